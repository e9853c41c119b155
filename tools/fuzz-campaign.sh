#!/usr/bin/env bash
# Runs long libFuzzer campaigns on the targets built in build-fuzz/ (see tests/fuzz/CMakeLists.txt)
# and prints one Markdown table row per target, for docs/PERFORMANCE.md "Fuzz campaigns".
# Each target runs from a copy of its binary (so rebuilding build-fuzz/ meanwhile is safe), at low
# priority, on a fresh scratch corpus seeded from tests/fuzz/corpus/<name without _fuzz>/.
# Crash inputs are written to OUT/artifacts/; each target's log is OUT/<target>.log. Needs GNU
# time (Debian package `time`) for the CPU time each target got.
# Usage: tools/fuzz-campaign.sh [--duration SECONDS] [--jobs J] [--build-dir DIR] [--out DIR]
#                               TARGET...
#   --duration SECONDS  per target (default 3600)
#   --jobs J            targets run at once (default 1)
#   --build-dir DIR     where the targets are built (default build-fuzz)
#   --out DIR           logs, scratch corpora and artifacts (default a new temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."

duration=3600 jobs=1 build_dir=build-fuzz out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz-campaign.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { echo "fuzz-campaign.sh: name at least one target (see --help)" >&2; exit 2; }
[[ "$duration" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz-campaign.sh: --duration is seconds" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz-campaign.sh: --jobs is a positive number" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "fuzz-campaign.sh: needs /usr/bin/time (apt install time)" >&2; exit 2; }
out="${out:-$(mktemp -d)}"
mkdir -p "$out/bin" "$out/artifacts"
for target in "$@"; do
  binary="$build_dir/tests/fuzz/$target"
  [[ -x "$binary" ]] || { echo "fuzz-campaign.sh: $binary is not built" >&2; exit 2; }
  seeds="tests/fuzz/corpus/${target%_fuzz}"
  [[ -d "$seeds" ]] || { echo "fuzz-campaign.sh: no seed corpus $seeds" >&2; exit 2; }
  cp "$binary" "$out/bin/$target"
done
echo "fuzz-campaign.sh: logs in $out" >&2

# campaign TARGET: runs it, then prints its row.
campaign() {
  local target="$1" seeds="tests/fuzz/corpus/${1%_fuzz}" log="$out/$1.log" status=0
  mkdir -p "$out/corpus/$target"
  # The CPU time it got: beside other work, at low priority, less than the duration.
  /usr/bin/time -o "$out/$target.cpu" -f '%U %S' \
    nice -n 19 "$out/bin/$target" -max_total_time="$duration" -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/$target-" \
    "$out/corpus/$target" "$seeds" >"$log" 2>&1 || status=$?
  local runs rss cov crashes cpu
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  crashes=$(find "$out/artifacts" -name "$target-*" | wc -l)
  cpu=$(awk '{printf "%d", ($1 + $2) / 60}' "$out/$target.cpu" 2>/dev/null)
  [[ $status = 0 ]] || echo "fuzz-campaign.sh: $target exited $status (see $log)" >&2
  printf '| %s | %d min (%s min CPU) | %s (%s/s) | %s | %s MB | %s |\n' "$target" \
    $((duration / 60)) "${cpu:-?}" "${runs:-0}" "$(( ${runs:-0} / duration ))" "$crashes" \
    "${rss:-?}" "${cov:-?}"
}
export -f campaign
export out duration
echo '| target | duration | inputs run | crashes | peak RSS | coverage (edges) |'
echo '|---|---|---|---|---|---|'
printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'campaign {}'
