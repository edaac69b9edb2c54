#!/bin/sh
# The README's second command: set up, build, and run every test, once in a
# normal build and once under AddressSanitizer and UndefinedBehaviorSanitizer,
# then fuzz the parsers for a short while. Ends with the plain line
# "N passed, N failed".
set -eu
cd "$(dirname "$0")/.."
# Each phase's wall time goes to build/test-phases.txt, for the table at the
# end (tools/test_durations.py).
phases=$(mktemp)
last=$(date +%s)
phase() {
  now=$(date +%s)
  echo "$1 $((now - last))" >> "$phases"
  last=$now
}
sh tools/setup.sh
phase "setup"
jobs=$(nproc)

[ -f build/build.ninja ] || { rm -rf build && meson setup build; }
ninja -C build
phase "build"
status=0

# The sanitizer build runs the compiler's own tests (not the emitted-program
# suites, which exercise gcc and the runtime far more than opc itself), so it
# builds only what those tests run, and the runtime's kernels (which
# programs the cli and testdata tests build link) for plain x86-64 only.
# It and the fuzz targets' build (tools/fuzz.sh) compile while the tests
# run, at low priority: they take the cores the tests leave idle (the
# tests' last minutes run fewer than two at a time), not the tests' share.
asan_suites="ir frontend cli passes schedule testdata"
side_log=build/side-builds.log
(
  nice -n 10 sh -c '
    set -eu
    [ -f build-asan/build.ninja ] || { rm -rf build-asan &&
      meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dkernel_isas=false; }
    ninja -C build-asan $(python3 tools/test_targets.py build-asan '"$asan_suites"')
    sh tools/fuzz.sh --build-only' > "$side_log" 2>&1
) &
side=$!
meson test -C build --num-processes "$jobs" --print-errorlogs || status=1
phase "tests"
# A failed build stops the run, as it would in the foreground.
wait "$side" || { cat "$side_log"; echo "tools/test.sh: the sanitizer or fuzz build failed" >&2; exit 1; }
phase "sanitizer and fuzz builds (after the tests)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --no-rebuild --num-processes "$jobs" --print-errorlogs \
  $(for s in $asan_suites; do echo --suite $s; done) || status=1
phase "sanitizer tests"

# The fuzz targets, 20 s each, two at a time, after replaying every input
# that once crashed one (tools/fuzz.sh; its own clang build, build-fuzz,
# already built above).
sh tools/fuzz.sh || status=1
phase "fuzz run"
cp "$phases" build/test-phases.txt
rm -f "$phases"
python3 tools/test_durations.py --phases build/test-phases.txt build/meson-logs/testlog.json \
  build-asan/meson-logs/testlog.json build-fuzz/meson-logs/testlog.json > build/test-durations.md || true

python3 tools/test_summary.py build/meson-logs/testlog.json build-asan/meson-logs/testlog.json \
  build-fuzz/meson-logs/testlog.json
exit $status
