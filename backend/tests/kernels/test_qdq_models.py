#!/usr/bin/env python3
"""A QDQ model runs in int8: a small CNN quantized by ONNX Runtime's
quantize_static in the QDQ format, per channel, compiled by opc (CPU
runtime) and compared with ONNX Runtime on the same model.

The CNN: Conv 3->8 + Relu, Conv 8->8, the residual Add of the two, MaxPool,
Flatten, MatMul to 10. Weights are scaled by 1/sqrt(fan-in); calibration
and test inputs are smooth images (a few low-frequency sinusoids per
channel and a little noise), not white noise; the test checks that the
outputs vary. quantize_static removes the Relu (the Conv's output range
starts at 0) and writes DQ(int32 bias) with scale x_scale * w_scale.

fuse-qdq must make the Convs QLinearConv and the MatMul QLinearMatMul:
`opc --stats` must show no Conv or MatMul left, and `--report` must list
the Add, MaxPool and Flatten as left float between Q/DQ.

ONNX Runtime runs twice: with its default optimisations (it fuses the
same patterns into QLinearConv, QLinearMatMul and QLinearAdd) and with
none (float operators between Q and DQ). Compared, exactly: the quantized
tensors (each Conv's, the Add's, the Flatten's, the MatMul's) and the
float output (DequantizeLinear is (q - zero point) * scale in both).
Rounding is half to even in both; where the fused sum times its multiplier
and the float convolution divided by y's scale fell on different sides of
a half, they would differ by one quantum: none does here.

reduce_range (7-bit weights) keeps this CPU's ONNX Runtime exact: without
VNNI it sums uint8 x int8 products in int16-saturated pairs (see
test_integer.py).

Negative controls: the same `--stats` check on an -O0 compile (no fusion)
must find the float Conv; and the first QLinearConv recomputed in numpy
without its bias must be rejected, while with it it must match.

usage: test_qdq_models.py OPC WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_case import compile_cpu, compare_exact, reference, run_program  # noqa: E402
from test_integer import conv_sums, wrap32  # noqa: E402

rng = np.random.default_rng(5151)

# The quantized tensors compared, and the float output.
CHECKED = ["x_QuantizeLinear_Output", "r1_QuantizeLinear_Output", "c2_QuantizeLinear_Output",
           "s_QuantizeLinear_Output", "f_QuantizeLinear_Output", "y_QuantizeLinear_Output"]
FLOAT_LEFT = ["residual", "pool", "flatten"]


def weight(shape, fan_in):
    return (rng.normal(0, 1, shape) / np.sqrt(fan_in)).astype(np.float32)


def cnn():
    arrays = {"w1": weight((8, 3, 3, 3), 27), "b1": rng.normal(0, 0.1, 8).astype(np.float32),
              "w2": weight((8, 8, 3, 3), 72), "b2": rng.normal(0, 0.1, 8).astype(np.float32),
              "w3": weight((128, 10), 128)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Add", ["r1", "c2"], ["s"], name="residual"),
             helper.make_node("MaxPool", ["s"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                              name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "w3"], ["y"], name="matmul")]
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def images(n):
    """Smooth [1, 3, 8, 8] images: a sinusoid of random frequency and phase
    per channel, and a little noise."""
    yy, xx = np.mgrid[0:8, 0:8] / 8.0
    out = []
    for _ in range(n):
        channels = [np.sin(2 * np.pi * (rng.uniform(0.3, 1.5) * xx + rng.uniform(0.3, 1.5) * yy)
                           + rng.uniform(0, 2 * np.pi)) for _ in range(3)]
        img = np.stack(channels) + rng.normal(0, 0.1, (3, 8, 8))
        out.append(img[None].astype(np.float32))
    return out


class Calibration(CalibrationDataReader):
    def __init__(self):
        self.batches = iter([{"x": x} for x in images(16)])

    def get_next(self):
        return next(self.batches, None)


def quantized(work):
    os.makedirs(work, exist_ok=True)
    src, dst = os.path.join(work, "cnn.onnx"), os.path.join(work, "cnn_qdq.onnx")
    onnx.save(cnn(), src)
    quantize_static(src, dst, Calibration(), quant_format=QuantFormat.QDQ, per_channel=True,
                    reduce_range=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    m = onnx.load(dst)
    for name in CHECKED:
        m.graph.output.append(onnx.ValueInfoProto(name=name))
    return m


def opc_stats(opc, path, flags=()):
    """opc's --stats and --report text (its `after` counts by kind) for the
    CPU target."""
    p = subprocess.run([opc, path, "--target", "cpu", "--stats", "--report", *flags],
                       capture_output=True, text=True)
    after = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            after[parts[0]] = int(parts[2])
    return p.returncode, after, p.stdout + p.stderr


def fusion_failures(after, report):
    """What says the QDQ patterns were not all fused, or the float ones not
    reported; empty when all is well."""
    why = [f"{after[k]} float {k} left" for k in ("Conv", "MatMul") if after.get(k, 0)]
    why += [f"{k} missing" for k in ("QLinearConv", "QLinearMatMul") if not after.get(k, 0)]
    why += [f"--report does not list '{n}'" for n in FLOAT_LEFT
            if f"node '{n}'" not in report]
    return why


def initializer(m, name):
    return next(numpy_helper.to_array(t) for t in m.graph.initializer if t.name == name)


def conv1_in_numpy(m, xq, with_bias):
    """The first QLinearConv, requantised as ONNX Runtime does."""
    zx = initializer(m, "x_zero_point")
    w, zw = initializer(m, "w1_quantized"), initializer(m, "w1_zero_point")
    bias = initializer(m, "b1_quantized") if with_bias else np.zeros(8, np.int32)
    mult = (np.float32(initializer(m, "x_scale")) * initializer(m, "w1_scale")).astype(np.float32)
    mult = (mult / np.float32(initializer(m, "r1_scale"))).astype(np.float32).reshape(1, -1, 1, 1)
    sums = wrap32(conv_sums(xq, w, zx, zw, pads=[1, 1, 1, 1]) + bias.reshape(1, -1, 1, 1))
    q = np.rint((sums.astype(np.float32) * mult).astype(np.float32))
    return np.clip(q + int(initializer(m, "r1_zero_point")), 0, 255).astype(np.uint8)


def main():
    opc, work = sys.argv[1:3]
    failures = 0

    def verdict(ok, what):
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}")

    m = quantized(work)
    path = os.path.join(work, "cnn_qdq_outputs.onnx")
    onnx.save(m, path)
    rc, after, text = opc_stats(opc, path)
    why = fusion_failures(after, text) if rc == 0 else [f"opc exited with {rc}: {text[-300:]}"]
    verdict(not why, "fused: no float Conv or MatMul left; Add, MaxPool, Flatten reported"
            + (": " + "; ".join(why) if why else ""))
    rc, after0, text0 = opc_stats(opc, path, ["-O0"])
    verdict(rc == 0 and fusion_failures(after0, text0),
            "control: the same check rejects an -O0 compile (no fusion)")

    exe, why = compile_cpu(opc, m, os.path.join(work, "program"))
    if exe is None:
        verdict(False, f"compile: {why}")
        return 1
    for k, x in enumerate(images(4)):
        feeds = {"x": x}
        got = run_program(exe, m, feeds, os.path.join(work, "program"))
        if isinstance(got, str):
            verdict(False, f"input {k}: {got}")
            continue
        for optimise in (True, False):
            want = reference(m, feeds, optimise)
            if optimise and k == 0:
                verdict(np.ptp(want["y"]) > 0, "the reference output varies")
            for name, w in want.items():
                why = compare_exact(got[name], w)
                verdict(why is None, f"input {k} {name} {w.dtype}{list(w.shape)} exact, ORT "
                        f"{'optimised' if optimise else 'as written'}{': ' + why if why else ''}")
        if k == 0:
            xq, r1 = want["x_QuantizeLinear_Output"], want["r1_QuantizeLinear_Output"]
            verdict(compare_exact(conv1_in_numpy(m, xq, True), r1) is None,
                    "control: conv1 as QLinearConv in numpy matches")
            verdict(compare_exact(conv1_in_numpy(m, xq, False), r1) is not None,
                    "control: conv1 in numpy without its bias is rejected")
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
