#!/usr/bin/env python3
"""Checks every opc kernel (compiled as C, run by kernel_runner) against
independent references: numpy, math, and onnx's reference evaluator.

usage: test_kernels.py KERNEL_RUNNER [-k SUBSTRING] [--record DIR | --replay DIR]

--record DIR saves every launch as DIR/NNNN.in (and still runs it here);
--replay DIR takes each launch's output from DIR/NNNN.out instead of
running it: how the same checks run on a GPU (kernel_runner built with
-DOPC_RUNNER_CUDA, on another machine).
"""
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np

RUNNER = None
RECORD = None
REPLAY = None
launches = 0
failures = []
checks = 0


# ------------------------------------------------------------- launching

def strides_of(arr):
    """Element strides of a numpy view (may be 0 or negative)."""
    return [s // arr.itemsize for s in arr.strides]


def base_and_extent(arr):
    """Lowest element offset reachable from arr's first element, and the
    number of elements from there to the highest one."""
    low = sum((d - 1) * s for d, s in zip(arr.shape, strides_of(arr)) if s < 0 and d > 0)
    high = sum((d - 1) * s for d, s in zip(arr.shape, strides_of(arr)) if s > 0 and d > 0)
    return low, high - low + 1


def launch(kernel, n, dims, ystride, y_init, xs=(), f=(), i=(), alias=None, parts=3,
           xstrides=None, xoffsets=None):
    """xs: list of 1-D float32 (or int32: indices) buffers; xstrides[k]: strides of x[k] along dims;
    xoffsets[k]: where x[k] points in its buffer. Returns the output buffer."""
    rec = [f"kernel {kernel}", f"n {n}", f"rank {len(dims)}",
           "dims " + " ".join(map(str, dims)), "ystride " + " ".join(map(str, ystride))]
    for k, buf in enumerate(xs):
        if buf is None:
            continue
        if buf.dtype == np.int32:
            rec.append(f"xi {k} {buf.size} " + " ".join(str(int(v)) for v in buf.ravel()))
        else:
            rec.append(f"x {k} {buf.size} " + " ".join(repr(float(v)) for v in buf.ravel()))
        if xoffsets and xoffsets[k]:
            rec.append(f"xoffset {k} {xoffsets[k]}")
    for k, st in enumerate(xstrides or []):
        if st is not None:
            rec.append(f"xstride {k} " + " ".join(map(str, st)))
    if alias is not None:
        rec.append(f"alias {alias}")
    if f:
        rec.append(f"f {len(f)} " + " ".join(repr(float(v)) for v in f))
    if i:
        rec.append(f"i {len(i)} " + " ".join(str(int(v)) for v in i))
    rec.append(f"y {y_init.size} " + " ".join(repr(float(v)) for v in y_init.ravel()))
    rec.append(f"parts {parts}")
    rec.append("end")
    global launches
    launches += 1
    text = "\n".join(rec) + "\n"
    if RECORD:
        with open(f"{RECORD}/{launches:04d}.in", "w") as f:
            f.write(text)
    if REPLAY:
        try:
            with open(f"{REPLAY}/{launches:04d}.out") as f:
                out = f.read()
        except OSError:
            out = " ".join(["nan"] * y_init.size)
    else:
        p = subprocess.run([RUNNER], input=text, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{kernel}: runner failed: {p.stderr}")
        out = p.stdout
    return np.array([float(v) for v in out.split()], dtype=np.float32)


def check(name, got, want, atol=1e-5, rtol=1e-5):
    global checks
    checks += 1
    got = np.asarray(got, dtype=np.float64).ravel()
    want = np.asarray(want, dtype=np.float64).ravel()
    if got.shape != want.shape:
        failures.append(f"{name}: shape {got.shape} != {want.shape}")
        return
    nan_ok = np.array_equal(np.isnan(got), np.isnan(want))
    fin = ~np.isnan(want) & (got != want)  # equal infinities are fine
    close = np.all(np.abs(got[fin] - want[fin]) <= atol + rtol * np.abs(want[fin])) \
        if fin.any() else True
    if not (nan_ok and close):
        with np.errstate(invalid="ignore"):
            bad = np.argmax(np.abs(np.nan_to_num(got - want, nan=1e30)))
        failures.append(f"{name}: element {bad}: got {got[bad]!r}, want {want[bad]!r}")


def run_elementwise(kernel, out_shape, inputs, f=(), i=(), alias=None):
    """inputs: numpy views broadcastable to out_shape (may be strided)."""
    xs, xstrides, xoffsets = [], [], []
    for arr in inputs:
        if arr is None:  # an absent input: x[k] stays null
            xs.append(None)
            xstrides.append(None)
            xoffsets.append(0)
            continue
        view = np.broadcast_to(arr, out_shape)
        low, extent = base_and_extent(view)
        base = arr.base if arr.base is not None else arr
        flat = np.ascontiguousarray(base).ravel().astype(np.float32)
        # Offset of the view's first element in its base buffer.
        start = (arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]) \
            // arr.itemsize
        xs.append(flat)
        xstrides.append(strides_of(view))
        xoffsets.append(start)
    y = np.zeros(out_shape, dtype=np.float32)
    n = int(np.prod(out_shape))
    return launch(kernel, n, list(out_shape), strides_of(y), y, xs, f, i, alias=alias,
                  xstrides=xstrides, xoffsets=xoffsets).reshape(out_shape)


# ----------------------------------------------------------------- tests

def erf(v):
    return np.vectorize(math.erf)(v)


def test_unary():
    x = np.linspace(-3.7, 3.7, 36, dtype=np.float32).reshape(4, 9)
    pos = np.linspace(0.05, 4.0, 36, dtype=np.float32).reshape(4, 9)
    unit = np.linspace(-0.95, 0.95, 36, dtype=np.float32).reshape(4, 9)
    big = np.linspace(1.05, 5.0, 36, dtype=np.float32).reshape(4, 9)
    d = x.astype(np.float64)
    sig = lambda v: 1 / (1 + np.exp(-v))
    cases = [
        ("opc_relu_f32", x, np.maximum(d, 0), ()),
        ("opc_leaky_relu", x, np.where(d < 0, 0.1 * d, d), (0.1,)),
        ("opc_elu", x, np.where(d < 0, 0.7 * (np.exp(d) - 1), d), (0.7,)),
        ("opc_selu", x, 1.0507 * np.where(d <= 0, 1.6733 * (np.exp(d) - 1), d), (1.6733, 1.0507)),
        ("opc_celu", x, np.maximum(0, d) + np.minimum(0, 1.5 * (np.exp(d / 1.5) - 1)), (1.5,)),
        ("opc_sigmoid", x, sig(d), ()),
        ("opc_tanh", x, np.tanh(d), ()),
        ("opc_hard_sigmoid", x, np.clip(0.3 * d + 0.4, 0, 1), (0.3, 0.4)),
        ("opc_hard_swish", x, d * np.clip(d / 6 + 0.5, 0, 1), ()),
        ("opc_swish", x, d * sig(1.7 * d), (1.7,)),
        ("opc_softplus", x * 30, np.log1p(np.exp((x * 30).astype(np.float64))), ()),
        ("opc_softsign", x, d / (1 + np.abs(d)), ()),
        ("opc_clip", x, np.clip(d, -1.25, 2.5), (-1.25, 2.5)),
        ("opc_erf", x, erf(d), ()),
        ("opc_exp", x, np.exp(d), ()),
        ("opc_log", pos, np.log(pos.astype(np.float64)), ()),
        ("opc_sqrt", pos, np.sqrt(pos.astype(np.float64)), ()),
        ("opc_abs_f32", x, np.abs(d), ()),
        ("opc_neg_f32", x, -d, ()),
        ("opc_reciprocal", pos, 1 / pos.astype(np.float64), ()),
        ("opc_floor", x, np.floor(d), ()),
        ("opc_ceil", x, np.ceil(d), ()),
        ("opc_sign_f32", x, np.sign(d), ()),
        ("opc_sin", x, np.sin(d), ()),
        ("opc_cos", x, np.cos(d), ()),
        ("opc_tan", unit, np.tan(unit.astype(np.float64)), ()),
        ("opc_asin", unit, np.arcsin(unit.astype(np.float64)), ()),
        ("opc_acos", unit, np.arccos(unit.astype(np.float64)), ()),
        ("opc_atan", x, np.arctan(d), ()),
        ("opc_sinh", x, np.sinh(d), ()),
        ("opc_cosh", x, np.cosh(d), ()),
        ("opc_asinh", x, np.arcsinh(d), ()),
        ("opc_acosh", big, np.arccosh(big.astype(np.float64)), ()),
        ("opc_atanh", unit, np.arctanh(unit.astype(np.float64)), ()),
    ]
    for kernel, inp, want, f in cases:
        # Read through a transposed view: strides (1, 4) over the (9, 4) output.
        got = run_elementwise(kernel, (9, 4), [inp.T], f=f)
        check(kernel, got, want.T)
    # Bounds computed at run time: one-element tensors in x[1] and x[2].
    lo, hi = np.array([-0.5], np.float32), np.array([1.75], np.float32)
    check("opc_clip runtime bounds", run_elementwise("opc_clip", (4, 9), [x, lo, hi], f=(-9, 9)),
          np.clip(d, -0.5, 1.75))
    check("opc_clip runtime max", run_elementwise("opc_clip", (4, 9), [x, None, hi], f=(-1, 9)),
          np.clip(d, -1, 1.75))
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, 0.6, -0.6, 3.5], dtype=np.float32)
    check("opc_round half to even", run_elementwise("opc_round", (10,), [halves]),
          [-2, -2, -0, 0, 2, 2, 0, 1, -1, 4])
    nan = np.array([np.nan, -np.inf, np.inf, 0.0], dtype=np.float32)
    check("opc_relu nan", run_elementwise("opc_relu_f32", (4,), [nan]), [np.nan, 0, np.inf, 0])
    check("opc_clip nan", run_elementwise("opc_clip", (4,), [nan], f=(-1, 1)), [np.nan, -1, 1, 0])
    check("opc_sign nan", run_elementwise("opc_sign_f32", (4,), [nan]), [np.nan, -1, 1, 0])


def test_in_place():
    x = np.linspace(-2, 2, 12, dtype=np.float32)
    y = x.copy()
    got = launch("opc_leaky_relu", 12, [12], [1], y, xs=[None], alias=0, xstrides=[[1]],
                 f=(0.25,))
    check("opc_leaky_relu in place", got, np.where(x < 0, 0.25 * x, x))


def test_binary():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 1)).astype(np.float32)
    pos = (np.abs(a) + 0.5).astype(np.float32)
    ops = [("opc_add_f32", np.add), ("opc_sub_f32", np.subtract), ("opc_mul_f32", np.multiply),
           ("opc_div_f32", np.divide)]
    for kernel, fn in ops:
        check(kernel, run_elementwise(kernel, (2, 3, 4), [a, b]), fn(a.astype(np.float64), b))
        # The broadcast operand first, the other one read through a transpose.
        at = np.ascontiguousarray(a.transpose(2, 1, 0)).transpose(2, 1, 0)
        check(kernel + " swapped", run_elementwise(kernel, (2, 3, 4), [b, at]),
              fn(b.astype(np.float64), a))
    check("opc_pow", run_elementwise("opc_pow", (2, 3, 4), [pos, b]),
          np.power(pos.astype(np.float64), b))
    ints = np.array([2.0, 3.0], dtype=np.float32)
    neg = np.array([[-2.0], [-1.5]], dtype=np.float32)
    check("opc_pow negative base", run_elementwise("opc_pow", (2, 2), [neg, ints]),
          np.power(neg.astype(np.float64), ints))
    slope = np.array([0.1, 0.2, 0.3], dtype=np.float32).reshape(3, 1)
    check("opc_prelu", run_elementwise("opc_prelu", (2, 3, 4), [a, slope]),
          np.where(a < 0, a * slope.astype(np.float64), a))


def test_variadic():
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4,), (3, 1), (1, 4)]]
    xs[1][2] = np.nan
    want = sum(np.broadcast_to(v, (3, 4)).astype(np.float64) for v in xs[:3])
    check("opc_sum 3", run_elementwise("opc_sum", (3, 4), xs[:3], f=(1.0,), i=(3,)), want)
    check("opc_sum mean", run_elementwise("opc_sum", (3, 4), xs[:2], f=(0.5,), i=(2,)),
          (xs[0].astype(np.float64) + xs[1]) / 2)
    mx = np.maximum(np.maximum(np.maximum(xs[0], xs[1]), xs[2]), xs[3])
    mn = np.minimum(np.minimum(np.minimum(xs[0], xs[1]), xs[2]), xs[3])
    check("opc_max 4", run_elementwise("opc_max_f32", (3, 4), xs, i=(4,)), mx)
    check("opc_min 4", run_elementwise("opc_min_f32", (3, 4), xs, i=(4,)), mn)
    check("opc_max 1", run_elementwise("opc_max_f32", (3, 4), xs[:1], i=(1,)), xs[0])


def run_copy(view, out_shape=None):
    """Copies a numpy view (any strides, negative too) with opc_copy."""
    shape = out_shape or view.shape
    view = np.broadcast_to(view, shape)
    low, extent = base_and_extent(view)
    base = view.base if view.base is not None else view
    while base.base is not None:
        base = base.base
    flat = np.ascontiguousarray(base).ravel()
    start = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) \
        // view.itemsize
    # x[0] points at the lowest element read; i[0] leads back to coordinate 0.
    buf = flat[start + low: start + low + extent]
    y = np.zeros(shape, dtype=np.float32)
    return launch("opc_copy_b4", int(np.prod(shape)), list(shape), strides_of(y), y, [buf],
                  i=(-low,), xstrides=[strides_of(view)]).reshape(shape)


def test_copy():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    check("opc_copy transpose", run_copy(a.transpose(3, 1, 0, 2)), a.transpose(3, 1, 0, 2))
    check("opc_copy slice", run_copy(a[:, 1:3, ::2, 1:]), a[:, 1:3, ::2, 1:])
    check("opc_copy negative steps", run_copy(a[::-1, 2:0:-1, ::-3, 4:0:-2]),
          a[::-1, 2:0:-1, ::-3, 4:0:-2])
    b = a[0, :, :1, :]
    check("opc_copy expand", run_copy(b, (2, 3, 4, 5)), np.broadcast_to(b, (2, 3, 4, 5)))
    # Tile (2, 1, 3) of a (3, 4, 2) tensor as a 6-d copy with 0 strides.
    t = rng.standard_normal((3, 4, 2)).astype(np.float32)
    tiled = np.tile(t, (2, 1, 3))
    y = np.zeros(tiled.shape, dtype=np.float32)
    dims = [2, 3, 4, 3, 2]
    xst = [0, 8, 2, 0, 1]
    yst = [3 * 4 * 6, 4 * 6, 6, 2, 1]
    got = launch("opc_copy_b4", y.size, dims, yst, y, [t.ravel()], i=(0,), xstrides=[xst])
    check("opc_copy tile", got.reshape(tiled.shape), tiled)
    # Into a strided output (rows of 7): how a part of a concatenation is written.
    out = np.full((2, 7), -1.0, dtype=np.float32)
    part = rng.standard_normal((2, 3)).astype(np.float32)
    got = launch("opc_copy_b4", 6, [2, 3], [7, 1], out, [part.ravel()], i=(0,), xstrides=[[3, 1]])
    want = out.copy()
    want[:, 0:3] = part
    check("opc_copy strided output", got.reshape(2, 7), want)


def test_gather():
    rng = np.random.default_rng(4)
    data = rng.standard_normal((3, 5, 2)).astype(np.float32)
    idx = np.array([[4, -1], [0, 2], [-5, 1]], dtype=np.int64)
    want = np.take(data, idx, axis=1)  # (3, 3, 2, 2)
    dims = [3, idx.size, 2]
    y = np.zeros(want.shape, dtype=np.float32)
    got = launch("opc_gather_b4", y.size, dims, [idx.size * 2, 2, 1], y,
                 [data.ravel(), idx.ravel().astype(np.int32)], i=(1, 5, 4),
                 xstrides=[[10, 2, 1]])
    check("opc_gather axis 1", got.reshape(want.shape), want)
    want0 = np.take(data, np.array([2, 0, -1]), axis=0)
    y = np.zeros(want0.shape, dtype=np.float32)
    got = launch("opc_gather_b4", y.size, [3, 5, 2], [10, 2, 1], y,
                 [data.ravel(), np.array([2, 0, -1], dtype=np.int32)], i=(0, 3, 4),
                 xstrides=[[10, 2, 1]])
    check("opc_gather axis 0", got.reshape(want0.shape), want0)
    # Along the last axis, one index per element.
    idx2 = np.array([1, -2, 0, 1, 1], dtype=np.int32)
    want2 = np.take(data, idx2, axis=2)
    y = np.zeros(want2.shape, dtype=np.float32)
    got = launch("opc_gather_b4", y.size, [3, 5, 5], [25, 5, 1], y, [data.ravel(), idx2],
                 i=(2, 2, 4), xstrides=[[10, 2, 1]])
    check("opc_gather last axis", got.reshape(want2.shape), want2)
    # From a column-major input, so that rows are strided.
    a2 = rng.standard_normal((4, 6)).astype(np.float32)
    want3 = np.take(a2, np.array([3, 1, 3]), axis=0)
    y = np.zeros(want3.shape, dtype=np.float32)
    got = launch("opc_gather_b4", y.size, [3, 6], [6, 1], y,
                 [a2.T.ravel(), np.array([3, 1, 3], dtype=np.int32)], i=(0, 4, 4),
                 xstrides=[[1, 4]])
    check("opc_gather strided rows", got.reshape(want3.shape), want3)


def test_pad():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    before, after = [0, 2, 3], [1, 1, 5]
    modes = [("opc_pad_constant_f32", "constant"), ("opc_pad_reflect_b4", "reflect"),
             ("opc_pad_edge_b4", "edge"), ("opc_pad_wrap_b4", "wrap")]
    for kernel, mode in modes:
        kw = {"constant_values": 1.5} if mode == "constant" else {}
        want = np.pad(x, list(zip(before, after)), mode=mode, **kw)
        y = np.zeros(want.shape, dtype=np.float32)
        i = before + [0] * 5 + list(x.shape) + [0] * 5
        got = launch(kernel, y.size, list(want.shape), strides_of(y), y, [x.ravel()],
                     f=(1.5,), i=i, xstrides=[strides_of(x)])
        check(kernel, got.reshape(want.shape), want)
    # Negative padding crops.
    want = np.pad(x, [(0, 0), (1, 0), (0, 0)], constant_values=0)[:, :, 1:3]
    y = np.zeros(want.shape, dtype=np.float32)
    i = [0, 1, -1] + [0] * 5 + list(x.shape) + [0] * 5
    got = launch("opc_pad_constant_f32", y.size, list(want.shape), strides_of(y), y, [x.ravel()],
                 f=(0.0,), i=i, xstrides=[strides_of(x)])
    check("opc_pad_constant crop", got.reshape(want.shape), want)


# ------------------------------------------------------------- onnx refs

def onnx_run(op, inputs, attrs, opset=19, runtime="reference"):
    """Runs one ONNX node with onnx's reference evaluator, or onnxruntime
    where the reference is wrong (its LRN sums over the batch dim, its
    MaxPool misreads asymmetric pads)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
    names = [f"in{k}" if v is not None else "" for k, v in enumerate(inputs)]
    node = helper.make_node(op, names, ["out"], **attrs)
    graph_inputs = []
    feeds = {}
    for nm, v in zip(names, inputs):
        if v is None:
            continue
        dt = TensorProto.INT64 if v.dtype == np.int64 else TensorProto.FLOAT
        graph_inputs.append(helper.make_tensor_value_info(nm, dt, list(v.shape)))
        feeds[nm] = v
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if runtime == "onnxruntime":
        import onnxruntime
        sess = onnxruntime.InferenceSession(model.SerializeToString(),
                                            providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)[0]
    return ReferenceEvaluator(model).run(None, feeds)[0]


COORD = {"half_pixel": 0, "pytorch_half_pixel": 1, "align_corners": 2, "asymmetric": 3,
         "tf_half_pixel_for_nn": 4, "tf_crop_and_resize": 5, "half_pixel_symmetric": 6}
NEAREST = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}


def run_resize(x, out_shape, scales, mode="nearest", coord="half_pixel",
               nearest="round_prefer_floor", cubic_a=-0.75, exclude=0, extrap=0.0, roi=None):
    """scales: per axis, a Fraction (exact); roi: per axis (start, end)."""
    r = x.ndim
    axes = []
    for d in range(r):
        identity = scales[d] == 1 and out_shape[d] == x.shape[d] and \
            (roi is None or (roi[d][0] == 0 and roi[d][1] == 1))
        if not identity:
            axes.append(d)
    assert len(axes) <= 3
    i = [0] * 16
    f = [cubic_a, extrap, 0, 0, 0, 0, 0, 0]
    i[0] = len(axes)
    for k, d in enumerate(axes):
        i[1 + k], i[4 + k] = d, x.shape[d]
        i[7 + k], i[10 + k] = scales[d].numerator, scales[d].denominator
        if roi is not None:
            f[2 + 2 * k], f[3 + 2 * k] = roi[d]
    i[13] = COORD[coord]
    i[14] = {"nearest": NEAREST[nearest], "linear": 4, "cubic": 5}[mode]
    i[15] = exclude
    y = np.zeros(out_shape, dtype=np.float32)
    return launch("opc_resize", y.size, list(out_shape), strides_of(y), y, [x.ravel()],
                  f=f, i=i, xstrides=[strides_of(x)]).reshape(out_shape)


def test_resize():
    rng = np.random.default_rng(6)
    x4 = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    cases = []
    for coord in ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                  "half_pixel_symmetric"]:
        for mode in ["nearest", "linear", "cubic"]:
            for sc in [(1, 1, 2.0, 1.5), (1, 1, 0.6, 0.8), (1, 1, 1.7, 0.5)]:
                cases.append(dict(mode=mode, coord=coord, scales=sc))
            cases.append(dict(mode=mode, coord=coord, sizes=(1, 2, 7, 3)))
            cases.append(dict(mode=mode, coord=coord, sizes=(1, 2, 1, 9)))
    for nearest in NEAREST:
        for coord in ["half_pixel", "asymmetric", "align_corners"]:
            for sc in [(1, 1, 2.5, 1.5), (1, 1, 0.5, 0.75)]:
                cases.append(dict(mode="nearest", coord=coord, scales=sc, nearest=nearest))
    for a in [-0.5, -0.75]:
        for ex in [0, 1]:
            cases.append(dict(mode="cubic", coord="half_pixel", scales=(1, 1, 1.6, 0.7),
                              cubic_a=a, exclude=ex))
    cases.append(dict(mode="linear", coord="half_pixel", scales=(1, 1, 2, 2), exclude=1))
    roi = [(0, 1), (0, 1), (0.2, 0.9), (-0.3, 1.2)]
    for mode in ["nearest", "linear", "cubic"]:
        cases.append(dict(mode=mode, coord="tf_crop_and_resize", sizes=(1, 2, 5, 6), roi=roi,
                          extrap=3.5))
        cases.append(dict(mode=mode, coord="tf_crop_and_resize", sizes=(1, 2, 1, 4), roi=roi,
                          extrap=-1.0))
    # Only the last axis resized, and only the one before it.
    for mode in ["linear", "cubic", "nearest"]:
        cases.append(dict(mode=mode, coord="half_pixel", scales=(1, 1, 1, 2.5)))
        cases.append(dict(mode=mode, coord="asymmetric", scales=(1, 1, 1.5, 1)))
    # A resize of the channel axis too: three resized axes.
    cases.append(dict(mode="linear", coord="align_corners", scales=(1, 1.5, 2, 0.6)))
    for c in cases:
        attrs = {"mode": c["mode"], "coordinate_transformation_mode": c["coord"],
                 "nearest_mode": c.get("nearest", "round_prefer_floor"),
                 "cubic_coeff_a": c.get("cubic_a", -0.75),
                 "exclude_outside": c.get("exclude", 0),
                 "extrapolation_value": c.get("extrap", 0.0)}
        roi_t = None
        if "roi" in c:
            roi_t = np.array([s for s, _ in c["roi"]] + [e for _, e in c["roi"]], np.float32)
        if "scales" in c:
            st = np.array(c["scales"], dtype=np.float32)
            want = onnx_run("Resize", [x4, roi_t, st], attrs)
            scales = [Fraction(float(v)) for v in st]
        else:
            sz = np.array(c["sizes"], dtype=np.int64)
            want = onnx_run("Resize", [x4, roi_t, None, sz], attrs)
            scales = [Fraction(int(o), int(n)) for o, n in zip(sz, x4.shape)]
        roi32 = None
        if "roi" in c:
            roi32 = [(float(np.float32(s)), float(np.float32(e))) for s, e in c["roi"]]
        got = run_resize(x4, want.shape, scales, mode=c["mode"], coord=c["coord"],
                         nearest=c.get("nearest", "round_prefer_floor"),
                         cubic_a=c.get("cubic_a", -0.75), exclude=c.get("exclude", 0),
                         extrap=c.get("extrap", 0.0), roi=roi32)
        check(f"opc_resize {c}", got, want, atol=1e-5, rtol=1e-5)
    # Trilinear on a 5-d tensor, and 1-d.
    x5 = rng.standard_normal((1, 1, 3, 4, 2)).astype(np.float32)
    st = np.array([1, 1, 2, 0.5, 3], dtype=np.float32)
    want = onnx_run("Resize", [x5, None, st], {"mode": "linear"})
    got = run_resize(x5, want.shape, [Fraction(float(v)) for v in st], mode="linear")
    check("opc_resize trilinear", got, want)
    x1 = rng.standard_normal((6,)).astype(np.float32)
    st = np.array([1.5], dtype=np.float32)
    want = onnx_run("Resize", [x1, None, st], {"mode": "cubic"})
    got = run_resize(x1, want.shape, [Fraction(float(v)) for v in st], mode="cubic")
    check("opc_resize 1-d cubic", got, want)


def pool_args(x_shape, attrs, out_shape):
    ns = len(x_shape) - 2
    k = list(attrs["kernel_shape"]) + [1] * (3 - ns)
    s = list(attrs.get("strides", [1] * ns)) + [1] * (3 - ns)
    dl = list(attrs.get("dilations", [1] * ns)) + [1] * (3 - ns)
    pads = attrs.get("pads", [0] * 2 * ns)
    pb = list(pads[:ns]) + [0] * (3 - ns)
    ins = list(x_shape[2:]) + [1] * (3 - ns)
    dims = list(out_shape) + [1] * (3 - ns)
    return dims, k + s + dl + pb + ins + [attrs.get("count_include_pad", 0)]


def test_pool():
    rng = np.random.default_rng(7)
    configs = [
        ((1, 2, 9), {"kernel_shape": [3]}),
        ((2, 3, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
        ((1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
        ((1, 2, 8, 8), {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
        ((1, 1, 6, 6), {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2], "count_include_pad": 1}),
        ((1, 1, 5, 6), {"kernel_shape": [3, 3], "pads": [1, 0, 1, 2]}),
        ((1, 2, 4, 5, 6), {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2],
                           "pads": [0, 1, 1, 1, 1, 0]}),
        # Enough channels that the CPU's parts take whole planes at once,
        # and parts that start inside a plane.
        ((1, 6, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
        ((1, 6, 10, 7), {"kernel_shape": [3, 2], "pads": [1, 1, 1, 0]}),
        ((1, 4, 5, 5), {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
        # Strided planes 64 columns wide or more, which max pooling folds
        # an output row at a time, split by column phase: stride 2 over an
        # odd width, and stride 3 with padding.
        ((1, 3, 21, 71), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
        ((1, 2, 12, 100), {"kernel_shape": [3, 4], "strides": [2, 3], "pads": [1, 1, 1, 2],
                           "ceil_mode": 1}),
    ]
    for shape, attrs in configs:
        x = rng.standard_normal(shape).astype(np.float32)
        for op, kernel in [("MaxPool", "opc_max_pool"), ("AveragePool", "opc_average_pool")]:
            a = dict(attrs)
            if op == "MaxPool":
                a.pop("count_include_pad", None)
            want = onnx_run(op, [x], a, runtime="onnxruntime" if op == "MaxPool" else "reference")
            dims, i = pool_args(shape, a, want.shape)
            xs = strides_of(x) + [0] * (5 - x.ndim)
            y = np.zeros(want.shape, dtype=np.float32)
            ys = strides_of(y) + [0] * (5 - y.ndim)
            got = launch(kernel, y.size, dims, ys, y, [x.ravel()], i=i, xstrides=[xs])
            check(f"{kernel} {shape} {a}", got.reshape(want.shape), want)
    # A NaN anywhere in a max window wins, whatever comes before or after
    # it in the window (cuDNN's max propagates NaN). Which windows hold one
    # comes from pooling an indicator of the NaNs' places.
    for shape, attrs in configs:
        x = rng.standard_normal(shape).astype(np.float32)
        holes = rng.random(shape) < 0.08
        want = onnx_run("MaxPool", [x], attrs_without(attrs, "count_include_pad"),
                        runtime="onnxruntime")
        hit = onnx_run("MaxPool", [holes.astype(np.float32)],
                       attrs_without(attrs, "count_include_pad"), runtime="onnxruntime") > 0
        want[hit] = np.nan
        x[holes] = np.nan
        dims, i = pool_args(shape, attrs_without(attrs, "count_include_pad"), want.shape)
        y = np.zeros(want.shape, dtype=np.float32)
        got = launch("opc_max_pool", y.size, dims, strides_of(y) + [0] * (5 - y.ndim), y,
                     [x.ravel()], i=i, xstrides=[strides_of(x) + [0] * (5 - x.ndim)])
        check(f"opc_max_pool NaN {shape} {attrs}", got.reshape(want.shape), want)


def attrs_without(attrs, name):
    return {k: v for k, v in attrs.items() if k != name}


def row_args(shape, axes, x_strides, y_strides):
    """Outer dims (row dims set to 1) and i[] for the row kernels; the row's
    dims are merged where both layouts allow."""
    dims = [1 if d in axes else n for d, n in enumerate(shape)]
    groups = []  # [size, xstride, ystride]
    for d in sorted(axes):
        if groups and groups[-1][3] == d - 1 and \
                groups[-1][1] == x_strides[d] * shape[d] and groups[-1][2] == y_strides[d] * shape[d]:
            groups[-1] = [groups[-1][0] * shape[d], x_strides[d], y_strides[d], d]
        else:
            groups.append([shape[d], x_strides[d], y_strides[d], d])
    assert len(groups) <= 4
    i = [0] * 16
    i[0] = len(groups)
    for k, g in enumerate(groups):
        i[1 + k], i[5 + k], i[9 + k] = g[0], g[1], g[2]
    i[15] = int(np.prod([shape[d] for d in axes]))
    return dims, i


def test_rows():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 3
    xs = strides_of(x)
    for axes in [(1,), (3,), (2, 3), (0, 2), (0, 1, 2, 3), (1, 3)]:
        keep = np.zeros([1 if d in axes else n for d, n in enumerate(x.shape)], np.float32)
        ys = strides_of(keep)
        dims, i = row_args(x.shape, axes, xs, [0] * 4)
        n = int(np.prod(dims))
        count = i[15]
        for kernel, fn, divisor in [("opc_reduce_sum_f32", np.sum, 0),
                                    ("opc_reduce_sum_f32", np.mean, count),
                                    ("opc_reduce_max_f32", np.max, 0),
                                    ("opc_reduce_min_f32", np.min, 0)]:
            i[14] = divisor
            got = launch(kernel, n, dims, ys, keep, [x.ravel()], f=(0.0, 0.0), i=i, xstrides=[xs])
            want = fn(x.astype(np.float64), axis=axes, keepdims=True)
            check(f"{kernel} {fn.__name__} {axes}", got.reshape(want.shape), want)
        # Softmax over the same axes, written through a transposed output.
        y = np.zeros(x.shape[::-1], np.float32)
        yt = strides_of(y)[::-1]
        dims, i = row_args(x.shape, axes, xs, yt)
        d = x.astype(np.float64)
        e = np.exp(d - d.max(axis=axes, keepdims=True))
        soft = e / e.sum(axis=axes, keepdims=True)
        got = launch("opc_softmax", n, dims, yt, y, [x.ravel()], i=i, xstrides=[xs])
        check(f"opc_softmax {axes}", got.reshape(y.shape).T, soft, atol=1e-6)
        got = launch("opc_log_softmax", n, dims, yt, y, [x.ravel()], i=i, xstrides=[xs])
        check(f"opc_log_softmax {axes}", got.reshape(y.shape).T, np.log(soft))
    # LayerNormalization over the last two axes, scale per element, bias broadcast.
    scale = rng.standard_normal((4, 5)).astype(np.float32)
    bias = np.array([0.25], np.float32)
    dims, i = row_args(x.shape, (2, 3), xs, xs)
    i[13], i[14] = 1, 0
    y = np.zeros(x.shape, np.float32)
    d = x.astype(np.float64)
    mu = d.mean(axis=(2, 3), keepdims=True)
    var = ((d - mu) ** 2).mean(axis=(2, 3), keepdims=True)
    want = (d - mu) / np.sqrt(var + 1e-5) * scale + 0.25
    got = launch("opc_layer_norm", 6, dims, xs, y, [x.ravel(), scale.ravel(), bias], f=(1e-5,),
                 i=i, xstrides=[xs])
    check("opc_layer_norm", got.reshape(x.shape), want, atol=1e-5)
    got = launch("opc_layer_norm", 6, dims, xs, y, [x.ravel(), scale.ravel()], f=(1e-5,),
                 i=i, xstrides=[xs])
    check("opc_layer_norm no bias", got.reshape(x.shape), want - 0.25, atol=1e-5)
    stats = np.zeros((2, 3, 1, 1), np.float32)
    got = launch("opc_reduce_inv_std", 6, dims, strides_of(stats), stats, [x.ravel()],
                 f=(1e-5,), i=i, xstrides=[xs])
    check("opc_reduce_inv_std", got.reshape(stats.shape), 1 / np.sqrt(var + 1e-5), atol=1e-5)
    # InstanceNormalization: rows are (n, c).
    sc = rng.standard_normal(3).astype(np.float32)
    bi = rng.standard_normal(3).astype(np.float32)
    dims, i = row_args(x.shape, (2, 3), xs, xs)
    i[13] = 3
    want = (d - mu) / np.sqrt(var + 1e-3) * sc.reshape(1, 3, 1, 1) + bi.reshape(1, 3, 1, 1)
    got = launch("opc_instance_norm", 6, dims, xs, y, [x.ravel(), sc, bi], f=(1e-3,), i=i,
                 xstrides=[xs])
    check("opc_instance_norm", got.reshape(x.shape), want, atol=1e-5)


def test_lrn_and_batch_norm():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 7, 3, 2)).astype(np.float32)
    for size in [1, 2, 3, 5]:
        attrs = {"size": size, "alpha": 0.002, "beta": 0.75, "bias": 1.5}
        # The spec's formula in numpy; onnxruntime agrees for odd sizes.
        sq = np.zeros(x.shape)
        for c in range(x.shape[1]):
            lo, hi = max(0, c - (size - 1) // 2), min(x.shape[1] - 1, c + math.ceil((size - 1) / 2))
            sq[:, c] = (x[:, lo:hi + 1].astype(np.float64) ** 2).sum(axis=1)
        want = x / (1.5 + 0.002 / size * sq) ** 0.75
        if size % 2:
            check(f"LRN numpy vs onnxruntime {size}", want,
                  onnx_run("LRN", [x], attrs, runtime="onnxruntime"))
        y = np.zeros(x.shape, np.float32)
        got = launch("opc_lrn", y.size, list(x.shape), strides_of(y), y, [x.ravel()],
                     f=(0.002, 0.75, 1.5), i=(size,), xstrides=[strides_of(x)])
        check(f"opc_lrn size {size}", got.reshape(x.shape), want)
    scale, bias, mean = (rng.standard_normal(7).astype(np.float32) for _ in range(3))
    var = (rng.random(7) + 0.1).astype(np.float32)
    centred = (x - mean.reshape(1, 7, 1, 1)).astype(np.float32)
    want = onnx_run("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": 1e-4})
    ch = [0, 1, 0, 0]
    y = centred.copy()
    got = launch("opc_batch_norm", y.size, list(x.shape), strides_of(y), y,
                 [None, scale, bias, var], f=(1e-4,), alias=0,
                 xstrides=[strides_of(y), ch, ch, ch])
    check("opc_batch_norm", got.reshape(x.shape), want)
    # Training mode: each channel's mean and biased variance, x stored
    # channels-last (N, H, W, C) and read as (N, C, H, W) by its strides.
    n, c, h, w = x.shape
    stored = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    i = [3, n, h, w, 0, 0, 0, 0, h * w * c, w * c, c, 0, 0, 0, 0, c]
    got = launch("opc_batch_moments", c, [c], [1], np.zeros(2 * c, np.float32),
                 [stored.ravel()], i=i, xstrides=[[1]])
    x64 = x.astype(np.float64)
    check("opc_batch_moments", got, np.concatenate([x64.mean(axis=(0, 2, 3)),
                                                    x64.var(axis=(0, 2, 3))]))
    got = launch("opc_running_average", c, [c], [1], np.zeros(c, np.float32), [mean, var],
                 f=(0.9,), xstrides=[[1], [1]])
    check("opc_running_average", got, mean * 0.9 + var * 0.1)


def test_indexing():
    """GatherND, ScatterND, ScatterElements and TopK's values on float32
    with int32 indices (kind 4), negative and repeated ones among them."""
    rng = np.random.default_rng(12)
    data = rng.standard_normal((2, 3, 4)).astype(np.float32)
    idx = np.array([[[0, -1], [1, 2]], [[-2, 0], [1, -3]]], dtype=np.int32)
    want = np.stack([data[tuple(t)] for t in idx.reshape(-1, 2)]).reshape(2, 2, 4)
    i = [0, 2, 4, 0, 0, 0, 2, 3, 0, 0, 0, 12, 4, 0, 0, 0]
    got = launch("opc_gather_nd_b4", 16, [4, 4], [4, 1], np.zeros(16, np.float32),
                 [data.ravel(), idx.ravel()], i=i, xstrides=[[0, 1], [0, 0]])
    check("opc_gather_nd", got.reshape(want.shape), want)
    bidx = np.array([[[2], [-1], [0]], [[1], [1], [-3]]], dtype=np.int32)
    want = np.stack([data[b][bidx[b, :, 0]] for b in range(2)])
    i = [1, 1, 4, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0, 0, 0, 0]
    got = launch("opc_gather_nd_b4", 24, [2, 3, 4], [12, 4, 1], np.zeros(24, np.float32),
                 [data.ravel(), bidx.ravel()], i=i, xstrides=[[12, 0, 1], [0, 0, 0]])
    check("opc_gather_nd batch_dims 1", got.reshape(want.shape), want)

    x = rng.standard_normal((4, 3)).astype(np.float32)
    sidx = np.array([[1], [-1], [1]], dtype=np.int32)
    upd = rng.standard_normal((3, 3)).astype(np.float32)
    for reduction, fn in ((0, None), (1, np.add), (2, np.multiply), (3, np.maximum),
                          (4, np.minimum)):
        want = x.copy()
        for t, (row,) in enumerate(sidx):
            want[row] = upd[t] if fn is None else fn(want[row], upd[t])
        i = [1, 4, reduction, 3, 3, 0, 4, 0, 0, 0, 0, 3, 0, 0, 0, 0]
        got = launch("opc_scatter_nd_f32", 3, [3], [1], x.copy().ravel(),
                     [upd.ravel(), sidx.ravel()], i=i, xstrides=[[1], [0]])
        check(f"opc_scatter_nd reduction {reduction}", got.reshape(x.shape), want)

    eidx = np.array([[3, -1], [0, 2], [-4, 1]], dtype=np.int32)
    eupd = rng.standard_normal((3, 2)).astype(np.float32)
    want = rng.standard_normal((3, 4)).astype(np.float32)
    base = want.copy()
    for r in range(3):
        for j in range(2):
            want[r, eidx[r, j] % 4] = eupd[r, j]  # in order: the last repeat wins
    i = [2, 4, 0, 4, 1, 1, 1]
    got = launch("opc_scatter_elements_f32", 3, [3, 1], [4, 0], base.ravel(),
                 [eupd.ravel(), eidx.ravel()], i=i, xstrides=[[2, 0], [2, 0]])
    check("opc_scatter_elements axis 1", got.reshape(want.shape), want)

    v = np.round(rng.standard_normal((3, 6)) * 2).astype(np.float32)  # with ties
    for largest in (1, 0):
        order = np.argsort(-v if largest else v, axis=1, kind="stable")[:, :4]
        want = np.take_along_axis(v, order, axis=1)
        got = launch("opc_topk_f32", 18, [3, 6], [4, 0], np.zeros(12, np.float32),
                     [v.ravel()], i=[1, 6, 1, 1, 4, largest, 0], xstrides=[[6, 1]])
        check(f"opc_topk values, largest {largest}", got.reshape(want.shape), want)


TESTS = [test_unary, test_in_place, test_binary, test_variadic, test_copy, test_gather, test_pad,
         test_resize, test_pool, test_rows, test_lrn_and_batch_norm, test_indexing]


def main():
    global RUNNER, RECORD, REPLAY
    args = sys.argv[1:]
    RUNNER = args.pop(0)
    only = None
    while args:
        flag, value = args.pop(0), args.pop(0)
        if flag == "-k":
            only = value
        elif flag == "--record":
            RECORD = value
        elif flag == "--replay":
            REPLAY = value
    for t in TESTS:
        if only and only not in t.__name__:
            continue
        before = len(failures)
        t()
        print(f"{t.__name__}: {'ok' if len(failures) == before else 'FAILED'}")
    for msg in failures:
        print("FAIL", msg)
    print(f"{checks} checks, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
