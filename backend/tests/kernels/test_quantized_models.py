#!/usr/bin/env python3
"""Two models quantized by ONNX Runtime's own tools, compiled by opc (CPU
runtime, built at -O0) and compared with ONNX Runtime on the same inputs.

- An MLP over token vectors ([2, 5, 16] -> 32 -> Relu -> 8, BERT's
  feed-forward shape), quantized with quantize_dynamic: each MatMul becomes
  DynamicQuantizeLinear + MatMulInteger, then Cast, Mul by the scales and
  Add of the float bias.
- A small CNN (Conv 3->8 + Relu, Conv 8->8 stride 2 + Relu, Flatten,
  MatMul to 10) quantized with quantize_static in the QOperator format,
  per channel: QuantizeLinear, QLinearConv (int32 biases), QLinearMatMul,
  DequantizeLinear.

Weights are scaled by 1/sqrt(fan-in) and inputs are normal(0, 1), so the
signal reaches the outputs; the test checks that the outputs vary.

Both quantizations use reduce_range (7-bit weights): this CPU's ONNX Runtime
sums uint8 x int8 products in int16-saturated pairs (no VNNI), which 7-bit
weights keep exact (see test_integer.py).

ONNX Runtime runs with graph optimisations off, so that it runs the nodes as
written (it would otherwise fuse them into its contrib operators, which
compute differently).

Compared: every integer tensor the models make (the quantized activations,
MatMulInteger's int32 sums, QLinearConv's and QLinearMatMul's outputs)
exactly; the float outputs of the CNN exactly too (DequantizeLinear is
(q - zero point) * scale in both). The MLP's float tensors come from int32
sums (exact) through Cast, Mul, Add and Relu, one float32 rounding each in
the same order; a contraction of the Mul and Add into one fused
multiply-add could move the last bit, so they may differ by 2 units in the
last place of each element, no more.

Both models' integer matmuls have a constant B, so the GPU program computes
their sums with cuBLASLt's int8 GEMM; each model's GPU program (net.c of
--target stand-in) must also build against the real CUDA 13 headers with
-Wall -Wextra -Werror and link with -lcublasLt, when the toolkit is
installed (OPC_CUDA, else /usr/local/cuda), and hold a cublasLtMatmul call.

Each model runs as both programs the CPU runtime runs (onnx_case's
run_opc_targets): the CPU program (--target cpu), in which the CNN's two
convolutions (the first, the stem, of 3 channels in ONNX's order) are each
one opc_int8_conv_packed launch, and the GPU program on the runtime's stand-in
for CUDA (--target stand-in); their outputs must be the same bits, and the
comparisons below are of both.

Negative controls, recomputed in numpy from the quantized inputs ONNX
Runtime produced: MatMulInteger without the activation's zero point, and the
first QLinearConv with its padding contributing the zero point, must both
be rejected, while the same numpy computations done right must match
ONNX Runtime exactly (which shows the controls compute what they claim).

usage: test_quantized_models.py OPC WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_case import packed_launches, run_opc_targets, stand_in_dir  # noqa: E402
from test_integer import compare, conv_sums, matmul_sums, wrap32  # noqa: E402

rng = np.random.default_rng(5152)


def weight(shape, fan_in):
    return (rng.normal(0, 1, shape) / np.sqrt(fan_in)).astype(np.float32)


def float_model(name, nodes, x_shape, y_shape, arrays):
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def mlp():
    arrays = {"w1": weight((16, 32), 16), "b1": rng.normal(0, 0.1, 32).astype(np.float32),
              "w2": weight((32, 8), 32), "b2": rng.normal(0, 0.1, 8).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]),
             helper.make_node("MatMul", ["h", "w2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["y"])]
    return float_model("mlp", nodes, [2, 5, 16], [2, 5, 8], arrays)


def cnn():
    arrays = {"w1": weight((8, 3, 3, 3), 27), "b1": rng.normal(0, 0.1, 8).astype(np.float32),
              "w2": weight((8, 8, 3, 3), 72), "b2": rng.normal(0, 0.1, 8).astype(np.float32),
              "w3": weight((128, 10), 128)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Flatten", ["r2"], ["f"]),
             helper.make_node("MatMul", ["f", "w3"], ["y"])]
    return float_model("cnn", nodes, [1, 3, 8, 8], [1, 10], arrays)


class Calibration(CalibrationDataReader):
    def __init__(self, shape):
        self.batches = iter([{"x": rng.normal(0, 1, shape).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.batches, None)


def with_outputs(m, names):
    """m with the named tensors added to its outputs (after y)."""
    for name in names:
        m.graph.output.append(onnx.ValueInfoProto(name=name))
    return m


def reference(m, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def within_two_ulp(got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if np.isnan(want).any() or np.isnan(got).any():
        return "NaN in the output or the reference"
    err = np.abs(got.astype(np.float64) - want)
    bound = 2 * np.spacing(np.abs(want)).astype(np.float64)
    if (err > bound).any():
        i = int(np.argmax(err - bound))
        return (f"{int((err > bound).sum())} beyond 2 ulp; worst at {i}: got {got.reshape(-1)[i]!r}, "
                f"expected {want.reshape(-1)[i]!r}")
    return None


def quantize(work):
    """The two quantized models, with their integer tensors as outputs."""
    os.makedirs(work, exist_ok=True)
    paths = {k: os.path.join(work, k + ".onnx") for k in ("mlp", "mlp_q", "cnn", "cnn_q")}
    onnx.save(mlp(), paths["mlp"])
    quantize_dynamic(paths["mlp"], paths["mlp_q"], weight_type=QuantType.QInt8, reduce_range=True)
    onnx.save(cnn(), paths["cnn"])
    quantize_static(paths["cnn"], paths["cnn_q"], Calibration((1, 3, 8, 8)),
                    quant_format=QuantFormat.QOperator, per_channel=True, reduce_range=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    mq = with_outputs(onnx.load(paths["mlp_q"]),
                      ["x_quantized", "x_zero_point", "h0_output_quantized", "h",
                       "h_quantized", "y0_output_quantized"])
    cq = with_outputs(onnx.load(paths["cnn_q"]), ["x_quantized", "c1_quantized", "c2_quantized",
                                                  "y_quantized"])
    return mq, cq


def initializer(m, name):
    return next(numpy_helper.to_array(t) for t in m.graph.initializer if t.name == name)


def negative_controls(mq, mlp_ref, cq, cnn_ref):
    """(failures, lines): each wrong computation rejected, each right one
    matching."""
    failures, lines = 0, []

    def check(what, got, want, should_match):
        nonlocal failures
        why = compare(got, want)
        ok = (why is None) == should_match
        failures += not ok
        verdict = "matches" if why is None else "is rejected"
        lines.append(f"{'ok  ' if ok else 'FAIL'} control: {what} {verdict}")

    names = [o.name for o in mq.graph.output]
    out = dict(zip(names, mlp_ref))
    xq = out["x_quantized"]
    w1 = initializer(mq, "w1_quantized")
    x_zero = out["x_zero_point"]
    w_zero = initializer(mq, "w1_zero_point")
    want = out["h0_output_quantized"]
    check("MatMulInteger in numpy", wrap32(matmul_sums(xq, w1, x_zero, w_zero)), want, True)
    check("MatMulInteger without x's zero point", wrap32(matmul_sums(xq, w1, [], w_zero)), want,
          False)
    names = [o.name for o in cq.graph.output]
    out = dict(zip(names, cnn_ref))
    x, c1 = out["x_quantized"], out["c1_quantized"]
    zx, w = initializer(cq, "x_zero_point"), initializer(cq, "w1_quantized")
    zw, bias = initializer(cq, "w1_zero_point"), initializer(cq, "b1_quantized")
    mult = (np.float32(initializer(cq, "x_scale")) * initializer(cq, "w1_scale")).astype(np.float32)
    mult = (mult / np.float32(initializer(cq, "c1_scale"))).astype(np.float32).reshape(1, -1, 1, 1)
    zy = int(initializer(cq, "c1_zero_point"))
    for what, pad_zero, should_match in (("QLinearConv in numpy", True, True),
                                         ("QLinearConv padded with 0, not the zero point",
                                          False, False)):
        sums = wrap32(conv_sums(x, w, zx, zw, pads=[1, 1, 1, 1],
                                pad_value_is_zero_point=pad_zero) + bias.reshape(1, -1, 1, 1))
        q = np.clip(np.rint((sums.astype(np.float32) * mult).astype(np.float32)) + zy, 0, 255)
        check(what, q.astype(np.uint8), c1, should_match)
    return failures, lines


CUDA = os.environ.get("OPC_CUDA", "/usr/local/cuda")


def real_cuda_build(d):
    """None when d/net.c calls cublasLtMatmul and builds against the real
    CUDA toolkit with -Werror (or no toolkit is installed), else why not."""
    with open(os.path.join(d, "net.c")) as f:
        if "cublasLtMatmul(" not in f.read():
            return "net.c does not call cublasLtMatmul"
    if not os.path.exists(os.path.join(CUDA, "include", "cublasLt.h")):
        print(f"note: no CUDA toolkit at {CUDA}: the real-header build is not checked")
        return None
    lib = os.path.join(CUDA, "lib64")
    cmd = [os.environ.get("CC", "cc").split()[0], "-O1", "-Wall", "-Wextra", "-Werror",
           "-I" + os.path.join(CUDA, "include"), os.path.join(d, "net.c"),
           "-o", os.path.join(d, "net_cuda"), "-L" + lib, "-L" + os.path.join(lib, "stubs"),
           "-lcudnn", "-lcublasLt", "-lcublas", "-lcudart", "-lcuda", "-lnvrtc", "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return None if p.returncode == 0 else "the real CUDA build fails: " + p.stderr[-600:]


def main():
    opc, work = sys.argv[1:3]
    failures = 0
    mq, cq = quantize(work)
    feeds = {"mlp": {"x": rng.normal(0, 1, (2, 5, 16)).astype(np.float32)},
             "cnn": {"x": rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)}}
    ops = {n.op_type for m in (mq, cq) for n in m.graph.node}
    for op in ("MatMulInteger", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul"):
        if op not in ops:
            print(f"FAIL the quantized models hold no {op}")
            failures += 1
    refs = {}
    for key, m in (("mlp", mq), ("cnn", cq)):
        refs[key] = reference(m, feeds[key])
        y = refs[key][0]
        if np.ptp(y) == 0:
            print(f"FAIL {key}: the reference output does not vary with the input")
            failures += 1
        gots, why = run_opc_targets(opc, m, feeds[key], os.path.join(work, key))
        if why:
            print(f"FAIL {key}: {why}")
            failures += 1
            continue
        count, want = packed_launches(os.path.join(work, key)), 2 if key == "cnn" else 0
        print(f"{'ok  ' if count == want else 'FAIL'} {key}: packed convolutions in the CPU "
              f"program: {count}, expected {want}; its outputs are the GPU program's (stand-in)")
        failures += count != want
        for o, want in zip(m.graph.output, refs[key]):
            got = gots[o.name]
            floats = want.dtype == np.float32 and key == "mlp"
            why = within_two_ulp(got, want) if floats else compare(got, want)
            rule = "within 2 ulp" if floats else "exact"
            print(f"{'FAIL' if why else 'ok  '} {key} {o.name} {want.dtype}{list(want.shape)} "
                  f"({rule}){': ' + why if why else ''}")
            failures += why is not None
        why = real_cuda_build(stand_in_dir(os.path.join(work, key)))
        print(f"{'FAIL' if why else 'ok  '} {key}: net.c's int8 GEMM is cublasLtMatmul, built "
              f"against the real CUDA headers (-Werror, -lcublasLt){': ' + why if why else ''}")
        failures += why is not None
    more, lines = negative_controls(mq, refs["mlp"], cq, refs["cnn"])
    print("\n".join(lines))
    failures += more
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
