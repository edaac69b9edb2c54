#!/usr/bin/env python3
"""Throughput benchmark: a serving program (opc A B C --instances ...) against
what users do without one, K independent contexts of each model on K
threads (contexts.c), under the same seeded Poisson arrivals.

    bench_throughput.py [--opc OPC] [--target cpu|cuda] [--duration S]
                        [--mixes NAME] [--instances K,...] [--models A,B]
                        [--budget S] [--work DIR] [-o FILE.md]

Models: the zoo's Inception-V3, ResNet-50 and SqueezeNet 1.1 (tools/models,
seeded weights, batch 1), or those of --models among them. For each arrival mix and each K, the serving
program gets --instances MODEL=K for every model and runs `--load`; the
baseline gets `--contexts K`. Both run the same main (serve_main_template.c)
with the same seed, so they see the same arrivals, and report per model the
requests served per second, latency percentiles and the backlog. The
table goes to -o (default bench/results/throughput-DATE-TARGET.md), with a
.json beside it. On the CPU runtime the rates are scaled to its speed
(MIXES); the machine is named in the report.

The load is bounded: each run lasts --duration seconds of arrivals at the
mix's rates, and a run that has not ended --duration + 60 s after it began
is stopped. With --budget, a run that would end past the budget is not
started; it and any run that failed stay in the table, marked. Exit
status 1 when a build or run failed.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODELS = ["inception_v3", "resnet50", "squeezenet1_1"]
# Requests per second of each model. The CPU runtime on 2 cores takes about
# 80, 60 and 7 ms for one request of each alone.
MIXES = {
    "cpu": {
        "light": {"inception_v3": 1.0, "resnet50": 1.5, "squeezenet1_1": 10.0},
        "medium": {"inception_v3": 2.0, "resnet50": 3.0, "squeezenet1_1": 20.0},
        "heavy": {"inception_v3": 3.0, "resnet50": 4.5, "squeezenet1_1": 30.0},
    },
    "cuda": {
        "light": {"inception_v3": 60.0, "resnet50": 120.0, "squeezenet1_1": 240.0},
        "medium": {"inception_v3": 150.0, "resnet50": 300.0, "squeezenet1_1": 600.0},
        "heavy": {"inception_v3": 300.0, "resnet50": 600.0, "squeezenet1_1": 1200.0},
    },
}


class Failed(Exception):
    pass


def run(cmd, timeout=600):
    try:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"{Path(str(cmd[0])).name}: stopped after {timeout:g} s")
    if r.returncode:
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        raise Failed(f"{Path(str(cmd[0])).name} exited {r.returncode}: {' / '.join(tail)[:300]}")
    return r


def parse_load(text):
    rows, header = {}, None
    for line in text.splitlines():
        parts = line.split()
        if line.startswith("model "):
            header = parts
        elif header and len(parts) == len(header):
            try:
                rows[parts[0]] = {h: float(v) for h, v in zip(header[1:], parts[1:])}
            except ValueError:
                pass
    m = re.search(r"total: (\d+) arrived, (\d+) served \(([\d.]+)/s\), backlog (\d+); (\d+) rounds, "
                  r"([\d.]+) requests per round", text)
    total = dict(zip(["arrived", "served", "served_per_s", "backlog", "rounds", "per_round"],
                     map(float, m.groups()))) if m else None
    return rows, total


def models_header(work, names):
    lines = [f'#include "m{k}.h"' for k in range(len(names))]
    lines.append(f"enum {{ MODEL_COUNT = {len(names)} }};")
    for k in range(len(names)):
        p = f"m{k}"
        lines += [
            f"static int create_{k}(void **c, const char *w) {{ return {p}_create(({p}_ctx **)c, w); }}",
            f"static int run_{k}(void *c, const void *const *i, void *const *o) {{ return {p}_run(c, i, o); }}",
            f"static void destroy_{k}(void *c) {{ {p}_destroy(c); }}",
            f"static const char *error_{k}(void *c) {{ return {p}_error(c); }}",
        ]
    lines.append("static const Program programs[MODEL_COUNT] = {")
    for k, name in enumerate(names):
        p = f"m{k}"
        fns = ", ".join(f"{p}_{f}" for f in [
            "num_inputs", "num_outputs", "input_name", "output_name", "input_type", "output_type",
            "input_element_size", "output_element_size", "input_rank", "output_rank",
            "input_dims", "output_dims"])
        lines.append(f'  {{"{name}", "{p}.weights", create_{k}, run_{k}, destroy_{k}, error_{k}, {fns}}},')
    lines.append("};")
    (work / "models.h").write_text("\n".join(lines) + "\n")


def build(opc, target, work, instances, names):
    """The serving program and the baseline for K = instances."""
    models = [work / f"{m}.onnx" for m in names]
    serve = work / f"serve-k{instances}"
    run([opc] + models + ["--instances", ",".join(f"{m}={instances}" for m in names), "-o", serve,
                          "--target", target])
    contexts = work / "contexts"
    if not contexts.exists():
        for k, m in enumerate(names):
            run([opc, models[k], "-o", work / f"m{k}.c", "--prefix", f"m{k}", "--target", target])
        models_header(work, names)
        cflags = run([opc, "--cflags", target]).stdout.split()
        libs = run([opc, "--libs", target]).stdout.split()
        cc = os.environ.get("CC", "cc").split()
        run(cc + ["-O2", "-DOPC_NO_MAIN", "-I", work, "-I", ROOT / "backend", HERE / "contexts.c"] +
            [work / f"m{k}.c" for k in range(len(names))] + ["-o", contexts, "-pthread", "-lm"] +
            cflags + libs)
    return serve, contexts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opc", default=str(ROOT / "build" / "opc"))
    ap.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--mixes", default="light,medium,heavy")
    ap.add_argument("--instances", default="1,2")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--models", default=",".join(MODELS), help="some of " + ", ".join(MODELS))
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds: no run starts that would end later (0: none)")
    ap.add_argument("--work", default="/tmp/opc-bench-throughput")
    ap.add_argument("-o", "--output", default=None)
    a = ap.parse_args()
    start = time.monotonic()
    names = [m for m in a.models.split(",") if m]
    if not names or any(m not in MODELS for m in names):
        ap.error(f"--models: some of {', '.join(MODELS)}")
    work = Path(a.work) / "-".join(names)
    work.mkdir(parents=True, exist_ok=True)
    # Built once a run, for every K (build()); never one of an earlier run.
    (work / "contexts").unlink(missing_ok=True)
    results = []

    def mark(k, mix, system, why):
        print(f"K={k} {mix} {system}: {why}", flush=True)
        results.append({"instances": k, "mix": mix, "system": system, "models": {}, "total": None,
                        "status": why})

    try:
        for m in names:
            if not (work / f"{m}.onnx").exists():
                run([sys.executable, ROOT / "tools/models/build.py", m, "-o", work / f"{m}.onnx",
                     "--seed", "0"])
    except Failed as exc:
        sys.exit(f"bench_throughput: {exc}")
    systems = ["serving program", "independent contexts"]
    for k in [int(x) for x in a.instances.split(",")]:
        mixes = a.mixes.split(",")
        try:
            serve, contexts = build(a.opc, a.target, work, k, names)
        except Failed as exc:
            for mix in mixes:
                for system in systems:
                    mark(k, mix, system, f"FAIL: build: {exc}")
            continue
        for mix in mixes:
            rates = {m: r for m, r in MIXES[a.target][mix].items() if m in names}
            load = "poisson:0," + ",".join(f"{m}={r}" for m, r in rates.items())
            for system, cmd in zip(systems, [[serve], [contexts, "--contexts", k]]):
                if a.budget and time.monotonic() - start + a.duration + 5 > a.budget:
                    mark(k, mix, system, f"not run: --budget {a.budget:g} s spent")
                    continue
                try:
                    r = run(cmd + ["--load", load, "--duration", a.duration, "--seed", a.seed],
                            timeout=a.duration + 60)
                except Failed as exc:
                    mark(k, mix, system, f"FAIL: {exc}")
                    continue
                rows, total = parse_load(r.stdout)
                print(f"K={k} {mix} {system}:\n{r.stdout}", flush=True)
                if total is None or not rows:
                    mark(k, mix, system, "FAIL: no report in the program's output")
                    continue
                results.append({"instances": k, "mix": mix, "rates": rates, "system": system,
                                "models": rows, "total": total, "status": "ok"})
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = None
    if a.target == "cuda":
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            pass
    date = datetime.date.today().isoformat()
    out = Path(a.output) if a.output else ROOT / "bench" / "results" / f"throughput-{date}-{a.target}.md"
    lines = [f"# Throughput: a serving program against independent contexts ({date}, {a.target})", "",
             f"Machine: {cpu}, {os.cpu_count()} CPUs, {platform.platform()}" +
             (f"; GPU: {gpu} (name, driver)." if gpu else "."),
             f"opc's {'CPU runtime' if a.target == 'cpu' else 'CUDA target'}; each run {a.duration:g} s of "
             f"seeded Poisson arrivals (seed {a.seed}), the same for both systems.",
             "Serving program: `opc " + " ".join(names) + " --instances M=K ...`, its launcher's "
             "default policy. Independent contexts: K contexts of each model's own program, a thread "
             "each, taking the model's requests from a shared queue.", "",
             "| K | mix | system | model | rate/s | served/s | p50 ms | p90 ms | p99 ms | backlog |",
             "|---:|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        if res["status"] != "ok":
            lines.append(f"| {res['instances']} | {res['mix']} | {res['system']} | all | | | | | | "
                         f"{res['status']} |")
        for m, row in res["models"].items():
            lines.append(f"| {res['instances']} | {res['mix']} | {res['system']} | {m} | {row['rate/s']:g} | "
                         f"{row['served/s']:.2f} | {row['p50_ms']:.2f} | {row['p90_ms']:.2f} | "
                         f"{row['p99_ms']:.2f} | {row['backlog']:.0f} |")
    lines += ["", "Totals: requests served per second over all models, and the worst model's p99.", "",
              "| K | mix | serving program served/s | independent contexts served/s | ratio | "
              "serving p99 ms | contexts p99 ms |", "|---:|---|---:|---:|---:|---:|---:|"]
    for k in sorted({r["instances"] for r in results}):
        for mix in a.mixes.split(","):
            pair = [next((r for r in results if r["instances"] == k and r["mix"] == mix
                          and r["system"] == s and r["total"]), None) for s in systems]
            if None in pair:
                continue
            served = [r["total"]["served_per_s"] for r in pair]
            p99 = [max((row["p99_ms"] for row in r["models"].values()), default=0) for r in pair]
            lines.append(f"| {k} | {mix} | {served[0]:.1f} | {served[1]:.1f} | "
                         f"{served[0] / served[1] if served[1] else 0:.2f} | {p99[0]:.2f} | {p99[1]:.2f} |")
    lines.append("")
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"date": date, "target": a.target, "cpu": cpu,
                                                    "models": names, "gpu": gpu,
                                                    "duration": a.duration, "results": results}, indent=1))
    print(f"bench_throughput: wrote {out}")
    failed = [r for r in results if r["status"].startswith("FAIL")]
    if failed:
        print(f"bench_throughput: {len(failed)} run(s) failed (see the table)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
