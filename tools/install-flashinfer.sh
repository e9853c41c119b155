#!/usr/bin/env bash
# Extracts FlashInfer's C++/CUDA headers from the pinned flashinfer-python wheel on PyPI into
# .deps/flashinfer-VERSION/include, where the CUDA build finds them (cmake/Cuda.cmake): df11d's
# paged decode attention for heads of 128 and 256 is FlashInfer's. The wheel is pure Python with
# the headers under flashinfer/data/include; its SHA-256 is checked. No root needed; does nothing
# when the headers are there. Without them the CUDA build attends with the project's own kernel.
# Usage: tools/install-flashinfer.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=0.6.0
sha256=e8be4fd2f9229a7faef411579439eebc6c6dc54893d62bd50498f374cd04cc16
wheel="flashinfer_python-$version-py3-none-any.whl"
dest="$root/.deps/flashinfer-$version"

[ -f "$dest/include/flashinfer/attention/decode.cuh" ] && exit 0
echo "install-flashinfer.sh: FlashInfer $version's headers into ${dest#"$root"/}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip from a throwaway venv (python3-venv, tools/install-deps.sh), so the index configured for pip
# is the one used; --require-hashes checks the wheel's SHA-256.
python3 -m venv "$work/venv"
echo "flashinfer-python==$version --hash=sha256:$sha256" > "$work/requirements.txt"
"$work/venv/bin/python3" -m pip download --quiet --disable-pip-version-check --no-deps \
  --require-hashes -r "$work/requirements.txt" -d "$work"
"$work/venv/bin/python3" - "$work/$wheel" "$dest" <<'PY'
import os, shutil, sys, zipfile
wheel, dest = sys.argv[1:]
prefix = "flashinfer/data/include/"
tmp = dest + ".partial"
shutil.rmtree(tmp, ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = os.path.join(tmp, "include", name[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(z.read(name))
shutil.rmtree(dest, ignore_errors=True)
os.rename(tmp, dest)
PY
