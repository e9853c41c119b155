#!/usr/bin/env bash
# Creates a Python venv with the packages in tools/requirements-test.txt (the pinned huggingface_hub
# that tests/hub/interop_test.py checks df11's hub cache against, and the openai SDK that
# tests/daemon/openai_sdk_test.py drives df11d with). Does nothing when the venv already has every
# pinned version, so it is cheap to run before every configure.
# Usage: tools/install-test-python.sh [VENV_DIR]   (default: build/venv-hub in the repository)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

venv="${1:-$root/build/venv-hub}"
requirements="$root/tools/requirements-test.txt"
# "name==version" lines; the venv is up to date when every one is installed at that version.
pins=$(grep -E '^[A-Za-z0-9_.-]+==' "$requirements")
missing=0
for pin in $pins; do
  have=$("$venv/bin/python3" -c \
    "import importlib.metadata as m; print(m.version('${pin%%==*}'))" 2>/dev/null || true)
  [ "$have" = "${pin##*==}" ] || missing=1
done
[ "$missing" = 0 ] && exit 0

echo "== $venv: $(echo $pins)"
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
"$venv/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$requirements"
