#!/usr/bin/env python3
"""End to end: sibling convolutions through every scheduler, on the CPU runtime.

  test_e2e.py OPC WORKDIR

Builds a small ONNX model with the shapes operator merge targets (three 1x1
siblings of an Inception block's entry, a 1x1 beside a 3x3, a 1x3 beside a
3x1, plus independent branches), compiles it with opc for the CPU target
under each scheduler (and with --no-merge), runs it with the race checker
(OPC_CHECK=1) and compares the outputs with ONNX Runtime.
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def conv(nodes, inits, rng, name, x, cin, cout, kh, kw, pads):
    w = (rng.standard_normal((cout, cin, kh, kw)) * 0.1).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    inits += [numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")]
    nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name + "_c"],
                                  name=name, kernel_shape=[kh, kw], pads=pads))
    nodes.append(helper.make_node("Relu", [name + "_c"], [name], name=name + "_relu"))
    return name


def build_model(path):
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    c = 96
    a = conv(nodes, inits, rng, "a1x1", "x", c, 32, 1, 1, [0, 0, 0, 0])
    b = conv(nodes, inits, rng, "b1x1", "x", c, 48, 1, 1, [0, 0, 0, 0])
    d = conv(nodes, inits, rng, "d1x1", "x", c, 16, 1, 1, [0, 0, 0, 0])
    e = conv(nodes, inits, rng, "e3x3", "x", c, 24, 3, 3, [1, 1, 1, 1])
    f = conv(nodes, inits, rng, "f1x3", b, 48, 32, 1, 3, [0, 1, 0, 1])
    g = conv(nodes, inits, rng, "g3x1", b, 48, 32, 3, 1, [1, 0, 1, 0])
    h = conv(nodes, inits, rng, "h3x3", d, 16, 24, 3, 3, [1, 1, 1, 1])
    nodes.append(helper.make_node("MaxPool", ["x"], ["pool"], name="pool", kernel_shape=[3, 3],
                                  pads=[1, 1, 1, 1], strides=[1, 1]))
    p = conv(nodes, inits, rng, "p1x1", "pool", c, 16, 1, 1, [0, 0, 0, 0])
    nodes.append(helper.make_node("Concat", [a, e, f, g, h, p], ["y"], name="concat", axis=1))
    graph = helper.make_graph(
        nodes, "siblings", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 17, 17])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 160, 17, 17])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    opc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "siblings.onnx")
    build_model(model)
    x = np.random.default_rng(1).standard_normal((1, 96, 17, 17)).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    failures = 0
    merged_somewhere = False
    runs = [(s, []) for s in ("sequential", "greedy", "ios", "lios")] + [("ios", ["--no-merge"])]
    for sched, extra in runs:
        tag = sched + "".join(extra).replace("-", "_")
        exe = os.path.join(work, "net_" + tag)
        schedule_json = exe + ".json"
        cmd = [opc, model, "--schedule", sched, "--target", "cpu", "-o", exe,
               "--emit-schedule", schedule_json] + extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL %s: opc exited %d\n%s" % (tag, r.returncode, r.stderr))
            failures += 1
            continue
        with open(schedule_json) as f:
            sch = json.load(f)
        names = [u["name"] for st in sch["stages"] for g in st["groups"] for u in g["units"]]
        merged = [n for n in names if n.endswith("_merged")]
        merged_somewhere |= bool(merged)
        if extra and merged:
            print("FAIL %s: merged %s despite --no-merge" % (tag, merged))
            failures += 1
        out = os.path.join(work, "y_" + tag + ".npy")
        env = dict(os.environ, OPC_CHECK="1")
        r = subprocess.run([exe, "--weights", exe + ".weights", "--input",
                            "x=" + os.path.join(work, "x.npy"), "--output", "y=" + out],
                           capture_output=True, text=True, env=env, timeout=300)
        if r.returncode != 0:
            print("FAIL %s: program exited %d\n%s" % (tag, r.returncode, r.stderr))
            failures += 1
            continue
        y = np.load(out)
        err = float(np.abs(y - ref).max() / max(1e-30, float(np.abs(ref).max())))
        ok = y.shape == ref.shape and err < 1e-4
        print("%-16s streams %d events %2d merged %-28s rel err %.2e %s" % (
            tag, sch["streams"], sch["events"], ",".join(merged) or "-", err,
            "ok" if ok else "FAIL"))
        failures += not ok
        if ok:  # a failing run's program stays to be looked at
            os.remove(exe)
    if not merged_somewhere:
        print("FAIL: no scheduler run merged any sibling convolutions")
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
