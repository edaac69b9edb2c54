#!/bin/sh
# Coverage-guided fuzzing of opc's parsers (tests/fuzz): builds the
# libFuzzer targets with clang, ASan and UBSan in build-fuzz, then runs them.
#
#   sh tools/fuzz.sh                 the short run (tools/test.sh, CI): each
#                                    target replays its regression inputs and
#                                    fuzzes 20 s, two targets at a time
#   sh tools/fuzz.sh --build-only    only the build (tools/test.sh builds
#                                    while its tests run)
#   sh tools/fuzz.sh --seconds 600 --target onnx
#                                    a long run, for accumulating CPU time:
#                                    the target (or every target, one after
#                                    another) for that many seconds
#
# Targets: onnx, ir, cost_db, const_input, npy, pb. New inputs go to
# build-fuzz/tests/fuzz/scratch/NAME/corpus and crashes to .../crashes,
# never into the committed corpus; each run appends its CPU time and
# executions to build-fuzz/tests/fuzz/scratch/runs.tsv. Installs nothing:
# needs clang and its runtime libraries (tools/setup.sh installs them).
# Exits 1 when a target crashes, leaks, hangs or trips UBSan, naming the input.
set -eu
cd "$(dirname "$0")/.."

usage() {
  echo "usage: sh tools/fuzz.sh [--build-only] [--seconds N] [--target onnx|ir|cost_db|const_input|npy|pb]" >&2
  exit 1
}

all="onnx ir cost_db const_input npy pb"
targets="" seconds="" build_only=""
while [ $# -gt 0 ]; do
  case "$1" in
  --build-only) build_only=1; shift ;;
  --seconds) [ $# -ge 2 ] || usage; seconds=$2; shift 2 ;;
  --target) [ $# -ge 2 ] || usage; targets="$targets $2"; shift 2 ;;
  *) usage ;;
  esac
done
case "$seconds" in *[!0-9]*) usage ;; esac
for t in $targets; do
  case " $all " in *" $t "*) ;; *) echo "fuzz: no target '$t' (targets: $all)" >&2; exit 1 ;; esac
done

command -v clang >/dev/null || { echo "fuzz: clang not found (sh tools/setup.sh installs it)" >&2; exit 1; }
[ -f build-fuzz/build.ninja ] || { rm -rf build-fuzz &&
  CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false >/dev/null; }
# A build that fails leaves no log of passes behind for the summary.
rm -f build-fuzz/meson-logs/testlog.json
# Only the targets and what they link: the rest of the project is not
# built with clang here.
ninja -C build-fuzz $(for t in $all; do echo tests/fuzz/fuzz_$t; done)
[ -z "$build_only" ] || exit 0

if [ -z "$targets" ] && [ -z "$seconds" ]; then
  # Two at a time: CI has two cores.
  exec meson test -C build-fuzz --suite fuzz --no-rebuild --num-processes 2 --print-errorlogs
fi

# A long run: one target at a time, in the foreground.
status=0
for t in ${targets:-$all}; do
  FUZZ_SECONDS=${seconds:-20} sh tests/fuzz/run_target.sh build-fuzz/tests/fuzz/fuzz_$t "$t" \
    build-fuzz/tests/fuzz/scratch/"$t" || status=1
done
exit $status
