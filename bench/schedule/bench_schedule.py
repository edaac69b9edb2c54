#!/usr/bin/env python3
"""Schedulers on the model zoo: search time, predicted and (on a GPU) measured latency.

  bench_schedule.py [--opc build/opc] [--models a,b] [--schedulers ios,lios,...]
                    [--device h100] [--measure N] [--out bench/results/schedule.md]

For every model (built with tools/models/build.py into a cache directory) and
scheduler, runs `opc MODEL --schedule X --emit-schedule S.json -o net.c` and
records opc's wall time, the scheduler's search time, the predicted stage
latency, the simulated latency of the issued program and the number of
stages, streams and events. With --measure N (a machine with a GPU), it also
builds each program for CUDA and runs `./net --bench N`, recording the
measured mean and p50; that is the figure the default scheduler is chosen by.
Writes a markdown table (and the raw rows as JSON beside it).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODELS = "squeezenet1_1,googlenet,inception_v3,resnet50,randwire,nasnet_a"
DEFAULT_SCHEDULERS = "sequential,greedy,ios,lios"


def build_model(name, cache):
    path = os.path.join(cache, name + ".onnx")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"), name,
                        "-o", path], check=True)
    return path


def run_opc(opc, model, sched, work, device, extra):
    base = os.path.join(work, os.path.basename(model)[:-5] + "_" + sched)
    js = base + ".json"
    cmd = [opc, model, "--schedule", sched, "--emit-schedule", js, "-o", base + ".c"] + extra
    if device:
        cmd += ["--device", device]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"}
    with open(js) as f:
        s = json.load(f)
    return {
        "wall_s": wall,
        "search_s": s["search"]["seconds"],
        "states": s["search"]["states"],
        "transitions": s["search"]["transitions"],
        "predicted_us": s["predicted_latency_us"],
        "simulated_us": s.get("simulated_latency_us", 0.0),
        "sequential_us": s["sequential_latency_us"],
        "stages": len(s["stages"]),
        "streams": s["streams"],
        "events": s["events"],
        "units": s.get("units", 0),
        "base": base,
    }


def measure(opc, model, sched, base, runs, device):
    exe = base + "_cuda"
    cmd = [opc, model, "--schedule", sched, "--target", "cuda", "-o", exe]
    if device:
        cmd += ["--device", device]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None
    r = subprocess.run([exe, "--weights", exe + ".weights", "--bench", str(runs), "--warmup",
                        str(max(10, runs // 10))], capture_output=True, text=True)
    m = re.search(r"mean=([0-9.]+) p50=([0-9.]+)", r.stdout)
    return (float(m.group(1)) * 1000, float(m.group(2)) * 1000) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opc", default=os.path.join(ROOT, "build", "opc"))
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--schedulers", default=DEFAULT_SCHEDULERS)
    ap.add_argument("--device", default=None)
    ap.add_argument("--measure", type=int, default=0, help="runs per measurement (needs a GPU)")
    ap.add_argument("--cache", default=os.path.join(ROOT, "build-bench", "models"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build-bench", "schedule"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "schedule.md"))
    ap.add_argument("--opc-arg", action="append", default=[], help="extra argument for opc")
    a = ap.parse_args()
    os.makedirs(a.cache, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    rows = []
    for name in a.models.split(","):
        model = build_model(name, a.cache)
        for sched in a.schedulers.split(","):
            row = {"model": name, "scheduler": sched}
            row.update(run_opc(a.opc, model, sched, a.work, a.device, a.opc_arg))
            if a.measure and "error" not in row:
                got = measure(a.opc, model, sched, row["base"], a.measure, a.device)
                if got:
                    row["measured_mean_us"], row["measured_p50_us"] = got
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "base"}), flush=True)

    lines = ["# Schedulers on the model zoo", "",
             "opc wall time includes import and code generation; predicted = sum of stage "
             "latencies (the scheduler's objective); simulated = the issued program without "
             "stage barriers; speedups are over the sequential prediction.", "",
             "| model | scheduler | units | stages | streams | events | opc s | search s | "
             "transitions | predicted us | simulated us | speedup | measured mean us | "
             "measured p50 us |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append("| %s | %s | error: %s |||||||||||| |" % (r["model"], r["scheduler"],
                                                                    r["error"]))
            continue
        sim = r["simulated_us"] or r["predicted_us"]
        lines.append("| %s | %s | %d | %d | %d | %d | %.3f | %.3f | %d | %.1f | %.1f | %.2fx | %s | %s |" % (
            r["model"], r["scheduler"], r["units"], r["stages"], r["streams"], r["events"],
            r["wall_s"], r["search_s"], r["transitions"], r["predicted_us"], sim,
            r["sequential_us"] / sim if sim else 0,
            "%.1f" % r["measured_mean_us"] if "measured_mean_us" in r else "-",
            "%.1f" % r["measured_p50_us"] if "measured_p50_us" in r else "-"))
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump([{k: v for k, v in r.items() if k != "base"} for r in rows], f, indent=1)
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
