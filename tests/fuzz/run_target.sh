#!/bin/sh
# Runs one fuzz target: replays every input of regressions/NAME, then
# fuzzes for $FUZZ_SECONDS (default 20) from corpus/NAME. New inputs go to
# SCRATCH/corpus and crashes to SCRATCH/crashes, never into the committed
# corpus. Fails, naming the input, when the target crashes, leaks, hangs
# (10 s on one input), runs out of memory (2 GB) or trips UBSan.
# Appends "NAME seconds cpu_seconds executions" to SCRATCH/../runs.tsv.
# usage: run_target.sh BINARY NAME SCRATCH
set -u
bin=$1 name=$2 scratch=$3
seconds=${FUZZ_SECONDS:-20}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$scratch/corpus" "$scratch/crashes"
log=$scratch/log.txt
: > "$log"
# The targets that need their input as a file write it under $TMPDIR:
# memory rather than disk where there is some.
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm

export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

# The parsers report every bad input on stderr; -close_fd_mask=3 silences
# them while libFuzzer keeps its own and the sanitizers' reports.
set -- -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 -artifact_prefix="$scratch/crashes/"
[ -f "$here/dict/$name.dict" ] && set -- "$@" -dict="$here/dict/$name.dict"

failed() {
  echo "fuzz-$name: $1; the last of $log:"
  tail -n 40 "$log"
  for f in $(grep -o 'Test unit written to .*' "$log" | sed 's/Test unit written to //'); do
    echo "fuzz-$name: crashing input: $f"
  done
  exit 1
}

regressions=$(find "$here/regressions/$name" -type f 2>/dev/null | sort)
if [ -n "$regressions" ]; then
  # shellcheck disable=SC2086 # file names without spaces, one argument each
  "$bin" "$@" $regressions >> "$log" 2>&1 || failed "a regression input fails again"
  echo "fuzz-$name: $(echo "$regressions" | wc -l) regression inputs pass"
fi

/usr/bin/time -f 'cpu_seconds %U %S' -a -o "$log" \
  "$bin" "$@" -max_total_time="$seconds" -print_final_stats=1 \
  "$scratch/corpus" "$here/corpus/$name" >> "$log" 2>&1 || failed "the target failed"

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
cpu=$(awk '/^cpu_seconds/ { printf "%.0f", $2 + $3 }' "$log" | tail -n 1)
printf '%s\t%s\t%s\t%s\n' "$name" "$seconds" "$cpu" "$execs" >> "$scratch/../runs.tsv"
echo "fuzz-$name: ${seconds} s, ${cpu} CPU s, ${execs} executions, no failure"
