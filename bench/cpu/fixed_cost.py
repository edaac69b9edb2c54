#!/usr/bin/env python3
"""The fixed cost of one run of a CPU program: a one-node model (Relu over
64 floats, or --op/--size) compiled by opc --target cpu, against ONNX
Runtime in-process on the same model, and optionally against the same
net.c linked with another build's runtime (--baseline-build: an opc build
directory, e.g. one of main before a change).

  fixed_cost.py --opc BUILD/opc [--baseline-build DIR] [--rounds R]
                [--runs N] [--threads T] [-o bench/results/FILE.md]

Each round runs every engine in turn (N runs after a warm-up); each
statistic is the median over the rounds and each ratio the median of the
rounds' ratios, as bench_cpu.py does. The net's own --bench times
net_run() (the input copied in, the CUDA graph launched, the output copied
out, the stream synchronised); ONNX Runtime's time is session.run()'s.
"""

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cpu import combine, cpu_info, git_rev, paired_ratio, parse_latency, summary  # noqa: E402


def one_node_model(path, op, size):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, size])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "one_node", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def link(opc, build, c_path, exe):
    """net.c linked with the runtime of `build` (an opc build directory)."""
    flags = subprocess.run([opc, "--cflags", "cpu"], capture_output=True, text=True,
                           check=True).stdout.split()
    libs = subprocess.run([opc, "--libs", "cpu"], capture_output=True, text=True,
                          check=True).stdout.split()
    if build:
        here = os.path.dirname(os.path.abspath(opc))
        libs = [l.replace(here, os.path.abspath(build)) for l in libs]
    subprocess.run(["cc", "-O2", *flags, c_path, "-o", exe, *libs], check=True)


def net_round(exe, weights, runs, env):
    p = subprocess.run([exe, "--weights", weights, "--bench", str(runs), "--warmup", "200"],
                       capture_output=True, text=True, env=env, check=True)
    return parse_latency(p.stdout + p.stderr)


def ort_round(sess, feeds, runs):
    for _ in range(200):
        sess.run(None, feeds)
    t = np.empty(runs)
    for i in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        t[i] = (time.perf_counter() - t0) * 1e3
    return summary(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--opc", required=True)
    ap.add_argument("--baseline-build", help="an opc build directory whose runtime to compare")
    ap.add_argument("--op", default="Relu")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()

    import onnxruntime as ort
    work = tempfile.mkdtemp(prefix="opc-fixed-cost-")
    model = os.path.join(work, "model.onnx")
    one_node_model(model, a.op, a.size)
    net = os.path.join(work, "net")
    subprocess.run([a.opc, model, "-o", net, "--target", "cpu"], check=True)
    engines = {"opc": net}
    link(a.opc, None, net + ".c", net)
    if a.baseline_build:
        engines["opc (baseline runtime)"] = net + "_base"
        link(a.opc, a.baseline_build, net + ".c", net + "_base")
    env = dict(os.environ, OPC_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feeds = {"x": np.linspace(-1, 1, a.size, dtype=np.float32).reshape(1, a.size)}

    rounds = {name: [] for name in [*engines, "ONNX Runtime"]}
    for _ in range(a.rounds):
        for name, exe in engines.items():
            rounds[name].append(net_round(exe, net + ".weights", a.runs, env))
        rounds["ONNX Runtime"].append(ort_round(sess, feeds, a.runs))
        time.sleep(0.5)  # ONNX Runtime's pool threads spin on after its runs

    cpu = cpu_info()
    lines = ["# Fixed cost of a run: one %s over %d floats, --target cpu" % (a.op, a.size), "",
             "- date: %s" % datetime.date.today().isoformat(),
             "- machine: %s, %s logical CPUs (%s available), %s" %
             (cpu["model"], cpu["logical_cpus"], cpu["cpus_available"], " ".join(cpu["isa"])),
             "- opc: %s" % git_rev(),
             "- threads: %d; %d rounds of %d runs, medians over the rounds" %
             (a.threads, a.rounds, a.runs), "",
             "| engine | p50 (us) | p90 (us) | min (us) | p50 / ONNX Runtime's |",
             "|---|---|---|---|---|"]
    for name, rs in rounds.items():
        c = combine(rs)
        ratio = paired_ratio(rs, rounds["ONNX Runtime"])
        lines.append("| %s | %.2f | %.2f | %.2f | %.2f |" %
                     (name, c["p50"] * 1e3, c["p90"] * 1e3, c["min"] * 1e3, ratio))
    text = "\n".join(lines) + "\n"
    print(text)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
