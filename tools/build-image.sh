#!/usr/bin/env bash
# Builds df11d's container image from deploy/Containerfile with podman (or buildah), tags it
# df11d:VERSION (the project's version), and prints its size. The build pulls Debian 12 from
# docker.io and, for the CUDA image, packages from NVIDIA's apt repository.
# Usage: tools/build-image.sh [--cpu] [--cuda VERSION] [--tag NAME:TAG]
#   --cpu           no CUDA (CPU nodes); the tag gets a -cpu suffix
#   --cuda VERSION  CUDA toolkit to build with (default 13.0)
#   --tag NAME:TAG  the image's name (default localhost/df11d:VERSION[-cpu])
# Then push it where the cluster pulls from, and name it in deploy/k8s/base/kustomization.yaml:
#   podman push localhost/df11d:0.1.0 registry.example.com/df11d:0.1.0
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=$(sed -n 's/^project(df11d VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
cuda=13.0 suffix="" tag=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) cuda="" suffix="-cpu" ;;
    --cuda|--tag)
      [ $# -ge 2 ] || { echo "build-image.sh: $1 needs a value" >&2; exit 2; }
      if [ "$1" = --cuda ]; then cuda="$2"; else tag="$2"; fi
      shift ;;
    -h|--help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "build-image.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done
tag="${tag:-localhost/df11d:$version$suffix}"

if command -v podman >/dev/null; then
  build=(podman build)
  inspect=(podman image inspect --format '{{.Size}}')
elif command -v buildah >/dev/null; then
  build=(buildah bud)
  inspect=(buildah images --noheading --format '{{.Size}}')
else
  echo "build-image.sh: needs podman or buildah (apt-get install podman)" >&2
  exit 1
fi

echo "== building $tag (CUDA: ${cuda:-none}) from deploy/Containerfile"
"${build[@]}" --file "$root/deploy/Containerfile" --build-arg "CUDA=$cuda" --tag "$tag" "$root"
size=$("${inspect[@]}" "$tag" 2>/dev/null || echo 0)
# podman reports bytes, buildah a human-readable size.
echo "== $tag: $(numfmt --to=iec --suffix=B "$size" 2>/dev/null || echo "$size")"
