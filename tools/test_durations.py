#!/usr/bin/env python3
"""Where the test suite's time goes: a Markdown table from meson's logs.

  test_durations.py [--phases FILE] LOG.json [LOG.json ...]

For each log (build/meson-logs/testlog.json, build-asan/..., build-fuzz/...)
and each suite in it: the number of tests, their summed run time and the
longest one. FILE holds tools/test.sh's phase times ("PHASE SECONDS" lines:
builds, test runs), printed first. Durations are meson's own, in seconds of
wall time; tests run two at a time, so a suite's sum is not its share of the
wall time.
"""
import argparse
import collections
import json
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--phases", default=None)
    a = ap.parse_args()
    if a.phases and os.path.exists(a.phases):
        print("| phase of tools/test.sh | wall s |\n|---|---:|")
        total = 0
        for line in open(a.phases):
            name, _, seconds = line.strip().rpartition(" ")
            if name:
                total += int(seconds)
                print("| %s | %s |" % (name, seconds))
        print("| **all** | **%d** |\n" % total)
    for path in a.logs:
        if not os.path.exists(path):
            continue
        suites = collections.defaultdict(list)
        for line in open(path):
            test = json.loads(line)
            suite = test["name"].split("/")[0].strip().split(":")[-1]
            suites[suite].append((test["duration"], test["name"].split("/")[-1].strip()))
        print("%s\n" % path)
        print("| suite | tests | summed s | longest |\n|---|---:|---:|---|")
        for suite, tests in sorted(suites.items(), key=lambda kv: -sum(d for d, _ in kv[1])):
            longest = max(tests)
            print("| %s | %d | %.0f | %s %.0f s |" % (suite, len(tests), sum(d for d, _ in tests),
                                                  longest[1], longest[0]))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
