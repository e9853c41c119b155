#!/usr/bin/env bash
# cmake --install of a build, staged under a temporary DESTDIR as a package would stage it: the
# three programs run from where they land and say their version; the installed configuration
# parses, with absolute paths only; the systemd unit starts the installed daemon on it.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
DESTDIR="$stage" cmake --install "$build" >/dev/null
prefix=$(sed -nE 's/^CMAKE_INSTALL_PREFIX:PATH=(.*)$/\1/p' "$build/CMakeCache.txt")
fail() { echo "install_test: $*" >&2; exit 1; }

for program in df11d df11ctl df11; do
  binary="$stage$prefix/bin/$program"
  [ -x "$binary" ] || fail "$program is not installed at $prefix/bin"
  version=$("$binary" --version)
  [[ "$version" =~ ^$program\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "$program --version said '$version'"
done

unit=$(find "$stage" -name df11d.service -path '*/systemd/system/*')
[ -n "$unit" ] || fail "no systemd unit installed"
exec_start=$(sed -nE 's/^ExecStart=(.*)$/\1/p' "$unit")
read -r daemon flag config <<<"$exec_start"
[ "$daemon" = "$prefix/bin/df11d" ] || fail "the unit runs '$daemon', not $prefix/bin/df11d"
[ "$flag" = "--config" ] || fail "the unit's ExecStart is '$exec_start'"
[ -f "$stage$config" ] || fail "the unit's configuration $config is not installed"

# The installed configuration as the daemon reads it: every path absolute, none under the stage.
effective=$("$stage$prefix/bin/df11d" --config "$stage$config" --print-config)
grep -q '^model_roots:' <<<"$effective" || fail "no model_roots in: $effective"
grep -A3 '^model_roots:' <<<"$effective" | grep -q -- '- /var/lib/df11d/models$' ||
  fail "model_roots is not /var/lib/df11d/models: $effective"
grep -q 'cache_dir: /var/cache/df11d/huggingface/hub$' <<<"$effective" ||
  fail "the hub cache is not /var/cache/df11d/huggingface/hub: $effective"
echo "installed under $prefix: df11d, df11ctl, df11, $config, $(basename "$unit")"
