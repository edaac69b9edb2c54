#!/usr/bin/env python3
"""MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv through opc, the
CPU runtime and the emitted program (built at -O0), against exact integer
arithmetic and ONNX Runtime.

Every case is a node of a few models, so that few programs run them all:
three with every operand a graph input (run-time kernels; a program takes 64
inputs at most), one with every operand an initializer (opc's compile-time
evaluators), and two with the weights (B or w, their zero point, scales
and bias) initializers and the activations inputs: there opc computes the
sums with cuBLASLt's int8 GEMM (the CPU runtime's stand-in) where the
weights less their zero point fit int8, the activations have one zero
point and the convolution one group, and with its kernels elsewhere; those
programs must call cublasLtMatmul and opc_int8_im2row, and run clean under
the runtime's checker (OPC_CHECK=1). All outputs are
integers and are compared exactly, type and shape too.

Every program is built twice (onnx_case.compile_targets): the CPU program
(--target cpu) and the GPU program on the runtime's stand-in for CUDA
(--target stand-in), which must give the same bits. They differ where a
channels-last QLinearConv has constant zero points and bias: the CPU
program runs it as one opc_int8_conv_packed launch (the two *-packed
cases, uint8 and int8 x), the GPU program through the GEMM; the checks of
the GEMM's calls read the GPU program's net.c, and both programs run under
the checker.

Oracles. The integer products' int32 sums are numpy's int64 sums of
(x - zero point) * (w - zero point): exact by the ONNX definition. Where ONNX
Runtime runs the form (it lacks int8 A with uint8 B and per-row zero points
of A), it must agree with them too. The requantised outputs are ONNX
Runtime's: its multiplier is float32 (a_scale * b_scale) / y_scale, and
float32(sum) * multiplier is rounded half to even, which opc does too and
must match exactly. The case qmm-multiplier-order shows that this is
ONNX Runtime's order: its scales make the float32 multipliers (a*b)/y and
a*(b/y) differ in the last bit, and the 65536 sums include some that the
two requantise differently; (a*b)/y must match ONNX Runtime there, a*(b/y)
and a float64 multiplier must not.

One caveat, measured here: this CPU's ONNX Runtime (AVX2, no VNNI) sums
uint8 x int8 products in pairs saturated to int16 (vpmaddubsw), so its
u8 x s8 results differ from the exact ones when two products pass 32767.
The u8 x s8 cases keep the uint8 operand below 128 (as ONNX Runtime's
reduce_range does), where it is exact; the other type pairs use full ranges.

Inputs move the output: random values over the types' ranges, zero points
away from 0, per-channel scales, and for the requantisation every tie k +
0.5 (power-of-two scales make float32(sum) * multiplier exact), plus sums
that saturate.

Negative controls: (1) requantising the ties half away from zero must be
rejected by the comparison, as must the other multipliers above; (2) a
convolution whose padding contributes x's
zero point instead of nothing (padding with 0 before subtracting) must be
rejected. Errors: a zero point of the other type, of the wrong shape, a 3-D
ConvInteger, and a per-row scale of QLinearMatMul are refused with exit
status 2 and a message naming the problem.

usage: test_integer.py OPC WORK_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import (check_refusals, compare_exact as compare, compile_targets,  # noqa: E402
                       packed_launches, reference, run_targets, stand_in_dir, value_info)

rng = np.random.default_rng(5151)
RANGES = {np.int8: (-128, 127), np.uint8: (0, 255)}
OPSET = 21


def ints(dtype, shape, top=None):
    """Random values over dtype's range (below `top` when given)."""
    lo, hi = RANGES[dtype]
    return rng.integers(lo, (top if top is not None else hi) + 1, shape).astype(dtype)


# ------------------------------------------------------------ exact sums

def matmul_sums(a, b, za, zb):
    """numpy matmul of (a - za) and (b - zb) in int64; za per row, zb per
    column when 1-D of more than one."""
    a64 = a.astype(np.int64) - (np.asarray(za, np.int64).reshape(-1, 1) if np.size(za) > 1
                                else np.int64(np.asarray(za).reshape(-1)[0] if np.size(za) else 0))
    b64 = b.astype(np.int64) - np.asarray(zb if np.size(zb) else 0, np.int64)
    return np.matmul(a64, b64)


def conv_sums(x, w, zx, zw, group=1, strides=None, dilations=None, pads=None,
              pad_value_is_zero_point=True):
    """Conv over (x - zx) and (w - zw) in int64, 1-D or 2-D, zw per output
    channel when 1-D. With pad_value_is_zero_point False the padding is 0
    before zx is subtracted: the negative control's wrong convolution."""
    ns = x.ndim - 2
    strides = strides or [1] * ns
    dilations = dilations or [1] * ns
    pads = pads or [0] * (2 * ns)
    zx = int(np.asarray(zx).reshape(-1)[0]) if np.size(zx) else 0
    zw = np.asarray(zw if np.size(zw) else 0, np.int64).reshape(-1)
    fill = zx if pad_value_is_zero_point else 0
    pad_width = [(0, 0), (0, 0)] + [(pads[i], pads[ns + i]) for i in range(ns)]
    xp = np.pad(x.astype(np.int64), pad_width, constant_values=fill) - zx
    ws = w.astype(np.int64) - zw.reshape((-1,) + (1,) * (w.ndim - 1))
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(xp.shape[2 + i] - (ks[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(ns)]
    y = np.zeros((n, m) + tuple(outs), np.int64)
    mg = m // group
    for oc in range(m):
        g = oc // mg
        for tap in np.ndindex(*ks):
            sl = tuple(slice(tap[i] * dilations[i],
                             tap[i] * dilations[i] + (outs[i] - 1) * strides[i] + 1, strides[i])
                       for i in range(ns))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            y[:, oc] += np.tensordot(patch, ws[(oc, slice(None)) + tap], axes=([1], [0]))
    return y


def wrap32(v):
    return v.astype(np.int64).astype(np.uint32).astype(np.int32)


# --------------------------------------------------------------- cases

class Case:
    """One node: its op, inputs (name -> array, in the op's order, None for
    an absent optional one), attributes, and its exact expected output (None
    where ONNX Runtime is the oracle)."""

    def __init__(self, name, op, inputs, attrs=None, exact=None, ort_runs=True, run_time=(),
                 constant=()):
        self.name, self.op, self.inputs = name, op, inputs
        self.attrs, self.exact, self.ort_runs = attrs or {}, exact, ort_runs
        # Where WEIGHTS names the constant operands: ones kept graph
        # inputs, and more made initializers.
        self.run_time, self.constant = run_time, constant


def integer_cases():
    out = []
    # MatMulInteger: every type pair, scalar / per-row / per-column zero
    # points, batch dims that broadcast, 1-D operands.
    a, b = ints(np.uint8, (3, 5)), ints(np.uint8, (5, 4))
    za, zb = np.uint8(131), np.uint8(77)
    out.append(Case("mm-u8u8", "MatMulInteger", [a, b, za, zb], exact=matmul_sums(a, b, za, zb)))
    a, b = ints(np.uint8, (2, 3, 7), top=127), ints(np.int8, (7, 6))
    za, zb = np.uint8(60), ints(np.int8, (6,))
    out.append(Case("mm-u8s8-percolumn-batch", "MatMulInteger", [a, b, za, zb],
                    exact=matmul_sums(a, b, za, zb)))
    a, b = ints(np.int8, (4, 1, 3, 5)), ints(np.int8, (2, 5, 3))
    za, zb = np.int8(-9), np.int8(17)
    out.append(Case("mm-s8s8-broadcast", "MatMulInteger", [a, b, za, zb],
                    exact=matmul_sums(a, b, za, zb)))
    a, b = ints(np.int8, (3, 6)), ints(np.uint8, (6, 2))
    za = ints(np.int8, (3,))
    out.append(Case("mm-s8u8-perrow-nozb", "MatMulInteger", [a, b, za, None],
                    exact=matmul_sums(a, b, za, []), ort_runs=False))
    a, b = ints(np.uint8, (5,)), ints(np.uint8, (5, 3))
    out.append(Case("mm-1d-a-nozp", "MatMulInteger", [a, b], exact=matmul_sums(a, b, [], [])))
    a, b = ints(np.uint8, (2, 4)), ints(np.uint8, (4,))
    zb = np.uint8(200)
    out.append(Case("mm-1d-b", "MatMulInteger", [a, b, None, zb],
                    exact=matmul_sums(a, b, [], zb)))
    # ConvInteger: 2-D with padding, groups, strides, dilations, per-channel
    # w zero points; 1-D with auto_pad; no zero points.
    x, w = ints(np.uint8, (1, 2, 6, 6)), ints(np.uint8, (3, 2, 3, 3))
    zx, zw = np.uint8(100), np.uint8(5)
    out.append(Case("conv-u8u8-pads", "ConvInteger", [x, w, zx, zw], {"pads": [1, 1, 1, 1]},
                    exact=conv_sums(x, w, zx, zw, pads=[1, 1, 1, 1])))
    x, w = ints(np.uint8, (2, 4, 7, 5), top=127), ints(np.int8, (6, 2, 2, 3))
    zx, zw = np.uint8(30), ints(np.int8, (6,))
    attrs = {"group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 2]}
    out.append(Case("conv-u8s8-groups-perchannel", "ConvInteger", [x, w, zx, zw], attrs,
                    exact=conv_sums(x, w, zx, zw, 2, [2, 1], [1, 2], [1, 0, 0, 2]),
                    ort_runs=False))
    x, w = ints(np.int8, (1, 3, 11)), ints(np.int8, (2, 3, 3))
    zx = np.int8(-40)
    # SAME_UPPER, stride 2 over 11: 6 outputs, total padding 2 -> 1 and 1.
    out.append(Case("conv-s8s8-1d-same", "ConvInteger", [x, w, zx],
                    {"auto_pad": "SAME_UPPER", "strides": [2]},
                    exact=conv_sums(x, w, zx, [], strides=[2], pads=[1, 1]), ort_runs=False))
    x, w = ints(np.uint8, (1, 1, 5, 5)), ints(np.uint8, (1, 1, 2, 2))
    out.append(Case("conv-nozp", "ConvInteger", [x, w], exact=conv_sums(x, w, [], [])))
    # Shapes cuBLASLt's int8 GEMM takes only padded (K and N not multiples
    # of 4), uint8 weights whose zero point 128 makes them int8, per-channel
    # zero points within int8's reach, a batch of images.
    a, b = ints(np.int8, (3, 37, 70)), ints(np.int8, (70, 45))
    za = np.int8(-9)
    out.append(Case("mm-s8s8-odd-sizes", "MatMulInteger", [a, b, za, np.int8(0)],
                    exact=matmul_sums(a, b, za, np.int8(0))))
    a, b = ints(np.uint8, (6, 9)), ints(np.uint8, (9, 7))
    za, zb = np.uint8(201), np.uint8(128)
    out.append(Case("mm-u8u8-zb128", "MatMulInteger", [a, b, za, zb],
                    exact=matmul_sums(a, b, za, zb)))
    x, w = ints(np.uint8, (2, 5, 9, 8)), rng.integers(-60, 61, (6, 5, 3, 2)).astype(np.int8)
    zx, zw = np.uint8(100), rng.integers(-50, 51, 6).astype(np.int8)
    attrs = {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 2, 2, 0]}
    out.append(Case("conv-u8s8-batch-perchannel", "ConvInteger", [x, w, zx, zw], attrs,
                    exact=conv_sums(x, w, zx, zw, 1, [2, 1], [1, 2], [1, 2, 2, 0]),
                    ort_runs=False))
    # 1x1 filters: stride 1 and no padding (the packing's transpose of x,
    # with a batch and K = 6, not a multiple of 4), then strided.
    x, w = ints(np.uint8, (2, 6, 5, 7)), rng.integers(-60, 61, (5, 6, 1, 1)).astype(np.int8)
    zx, zw = np.uint8(77), np.int8(3)
    out.append(Case("conv-u8s8-1x1-batch", "ConvInteger", [x, w, zx, zw],
                    exact=conv_sums(x, w, zx, zw)))
    out.append(Case("conv-u8s8-1x1-strided", "ConvInteger", [x, w, zx, zw], {"strides": [2, 2]},
                    exact=conv_sums(x, w, zx, zw, 1, [2, 2])))
    return out


def qlinear_cases():
    f = np.float32
    out = []
    # Every tie: sums 0..255 times 0.5 (a_scale 0.5, the rest 1), y_zp 0,
    # and negative ties through a zero point of 255.
    a = np.arange(256, dtype=np.uint8).reshape(256, 1)
    b = np.ones((1, 1), np.uint8)
    out.append(Case("qmm-ties", "QLinearMatMul",
                    [a, f(0.5), np.uint8(0), b, f(1), np.uint8(0), f(1), np.uint8(0)]))
    out.append(Case("qmm-ties-negative", "QLinearMatMul",
                    [a, f(0.5), np.uint8(255), b, f(1), np.uint8(0), f(1), np.uint8(120)]))
    # Random values and scales, uint8 and int8, per column, batched.
    a, b = ints(np.uint8, (4, 16)), ints(np.uint8, (16, 5))
    out.append(Case("qmm-u8", "QLinearMatMul",
                    [a, f(0.0123), np.uint8(120), b, f(0.0371), np.uint8(131), f(0.9), np.uint8(128)]))
    a, b = ints(np.int8, (2, 3, 16)), ints(np.int8, (16, 6))
    bs = rng.uniform(0.002, 0.02, 6).astype(f)
    out.append(Case("qmm-s8-percolumn", "QLinearMatMul",
                    [a, f(0.05), np.int8(3), b, bs, np.zeros(6, np.int8), f(0.4), np.int8(-5)]))
    out.append(multiplier_order_case())
    # QLinearConv: uint8 x int8 weights per channel with a bias (x below
    # 128, see above); int8 with groups; 1-D uint8 with strides.
    x, w = ints(np.uint8, (1, 3, 8, 8), top=127), ints(np.int8, (4, 3, 3, 3))
    ws = rng.uniform(0.002, 0.02, 4).astype(f)
    bias = rng.integers(-3000, 3000, 4).astype(np.int32)
    out.append(Case("qconv-u8s8-perchannel-bias", "QLinearConv",
                    [x, f(0.02), np.uint8(64), w, ws, np.zeros(4, np.int8), f(0.15), np.uint8(110),
                     bias], {"pads": [1, 1, 1, 1]}))
    x, w = ints(np.int8, (1, 4, 6, 6)), ints(np.int8, (4, 2, 3, 3))
    out.append(Case("qconv-s8-groups", "QLinearConv",
                    [x, f(0.03), np.int8(-7), w, f(0.01), np.int8(0), f(0.2), np.int8(9)],
                    {"group": 2, "strides": [2, 2]}))
    x, w = ints(np.uint8, (1, 2, 9)), ints(np.uint8, (3, 2, 3))
    bias = rng.integers(-500, 500, 3).astype(np.int32)
    out.append(Case("qconv-u8-1d", "QLinearConv",
                    [x, f(0.04), np.uint8(128), w, f(0.02), np.uint8(100), f(0.05), np.uint8(90), bias],
                    {"strides": [2], "pads": [1, 0]}))
    # Channels-last (choose-layout's int8 form, C >= 4): the GEMM reads
    # whole pixels. uint8 with K = 45 (padded to 48), Cout 6 (padded to 8),
    # uneven pads, strides and dilations; int8, two images, x's zero point
    # a graph input (the sums, then opc_requantize over NHWC strides).
    x, w = ints(np.uint8, (1, 5, 7, 9), top=127), ints(np.int8, (6, 5, 3, 3))
    ws = rng.uniform(0.002, 0.02, 6).astype(f)
    bias = rng.integers(-3000, 3000, 6).astype(np.int32)
    out.append(Case("qconv-u8-nhwc", "QLinearConv",
                    [x, f(0.02), np.uint8(70), w, ws, np.zeros(6, np.int8), f(0.12), np.uint8(100),
                     bias], {"pads": [1, 2, 1, 0], "strides": [2, 1], "dilations": [1, 2]}))
    x, w = ints(np.int8, (2, 8, 5, 5)), ints(np.int8, (4, 8, 3, 3))
    out.append(Case("qconv-s8-nhwc-zero-point-input", "QLinearConv",
                    [x, f(0.03), np.int8(-7), w, f(0.01), np.int8(0), f(0.6), np.int8(4)],
                    {"pads": [1, 1, 1, 1]}, run_time=(2,)))
    # The CPU program's packed convolution (y's zero point constant too,
    # as it needs; the GPU program takes the GEMM): uint8 with M 70 (two
    # groups of 64 channels, the last block of 16 partial), K 45, the
    # first case's window, 56 pixels over two images; int8 x (which the
    # kernel makes uint8 by adding 128) with M 20, K 72, 18 pixels (a tile
    # of 12 and a partial one), padding that the zero point must fill.
    x, w = ints(np.uint8, (2, 5, 7, 9), top=127), ints(np.int8, (70, 5, 3, 3))
    ws = rng.uniform(0.002, 0.02, 70).astype(f)
    bias = rng.integers(-3000, 3000, 70).astype(np.int32)
    out.append(Case("qconv-u8-nhwc-packed", "QLinearConv",
                    [x, f(0.02), np.uint8(70), w, ws, np.zeros(70, np.int8), f(0.12), np.uint8(100),
                     bias], {"pads": [1, 2, 1, 0], "strides": [2, 1], "dilations": [1, 2]},
                    constant=(7,)))
    x, w = ints(np.int8, (2, 8, 5, 5)), ints(np.int8, (20, 8, 3, 3))
    out.append(Case("qconv-s8-nhwc-packed", "QLinearConv",
                    [x, f(0.03), np.int8(-7), w, f(0.01), np.int8(0), f(0.6), np.int8(4)],
                    {"pads": [1, 1, 1, 1], "strides": [2, 2]}, constant=(7,)))
    # Depthwise, channels-last (y's zero point constant too): C 40, runs of
    # 32 channels and a tail of 8, uint8 weights with zero point 128;
    # int8 with dilations reaching past the padding.
    x, w = ints(np.uint8, (1, 40, 7, 6)), ints(np.uint8, (40, 1, 3, 3))
    bias = rng.integers(-3000, 3000, 40).astype(np.int32)
    out.append(Case("qconv-u8-depthwise-nhwc", "QLinearConv",
                    [x, f(0.02), np.uint8(90), w, f(0.004), np.uint8(128), f(0.1), np.uint8(120),
                     bias], {"group": 40, "pads": [1, 1, 1, 1], "strides": [2, 1]},
                    constant=(7,)))
    x, w = ints(np.int8, (2, 8, 5, 5)), ints(np.int8, (8, 1, 3, 3))
    ws = rng.uniform(0.002, 0.02, 8).astype(f)
    out.append(Case("qconv-s8-depthwise-nhwc", "QLinearConv",
                    [x, f(0.03), np.int8(5), w, ws, np.zeros(8, np.int8), f(0.15), np.int8(-3)],
                    {"group": 8, "pads": [2, 2, 2, 2], "dilations": [2, 2]}, constant=(7,)))
    return out


def multiplier(sa, sb, sy, order):
    """The float32 requantisation multiplier formed in the given order."""
    f = np.float32
    if order == "(a*b)/y":
        return f(f(sa * sb) / sy)
    return f(sa * f(sb / sy))  # "a*(b/y)"


def requantize(sums, mult, zy, dtype, exact=False):
    """sums * mult rounded half to even plus zy, saturated: in float32 as
    ONNX Runtime does, or (exact) in float64."""
    v = sums.astype(np.float64) * np.float64(mult) if exact else \
        (sums.astype(np.float32) * mult).astype(np.float32)
    lo, hi = RANGES[dtype]
    return np.clip(np.rint(v) + int(zy), lo, hi).astype(dtype)


def multiplier_order_case():
    """QLinearMatMul of every uint8 a (less 128) by every uint8 b (less
    128), K = 1: all 65536 products as sums, under scales for which the
    float32 multipliers (a*b)/y and a*(b/y) differ in the last bit and so
    requantise some of those sums differently. Found by a seeded search."""
    f = np.float32
    a = np.arange(256, dtype=np.uint8).reshape(256, 1)
    b = np.arange(256, dtype=np.uint8).reshape(1, 256)
    sums = matmul_sums(a, b, np.uint8(128), np.uint8(128))
    search = np.random.default_rng(77)
    while True:
        sa, sb = f(search.uniform(1e-3, 1e-1)), f(search.uniform(1e-3, 1e-1))
        sy = f(sa * sb * search.uniform(100, 300))
        right = requantize(sums, multiplier(sa, sb, sy, "(a*b)/y"), 128, np.uint8)
        other = requantize(sums, multiplier(sa, sb, sy, "a*(b/y)"), 128, np.uint8)
        if (right != other).sum() >= 2:
            break
    return Case("qmm-multiplier-order", "QLinearMatMul",
                [a, sa, np.uint8(128), b, sb, np.uint8(128), sy, np.uint8(128)])


# ------------------------------------------------------------- models

def arr(v):
    return np.asarray(v)


# The weights' operands: B or w and its zero point; scales and bias too,
# and QLinear's zero point of the activations (then opc folds the
# correction and bias into the GEMM's epilogue, opc_int8_requantize;
# MatMulInteger and ConvInteger keep theirs an input: opc_int8_fixup).
WEIGHTS = {"MatMulInteger": (1, 3), "ConvInteger": (1, 3), "QLinearMatMul": (2, 3, 4, 5),
           "QLinearConv": (2, 3, 4, 5, 8)}


def build_model(cases, as_initializers):
    """All cases as nodes of one model; operand k of case c is named
    c.name + "_k", a graph input or (as_initializers) an initializer;
    as_initializers "weights": the operands WEIGHTS names only."""
    nodes, inputs, inits, outputs = [], [], [], []
    for c in cases:
        names = []
        for k, v in enumerate(c.inputs):
            if v is None:
                names.append("")
                continue
            name = f"{c.name}_{k}"
            names.append(name)
            if as_initializers is True or (as_initializers == "weights" and (
                    k in WEIGHTS[c.op] and k not in c.run_time or k in c.constant)):
                inits.append(numpy_helper.from_array(arr(v), name))
            else:
                inputs.append(value_info(name, arr(v)))
        nodes.append(helper.make_node(c.op, names, [c.name], **c.attrs))
        outputs.append(onnx.ValueInfoProto(name=c.name))
    return onnx_case.model(nodes, inputs, outputs, inits, OPSET, name="integer", ir_version=10)


def feeds_of(cases):
    return {f"{c.name}_{k}": arr(v) for c in cases for k, v in enumerate(c.inputs)
            if v is not None}


# ----------------------------------------------------- negative controls

def requantize_away_from_zero(case):
    """QLinearMatMul of a 2-D case requantised with ties away from zero."""
    a, sa, za, b, sb, zb, sy, zy = [arr(v) for v in case.inputs]
    sums = matmul_sums(a, b, za, zb)
    mult = np.float32(np.float32(sa * sb) / sy)
    v = (sums.astype(np.float32) * mult).astype(np.float64)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5) + int(zy)
    lo, hi = RANGES[zy.dtype.type]
    return np.clip(q, lo, hi).astype(zy.dtype)


def negative_controls(by_name, wants):
    """Each wrong answer must be told apart from the reference."""
    failures = 0
    for name in ("qmm-ties", "qmm-ties-negative"):
        wrong = requantize_away_from_zero(by_name[name])
        ok = compare(wrong, wants[name]) is not None
        print(f"{'ok  ' if ok else 'FAIL'} negative control: {name} rounded half away from zero "
              f"{'is rejected' if ok else 'passes the comparison'}")
        failures += not ok
    # The multiplier's order and precision: ONNX Runtime's float32
    # (a*b)/y must match, a*(b/y) and a float64 product must not.
    c = by_name["qmm-multiplier-order"]
    a, sa, za, b, sb, zb, sy, zy = [arr(v) for v in c.inputs]
    sums = matmul_sums(a, b, za, zb)
    for what, got, should_match in (
            ("(a*b)/y in float32", requantize(sums, multiplier(sa, sb, sy, "(a*b)/y"), zy, np.uint8), True),
            ("a*(b/y) in float32", requantize(sums, multiplier(sa, sb, sy, "a*(b/y)"), zy, np.uint8), False),
            ("the product in float64", requantize(sums, np.float64(sa) * np.float64(sb) / np.float64(sy),
                                                  zy, np.uint8, exact=True), False)):
        why = compare(got, wants[c.name])
        ok = (why is None) == should_match
        print(f"{'ok  ' if ok else 'FAIL'} control: the multiplier as {what} "
              f"{'matches' if why is None else 'is rejected: ' + why}")
        failures += not ok
    c = by_name["conv-u8u8-pads"]
    x, w, zx, zw = c.inputs
    wrong = wrap32(conv_sums(x, w, zx, zw, pads=[1, 1, 1, 1], pad_value_is_zero_point=False))
    ok = compare(wrong, wants[c.name]) is not None
    print(f"{'ok  ' if ok else 'FAIL'} negative control: padding contributing x's zero point "
          f"{'is rejected' if ok else 'passes the comparison'}")
    return failures + (not ok)


# ---------------------------------------------------------------- errors

def error_cases():
    """(name, model, text opc's message must hold)."""
    def one(op, inputs, attrs=None):
        return build_model([Case("e", op, inputs, attrs)], as_initializers=False)
    a, b = np.zeros((2, 3), np.uint8), np.zeros((3, 4), np.uint8)
    f = np.float32
    return [
        ("zero point of the other type", one("MatMulInteger", [a, b, np.int8(0)]),
         "expected the same type"),
        ("zero point of the wrong shape", one("MatMulInteger", [a, b, None, np.zeros(3, np.uint8)]),
         "one per column of B"),
        ("3-D ConvInteger", one("ConvInteger", [np.zeros((1, 1, 3, 3, 3), np.uint8),
                                                np.zeros((1, 1, 2, 2, 2), np.uint8)]),
         "1-D and 2-D ConvInteger only"),
        ("3-D QLinearConv", one("QLinearConv", [np.zeros((1, 1, 3, 3, 3), np.uint8), f(1),
                                                np.uint8(0), np.zeros((1, 1, 2, 2, 2), np.uint8),
                                                f(1), np.uint8(0), f(1), np.uint8(0)]),
         "1-D and 2-D QLinearConv only"),
        ("per-row scale of QLinearMatMul",
         one("QLinearMatMul", [a, np.full(2, f(1)), np.uint8(0), b, f(1), np.uint8(0), f(1),
                               np.uint8(0)]), "must be a scalar"),
        ("bias of the wrong length",
         one("QLinearConv", [np.zeros((1, 1, 3, 3), np.uint8), f(1), np.uint8(0),
                             np.zeros((2, 1, 2, 2), np.uint8), f(1), np.uint8(0), f(1),
                             np.uint8(0), np.zeros(3, np.int32)]), "must have shape [2]"),
    ]


def main():
    opc, work = sys.argv[1:3]
    failures = 0
    cases = integer_cases() + qlinear_cases()
    by_name = {c.name: c for c in cases}
    feeds = feeds_of(cases)
    # The references: exact sums wrapped to int32, and ONNX Runtime.
    wants = {}
    for c in cases:
        m = build_model([c], as_initializers=False)
        ref = reference(m, feeds)[c.name] if c.ort_runs else None
        if c.exact is not None:
            wants[c.name] = wrap32(c.exact)
            if ref is not None and compare(ref, wants[c.name]) is not None:
                print(f"FAIL {c.name}: ONNX Runtime and the exact sums disagree: "
                      f"{compare(ref, wants[c.name])}")
                failures += 1
        else:
            wants[c.name] = ref
    failures += negative_controls(by_name, wants)
    # The emitted main takes 64 inputs at most: a run-time program per
    # family, and one with everything folded.
    runs = [("run time", [c for c in cases if c.op in ops], False)
            for ops in (("MatMulInteger", "ConvInteger"), ("QLinearMatMul",), ("QLinearConv",))]
    runs.append(("folded", cases, True))
    for ops in (("MatMulInteger", "ConvInteger"), ("QLinearMatMul", "QLinearConv")):
        runs.append(("weights constant", [c for c in cases if c.op in ops], "weights"))
    for k, (mode, group, folded) in enumerate(runs):
        ops = {c.op for c in group}
        m = build_model(group, as_initializers=folded)
        model_feeds = {i.name: feeds[i.name] for i in m.graph.input}
        d = os.path.join(work, f"program{k}")
        exes, why = compile_targets(opc, m, d)
        gots = run_targets(exes, m, model_feeds, d) if exes else None
        why = gots if isinstance(gots, str) else why
        if why:
            print(f"FAIL {mode}: {why}")
            failures += 1
            continue
        if folded == "weights":
            with open(os.path.join(stand_in_dir(d), "net.c")) as f:
                text = f.read()  # the GPU program's
            calls = ("cublasLtMatmul(", "opc_int8_im2row",
                     "opc_int8_requantize" if "QLinearConv" in ops else "opc_int8_fixup")
            if "QLinearConv" in ops:  # channels-last pixels, for C >= 4, and depthwise
                calls += ("opc_int8_im2row_nhwc", "opc_qconv_depthwise_nhwc")
            for call in calls:
                if call not in text:
                    print(f"FAIL {mode}: net.c has no {call}")
                    failures += 1
            # The CPU program packs the two *-packed cases' filters; the
            # other channels-last cases' zero points are run-time data.
            count, want = packed_launches(d), 2 if "QLinearConv" in ops else 0
            print(f"{'ok  ' if count == want else 'FAIL'} {mode}: packed convolutions in the "
                  f"CPU program: {count}, expected {want}")
            failures += count != want
            # Both programs under the runtime's checker (OPC_CHECK=1): no
            # race, no access outside what each call says it touches (the
            # scratch's rows past the last pixel, for one, must be written
            # by a kernel on the node's stream, not by a memset in create()).
            os.environ["OPC_CHECK"] = "1"
            got = run_targets(exes, m, model_feeds, d)
            del os.environ["OPC_CHECK"]
            print(f"{'FAIL' if isinstance(got, str) else 'ok  '} {mode}: runs under OPC_CHECK=1"
                  f"{': ' + got if isinstance(got, str) else ''}")
            failures += isinstance(got, str)
        for c in group:
            why = compare(gots[c.name], wants[c.name])
            print(f"{'FAIL' if why else 'ok  '} {c.name} ({mode}){': ' + why if why else ''}")
            failures += why is not None
    failures += check_refusals(opc, error_cases(), work)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
