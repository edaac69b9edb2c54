#!/usr/bin/env python3
"""Slice at run-time starts (ir/ops.c slice_plan_at_run_time: each end the
start plus a constant, the output static, the kernel opc_slice_at reading
and clamping the starts on the device). Against ONNX Runtime exactly.

usage: test_run_time_slice.py OPC WORK_DIR

One program, compiled with and without --no-cuda-graph, the runtime's
checker on (OPC_CHECK=1), holds:
- x[:, s:s+2] with s a graph input (a start of 1, then -3: from the end);
- x[s+2:s:-1, :] (a negative step);
- x[s:s+1, 1:4] (starts a Concat of the run-time start and a constant);
- a Loop over x's rows as test_loop11 writes it (Slice(x, i, i + 1) at
  the iteration number i), its trip count a graph input (4, then 3): a
  run-time Loop, which needs the Slice.
Run-time errors, where ONNX Runtime clamps to a shorter slice: a start of
5 (x[7:5:-1] on 6 rows: ONNX Runtime's no rows; opc's error names the
node, the start and end and the lengths; x[5:7] on 6 columns fails too,
checked after it), and a Loop of 7 trips over x's 6 rows.
The GPU program's net.c builds against the real CUDA headers with -Werror.
Form b, ends that are not the starts plus a constant: x[:, s:e], its
double (Add), x[e:s:-1] match ONNX Runtime exactly, shapes included, for
(s, e) = (1, 5), (-3, 100) and (7, 9) (past the end: empty), with and
without a CUDA graph. Refused with a clear error: two axes of run-time
lengths in one Slice.

--max-dim: Range(0, n, 1) with n a graph input under --max-dim r=8 (and
Gather of its elements) matches ONNX Runtime for n = 5 and 3, with and
without a CUDA graph; n = 11 fails the run naming the tensor and the
bound. Without --max-dim opc's error suggests `--max-dim r=N`; `--max-dim
r`, `r=0` and a name that is no tensor are clear errors.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import const, out, real_cuda_compile, reference  # noqa: E402

ROWS, COLS = 6, 6
RANGE_BOUND = 8


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def loop_body():
    """test_loop11's body over x's rows: row i added to the sum."""
    nodes = [
        node("Identity", ["cond_in"], ["cond_out"]),
        node("Add", ["iter", "b_one"], ["next"]),
        node("Unsqueeze", ["iter", "b_axes"], ["row_start"]),
        node("Unsqueeze", ["next", "b_axes"], ["row_end"]),
        # '%s' in the name: net.c must print it, not read it as a format
        node("Slice", ["x", "row_start", "row_end"], ["row"], name="row_slice%s"),
        node("Add", ["sum_in", "row"], ["sum_out"]),
    ]
    inits = [const("b_one", 1, np.int64), const("b_axes", [0], np.int64)]
    return helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("sum_in", TensorProto.FLOAT, [1, COLS])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("sum_out", TensorProto.FLOAT, [1, COLS])], inits)


def slice_model():
    nodes = [
        node("Add", ["s", "two"], ["s_plus2"]),
        node("Slice", ["x", "s", "s_plus2", "one"], ["cols"], name="slice_cols"),
        node("Slice", ["x", "s_plus2", "s", "zero", "minus_one"], ["back"], name="slice_back"),
        node("Add", ["s", "one"], ["s_plus1"]),
        node("Concat", ["s", "one"], ["starts2"], axis=0),
        node("Concat", ["s_plus1", "four"], ["ends2"], axis=0),
        node("Slice", ["x", "starts2", "ends2"], ["block"], name="slice_block"),
        node("Loop", ["trips", "", "sum0"], ["sum"], body=loop_body(), name="loop"),
    ]
    inits = [const("two", [2], np.int64), const("one", [1], np.int64),
             const("zero", [0], np.int64), const("minus_one", [-1], np.int64),
             const("four", [4], np.int64), const("sum0", np.zeros((1, COLS)))]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, COLS]),
              helper.make_tensor_value_info("s", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("trips", TensorProto.INT64, [])]
    return onnx_case.model(nodes, inputs, [out(o) for o in ("cols", "back", "block", "sum")],
                           inits, opset=13, name="run_time_slice")


def feeds(phase, start=None, trips=None):
    x = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) * 0.5 - 3 + phase
    return {"x": x, "s": np.array([start if start is not None else (1, -3)[phase]], np.int64),
            "trips": np.array(trips if trips is not None else (4, 3)[phase], np.int64)}


def range_model():
    """Range from 0 by 1 to a graph input, bounded by --max-dim r=8, and
    the elements of x it picks."""
    nodes = [node("Range", ["zero_s", "n", "one_s"], ["r"], name="range"),
             node("Gather", ["x8", "r"], ["picked"], axis=0)]
    inits = [const("zero_s", 0, np.int64), const("one_s", 1, np.int64)]
    inputs = [helper.make_tensor_value_info("x8", TensorProto.FLOAT, [RANGE_BOUND]),
              helper.make_tensor_value_info("n", TensorProto.INT64, [])]
    return onnx_case.model(nodes, inputs, [out("r"), out("picked")], inits, opset=13,
                           name="range_to_max_dim")


def range_feeds(phase, n=None):
    return {"x8": np.arange(RANGE_BOUND, dtype=np.float32) * 1.5 - phase,
            "n": np.array(n if n is not None else (5, 3)[phase], np.int64)}


def max_dim_checks(opc, work):
    """--max-dim: a Range to a run-time limit within its bound matches ONNX
    Runtime (two lengths, with and without a CUDA graph), past it fails
    the run naming the tensor; without --max-dim, and with a malformed
    one, opc says what to give."""
    m, failures = range_model(), []
    flag = ("--max-dim", f"r={RANGE_BOUND}")
    for flags in (flag, flag + ("--no-cuda-graph",)):
        label = " ".join(flags)
        dir_ = os.path.join(work, "range" + str(len(flags)))
        exe, why = onnx_case.compile_cpu(opc, m, dir_, flags)
        if why:
            failures.append(f"{label}: opc refused the Range: {why}")
            continue
        ran, _ = onnx_case.run_phases(exe, m, range_feeds, dir_, 0, label + ": ")
        failures += ran
        got = onnx_case.run_program(exe, m, range_feeds(0, n=RANGE_BOUND + 3), dir_)
        text = (f"node 'range' (Range): its output 'r' has {RANGE_BOUND + 3} elements in this "
                f"run, more than the {RANGE_BOUND} that --max-dim r={RANGE_BOUND} allows")
        if not isinstance(got, str) or "exited with 2" not in got or text not in got:
            failures.append(f"{label}: a limit past the bound: expected {text!r}, got "
                            f"{got if isinstance(got, str) else 'outputs'}")
    cuda = real_cuda_compile(opc, m, os.path.join(work, "range-cuda"), flag)
    if cuda:
        failures.append(cuda)
    for args, text in (((), "give its most elements with --max-dim r=N"),
                       (("--max-dim", "r"), "--max-dim: expected NAME=N like positions=512, "
                        "got 'r'"),
                       (("--max-dim", "r=0"), "--max-dim: expected a number from 1 to"),
                       (flag + ("--max-dim", "nothere=4"), "--max-dim: 'nothere' is no tensor of")):
        exe, why = onnx_case.compile_cpu(opc, m, os.path.join(work, "range-refused"), args)
        if exe or not isinstance(why, tuple) or text not in why[1]:
            failures.append(f"opc {' '.join(args)}: expected an error with {text!r}, got "
                            f"{why or 'a program'}")
    return failures


def free_model():
    """Form b: ends that are not the starts plus a constant, the output
    bounded along the sliced axis."""
    nodes = [node("Slice", ["x", "s", "e", "one"], ["free"], name="free"),
             node("Add", ["free", "free"], ["doubled"]),
             node("Slice", ["x", "e", "s", "zero", "minus_one"], ["free_back"])]
    inits = [const("one", [1], np.int64), const("zero", [0], np.int64),
             const("minus_one", [-1], np.int64)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, COLS]),
              helper.make_tensor_value_info("s", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("e", TensorProto.INT64, [1])]
    return onnx_case.model(nodes, inputs, [out(o) for o in ("free", "doubled", "free_back")],
                           inits, opset=13, name="free_slice")


def free_feeds(phase, start=None, end=None):
    f = feeds(phase)
    f["s"] = np.array([start if start is not None else (1, -3)[phase]], np.int64)
    f["e"] = np.array([end if end is not None else (5, 100)[phase]], np.int64)
    del f["trips"]
    return f


def free_checks(opc, work):
    """Form b against ONNX Runtime exactly: two inputs, and a start past
    the end (ONNX Runtime's empty slice), with and without a CUDA graph."""
    m, failures = free_model(), []
    for flags in ((), ("--no-cuda-graph",)):
        label = "form b " + (" ".join(flags) or "graph")
        dir_ = os.path.join(work, "free" + str(len(flags)))
        exe, why = onnx_case.compile_cpu(opc, m, dir_, flags)
        if why:
            failures.append(f"{label}: opc refused it: {why}")
            continue
        ran, _ = onnx_case.run_phases(exe, m, free_feeds, dir_, 0, label + ": ")
        failures += ran
        f = free_feeds(0, start=7, end=9)
        want, got = reference(m, f), onnx_case.run_program(exe, m, f, dir_)
        if isinstance(got, str):
            failures.append(f"{label}: a start past the end: {got}")
            continue
        for o in ("free", "doubled", "free_back"):
            why = onnx_case.compare_exact(got[o], want[o])
            if why or want["free"].shape != (ROWS, 0):
                failures.append(f"{label}: a start past the end, {o}: {why or 'not empty'}")
    cuda = real_cuda_compile(opc, m, os.path.join(work, "free-cuda"))
    if cuda:
        failures.append(cuda)
    return failures


def refused_models():
    x = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, COLS]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("e", TensorProto.INT64, [2])]
    m = onnx_case.model([node("Slice", ["x", "s", "e"], ["y"], name="two")], x, [out("y")])
    return [("two axes of run-time lengths", m,
             "node 'two' (Slice): shape input 'e' is not a compile-time constant, and opc cannot "
             "tell that element 1 of ends 'e' is the start's plus a constant, while axis 0 "
             "already has a length only the run decides")]


def faults(exe, m, work):
    """The runs where clamping shortens a slice: opc's run-time error, and
    ONNX Runtime's shorter result (which shows the case clamps)."""
    failures = []
    cases = [("a start of 5 on 6 rows, back by -1", feeds(0, start=5), "back",
              "node 'slice_back' (Slice): along axis 0 its start 7 and end 5 (inputs 's_plus2' "
              "and 's') clamp to 0 elements, but this program was compiled for 2"),
             ("a Loop of 7 trips over 6 rows", feeds(0, trips=7), "sum",
              "node 'row_slice%s' (Slice): along axis 0 its start 6 and end 7")]
    for name, f, output, text in cases:
        if name.startswith("a start"):
            if reference(m, f)[output].shape != (0, COLS):
                failures.append(f"{name}: ONNX Runtime does not clamp it to no rows")
        got = onnx_case.run_program(exe, m, f, work)
        if not isinstance(got, str) or "exited with 2" not in got or text not in got:
            failures.append(f"{name}: expected a run-time error with {text!r}, got "
                            f"{got if isinstance(got, str) else 'outputs'}")
    return failures


def main():
    opc, work = sys.argv[1:3]
    os.environ["OPC_CHECK"] = "1"
    m = slice_model()
    failures = []
    for flags in ((), ("--no-cuda-graph",)):
        label = " ".join(flags) or "graph"
        exe, why = onnx_case.compile_cpu(opc, m, os.path.join(work, label), flags)
        if why:
            failures.append(f"{label}: opc refused the model: {why}")
            continue
        ran, runs = onnx_case.run_phases(exe, m, feeds, os.path.join(work, label), 0,
                                         label + ": ")
        failures += ran + [f"{label}: {f}" for f in faults(exe, m, os.path.join(work, label))]
    cuda = real_cuda_compile(opc, m, os.path.join(work, "cuda"))
    if cuda:
        failures.append(cuda)
    failures += max_dim_checks(opc, work) + free_checks(opc, work)
    return onnx_case.finish(opc, failures, refused_models(), work,
                            "run-time slices: 4 outputs match ONNX Runtime on two inputs, with "
                            "and without a CUDA graph; 2 clamped slices fail the run; 1 refusal; "
                            "a Range under --max-dim matches on two lengths, fails past its "
                            "bound; 4 --max-dim errors; form b matches on three inputs")


if __name__ == "__main__":
    sys.exit(main())
