"""Mutation tests of the schedule checkers over the model zoo.

    run_mutation.py TEST_MUTATE OPC WORKDIR [--models a,b] [--schedulers a,b]
                    [--limit N] [--runtime MODEL:K,...] [--no-runtime]
                    [--gaps MODEL:K,...]

Static part: for every zoo model (tools/models/build.py, batch 1) under every
scheduler, test_mutate breaks the schedule and memory plan one mutation at
a time and checks each checker against its oracle; the per-checker totals
are printed as a table.

Run-time part: for a few models under lios, test_mutate emits K mutated
programs whose race shows at run time, and the unmutated one; each is
compiled against the CPU runtime (at -O0: only the race checker's verdict
matters, not speed) and run with OPC_CHECK=1. The unmutated program must
run clean, every mutated one must end with an "opc-check: race" report.

--gaps (not part of the test): emits K mutations of the two classes the
run-time checker cannot see (share-in-place, share-output-view, which
verify_buffer_reuse missed until this test found them) per model, runs
them the same way and says whether the race checker reports them and
whether the outputs differ from the unmutated program's.

Exit status 1 when any checker misses a mutation, raises a false alarm, or
the run-time checker misses a race.
"""
import argparse
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCHEDULERS = ["sequential", "greedy", "ios", "lios"]
RUNTIME = "googlenet:4,inception_v3:2"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def zoo_models():
    r = run([sys.executable, str(ROOT / "tools/models/build.py"), "--list"])
    return r.stdout.split()


def build_model(name, work):
    path = work / "models" / f"{name}.onnx"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.onnx")
        r = run([sys.executable, str(ROOT / "tools/models/build.py"), name, "-o", str(tmp),
                 "--batch", "1"])
        if r.returncode:
            sys.exit(f"cannot build {name}:\n{r.stdout}{r.stderr}")
        tmp.rename(path)
    return path


def static_part(args, work, models):
    """Runs test_mutate per model and scheduler; returns (failures, totals)."""
    totals = defaultdict(lambda: [0, 0, 0, 0])  # (checker, kind) -> counts
    per_config = defaultdict(lambda: [0, 0, 0, 0])  # (model, scheduler, checker)
    failures = 0
    for name in models:
        model = build_model(name, work)
        for sched in args.schedulers.split(","):
            r = run([args.test_mutate, str(model), sched, "--limit", str(args.limit)])
            for line in r.stdout.splitlines():
                if not line.startswith("RESULT "):
                    print(line)
                    continue
                _, m, s, checker, kind, *counts = line.split()
                counts = list(map(int, counts))
                for i, c in enumerate(counts):
                    totals[checker, kind][i] += c
                for i, c in enumerate(counts):
                    per_config[m, s, checker][i] += c
            if r.returncode:
                print(f"FAIL {name} {sched}: test_mutate exited {r.returncode}\n{r.stderr[-2000:]}")
                failures += 1
    return failures, totals, per_config


def print_totals(totals, per_config):
    print(f"{'checker':22} {'mutation':14} {'tried':>6} {'harmful':>7} {'reported':>8} "
          f"{'kill':>6} {'false':>5}")
    for (checker, kind), (tried, harmful, reported, false) in sorted(totals.items()):
        kill = f"{100.0 * reported / harmful:.0f}%" if harmful else "-"
        print(f"{checker:22} {kind:14} {tried:6} {harmful:7} {reported:8} {kill:>6} {false:5}")
    print()
    print("per model and scheduler")
    print(f"{'model':18} {'scheduler':10} {'checker':22} {'tried':>6} {'harmful':>7} "
          f"{'reported':>8} {'false':>5}")
    for (m, s, checker), (tried, harmful, reported, false) in sorted(per_config.items()):
        print(f"{m:18} {s:10} {checker:22} {tried:6} {harmful:7} {reported:8} {false:5}")


def summary(stdout):
    """The program's one line per output: "name: type mean=... first=..."."""
    return [l for l in stdout.splitlines() if " mean=" in l]


def runtime_part(args, work, specs, gaps=False):
    """Emits, builds and runs a few mutated programs; returns the failure count."""
    opc = args.opc
    cflags = run([opc, "--cflags", "cpu"]).stdout.split()
    libs = run([opc, "--libs", "cpu"]).stdout.split()
    cc = os.environ.get("CC", "cc").split()
    failures = races = caught = 0
    for spec in specs.split(","):
        name, count = spec.split(":")
        model = build_model(name, work)
        out = work / ("gaps" if gaps else "programs") / name
        out.mkdir(parents=True, exist_ok=True)
        r = run([args.test_mutate, str(model), "lios", "--limit", str(args.limit),
                 "--emit", str(out), "--emit-count", count] + (["--emit-gaps"] if gaps else []))
        if r.returncode and not (gaps and r.returncode == 1):
            print(f"FAIL {name} lios: test_mutate --emit exited {r.returncode}\n"
                  f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
            failures += 1
            continue
        clean_outputs = None
        for line in (out / "manifest.txt").read_text().splitlines():
            prog, expect, what = line.split(" ", 2)
            exe = out / prog
            b = run(cc + ["-O0", str(exe.with_suffix(".c")), "-o", str(exe)] + cflags + libs)
            if b.returncode:
                print(f"FAIL {name} {prog}: does not build\n{b.stderr[-2000:]}")
                failures += 1
                continue
            p = run([str(exe)], env=dict(os.environ, OPC_CHECK="1"))
            raced = "opc-check: race" in p.stderr and p.returncode != 0
            report = next((l for l in p.stderr.splitlines() if "opc-check: race" in l), "")
            if expect == "clean":
                clean_outputs = summary(p.stdout)
                ok = p.returncode == 0 and not raced
                verdict = "PASS" if ok else "FAIL"
            elif expect == "race":
                races += 1
                caught += raced
                ok = raced
                verdict = "PASS" if ok else "FAIL"
            else:
                ok = True
                differ = summary(p.stdout) != clean_outputs
                verdict = (f"GAP ({'reported' if raced else 'not reported'} by the race "
                           f"checker; outputs {'differ' if differ else 'equal'})")
            print(f"{verdict} run-time {name} lios {prog} ({what}): "
                  f"exit {p.returncode}{'; ' + report[:200] if report else ''}")
            failures += not ok
            for f in [exe, exe.with_suffix(".c"), exe.with_suffix(".h"),
                      exe.with_suffix(".weights")]:
                f.unlink(missing_ok=True)
    if not gaps:
        kill = f"{100.0 * caught / races:.0f}%" if races else "-"
        print(f"run-time race checker: {races} racing programs, {caught} reported, "
              f"kill rate {kill}")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test_mutate")
    ap.add_argument("opc")
    ap.add_argument("workdir")
    ap.add_argument("--models", default="")
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--runtime", default=RUNTIME)
    ap.add_argument("--no-runtime", action="store_true")
    ap.add_argument("--gaps", default="")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    models = args.models.split(",") if args.models else zoo_models()
    failures, totals, per_config = static_part(args, work, models)
    print_totals(totals, per_config)
    if not args.no_runtime:
        failures += runtime_part(args, work, args.runtime)
    if args.gaps:
        failures += runtime_part(args, work, args.gaps, gaps=True)
    print("FAIL" if failures else "PASS", f"({failures} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
