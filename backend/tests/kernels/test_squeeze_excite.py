#!/usr/bin/env python3
"""Squeeze-and-excitation blocks through fuse-squeeze-excite and opc's
kernel opc_se_gate, end to end against ONNX Runtime, on the CPU runtime
under its race checker (OPC_CHECK=1).

usage: test_squeeze_excite.py OPC WORK_DIR

Each model is a 3x3 convolution (so that the block reads computed data),
the block as exporters write it (GlobalAveragePool, 1x1 Conv + bias +
activation, 1x1 Conv + bias + gate, Mul), then a projection Conv:
  - efficientnet: SiLU written as x * Sigmoid(x), Sigmoid gate, one image,
    80 channels (three tiles of 32, the last partial), hidden 20; the
    projection's filter (8 x 80) is smaller than x (80 x 8 x 8), so the Mul
    goes into it;
  - mobilenet_v3: Relu, HardSigmoid(1/6, 1/2), three images (two tiles
    each, so that a CPU thread's run of tiles crosses an image and must
    compute the hidden layer again): the gate is written and the Mul stays;
  - late_stage: a 3x3 image whose projection filter (24 x 48) is larger
    than x (48 x 3 x 3): the Mul's launch still outweighs it, and it goes.
The first two again in float16 and bfloat16 (--precision): there the gate
is fused and the Mul stays (fuse-squeeze-excite says why).
Inputs are smooth images (low-frequency sinusoids and a little noise),
weights scaled by 1/sqrt(fan-in). `--stats` must show the SEGate (and no
Mul where the filter takes it). Negative control: ONNX Runtime's output
with the gate left out (y = projection of x) must differ from opc's.
"""
import os
import re
import subprocess
import sys

import numpy as np
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, reference, run_opc, value_info  # noqa: E402

def smooth_image(rng, n, c, h, w):
    """A few low-frequency sinusoids per channel, and a little noise."""
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    img = np.zeros((n, c, h, w), np.float32)
    for i in range(n):
        for k in range(c):
            fy, fx, ph = rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0), rng.uniform(0, 6.3)
            img[i, k] = np.sin(2 * np.pi * (fy * yy + fx * xx) + ph)
    return img + rng.normal(0, 0.05, img.shape).astype(np.float32)


def weight(rng, name, *shape):
    fan_in = int(np.prod(shape[1:]))
    w = rng.normal(0, 1 / np.sqrt(fan_in), shape).astype(np.float32)
    return numpy_helper.from_array(w, name)


def bias(rng, name, n):
    return numpy_helper.from_array(rng.normal(0, 0.2, n).astype(np.float32), name)


def se_model(name, n, c_in, c, hidden, hw, out, inner, gate, gated=True):
    """The conv, SE block and projection, and its input; gated=False leaves
    the gate out (the same weights: they come from the name's seed)."""
    rng = np.random.default_rng(sum(name.encode()))
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["a"], pads=[1, 1, 1, 1])]
    inits = [weight(rng, "w0", c, c_in, 3, 3), bias(rng, "b0", c),
             weight(rng, "w1", hidden, c, 1, 1), bias(rng, "b1", hidden),
             weight(rng, "w2", c, hidden, 1, 1), bias(rng, "b2", c),
             weight(rng, "w3", out, c, 1, 1), bias(rng, "b3", out)]
    nodes += [helper.make_node("GlobalAveragePool", ["a"], ["p"]),
              helper.make_node("Conv", ["p", "w1", "b1"], ["h0"])]
    if inner == "silu":
        nodes += [helper.make_node("Sigmoid", ["h0"], ["hs"]),
                  helper.make_node("Mul", ["h0", "hs"], ["h"])]
    else:
        nodes += [helper.make_node("Relu", ["h0"], ["h"])]
    nodes += [helper.make_node("Conv", ["h", "w2", "b2"], ["s0"])]
    if gate == "sigmoid":
        nodes += [helper.make_node("Sigmoid", ["s0"], ["s"])]
    else:
        nodes += [helper.make_node("HardSigmoid", ["s0"], ["s"], alpha=1 / 6, beta=0.5)]
    nodes += [helper.make_node("Mul", ["a", "s"], ["g"]),
              helper.make_node("Conv", ["g" if gated else "a", "w3", "b3"], ["y"])]
    x = np.zeros((n, c_in, hw, hw), np.float32)
    m = onnx_case.model(nodes, [value_info("x", x)],
                        [helper.make_tensor_value_info("y", 1, None)], inits, name=name)
    return m, smooth_image(rng, n, c_in, hw, hw)


# name, images, in channels, channels, hidden, side, outputs, inner, gate,
# Muls left, precision (and the tolerance, of the output's largest value)
CASES = [
    ("efficientnet", 1, 3, 80, 20, 8, 8, "silu", "sigmoid", 0, "fp32"),
    ("mobilenet_v3", 3, 4, 40, 10, 6, 16, "relu", "hard_sigmoid", 1, "fp32"),
    ("late_stage", 1, 4, 48, 12, 3, 24, "silu", "sigmoid", 0, "fp32"),
    ("efficientnet", 1, 3, 80, 20, 8, 8, "silu", "sigmoid", 1, "fp16"),
    ("mobilenet_v3", 2, 4, 40, 10, 6, 16, "relu", "hard_sigmoid", 1, "bf16"),
]
TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 3e-2}


def stats(opc, path, flags):
    p = subprocess.run([opc, path, "-o", path + ".c", "--stats", *flags], capture_output=True,
                       text=True)
    counts = dict(re.findall(r"^(\w+)\s+\d+\s+(\d+)$", p.stdout, re.M))
    return {k: int(v) for k, v in counts.items()}


def main():
    opc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    os.environ["OPC_CHECK"] = "1"
    failures = 0
    for name, n, c_in, c, hidden, hw, out, inner, gate, muls, precision in CASES:
        m, x = se_model(name, n, c_in, c, hidden, hw, out, inner, gate)
        want = reference(m, {"x": x})["y"]
        flags = [] if precision == "fp32" else ["--precision", precision]
        case = f"{name}-{precision}"
        got, why = run_opc(opc, m, {"x": x}, os.path.join(work, case), flags)
        problem = why if got is None else compare_close(got["y"], want, TOLERANCE[precision])
        if problem is None:
            counts = stats(opc, os.path.join(work, case, "model.onnx"), flags)
            if counts.get("SEGate") != 1 or counts.get("Mul", 0) != muls:
                problem = f"--stats: {counts.get('SEGate', 0)} SEGate, " \
                          f"{counts.get('Mul', 0)} Mul; wanted 1 and {muls}"
        if problem is None:  # negative control: without the gate
            plain = reference(se_model(name, n, c_in, c, hidden, hw, out, inner, gate,
                                       gated=False)[0], {"x": x})["y"]
            if compare_close(got["y"], plain, 10 * TOLERANCE[precision]) is None:
                problem = "the output without the gate matches too: the case decides nothing"
        print(f"{'FAIL' if problem else 'ok  '} {case}" + (f": {problem}" if problem else ""))
        failures += problem is not None
    failures += not refuses_internal_kind(opc, work)
    return 1 if failures else 0


def refuses_internal_kind(opc, work):
    """SEGate is opc's own kind: an ONNX node of that op_type is unknown."""
    w = numpy_helper.from_array(np.zeros(7, np.float32), "w")
    m = onnx_case.model([helper.make_node("SEGate", ["x", "w"], ["y"])],
                        [value_info("x", np.zeros((1, 2, 1, 1), np.float32))],
                        [helper.make_tensor_value_info("y", 1, None)], [w])
    exe, why = onnx_case.compile_cpu(opc, m, os.path.join(work, "refused"))
    ok = exe is None and why[0] != 0 and "unsupported operators: SEGate" in why[1]
    print(f"{'ok  ' if ok else 'FAIL'} an ONNX SEGate node is refused: {why}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
