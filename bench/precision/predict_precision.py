#!/usr/bin/env python3
"""What the cost model predicts --precision changes on the GPU.

  predict_precision.py --opc OPC [--models a,b,...] [--device h100] -o FILE.md

For each zoo model (tools/models/build.py, batch 1) opc compiles for
--target cuda under fp32, tf32, fp16 and bf16 with --emit-schedule, and the
table gives the schedule's simulated latency (the cost model's, on the
device file's GPU) and how many of the model's nodes lowered to 16 bits,
with the casts lower-precision added. These are predictions, not
measurements: the 16-bit rates are the device file's data-sheet gain,
capped (passes/cost_model.c), until a lent GPU measures them with
bench/gpu/bench_gpu.py --precisions fp16,bf16.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["inception_v3", "squeezenet1_1", "nasnet_a", "randwire", "resnet50", "googlenet",
          "mobilenet_v2", "densenet121", "efficientnet_b0", "mobilenet_v3", "shufflenet_v2",
          "deeplabv3", "swin", "bert_tiny"]
PRECISIONS = ["fp32", "tf32", "fp16", "bf16"]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def lowered(opc, model, precision, work):
    """(16-bit nodes, casts added) after lower-precision."""
    r = run([opc, model, "--precision", precision, "--dump-after=lower-precision",
             "-o", os.path.join(work, "dump.c")])
    nodes = [l for l in r.stdout.splitlines() if " = " in l and not l.startswith("const")]
    half = sum(1 for l in nodes if re.match(r"%\S+: (f16|bf16)\[", l) and "= Cast(" not in l)
    casts = sum(1 for l in nodes if "= Cast(" in l)
    return half, casts, len(nodes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opc", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--device", default="h100")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in a.models.split(","):
            model = os.path.join(work, name + ".onnx")
            r = run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"), name,
                     "-o", model, "--batch", "1", "--seed", "0"])
            if r.returncode:
                sys.exit("predict_precision: %s: %s" % (name, r.stderr.strip()))
            row = {"model": name}
            for p in PRECISIONS:
                sched = os.path.join(work, "sched.json")
                r = run([a.opc, model, "--precision", p, "--device", a.device,
                         "--emit-schedule", sched, "-o", os.path.join(work, "net.c")])
                if r.returncode:
                    sys.exit("predict_precision: %s %s: %s" % (name, p, r.stderr.strip()))
                s = json.load(open(sched))
                row[p] = s.get("simulated_latency_us") or s["predicted_latency_us"]
            row["fp16_nodes"], row["fp16_casts"], row["nodes"] = lowered(a.opc, model, "fp16", work)
            rows.append(row)
            print("predict_precision: %s %s" % (name, {p: round(row[p], 1) for p in PRECISIONS}),
                  flush=True)
    date = datetime.date.today().isoformat()
    lines = ["# Predicted GPU latency by precision (%s, device file `%s`)" % (date, a.device), "",
             "The cost model's simulation of each schedule (batch 1, the default scheduler),",
             "not a measurement: no GPU ran these. fp16 nodes: nodes that lower-precision",
             "stored in float16, of all nodes after it; casts: the conversions it added.", "",
             "| model | fp32 us | tf32 us | fp16 us | bf16 us | fp16/fp32 | fp16 nodes | casts |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %.1f | %.1f | %.1f | %.1f | %.2f | %d of %d | %d |" % (
            r["model"], r["fp32"], r["tf32"], r["fp16"], r["bf16"], r["fp16"] / r["fp32"],
            r["fp16_nodes"], r["nodes"], r["fp16_casts"]))
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump({"date": date, "device": a.device, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
