#!/usr/bin/env python3
"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear through opc, the CPU runtime and the
emitted program, against ONNX Runtime.

Quantized outputs are integers and are compared exactly; dequantized ones
are float32 products that ONNX Runtime computes the same way, (x - zero
point) in integers times the scale, so they are compared exactly too.

The inputs include every tie x / scale = k + 0.5 over the whole int8 and
uint8 ranges (scales that are powers of two make the quotient exact), values
that saturate, infinities and NaN, and random values under random scales
(x / scale is a division, not a product by the reciprocal: the two differ
in the last bit, and then in the rounding). Each case runs per tensor and
per axis, on int8 and uint8, with and without a zero point, as run-time
work and folded at compile time (x an initializer).

The Q/DQ pattern DequantizeLinear -> Conv -> QuantizeLinear runs with
dyadic scales and small integer weights, so that every float sum of the
convolution is exact in any order: the uint8 result must equal ONNX
Runtime's bit for bit, however either adds.

Negative control: the comparison must reject a wrong quantizer, ties
rounded half away from zero (C's roundf), on the same inputs; a test that
could not tell the two apart would prove nothing about the rounding.

DynamicQuantizeLinear's three outputs (uint8 y, the float32 scale, the
uint8 zero point) are compared exactly on ranges on both sides of 0, on one
side, all zeros, with NaN and infinities, at run time and folded.

Errors: types opc cannot store at run time (int16), blocked quantization,
a scale that does not match the axis, a zero point of another type, and a
float8 zero point must be refused with exit status 2 and a message naming
the problem.

usage: test_quantize.py OPC WORK_DIR [-k SUBSTRING]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import (check_refusals, compare_exact as compare, reference, run_opc,  # noqa: E402
                       value_info)

rng = np.random.default_rng(51)
RANGES = {np.int8: (-128, 127), np.uint8: (0, 255)}


def model(nodes, inputs, outputs, inits, opset=13):
    return onnx_case.model(nodes, inputs, outputs, inits, opset, name="quantize", ir_version=8)


def one_node(op, x, scale, zero, attrs=None, folded=False, opset=13):
    """op(x, scale[, zero]): x a graph input, or an initializer when folded
    (opc then evaluates the node at compile time)."""
    inits = [numpy_helper.from_array(scale, "scale")]
    names = ["x", "scale"]
    if zero is not None:
        inits.append(numpy_helper.from_array(zero, "zero"))
        names.append("zero")
    inputs = [] if folded else [value_info("x", x)]
    if folded:
        inits.append(numpy_helper.from_array(x, "x"))
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    return model([node], inputs, [onnx.ValueInfoProto(name="y")], inits, opset)


def ties_and_extremes(scale, dtype):
    """x / scale over every tie k + 0.5 across dtype's range and beyond,
    whole numbers, values that saturate, infinities and NaN."""
    lo, hi = RANGES[dtype]
    k = np.arange(lo - 4, hi + 4, dtype=np.float32)
    q = np.concatenate([k + 0.5, k, k - 0.25, k + 0.75,
                        [1e6, -1e6, 3e38, -3e38, np.inf, -np.inf, np.nan]])
    return (q * np.float32(scale)).astype(np.float32)


def away_from_zero(x, scale, zero, dtype):
    """A wrong quantizer, for the negative control: ties away from zero."""
    lo, hi = RANGES[dtype]
    v = np.nan_to_num(x / scale, nan=lo - zero, posinf=hi, neginf=lo)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5) + zero
    return np.clip(q, lo, hi).astype(dtype)


def cases():
    """(name, model, feeds) of every case compared with ONNX Runtime."""
    out = []
    for dtype in (np.int8, np.uint8):
        t = np.dtype(dtype).name
        lo, hi = RANGES[dtype]
        for scale in (0.5, 0.0078125):
            x = ties_and_extremes(scale, dtype)
            for zero in (None, 0, lo + 100, hi - 3):
                if zero is None and dtype == np.int8:
                    continue  # without a zero point the type is uint8
                z = None if zero is None else np.array(zero, dtype)
                for folded in (False, True):
                    name = f"q-{t}-ties-s{scale}-z{zero}{'-folded' if folded else ''}"
                    out.append((name, one_node("QuantizeLinear", x, np.float32(scale), z,
                                               folded=folded), {"x": x}))
        # Random values and scales, scalar and per axis along each axis.
        x = rng.normal(0, 3, (2, 3, 4, 5)).astype(np.float32)
        scale = np.float32(rng.uniform(0.005, 0.05))
        z = np.array(rng.integers(lo, hi + 1), dtype)
        out.append((f"q-{t}-random", one_node("QuantizeLinear", x, scale, z), {"x": x}))
        for axis in (0, 1, -1, 2):
            n = x.shape[axis]
            scales = rng.uniform(0.005, 0.05, n).astype(np.float32)
            zs = rng.integers(lo, hi + 1, n).astype(dtype)
            for folded in (False, True):
                name = f"q-{t}-axis{axis}{'-folded' if folded else ''}"
                out.append((name, one_node("QuantizeLinear", x, scales, zs, {"axis": axis},
                                           folded=folded), {"x": x}))
                # Dequantize the same way, from values over the whole range.
                xq = rng.integers(lo, hi + 1, x.shape).astype(dtype)
                name = f"dq-{t}-axis{axis}{'-folded' if folded else ''}"
                out.append((name, one_node("DequantizeLinear", xq, scales, zs, {"axis": axis},
                                           folded=folded), {"x": xq}))
        xq = rng.integers(lo, hi + 1, (7, 9)).astype(dtype)
        out.append((f"dq-{t}-tensor", one_node("DequantizeLinear", xq, scale, z), {"x": xq}))
        out.append((f"dq-{t}-no-zero", one_node("DequantizeLinear", xq, scale, None),
                    {"x": xq}) if dtype == np.uint8 else
                   (f"dq-{t}-scale-1d", one_node("DequantizeLinear", xq, scale.reshape(1), z.reshape(1)),
                    {"x": xq}))
        # One scale and one zero point, one of them a scalar and the other of
        # shape [1], as quantize_static writes some (ONNX Runtime runs them).
        out.append((f"dq-{t}-scale-1d-zero-scalar",
                    one_node("DequantizeLinear", xq, scale.reshape(1), z), {"x": xq}))
        out.append((f"q-{t}-scale-scalar-zero-1d",
                    one_node("QuantizeLinear", x, scale, z.reshape(1)), {"x": x}))
    # int32 (biases of QDQ models): no zero point, values beyond float's 24 bits.
    x32 = rng.integers(-2**31, 2**31, (64,)).astype(np.int32)
    out.append(("dq-int32", one_node("DequantizeLinear", x32, np.float32(0.001), None),
                {"x": x32}))
    out += dynamic_cases()
    out.append(("qdq-conv", qdq_conv(), {"x": rng.integers(0, 256, (1, 3, 8, 8)).astype(np.uint8)}))
    return out


def dynamic(x, folded=False, outputs="ysz"):
    """DynamicQuantizeLinear(x) -> y, s, z, the graph's outputs named in
    `outputs` (the others computed but unused)."""
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    inputs = [] if folded else [value_info("x", x)]
    inits = [numpy_helper.from_array(x, "x")] if folded else []
    return model([node], inputs, [onnx.ValueInfoProto(name=o) for o in outputs], inits)


def dynamic_cases():
    """Ranges on both sides of 0, on one side only (the range is widened to
    0), all zeros (scale 1 in ONNX Runtime), NaN (left out of the range,
    quantized to 0), an infinity (an infinite scale), a scalar, and a
    large tensor; at run time and folded."""
    big = rng.normal(0.3, 2, (3, 64, 65)).astype(np.float32)
    xs = {"mixed": rng.normal(0, 3, (4, 5, 6)).astype(np.float32),
          "positive": rng.uniform(0.5, 9, (7, 3)).astype(np.float32),
          "negative": rng.uniform(-9, -0.5, (7, 3)).astype(np.float32),
          "zeros": np.zeros((2, 3), np.float32),
          "nan": np.array([-1.5, np.nan, 3.25, 0.7], np.float32),
          "inf": np.array([-1.5, np.inf, 3.25], np.float32),
          "scalar": np.array(-2.5, np.float32),
          "big": big}
    out = []
    for name, x in xs.items():
        out.append((f"dyn-{name}", dynamic(x), {"x": x}))
        if x.size <= 1000:
            out.append((f"dyn-{name}-folded", dynamic(x, folded=True), {"x": x}))
    x = xs["mixed"]
    out.append(("dyn-y-only", dynamic(x, outputs="y"), {"x": x}))
    out.append(("dyn-scale-only", dynamic(x, outputs="s"), {"x": x}))
    return out


def qdq_conv():
    """uint8 x -> DequantizeLinear -> Conv (int8 weights dequantized per
    output channel, a float bias) -> QuantizeLinear -> uint8 y. Scales are
    powers of two and weights small, so the float sums are exact."""
    w = rng.integers(-8, 8, (4, 3, 3, 3)).astype(np.int8)
    w_scale = np.array([0.5, 0.25, 0.125, 1.0], np.float32)
    bias = (rng.integers(-64, 64, 4) / 8).astype(np.float32)
    inits = [numpy_helper.from_array(np.float32(0.0625), "x_scale"),
             numpy_helper.from_array(np.uint8(128), "x_zero"),
             numpy_helper.from_array(w, "w_q"),
             numpy_helper.from_array(w_scale, "w_scale"),
             numpy_helper.from_array(np.zeros(4, np.int8), "w_zero"),
             numpy_helper.from_array(bias, "bias"),
             numpy_helper.from_array(np.float32(0.25), "y_scale"),
             numpy_helper.from_array(np.uint8(100), "y_zero")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zero"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["wf"], axis=0),
             helper.make_node("Conv", ["xf", "wf", "bias"], ["yf"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["yf", "y_scale", "y_zero"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 8, 8])
    return model(nodes, [x], [onnx.ValueInfoProto(name="y")], inits)


def error_cases():
    """(name, model, text opc's message must hold)."""
    x = np.zeros((2, 3), np.float32)
    s, z8 = np.float32(0.5), np.array(0, np.int8)
    f8 = helper.make_tensor("zero", 17, [], [0])  # float8e4m3fn
    f8_model = one_node("QuantizeLinear", x, s, None, opset=19)
    f8_model.graph.initializer.append(f8)
    f8_model.graph.node[0].input.append("zero")
    blocked = one_node("QuantizeLinear", x, np.full((2, 2), s), None,
                       {"axis": 1, "block_size": 2}, opset=21)
    return [
        ("int16 at run time", one_node("QuantizeLinear", x, s, np.array(0, np.int16), opset=21),
         "int16"),
        ("int4 output_dtype", one_node("QuantizeLinear", x, s, None, {"output_dtype": 22},
                                       opset=21), "int4"),
        ("float8 zero point", f8_model, "float8"),
        ("blocked", blocked, "block_size"),
        ("scale along the wrong axis", one_node("QuantizeLinear", x, np.full(2, s), None,
                                                {"axis": 1}), "along axis 1"),
        ("zero point of another type",
         one_node("DequantizeLinear", np.zeros((2, 3), np.uint8), s, z8), "expected the same type"),
        ("zero point of another shape",
         one_node("DequantizeLinear", np.zeros((2, 3), np.int8), np.full(3, s),
                  np.zeros(2, np.int8)), "must have the scale's shape"),
    ]


def main():
    opc, work = sys.argv[1:3]
    only = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "-k" else ""
    failures = 0
    for name, m, feeds in cases():
        if only not in name:
            continue
        # Without graph optimisations ONNX Runtime runs the float Conv of the
        # Q/DQ pattern as written, not fused into an integer QLinearConv.
        wants = list(reference(m, feeds, optimise=False).values())
        gots, why = run_opc(opc, m, feeds, os.path.join(work, name))
        for got, want in zip(gots.values() if gots else [], wants):
            why = why or compare(got, want)
        want = wants[0]
        print(f"{'FAIL' if why else 'ok  '} {name}{': ' + str(why) if why else ''}")
        failures += why is not None
        if why is None and name.startswith("q-") and "ties" in name:
            # Negative control: half away from zero must be told apart.
            x = feeds["x"]
            scale = float(numpy_helper.to_array(m.graph.initializer[0]))
            zero = int(numpy_helper.to_array(m.graph.initializer[1])) if "zNone" not in name else 0
            wrong = away_from_zero(x, np.float32(scale), zero, want.dtype.type)
            if compare(wrong, want) is None:
                print(f"FAIL {name}: the comparison accepts ties rounded away from zero")
                failures += 1
    failures += check_refusals(opc, [c for c in error_cases() if not only or only in c[0]], work)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
