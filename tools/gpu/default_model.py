#!/usr/bin/env python3
"""The default model on the GPU: a zoo model (tools/models/build.py) compiled
with `opc --target cuda` under every scheduler, run on a photograph chosen by
a seed, compared with ONNX Runtime (tests/zoo/compare.py: relative L2 and
signal-relative bounds of each precision) and timed with the program's own
--bench.

usage: default_model.py --opc OPC [--model squeezenet1_1] [--configs a,b,...]
                        [--runs 300] [--warmup 50] [--work DIR]
                        [--target cuda|cpu] [--json FILE]

Configurations: ios, lios, greedy, sequential (strict fp32, CUDA graph
replay), lios-no-graph (kernels issued on every run), lios-tf32 (TF32
allowed: relative L2 held to 1e-2 only, since TF32 rounds inputs to 10-bit
mantissas, but the signal-relative error to 1e-3 as fp32's),
lios-fp16 and lios-bf16 (16-bit storage; compare.PRECISIONS),
hope-alternate (every other operator on the host CPU, --devices gpu,cpu),
hope-ilp (HOPE's ILP partition), hios (--gpus 1: HIOS's sliding window
on the one GPU), and hios-2-on-1 and hios-4-on-1 (programs for 2 and 4 GPUs,
HIOS's placement and its transfers, all on the one GPU with OPC_GPU_MAP).
--target cpu runs the same steps on opc's CPU runtime, to test this script
on a machine without a GPU. Exits non-zero when any configuration fails.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIGS = {
    "ios": ["--schedule", "ios"],
    "lios": ["--schedule", "lios"],
    "greedy": ["--schedule", "greedy"],
    "sequential": ["--schedule", "sequential"],
    "lios-no-graph": ["--schedule", "lios", "--no-cuda-graph"],
    "lios-tf32": ["--schedule", "lios", "--precision", "tf32"],
    "lios-fp16": ["--schedule", "lios", "--precision", "fp16"],
    "lios-bf16": ["--schedule", "lios", "--precision", "bf16"],
    # every other operator on the host CPU (HOPE): opc's CPU kernels in host
    # functions of the GPU's streams, beside real cuDNN and cuBLAS
    "hope-alternate": ["--schedule", "lios", "--devices", "gpu,cpu", "--partition", "alternate"],
    # HOPE's own partition (GLPK's ILP over the cost models)
    "hope-ilp": ["--schedule", "lios", "--devices", "gpu,cpu", "--partition", "ilp"],
    # HIOS on the one GPU the lent machines have: its sliding-window grouping
    "hios": ["--gpus", "1"],
    # programs for several GPUs, run on the one there is: each of their GPUs
    # keeps its streams, handles, arena and weights, and a transfer is a copy
    "hios-2-on-1": ["--gpus", "2"],
    "hios-4-on-1": ["--gpus", "4"],
}
CONFIG_ENV = {
    "hios-2-on-1": {"OPC_GPU_MAP": "0,0"},
    "hios-4-on-1": {"OPC_GPU_MAP": "0,0,0,0"},
}
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


zoo_compare = load("opc_zoo_compare", os.path.join(ROOT, "tests", "zoo", "compare.py"))
# The benchmark reads the program's --bench line the same way.
parse_latency = load("opc_bench_gpu", os.path.join(ROOT, "bench", "gpu", "bench_gpu.py")).parse_latency


def run(cmd, timeout=600, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout


def last_line(text):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else "(no message)"


def read_pairs(path):
    pairs = []
    with open(path) as f:
        for line in f:
            if line.strip():
                name, _, file = line.strip().partition("=")
                pairs.append((name, file))
    return pairs


def check_config(name, flags, model, inputs, refs, args):
    r = {"config": name, "flags": flags, "status": "FAIL"}
    exe = os.path.join(args.work, "net-" + name)
    t0 = time.time()
    code, out = run([args.opc, model, "-o", exe, "--target", args.target] + flags)
    r["compile_s"] = round(time.time() - t0, 1)
    if code != 0:
        r["message"] = "opc %s: %s" % ("timed out" if code is None else "exited %d" % code,
                                       last_line(out))
        return r
    cmd = [exe]
    for n, f in inputs:
        cmd += ["--input", "%s=%s" % (n, f)]
    outs = []
    for k, (n, _) in enumerate(refs):
        outs.append(os.path.join(args.work, "out-%s-%d.npy" % (name, k)))
        cmd += ["--output", "%s=%s" % (n, outs[-1])]
    # One program run: a checked run, then the timed runs; the outputs written
    # are those of the last timed run, so replays are checked too.
    cmd += ["--bench", str(args.runs), "--warmup", str(args.warmup)]
    code, out = run(cmd, env=dict(os.environ, **CONFIG_ENV.get(name, {})))
    if code != 0:
        r["message"] = "program %s: %s" % ("timed out" if code is None else "exited %d" % code,
                                           last_line(out))
        return r
    r["latency_ms"] = parse_latency(out)
    precision = flags[flags.index("--precision") + 1] if "--precision" in flags else "fp32"
    worst, signal, problems = 0.0, 0.0, []
    r["bounds"] = zoo_compare.PRECISIONS[precision]
    for k, ((n, ref), got) in enumerate(zip(refs, outs)):
        baseline = os.path.join(os.path.dirname(ref), "baseline_%d.npy" % k)
        # bf16's bounds widen to the storage-rounding floor (compare.py)
        floor = os.path.join(os.path.dirname(ref), "floor_%s_%d.npy" % (precision, k))
        try:
            ok, message, figures = zoo_compare.check(
                np.load(ref), np.load(got), precision,
                np.load(baseline) if os.path.exists(baseline) else None,
                np.load(floor) if os.path.exists(floor) else None)
        except zoo_compare.ReferenceError as e:
            ok, message, figures = False, "reference: %s" % e, {}
        worst = max(worst, figures.get("rel_l2") or 0.0)
        signal = max(signal, figures.get("signal_rel") or 0.0)
        if figures.get("bounds"):
            r["bounds"] = tuple(max(a, b) for a, b in zip(r["bounds"], figures["bounds"]))
        if not ok:
            problems.append("%s: %s" % (n, message))
    r["rel_l2"] = worst
    r["signal_rel"] = signal
    if problems:
        r["message"] = "; ".join(problems)
    elif not r["latency_ms"]:
        r["message"] = "the program printed no latency_ms line"
    else:
        r["status"] = "PASS"
    for suffix in ("", ".c", ".h", ".weights"):
        if os.path.exists(exe + suffix) and r["status"] == "PASS":
            os.remove(exe + suffix)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opc", required=True)
    ap.add_argument("--model", default="squeezenet1_1")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1, help="seed of the random input")
    ap.add_argument("--work", default="/tmp/opc-gpu/default-model")
    ap.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()
    args.opc = os.path.abspath(args.opc)
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            ap.error("unknown configuration %r (known: %s)" % (c, ", ".join(CONFIGS)))
    os.makedirs(args.work, exist_ok=True)

    result = {"model": args.model, "target": args.target, "runs": args.runs,
              "warmup": args.warmup, "seed": args.seed, "configs": []}
    model = os.path.join(args.work, "model.onnx")
    code, out = run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"),
                     args.model, "-o", model, "--seed", "0"])
    ref_dir = os.path.join(args.work, "ref")
    if code == 0:
        code, out = run([sys.executable, os.path.join(ROOT, "tests", "zoo", "reference.py"), model,
                         "--seed", str(args.seed), "--outdir", ref_dir])
    if code != 0:
        result["error"] = "model or reference: " + last_line(out)
        print("default model: " + result["error"])
    else:
        inputs = read_pairs(os.path.join(ref_dir, "inputs.txt"))
        refs = read_pairs(os.path.join(ref_dir, "outputs.txt"))
        for c in configs:
            r = check_config(c, CONFIGS[c], model, inputs, refs, args)
            result["configs"].append(r)
            lat = r.get("latency_ms") or {}
            print("%-4s %s %-13s rel_l2=%-9s signal_rel=%-9s p50=%-8s p90=%-8s compile %s s%s" % (
                r["status"], args.model, c,
                "%.2e" % r["rel_l2"] if "rel_l2" in r else "-",
                "%.2e" % r["signal_rel"] if "signal_rel" in r else "-",
                "%.4f" % lat["p50"] if "p50" in lat else "-",
                "%.4f" % lat["p90"] if "p90" in lat else "-",
                r.get("compile_s", "-"), (": " + r["message"]) if r.get("message") else ""),
                flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    ok = "error" not in result and all(r["status"] == "PASS" for r in result["configs"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
