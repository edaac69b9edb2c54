#!/usr/bin/env python3
"""HOPE, the GPU and the host CPU together: opc's predicted latency per partition.

  bench_hope.py [--opc build/opc] [--models a,b] [--measure-cpu]
                [--out bench/results/hope-sim-DATE.md]

For every model of the zoo (batch 1, built with tools/models/build.py into a
cache directory), runs `opc --devices gpu,cpu --partition P --emit-schedule`
for P in gpu (everything on the GPU), cpu (everything on the CPU), ilp
(HOPE's ILP, GLPK) and heuristic (HOPE's greedy search), and reads the
predicted latency, the units the partition put on the CPU and the time the
partition took.

The GPU is the cost model's H100 (passes/devices/h100.json), the host link
its host_link_gbps. The CPU is passes/devices/cpu.json (rates of opc's CPU
program on a two-core AVX-512 VM) or, with --measure-cpu, that file plus a
profile of the model's own CPU program measured here (`net --profile`,
given to opc as --cpu-cost-db): then every CPU unit whose key the profile has
costs what was measured. Nothing runs on a GPU.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARTITIONS = ["gpu", "cpu", "ilp", "heuristic"]


def build_model(name, cache):
    path = os.path.join(cache, "%s_b1.onnx" % name)
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"), name,
                        "-o", path, "--batch", "1", "--seed", "0"], check=True,
                       capture_output=True)
    return path


def zoo_models():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"),
                          "--list"], check=True, capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def cpu_profile(opc, model, work):
    """Profiles the model's CPU program here: the file for --cpu-cost-db."""
    exe = os.path.join(work, "cpu_net")
    subprocess.run([opc, model, "-o", exe, "--target", "cpu"], check=True, capture_output=True)
    profile = os.path.join(work, "cpu_profile.json")
    subprocess.run([exe, "--profile", profile, "--repeats", "5"], check=True, capture_output=True,
                   cwd=work)
    return profile


def predict(opc, model, partition, work, extra):
    out = os.path.join(work, "schedule.json")
    t0 = time.monotonic()
    r = subprocess.run([opc, model, "--devices", "gpu,cpu", "--partition", partition,
                        "--emit-schedule", out] + extra, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    if r.returncode:
        raise RuntimeError("%s --partition %s: %s" % (model, partition, r.stderr.strip()))
    s = json.load(open(out))
    units = [u for st in s["stages"] for grp in st["groups"] for u in grp["units"]]
    on_cpu = sum(1 for u in units if u.get("device") == 1)
    hope = s["hope"]
    return {"latency_us": s["predicted_latency_us"], "cpu_units": on_cpu, "units": len(units),
            "model_us": hope["model_latency_us"], "partition_us": hope["partition_latency_us"],
            "gpu_alone_us": hope["gpu_alone_latency_us"], "kept_gpu": hope["kept_gpu"],
            "transfers": len(s.get("transfers", [])), "seconds": seconds}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opc", default=os.path.join(ROOT, "build", "opc"))
    ap.add_argument("--models", default="")
    ap.add_argument("--measure-cpu", action="store_true")
    ap.add_argument("--out", default=os.path.join(
        ROOT, "bench", "results", "hope-sim-%s.md" % datetime.date.today().isoformat()))
    args = ap.parse_args()
    models = args.models.split(",") if args.models else zoo_models()
    cache = os.path.join(tempfile.gettempdir(), "opc-bench-models")
    os.makedirs(cache, exist_ok=True)
    rows = []
    for name in models:
        model = build_model(name, cache)
        with tempfile.TemporaryDirectory() as work:
            settings = [("cpu.json", [])]
            if args.measure_cpu:
                settings.append(("measured here", ["--cpu-cost-db", cpu_profile(args.opc, model,
                                                                                 work)]))
            for label, extra in settings:
                row = {"model": name, "cpu_costs": label}
                for p in PARTITIONS:
                    row[p] = predict(args.opc, model, p, work, extra)
                rows.append(row)
                print("%-16s %-14s gpu %9.1f  cpu %10.1f  ilp %9.1f (model %9.1f, %d on cpu%s)"
                      "  heuristic %9.1f (model %9.1f)"
                      % (name, label, row["gpu"]["latency_us"], row["cpu"]["latency_us"],
                         row["ilp"]["latency_us"], row["ilp"]["model_us"], row["ilp"]["cpu_units"],
                         ", kept the GPU" if row["ilp"]["kept_gpu"] else "",
                         row["heuristic"]["latency_us"], row["heuristic"]["model_us"]),
                      flush=True)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"machine": platform.processor() or platform.machine(),
                   "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    # The host link as the cost model reads it: the device file, else opc's defaults.
    with open(os.path.join(ROOT, "passes", "devices", "h100.json")) as f:
        gpu = json.load(f)
    link = (gpu.get("host_link_gbps", 25), gpu.get("host_link_latency_us", 10))
    with open(args.out, "w") as f:
        f.write("# HOPE: predicted latency per partition, GPU (H100 model) and host CPU\n\n")
        f.write("Made by `bench/hope/bench_hope.py` on %s (%d CPUs), %s. Predictions of opc's "
                "cost model, batch 1; nothing ran on a GPU. GPU: passes/devices/h100.json; "
                "host link %g GB/s + %g us per copy. CPU: passes/devices/cpu.json, or that file "
                "with a profile of the model's CPU program measured on this machine "
                "(`--cpu-cost-db`).\n\n"
                % (platform.node(), os.cpu_count(), datetime.date.today().isoformat(), link[0],
                   link[1]))
        f.write("Columns: the program's predicted latency (LIOS on the GPU's streams, the "
                "simulation with contention) for everything on the GPU, everything on the CPU, "
                "and what `--partition ilp` chose; the ILP's own latency in HOPE's model (one "
                "unit at a time per processor) and LIOS's prediction of that partition (without "
                "contention) against the GPU alone: where the partition does not beat the GPU "
                "alone, opc keeps the GPU alone ('kept GPU'); the heuristic in HOPE's model "
                "against the ILP in it.\n\n")
        f.write("| model | CPU costs | GPU only | CPU only | chosen (ILP) | units on CPU "
                "| ILP, HOPE model | ILP, LIOS | GPU alone, LIOS | heuristic / ILP (HOPE model) "
                "| ILP time (s) |\n")
        f.write("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n")
        for r in rows:
            i = r["ilp"]
            f.write("| %s | %s | %.1f | %.1f | %.1f | %s | %.1f | %.1f | %.1f | %.3f | %.2f |\n"
                    % (r["model"], r["cpu_costs"], r["gpu"]["latency_us"], r["cpu"]["latency_us"],
                       i["latency_us"],
                       "kept GPU" if i["kept_gpu"] else "%d of %d" % (i["cpu_units"], i["units"]),
                       i["model_us"], i["partition_us"], i["gpu_alone_us"],
                       r["heuristic"]["model_us"] / i["model_us"], i["seconds"]))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
