#!/usr/bin/env bash
# Creates a Python venv with the packages in tools/requirements-test.txt (the pinned huggingface_hub
# that tests/hub/interop_test.py checks df11's hub cache against). Does nothing when the venv
# already has the pinned version, so it is cheap to run before every configure.
# Usage: tools/install-test-python.sh [VENV_DIR]   (default: build/venv-hub in the repository)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

venv="${1:-$root/build/venv-hub}"
requirements="$root/tools/requirements-test.txt"
want=$(sed -n 's/^huggingface_hub==//p' "$requirements")

have=$("$venv/bin/python3" -c \
  'import importlib.metadata as m; print(m.version("huggingface_hub"))' 2>/dev/null || true)
[ -n "$want" ] && [ "$have" = "$want" ] && exit 0

echo "== $venv: huggingface_hub==$want"
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
"$venv/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$requirements"
