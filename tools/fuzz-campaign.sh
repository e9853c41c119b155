#!/usr/bin/env bash
# Runs long libFuzzer campaigns on the targets built in build-fuzz/ (see tests/fuzz/CMakeLists.txt)
# and prints one Markdown table row per target, for docs/PERFORMANCE.md "Fuzz campaigns".
# Each target runs from a copy of its binary (so rebuilding build-fuzz/ meanwhile is safe), at low
# priority, on a fresh scratch corpus seeded from tests/fuzz/corpus/<name without _fuzz>/, until
# it has had SECONDS of CPU time: a campaign beside builds then fuzzes as much as one on idle cores,
# only over a longer wall time (both are printed). Crash inputs are written to OUT/artifacts/; each
# target's log is OUT/<target>.log.
# Usage: tools/fuzz-campaign.sh [--cpu-seconds SECONDS] [--jobs J] [--build-dir DIR] [--out DIR]
#                               TARGET...
#   --cpu-seconds SECONDS  CPU time per target (default 3600)
#   --jobs J            targets run at once (default 1)
#   --build-dir DIR     where the targets are built (default build-fuzz)
#   --out DIR           logs, scratch corpora and artifacts (default a new temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."

cpu_seconds=3600 jobs=1 build_dir=build-fuzz out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu-seconds) cpu_seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz-campaign.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { echo "fuzz-campaign.sh: name at least one target (see --help)" >&2; exit 2; }
[[ "$cpu_seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz-campaign.sh: --cpu-seconds is seconds" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz-campaign.sh: --jobs is a positive number" >&2; exit 2; }
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

# cpu_of PID: the CPU seconds the process has used (utime + stime, /proc/PID/stat fields 14-15).
cpu_of() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat="${stat##*) }"  # fields after the command name, which may hold spaces
  awk -v ticks="$(getconf CLK_TCK)" '{printf "%d", ($12 + $13) / ticks}' <<<"$stat"
}

# campaign TARGET: runs it until it has had the CPU time, then prints its row.
campaign() {
  local target="$1" seeds="tests/fuzz/corpus/${1%_fuzz}" log="$out/$1.log" status=0
  local start=$SECONDS cpu=0 now pid
  mkdir -p "$out/corpus/$target"
  nice -n 19 "$out/bin/$target" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$target-" "$out/corpus/$target" "$seeds" >"$log" 2>&1 &
  pid=$!
  # libFuzzer prints its final stats on SIGINT and exits; it stops by itself only on a crash.
  while now=$(cpu_of "$pid"); do
    cpu=$now
    if (( cpu >= cpu_seconds )); then kill -INT "$pid"; break; fi
    sleep 5
  done
  wait "$pid" || status=$?
  local wall=$((SECONDS - start)) runs rss cov crashes
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  # Crashes, leaks, timeouts (-timeout, 1200 s of wall time by default) and out-of-memory inputs.
  # Not slow-unit reports: those are wall time too, and a campaign paused or starved beside other
  # work writes them for inputs that take milliseconds.
  crashes=$(find "$out/artifacts" \( -name "$target-crash-*" -o -name "$target-leak-*" \
    -o -name "$target-timeout-*" -o -name "$target-oom-*" \) | wc -l)
  # An interrupted libFuzzer exits 72 (its -interrupted_exitcode default); anything else is news.
  [[ $status = 0 || $status = 72 ]] || echo "fuzz-campaign.sh: $target exited $status (see $log)" >&2
  printf '| %s | %d min CPU (%d min wall) | %s (%s/s CPU) | %s | %s MB | %s |\n' "$target" \
    $((cpu / 60)) $((wall / 60)) "${runs:-0}" "$(( ${runs:-0} / (cpu > 0 ? cpu : 1) ))" \
    "$crashes" "${rss:-?}" "${cov:-?}"
}
export -f campaign cpu_of
export out cpu_seconds
echo '| target | fuzzing time | inputs run | crashes | peak RSS | coverage (edges) |'
echo '|---|---|---|---|---|---|'
printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'campaign {}'
