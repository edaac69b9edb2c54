#!/usr/bin/env python3
"""Fits the host CPU's three rates (passes/devices/cpu.json) to this machine.

  fit_cpu.py [--opc build/opc] [--models a,b] [--out cpu-fitted.json]

The CPU cost model prices an operator at op_us + flops / gflops + bytes /
mem_bandwidth_gbs. For each model this profiles its CPU program here
(`--target cpu`, `net --profile`), reads each operator's flops and bytes
back from opc itself (three `--emit-schedule` runs with made-up CPU files
that isolate one term each), and fits the three rates by least squares on
the relative error, so that small operators count as much as large ones.
Prints the fit and how far each model's whole-CPU prediction lands from its
measurement.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_hope import build_model, zoo_models  # noqa: E402

# Each made-up CPU leaves one term of the cost: 1 per operator, flops / 1e3
# (1 GFLOP/s), bytes / 1e3 (1 GB/s); the others vanish.
PROBES = {
    "op": {"gflops": 1e15, "mem_bandwidth_gbs": 1e15, "op_us": 1},
    "flops": {"gflops": 1, "mem_bandwidth_gbs": 1e15, "op_us": 0},
    "bytes": {"gflops": 1e15, "mem_bandwidth_gbs": 1, "op_us": 0},
}


def unit_costs(opc, model, work, probe):
    path = os.path.join(work, "probe.json")
    with open(path, "w") as f:
        json.dump(dict(name="probe", kind="cpu", **probe), f)
    out = os.path.join(work, "schedule.json")
    subprocess.run([opc, model, "--devices", "gpu,cpu", "--partition", "cpu", "--cpu-device",
                    path, "--emit-schedule", out], check=True, capture_output=True)
    s = json.load(open(out))
    return {u["key"]: u["cost_us"] for st in s["stages"] for g in st["groups"]
            for u in g["units"] if u["device"] == 1}


def measured(opc, model, work):
    exe = os.path.join(work, "net")
    subprocess.run([opc, model, "-o", exe, "--target", "cpu"], check=True, capture_output=True)
    prof = os.path.join(work, "profile.json")
    subprocess.run([exe, "--profile", prof, "--repeats", "5"], check=True, capture_output=True)
    return {u["key"]: u["us"] for u in json.load(open(prof))["units"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opc", default=os.path.join(ROOT, "build", "opc"))
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    models = args.models.split(",") if args.models else zoo_models()
    cache = os.path.join(tempfile.gettempdir(), "opc-bench-models")
    os.makedirs(cache, exist_ok=True)
    rows, per_model = [], []
    for name in models:
        model = build_model(name, cache)
        with tempfile.TemporaryDirectory() as work:
            terms = {k: unit_costs(args.opc, model, work, p) for k, p in PROBES.items()}
            times = measured(args.opc, model, work)
        keys = [k for k in times if k in terms["op"]]
        x = np.array([[terms["op"][k], terms["flops"][k], terms["bytes"][k]] for k in keys])
        y = np.array([times[k] for k in keys])
        rows.append((x, y))
        per_model.append((name, x, y))
        print("%-16s %4d operators profiled, %.0f us in all" % (name, len(keys), y.sum()), flush=True)
    x = np.concatenate([r[0] for r in rows])
    y = np.concatenate([r[1] for r in rows])
    # cost = op_us * op + flops_term / gflops + bytes_term / gbs: linear in
    # (op_us, 1/gflops, 1/gbs); weighted by 1/y for relative errors
    w = 1 / np.maximum(y, 1.0)
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    coef = np.maximum(coef, 1e-9)
    fit = {"op_us": coef[0], "gflops": 1 / coef[1], "mem_bandwidth_gbs": 1 / coef[2]}
    print("fit: op_us %.2f, gflops %.1f, mem_bandwidth_gbs %.2f" %
          (fit["op_us"], fit["gflops"], fit["mem_bandwidth_gbs"]))
    for name, xm, ym in per_model:
        print("  %-16s whole CPU: predicted %9.0f us, measured %9.0f us (%.2fx)"
              % (name, (xm @ coef).sum(), ym.sum(), (xm @ coef).sum() / ym.sum()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"name": "cpu-fitted", "kind": "cpu",
                       "gflops": round(fit["gflops"], 1),
                       "mem_bandwidth_gbs": round(fit["mem_bandwidth_gbs"], 2),
                       "op_us": round(fit["op_us"], 2)}, f, indent=2)
        print("wrote", args.out)


if __name__ == "__main__":
    main()
