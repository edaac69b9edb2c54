#!/usr/bin/env python3
"""OneHot at run time (opc_one_hot), as exports carry it: the depth a
constant, the indices (and here the values too) run-time data.

usage: test_one_hot.py OPC WORK_DIR

One program holds every case, against ONNX Runtime, compared exactly:
int64 and int32 indices with negative and out-of-range entries, float32
indices (truncated), the axis first, inside and last, float32 and int64
values, depth as int64, int32 and float32 (the type combinations ONNX
Runtime has kernels for). Negative controls: the reference of the same indices with
another axis, and with negative indices not wrapped, must each differ from
what the program returned. A float16 index is refused with a clear error.
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_exact, reference, run_opc, value_info  # noqa: E402

rng = np.random.default_rng(53)
DEPTH = 5
# name, indices, axis, values, depth's type
CASES = [
    ("i64_last", rng.integers(-DEPTH - 2, DEPTH + 2, (3, 4)).astype(np.int64), -1,
     np.array([0.25, 2.5], np.float32), np.int64),
    ("i64_first", rng.integers(-DEPTH, DEPTH, (3, 4)).astype(np.int64), 0,
     np.array([-1, 7], np.int64), np.int64),
    ("i32_inside", rng.integers(-DEPTH, DEPTH + 1, (2, 3, 2)).astype(np.int32), 1,
     np.array([0.5, -8.0], np.float32), np.int32),
    ("f32_truncated", (rng.integers(-DEPTH, DEPTH, (6,)) + 0.75).astype(np.float32), -1,
     np.array([3.0, -4.0], np.float32), np.float32),
    # DEPTH indices: the other axis gives the same shape, transposed
    ("i64_square", np.array([3, -1, 0, 4, 1], np.int64), -1, np.array([0, 9], np.int64),
     np.int64),
]


def one_hot_model(cases, axes=None):
    nodes, inputs, outputs, inits = [], [], [], []
    for k, (name, idx, axis, values, depth_type) in enumerate(cases):
        axis = axes[k] if axes else axis
        inputs += [value_info(name + "_i", idx), value_info(name + "_v", values)]
        inits.append(numpy_helper.from_array(np.array(DEPTH, depth_type), name + "_depth"))
        nodes.append(helper.make_node("OneHot", [name + "_i", name + "_depth", name + "_v"],
                                      [name], axis=axis))
        outputs.append(onnx.ValueInfoProto(name=name))
    return onnx_case.model(nodes, inputs, outputs, inits, opset=11, name="one_hot")


def feeds_of(cases):
    feeds = {}
    for name, idx, _, values, _ in cases:
        feeds[name + "_i"], feeds[name + "_v"] = idx, values
    return feeds


def unwrapped(idx, axis, values):
    """OneHot as numpy, with negative indices left out instead of wrapped."""
    hot = np.moveaxis(np.arange(DEPTH).reshape((DEPTH,) + (1,) * idx.ndim) ==
                      idx.astype(np.int64)[None], 0, axis if axis >= 0 else idx.ndim + 1 + axis)
    return np.where(hot, values[1], values[0]).astype(values.dtype)


def main():
    opc, work = sys.argv[1:3]
    failures = []
    m, feeds = one_hot_model(CASES), feeds_of(CASES)
    want = reference(m, feeds)
    got, why = run_opc(opc, m, feeds, os.path.join(work, "program"))
    if why:
        sys.exit(f"FAIL: {why}")
    for name, *_ in CASES:
        why = compare_exact(got[name], want[name])
        if why:
            failures.append(f"{name}: {why}")
    # Negative controls: a wrong axis, negative indices not wrapped.
    other = reference(one_hot_model(CASES, axes=[0, 1, 0, 0, 0]), feeds)
    compared = 0
    for name, idx, axis, values, _ in CASES:
        if got[name].shape == other[name].shape:
            compared += 1
            if compare_exact(got[name], other[name]) is None:
                failures.append(f"{name}: the reference for another axis matches too")
        if (idx < 0).any() and compare_exact(got[name], unwrapped(idx, axis, values)) is None:
            failures.append(f"{name}: negative indices left unwrapped match too")
    if compared == 0:
        failures.append("the wrong-axis control compared nothing")
    half = CASES[:1]
    bad = one_hot_model([(half[0][0], half[0][1].astype(np.float16), -1, half[0][3], np.int64)])
    _, why = run_opc(opc, bad, {}, os.path.join(work, "refused"))
    if not (isinstance(why, tuple) and why[0] == 2 and "indices at run time" in why[1]):
        failures.append(f"a float16 index is not refused clearly: {why}")
    if failures:
        print("\n".join("FAIL " + f for f in failures))
        return 1
    print(f"one_hot: {len(CASES)} cases match ONNX Runtime exactly; both negative controls "
          "differ; a float16 index is refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
