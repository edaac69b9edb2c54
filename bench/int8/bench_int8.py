#!/usr/bin/env python3
"""bench_int8.py - int8 latency on the CPU: opc's int8 CPU program (--target
cpu: each convolution one packed int8 kernel, opc_int8_conv_packed;
activations channels-last between the integer convolutions) against the
GPU program on the CPU runtime (--target stand-in: cuBLASLt's int8 GEMM on
the runtime's oneDNN stand-in, between im2row and requantize kernels), the
CPU program in ONNX's order (--layout nchw: the code before choose-layout's
int8 form, which takes the GEMM), with
opc's own integer kernels (OPC_INT8_GEMM=kernel at compile time: the code
before the GEMM), opc's float32 program of the float model, and ONNX
Runtime on the int8 and the float model, in one run.

  bench_int8.py --opc build/opc [--models resnet50,mobilenet_v2] [--runs 20]
                [--warmup 3] [--rounds 3] [--kernel-runs 2] [--threads 2]
                [--pause 0.2] [--work DIR] -o bench/results/int8-cpu-DATE.md

Per model: tools/models/build.py (batch 1), quantize.py (QDQ, per
channel, calibrated on 8 photographs), five compiles (`--target cpu` but
the stand-in's).
Rounds alternate the engines; each round runs `net --bench RUNS` (the
kernels' program --bench KERNEL_RUNS, it is slow) and times ONNX Runtime
in-process (graph optimisation `all`, intra-op THREADS, sequential) over
the same counts; a median over rounds of each p50 is reported. Each turn
starts after a pause (--pause), because ONNX Runtime's pool threads spin
on after its runs (tens of milliseconds) and would share the cores with
the next program's runs, which slowed opc's by up to a third. Also: opc
int8 against ONNX Runtime int8 (optimisations off: the nodes as written)
on one photograph, the count of differing output elements and the
largest difference.
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

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench", "cpu"))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
import bench_cpu  # noqa: E402
import photos  # noqa: E402


def run(cmd, env=None, cwd=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if p.returncode != 0:
        sys.exit("bench_int8.py: %s failed: %s" % (" ".join(cmd), p.stderr[-500:]))
    return p.stdout + p.stderr


def compile_net(opc, model, out, env, *extra, target="cpu"):
    run([opc, model, "-o", out, "--target", target, *extra], env=env)
    return out


def net_p50(net, runs, warmup, env):
    text = run([net, "--bench", str(runs), "--warmup", str(warmup)], env=env,
               cwd=os.path.dirname(net))
    return bench_cpu.parse_latency(text)["p50"]


def ort_p50(sess, feeds, runs, warmup):
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.percentile(times, 50))


def output_of(net, model, x, work):
    name, out = model.graph.input[0].name, model.graph.output[0].name
    f, o = os.path.join(work, "photo.npy"), os.path.join(work, "photo.out.npy")
    np.save(f, x)
    run([net, "--input", "%s=%s" % (name, f), "--output", "%s=%s" % (out, o)])
    return np.load(o).reshape(-1)


def agreement(nets, model_path, x, work, threads):
    """opc's int8 output against the GPU program's, NCHW's and its kernels'
    (all must be the same bits) and against ONNX Runtime's (no
    optimisation) on x."""
    import onnx
    m = onnx.load(model_path)
    got = output_of(nets["opc int8"], m, x, work)
    before = output_of(nets["opc int8 kernels"], m, x, work)
    nchw = output_of(nets["opc int8 nchw"], m, x, work)
    gpu = output_of(nets["opc int8 stand-in"], m, x, work)
    sess = bench_cpu.ort_session(model_path, threads, "disable")
    want = sess.run(None, {m.graph.input[0].name: x})[0].reshape(-1)
    diff = np.abs(got.astype(np.float64) - want)
    return {"differ_kernels": int((got != before).sum()), "differ_nchw": int((got != nchw).sum()),
            "differ_stand_in": int((got != gpu).sum()),
            "differ": int((diff > 0).sum()),
            "worst": float(diff.max()), "outputs": int(got.size),
            "top1": bool(np.argmax(got) == np.argmax(want))}


def bench_model(name, a, env):
    work = os.path.join(a.work, name)
    os.makedirs(work, exist_ok=True)
    fp32, int8 = os.path.join(work, name + ".onnx"), os.path.join(work, name + "_int8.onnx")
    run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"), name, "-o", fp32])
    run([sys.executable, os.path.join(HERE, "quantize.py"), fp32, int8])
    nets = {"opc int8": compile_net(a.opc, int8, os.path.join(work, "net_int8"), env),
            "opc int8 stand-in": compile_net(a.opc, int8, os.path.join(work, "net_int8_gpu"), env,
                                             target="stand-in"),
            "opc int8 nchw": compile_net(a.opc, int8, os.path.join(work, "net_int8_nchw"), env,
                                         "--layout", "nchw"),
            "opc int8 kernels": compile_net(a.opc, int8, os.path.join(work, "net_int8_kernel"),
                                            dict(env, OPC_INT8_GEMM="kernel")),
            "opc fp32": compile_net(a.opc, fp32, os.path.join(work, "net_fp32"), env)}
    sessions = {"ORT int8": bench_cpu.ort_session(int8, a.threads, "all"),
                "ORT fp32": bench_cpu.ort_session(fp32, a.threads, "all")}
    inp = sessions["ORT int8"].get_inputs()[0]
    x = photos.image_batch([0], inp.shape)
    times = {k: [] for k in list(nets) + list(sessions)}
    for _ in range(a.rounds):
        for k, net in nets.items():
            time.sleep(a.pause)
            runs = a.kernel_runs if "kernels" in k else a.runs
            times[k].append(net_p50(net, runs, 0 if "kernels" in k else a.warmup, env))
        for k, s in sessions.items():
            time.sleep(a.pause)
            times[k].append(ort_p50(s, {inp.name: x}, a.runs, a.warmup))
    p50 = {k: float(np.median(v)) for k, v in times.items()}
    r = {"model": name, "input": "%s%s" % (inp.name, inp.shape), "p50_ms": p50, "rounds": times,
         "stats": run([a.opc, int8, "--target", "cpu", "--stats"], env=env)}
    r.update(agreement(nets, int8, x, work, a.threads))
    return r


def write_report(path, results, a, env):
    info = bench_cpu.cpu_info()
    lines = ["# int8 on the CPU: opc's CPU program (packed int8 convolutions, channels-last) vs "
             "the GPU program on the stand-in (cuBLASLt's int8 GEMM on oneDNN), NCHW, its "
             "kernels, fp32, ONNX Runtime (%s)" % datetime.date.today(), "",
             "| | |", "|---|---|",
             "| CPU | %s (%s CPUs available) |" % (info.get("model", platform.processor()),
                                                info.get("cpus_available")),
             "| instruction sets | %s |" % " ".join(info.get("isa", [])),
             "| date | %s |" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
             "| threads | %d (OPC_THREADS, OMP_NUM_THREADS; ORT intra-op) |" % a.threads,
             "| repo | %s |" % bench_cpu.git_rev(),
             "| runs | %d rounds; each: `net --bench %d --warmup %d` (kernels: --bench %d), "
             "ORT %d runs after %d, p50, each turn after %.1f s of quiet; the median of the "
             "rounds' p50 |" % (a.rounds, a.runs, a.warmup, a.kernel_runs, a.runs, a.warmup,
                                a.pause),
             "| models | tools/models/build.py, batch 1; int8: bench/int8/quantize.py (QDQ, "
             "per channel, uint8 activations, int8 weights, reduce_range) |", "",
             "Latency p50 in milliseconds.", "",
             "| model | opc int8 | opc int8 GPU program (stand-in) | opc int8 NCHW | "
             "opc int8 kernels | opc fp32 | ORT int8 | ORT fp32 | int8/stand-in | int8/NCHW | "
             "int8/opc fp32 | int8/ORT int8 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        p = r["p50_ms"]
        lines.append("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f "
                     "| %.2f |" % (
                         r["model"], p["opc int8"], p["opc int8 stand-in"], p["opc int8 nchw"],
                         p["opc int8 kernels"], p["opc fp32"], p["ORT int8"], p["ORT fp32"],
                         p["opc int8"] / p["opc int8 stand-in"], p["opc int8"] / p["opc int8 nchw"],
                         p["opc int8"] / p["opc fp32"], p["opc int8"] / p["ORT int8"]))
    if len(results) > 1:
        def geomean(key):
            return float(np.exp(np.mean([np.log(r["p50_ms"]["opc int8"] / r["p50_ms"][key])
                                         for r in results])))
        lines += ["", "Geometric mean over the %d models: opc int8 / ORT int8 %.2f (largest %.2f, "
                  "%s), opc int8 / opc fp32 %.2f." % (
                      len(results), geomean("ORT int8"),
                      max(r["p50_ms"]["opc int8"] / r["p50_ms"]["ORT int8"] for r in results),
                      max(results, key=lambda r: r["p50_ms"]["opc int8"] / r["p50_ms"]["ORT int8"])
                      ["model"], geomean("opc fp32"))]
    lines += ["", "Outputs on photograph 0: opc int8 against the GPU program's, NCHW's and the "
              "kernels' (the same bits are due, but where a float AveragePool sits between a DQ and a "
              "Q: its window's sum is added in another order in each layout, DenseNet's "
              "transitions), and against ONNX Runtime int8 (optimisations "
              "off):", ""]
    for r in results:
        lines.append("- %s: %d of %d differ from the GPU program's, %d from NCHW's, %d from the "
                     "kernels'; %d differ from ONNX Runtime's, largest difference %g, same "
                     "top-1: %s" % (r["model"], r["differ_stand_in"], r["outputs"],
                                    r["differ_nchw"], r["differ_kernels"], r["differ"],
                                    r["worst"], r["top1"]))
    write_with_rounds(path, lines, results, 2)


def write_with_rounds(path, lines, results, digits):
    """The report's lines, then each model's p50 per round (`digits`
    decimals), to path, and the results as JSON beside it."""
    lines = lines + ["", "Per round p50 (ms):", ""]
    for r in results:
        lines.append("- %s: %s" % (r["model"], json.dumps(
            {k: [round(v, digits) for v in vs] for k, vs in r["rounds"].items()})))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump(results, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opc", required=True)
    ap.add_argument("--models", default="resnet50")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernel-runs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pause", type=float, default=0.2,
                    help="seconds of quiet before each turn: ONNX Runtime's pool threads "
                    "spin on after its runs (default 0.2)")
    ap.add_argument("--work", default="/tmp/opc-bench-int8")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    a.opc = os.path.abspath(a.opc)
    env = dict(os.environ, OPC_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    env.pop("OPC_INT8_GEMM", None)
    results = [bench_model(m, a, env) for m in a.models.split(",")]
    write_report(a.output, results, a, env)
    print(open(a.output).read())


if __name__ == "__main__":
    main()
