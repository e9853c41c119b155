#!/usr/bin/env bash
# cmake --install of a build, staged under a temporary DESTDIR as a package would stage it: the
# three programs run from where they land and say their version; the installed configuration
# parses, with absolute paths only; the systemd unit starts the installed daemon on it; installing
# again keeps an edited configuration.
# Usage: install_test.sh BUILD_DIR BINDIR   (BINDIR: CMAKE_INSTALL_FULL_BINDIR)
set -euo pipefail
build=$1 bindir=$2
fail() { echo "install_test: $*" >&2; exit 1; }
[ -n "$bindir" ] || fail "no BINDIR given"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
DESTDIR="$stage" cmake --install "$build" >/dev/null || fail "cmake --install failed"

for program in df11d df11ctl df11; do
  binary="$stage$bindir/$program"
  [ -x "$binary" ] || fail "$program is not installed in $bindir"
  version=$("$binary" --version) || fail "$program --version failed"
  [[ "$version" =~ ^$program\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "$program --version said '$version'"
done

unit=$(find "$stage" -name df11d.service -path '*/systemd/system/*')
[ -n "$unit" ] || fail "no systemd unit installed"
exec_start=$(sed -nE 's/^ExecStart=(.*)$/\1/p' "$unit")
read -r daemon flag config <<<"$exec_start"
[ "$daemon" = "$bindir/df11d" ] || fail "the unit runs '$daemon', not $bindir/df11d"
[ "$flag" = "--config" ] || fail "the unit's ExecStart is '$exec_start'"
[ -f "$stage$config" ] || fail "the unit's configuration $config is not installed"

# The installed configuration as the daemon reads it: every path absolute, none under the stage.
effective=$("$stage$bindir/df11d" --config "$stage$config" --print-config) ||
  fail "the installed configuration does not parse"
! grep -qF "$stage" <<<"$effective" || fail "a path of the configuration is relative: $effective"
grep -q '^model_roots:' <<<"$effective" || fail "no model_roots in: $effective"
grep -A3 '^model_roots:' <<<"$effective" | grep -q -- '- /var/lib/df11d/models$' ||
  fail "model_roots is not /var/lib/df11d/models: $effective"
grep -q 'cache_dir: /var/cache/df11d/huggingface/hub$' <<<"$effective" ||
  fail "the hub cache is not /var/cache/df11d/huggingface/hub: $effective"

# Installing again keeps an edited configuration.
echo "# edited" >>"$stage$config"
DESTDIR="$stage" cmake --install "$build" >/dev/null || fail "the second cmake --install failed"
grep -qx "# edited" "$stage$config" || fail "installing again replaced the edited $config"
echo "installed: $bindir/{df11d,df11ctl,df11}, $config, $unit"
