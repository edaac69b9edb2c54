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
Refused with a clear error: an end that is not the start plus a constant.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import const, out, real_cuda_compile, reference  # noqa: E402

ROWS, COLS = 6, 6


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def loop_body():
    """test_loop11's body over x's rows: row i added to the sum."""
    nodes = [
        node("Identity", ["cond_in"], ["cond_out"]),
        node("Add", ["iter", "b_one"], ["next"]),
        node("Unsqueeze", ["iter", "b_axes"], ["row_start"]),
        node("Unsqueeze", ["next", "b_axes"], ["row_end"]),
        node("Slice", ["x", "row_start", "row_end"], ["row"], name="row_slice"),
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


def refused_models():
    x = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("e", TensorProto.INT64, [1])]
    m = onnx_case.model([node("Slice", ["x", "s", "e"], ["y"], name="free")], x, [out("y")])
    return [("an end that is not the start plus a constant", m,
             "node 'free' (Slice): shape input 'e' is not a compile-time constant, and opc "
             "cannot tell that element 0 of ends 'e' is the start's plus a constant")]


def faults(exe, m, work):
    """The runs where clamping shortens a slice: opc's run-time error, and
    ONNX Runtime's shorter result (which shows the case clamps)."""
    failures = []
    cases = [("a start of 5 on 6 rows, back by -1", feeds(0, start=5), "back",
              "node 'slice_back' (Slice): along axis 0 its start 7 and end 5 (inputs 's_plus2' "
              "and 's') clamp to 0 elements, but this program was compiled for 2"),
             ("a Loop of 7 trips over 6 rows", feeds(0, trips=7), "sum",
              "node 'row_slice' (Slice): along axis 0 its start 6 and end 7")]
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
    return onnx_case.finish(opc, failures, refused_models(), work,
                            "run-time slices: 4 outputs match ONNX Runtime on two inputs, with "
                            "and without a CUDA graph; 2 clamped slices fail the run; 1 refusal")


if __name__ == "__main__":
    sys.exit(main())
