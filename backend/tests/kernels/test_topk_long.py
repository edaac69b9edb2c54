#!/usr/bin/env python3
"""TopK over long rows (opc_topk_select: a block per row, radix selection
of the K-th key, then a merge sort of the K), against ONNX Runtime
exactly: values bit for bit, indices as integers.

usage: test_topk_long.py OPC WORK_DIR [--break]

One model, run on two inputs:
- 200,000 float32 values of 61 levels (so every value ties thousands of
  times), with NaNs (ONNX Runtime ranks NaN above +inf), infinities, -0
  and +0 (equal: the lower index first); K = 1000, largest and smallest;
- the same with K a graph input (1000, then 37);
- a run of that row picked by NonZero (a bounded tensor: the kernel reads
  the run's length on the device) and its best 1000 smallest, K from its
  Shape through Min as torchvision writes min(1000, n), whose bound of
  1000 (not the run's) must size the selection's scratch;
- a middle axis, [3, 3000, 2] along axis 1 (six strided rows), K = 50;
- two rows of 40 with NaNs, K = 10 both ways: opc_topk's scan, which
  must order NaN as the selection does;
- float64, int64, int32, int8 and uint8 rows of 4000 to 5000 with ties, at
  the extremes of their ranges, K = 300 (int8 and uint8: 256 levels, K
  beyond one level's count of ties).
Rows past 128 elements take the selection (kernels_index.c), so the
program must launch opc_topk_select; the short rows' opc_topk is the
conformance tests'. Under the race checker (OPC_CHECK=1: fresh memory is
NaN bits, so an unwritten output shows). With a CUDA toolkit (OPC_CUDA,
default /usr/local/cuda) the GPU program's net.c compiles against its real
headers with -Werror; kernels-nvrtc compiles the kernels with NVRTC.
--break feeds ONNX Runtime the reversed row for the first output: the
test must then fail (its negative control, run by hand).
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import const, out, real_cuda_compile, reference  # noqa: E402

LONG, K = 200000, 1000
TYPED = [("f64", TensorProto.DOUBLE, np.float64, 5000, 1), ("i64", TensorProto.INT64, np.int64, 4000, 0),
         ("i32", TensorProto.INT32, np.int32, 4000, 1), ("i8", TensorProto.INT8, np.int8, 4000, 0),
         ("u8", TensorProto.UINT8, np.uint8, 4500, 1)]


def topk(x, k, names, largest, axis=-1):
    return helper.make_node("TopK", [x, k], names, axis=axis, largest=largest, name=names[0])


def topk_model():
    nodes = [topk("long", "k1000", ["big_v", "big_i"], 1),
             topk("long", "k1000", ["small_v", "small_i"], 0),
             topk("long", "k_in", ["rt_v", "rt_i"], 1),
             # a run: the row's elements above a threshold, K = min(1000, n)
             helper.make_node("Reshape", ["long", "flat"], ["long_flat"]),
             helper.make_node("Greater", ["long_flat", "thr"], ["mask"]),
             helper.make_node("NonZero", ["mask"], ["nz"]),
             helper.make_node("Squeeze", ["nz", "axes_0"], ["picked"]),
             helper.make_node("Gather", ["long_flat", "picked"], ["run"], axis=0),
             helper.make_node("Shape", ["run"], ["run_n"]),
             helper.make_node("Min", ["run_n", "k1000"], ["run_k"]),
             topk("run", "run_k", ["run_v", "run_i"], 0),
             topk("mid", "k50", ["mid_v", "mid_i"], 1, axis=1),
             # short rows (opc_topk's scan) order NaN the same way
             topk("short", "k10", ["short_big_v", "short_big_i"], 1),
             topk("short", "k10", ["short_small_v", "short_small_i"], 0)]
    outputs = ["big_v", "big_i", "small_v", "small_i", "rt_v", "rt_i", "run_v", "run_i",
               "mid_v", "mid_i", "short_big_v", "short_big_i", "short_small_v", "short_small_i"]
    inputs = [helper.make_tensor_value_info("long", TensorProto.FLOAT, [1, LONG]),
              helper.make_tensor_value_info("k_in", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("mid", TensorProto.FLOAT, [3, 3000, 2]),
              helper.make_tensor_value_info("short", TensorProto.FLOAT, [2, 40])]
    for tag, proto, _, n, largest in TYPED:
        inputs.append(helper.make_tensor_value_info(tag, proto, [2, n]))
        nodes.append(topk(tag, "k300", [tag + "_v", tag + "_i"], largest))
        outputs += [tag + "_v", tag + "_i"]
    inits = [const("k1000", [K], np.int64), const("k50", [50], np.int64), const("k10", [10], np.int64),
             const("k300", [300], np.int64), const("thr", 0.2), const("axes_0", [0], np.int64),
             const("flat", [-1], np.int64)]
    return onnx_case.model(nodes, inputs, [out(o) for o in outputs], inits, opset=17,
                           name="topk_long")


def feeds(phase):
    rng = np.random.default_rng(7 + phase)
    long = rng.integers(0, 61, LONG).astype(np.float32) / 60
    spots = rng.choice(LONG, 40, replace=False)
    long[spots[:8]] = np.nan
    long[spots[8:12]] = np.inf
    long[spots[12:16]] = -np.inf
    long[spots[16:28]] = -0.0
    long[spots[28:]] = 0.0
    f = {"long": long[None], "k_in": np.array([K if phase == 0 else 37], np.int64),
         "mid": (rng.integers(0, 9, (3, 3000, 2)) - 4).astype(np.float32),
         "short": long[:80].reshape(2, 40).copy()}
    f["short"][:, [3, 17, 30]] = [np.nan, -np.inf, np.nan]
    for tag, _, dtype, n, _ in TYPED:
        if dtype in (np.int8, np.uint8):
            v = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, (2, n))
        else:
            v = rng.integers(-50, 50, (2, n))
        v = v.astype(dtype)
        if dtype == np.float64:
            v = v / 7
            v[0, :5] = [np.nan, -0.0, np.inf, -np.inf, 1e300]
        elif dtype in (np.int64, np.int32):
            info = np.iinfo(dtype)
            v[0, :4] = [info.min, info.max, info.min, info.max]
        f[tag] = v
    return f


def same(got, want):
    """None when got is want bit for bit (NaNs and the sign of zero
    included), else what differs."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    view = {1: np.uint8, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    eq = got.view(view) == want.view(view) if want.dtype.kind == "f" else got == want
    if eq.all():
        return None
    i = int(np.argmin(eq.reshape(-1)))
    return (f"{int((~eq).sum())} of {got.size} differ; first at {i}: got {got.reshape(-1)[i]!r}, "
            f"expected {want.reshape(-1)[i]!r}")


def main():
    opc, work = sys.argv[1:3]
    broken = "--break" in sys.argv
    os.environ["OPC_CHECK"] = "1"
    m = topk_model()
    exe, why = onnx_case.compile_cpu(opc, m, os.path.join(work, "program"))
    if why:
        print(f"FAIL: opc refused the model: {why}")
        return 1
    failures = []
    net_c = open(os.path.join(work, "program", "net.c")).read()
    selects = net_c.count("opc_topk_select_")
    # K = min(1000, n): its bound 1000 (ir/symbolic.c's sym_upper_bound),
    # not the run's 200,000, sizes the run's scratch
    if "run_v_scratch, 4000 * sizeof" not in net_c:
        failures.append("the run's TopK is not planned at K's bound of 1000")
    if "opc_topk_select_f32" not in net_c or "opc_topk_select_u8" not in net_c:
        failures.append("the program launches no opc_topk_select: the long rows took the scan")
    counts = []
    for phase in (0, 1):
        f = feeds(phase)
        want = reference(m, f)
        if broken:
            want = reference(m, dict(f, long=f["long"][:, ::-1].copy()))
        got = onnx_case.run_program(exe, m, f, os.path.join(work, "program"))
        if isinstance(got, str):
            failures.append(f"phase {phase}: {got}")
            continue
        for o in m.graph.output:
            why = same(got[o.name], want[o.name])
            if why:
                failures.append(f"phase {phase}, {o.name}: {why}")
        counts.append((len(want["rt_v"][0]), len(want["run_v"]), int(np.isnan(want["big_v"]).sum())))
    why = real_cuda_compile(opc, m, os.path.join(work, "cuda"))
    if why:
        failures.append(why)
    for c in counts:
        if c[2] == 0:
            failures.append(f"no NaN among the largest ({c}): the NaN order is not tested")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"topk long: {len(m.graph.output)} outputs match ONNX Runtime exactly on two inputs "
          f"(K, run, NaNs: {counts}); {selects} mentions of opc_topk_select in net.c")
    return 0


if __name__ == "__main__":
    sys.exit(main())
