#!/usr/bin/env python3
"""The "more operators" (reductions L1, L2, SumSquare, Prod, LogSum,
LogSumExp; ArgMax and ArgMin over NaNs; Trilu, GatherElements, Hardmax, CumSum, ThresholdedRelu, Shrink,
Mish, Gelu, MeanVarianceNormalization, Mod, EyeLike, LpNormalization,
GlobalLpPool, LpPool) end to end: small models built here, compiled with
`opc --target cpu`, run, and compared with ONNX Runtime on the same inputs.

Each model also goes through a variant whose output lands in a Concat, which
opc may build in place: the kernels then write through strided views.
Parameters (axes, k, indices) are initializers; data inputs are random.
The cases of one opset share a program (onnx_case.merged), each compared
on its own output; where a program cannot be built or run, each of its
cases is tried alone.

usage: test_more_ops.py OPC WORK_DIR [-k SUBSTRING]
"""
import os
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_case import batches, merged, reference, run_opc  # noqa: E402

TOLERANCE = 1e-4
rng = np.random.default_rng(7)


def rand(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape).astype(np.float32)


def model(op, x, attrs=None, params=(), opset=13, concat=False, folded=False):
    """A one-node model: input x (float32, its shape from the array), then
    the initializers in params ((name, array) pairs, in input order; a None
    name leaves an optional input out). With concat, the output is
    concatenated with itself along axis 0. With folded, x is an initializer
    too, so that opc evaluates the node at compile time."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)]
    inits = []
    if folded:
        inputs = []
        inits.append(numpy_helper.from_array(x, "x"))
    names = ["x"]
    for name, value in params:
        if name is None:
            names.append("")
            continue
        names.append(name)
        inits.append(numpy_helper.from_array(value, name))
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    nodes = [node]
    out = "y"
    if concat:
        nodes.append(helper.make_node("Concat", ["y", "y"], ["z"], axis=0))
        out = "z"
    out_type = TensorProto.INT64 if op in ("ArgMax", "ArgMin") else TensorProto.FLOAT
    outputs = [helper.make_tensor_value_info(out, out_type, None)]
    graph = helper.make_graph(nodes, op.lower(), inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def compare(got, want):
    if got.size != want.size:
        return f"shape {got.shape}, expected {want.shape}"
    got = got.reshape(want.shape).astype(np.float64)
    want = want.astype(np.float64)
    if (np.isnan(got) != np.isnan(want)).any():
        return "NaN at different positions"
    ok = ~np.isnan(want) & (got != want)
    bad = np.abs(got[ok] - want[ok]) > TOLERANCE + TOLERANCE * np.abs(want[ok])
    if bad.any():
        i = int(np.argmax(bad))
        return f"got {got[ok][i]!r}, expected {want[ok][i]!r}"
    return None


# Kinds that opc evaluates at compile time when their inputs are constant.
FOLDABLE = {"ReduceSumSquare", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
            "ReduceLogSumExp", "Trilu", "GatherElements", "Hardmax", "CumSum",
            "ThresholdedRelu", "Shrink", "Mish", "Gelu", "Mod", "EyeLike", "ArgMax", "ArgMin"}


def i64(*v):
    return np.array(v, dtype=np.int64)


def cases():
    """(name, op, x, attrs, params, opset)"""
    x3 = rand(2, 3, 4)
    pos = rand(2, 3, 4, low=0.1, high=2.0)
    for op in ["ReduceSumSquare", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
               "ReduceLogSumExp"]:
        data = pos if op == "ReduceLogSum" else x3
        yield f"{op}_axes1", op, data, {"axes": [1]}, [], 13
        yield f"{op}_axes02_drop", op, data, {"axes": [0, 2], "keepdims": 0}, [], 13
        yield f"{op}_all", op, data, {}, [], 13
        yield f"{op}_neg_axis", op, data, {"axes": [-1], "keepdims": 0}, [], 13
        yield f"{op}_input_axes", op, data, {}, [("axes", i64(2, 0))], 18
        yield f"{op}_noop", op, data, {"noop_with_empty_axes": 1}, [("axes", i64())], 18
    big = rand(2, 3, low=60.0, high=90.0)
    yield "ReduceLogSumExp_large", "ReduceLogSumExp", big, {"axes": [1]}, [], 13

    x = rand(2, 4, 5)
    for upper in (0, 1):
        for k in (-1, 0, 2, 7):
            yield f"Trilu_upper{upper}_k{k}", "Trilu", x, {"upper": upper}, [("k", i64(k))], 14
        yield f"Trilu_upper{upper}_nok", "Trilu", x, {"upper": upper}, [], 14

    data = rand(3, 4, 5)
    idx = rng.integers(-4, 4, size=(3, 2, 5)).astype(np.int64)
    yield "GatherElements_axis1", "GatherElements", data, {"axis": 1}, [("idx", idx)], 13
    idx0 = rng.integers(-3, 3, size=(2, 4, 3)).astype(np.int64)
    yield "GatherElements_axis0", "GatherElements", data, {"axis": 0}, [("idx", idx0)], 13
    idx2 = rng.integers(-5, 5, size=(3, 4, 2)).astype(np.int32)
    yield "GatherElements_axis-1_i32", "GatherElements", data, {"axis": -1}, [("idx", idx2)], 13

    h = rand(2, 3, 4)
    h[0, 1, :] = 1.5  # ties: the first one wins
    for axis in (0, 1, -1):
        yield f"Hardmax_axis{axis}", "Hardmax", h, {"axis": axis}, [], 13
        yield f"Hardmax_axis{axis}_opset11", "Hardmax", h, {"axis": axis}, [], 11

    c = rand(3, 4, 2)
    for axis in (0, 1, -1):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                yield (f"CumSum_axis{axis}_ex{exclusive}_rev{reverse}", "CumSum", c,
                       {"exclusive": exclusive, "reverse": reverse},
                       [("axis", np.array(axis, dtype=np.int32))], 14)

    u = rand(3, 7, low=-4.0, high=4.0)
    yield "ThresholdedRelu", "ThresholdedRelu", u, {"alpha": 0.5}, [], 10
    yield "ThresholdedRelu_default", "ThresholdedRelu", u, {}, [], 10
    yield "Shrink", "Shrink", u, {"lambd": 0.6, "bias": 0.2}, [], 9
    yield "Shrink_default", "Shrink", u, {}, [], 9
    yield "Mish", "Mish", rand(3, 7, low=-30.0, high=30.0), {}, [], 18
    yield "Gelu", "Gelu", u, {}, [], 20
    yield "Gelu_tanh", "Gelu", u, {"approximate": "tanh"}, [], 20

    # ArgMax and ArgMin over NaNs: ONNX leaves them open; ONNX Runtime keeps
    # the first element while nothing compares above (below) it, so a NaN
    # wins only where it comes first, and never displaces a number
    nan = np.float32("nan")
    g = rand(4, 6)
    g[0] = [1, nan, 3, np.inf, -np.inf, 2]
    g[1, 0] = nan
    g[2, 2:4] = nan
    g[3, :] = 0.5  # ties: the first, or the last with select_last_index
    for op in ("ArgMax", "ArgMin"):
        for axis in (0, 1):
            for last in (0, 1):
                yield (f"{op}_nan_axis{axis}_last{last}", op, g,
                       {"axis": axis, "select_last_index": last, "keepdims": axis}, [], 13)

    mv = rand(2, 3, 4, 5)
    yield "MeanVarianceNormalization", "MeanVarianceNormalization", mv, {}, [], 13
    yield "MeanVarianceNormalization_axes1", "MeanVarianceNormalization", mv, {"axes": [1, 3]}, [], 13

    a = rand(3, 4, low=-9.0, high=9.0)
    yield "Mod_fmod", "Mod", a, {"fmod": 1}, [("b", np.array([2.5, -1.5, 3.0, -4.0], np.float32))], 13

    yield "EyeLike_k1", "EyeLike", rand(3, 4), {"k": 1}, [], 9
    yield "EyeLike_k-2", "EyeLike", rand(4, 4), {"k": -2}, [], 9

    ln = rand(3, 4, 5)
    for p in (1, 2):
        for axis in (0, -1):
            yield f"LpNormalization_p{p}_axis{axis}", "LpNormalization", ln, {"p": p, "axis": axis}, [], 13
    zero = ln.copy()
    zero[1, :, :] = 0
    yield "LpNormalization_zero_row", "LpNormalization", zero, {"axis": 1}, [], 13

    img = rand(2, 3, 5, 6)
    for p in (1, 2, 3):
        yield f"GlobalLpPool_p{p}", "GlobalLpPool", img, {"p": p}, [], 13
    yield "LpPool_2x2", "LpPool", img, {"kernel_shape": [2, 2], "strides": [2, 2], "p": 2}, [], 18
    yield "LpPool_pads", "LpPool", img, {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "p": 3}, [], 18


def check_batch(opc, work, label, opset, items):
    """Compiles the items ((label, model, x)) as one program and compares
    each output with ONNX Runtime's: (failures [(label, problem)], None), or
    (None, problem) when the program cannot be built or run."""
    m = merged([item[1] for item in items], opset)
    feeds = {}
    for k, (_, case_m, x) in enumerate(items):
        if case_m.graph.input:
            feeds["c%d_x" % k] = x
    wants = reference(m, feeds, optimise=False)
    got, problem = run_opc(opc, m, feeds, os.path.join(work, label))
    if problem:
        return None, problem
    failures = []
    for k, (case_label, case_m, _) in enumerate(items):
        name = "c%d_" % k + case_m.graph.output[0].name
        problem = compare(got[name], wants[name])
        if problem:
            failures.append((case_label, problem))
    if not failures:
        shutil.rmtree(os.path.join(work, label), ignore_errors=True)
    return failures, None


def main():
    opc, work = sys.argv[1:3]
    only = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "-k" else None
    items = []
    for name, op, x, attrs, params, opset in cases():
        if only and only not in name:
            continue
        variants = [("", {}), ("into Concat", {"concat": True})]
        if op in FOLDABLE:
            variants.append(("folded", {"folded": True}))
        for what, how in variants:
            label = name + (f" ({what})" if what else "")
            items.append((label, model(op, x, attrs, params, opset, **how), x))
    # Cases of one opset share a program; where it cannot be built or run,
    # each case alone says which one stops it.
    failed = []
    for k, (opset, run) in enumerate(batches(items, lambda item: item[1])):
        failures, problem = check_batch(opc, work, "batch%d" % k, opset, run)
        if failures is None:
            failures = []
            for j, item in enumerate(run):
                alone, problem = check_batch(opc, work, "batch%d_%d" % (k, j), opset, [item])
                failures += alone if alone is not None else [(item[0], problem)]
        for label, problem in failures:
            failed.append(label)
            print(f"FAIL {label}: {problem}")
    passed = len(items) - len(failed)
    print(f"more ops: {passed} passed, {len(failed)} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
