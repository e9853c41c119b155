#!/usr/bin/env bash
# Packs everything the GPU checks need into one archive for a GPU machine that lacks df11d's
# Debian packages: the GPU test programs, df11, df11d and df11ctl, every shared library they load
# (all but glibc's, the CUDA driver's and cuBLAS, 600 MB, which a GPU machine's CUDA toolkit or
# PyTorch has: run-gpu-checks.sh finds it there), tests/data, the demo model, tools/*.py and
# run-gpu-checks.sh, which runs every check and benchmark and prints one table last.
#
#   bash tools/gpu-bundle.sh [BUILD_DIR] [ARCHIVE]     # defaults: build, gpu-bundle.tar.xz
#   # on the GPU machine:
#   tar -xJf gpu-bundle.tar.xz -C /tmp && bash /tmp/gpu-bundle/run-gpu-checks.sh
#
# ARCHIVE "-" leaves the unpacked folder instead, next to the build (BUILD_DIR/gpu-bundle), for
# tools that carry folders. Run from anywhere; BUILD_DIR is a CUDA build (cmake -DDF11_CUDA=ON).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$repo/build}")
archive=${2:-gpu-bundle.tar.xz}
programs=(df11 df11d df11ctl cuda_devices_test gpu_decoder_test gpu_interleaved_test gpu_lane_test gpu_tiled_test
          decoder_equivalence_gpu_test forward_ops_gpu_test cuda_backend_gpu_test daemon_gpu_test)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
kit=$stage/gpu-bundle
mkdir -p "$kit/bin" "$kit/lib" "$kit/tools"
for name in "${programs[@]}"; do
  f=$(find "$build" -type f -name "$name" -perm -u+x | head -1)
  [[ -n $f ]] || { echo "gpu-bundle: no program $name under $build (a CUDA build?)" >&2; exit 1; }
  cp "$f" "$kit/bin/"
  ldd "$f" | awk '/=> \//{print $3}' | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libresolv.so*|libcuda.so*) ;;
      libcublas.so*|libcublasLt.so*) ;;
      *) [[ -f $kit/lib/$(basename "$lib") ]] || cp -L "$lib" "$kit/lib/";;
    esac
  done
done
strip --strip-debug "$kit"/bin/* 2>/dev/null || true
strip --strip-unneeded "$kit"/lib/*.so* 2>/dev/null || true
cp -r "$repo/tests/data" "$kit/data"
cp -r "$repo/models/demo" "$kit/demo"
cp "$repo"/tools/*.py "$kit/tools/"
cp "$repo/tools/run-gpu-checks.sh" "$kit/"
if [[ $archive == "-" ]]; then
  rm -rf "$build/gpu-bundle"
  mv "$kit" "$build/gpu-bundle"
  echo "gpu-bundle: $(du -sh "$build/gpu-bundle" | cut -f1) in $build/gpu-bundle"
else
  tar -C "$stage" -cf - gpu-bundle | xz -6 -T0 > "$archive"
  echo "gpu-bundle: $(du -h "$archive" | cut -f1) in $archive ($(ls "$kit/lib" | wc -l) libraries)"
fi
