#!/usr/bin/env python3
"""A Loop whose trip count or condition is run-time data: one OP_LOOP node
owning its body, run as a CUDA-graph WHILE node, or, with --no-cuda-graph,
by the host reading the condition after each iteration (backend/loop.c).
Against ONNX Runtime, integers exactly, floats within 1e-5 of their
largest magnitude.

usage: test_loop.py OPC WORK_DIR

One program holds four loops:
- torch.jit.script's `for _ in range(n): y = y * c + d`: the trip count a
  graph input, the condition true and passed through, c and d read from
  the outer scope; run with n = 0, 1, 3 and 10;
- a while loop: a trip-count bound of 20 and a condition the body computes
  (go on while the sum of x is under `limit`, a graph input the body reads
  from the outer scope), so that the data decides when it stops;
- two carried values of different dtypes: a float32 sum of an outer-scope
  input and an int64 sum of the iteration numbers, the float one also a
  scan output, whose rows are the iterations run (bounded by its declared
  12 rows; a run of 13 iterations is an error);
- two carried values that swap places each iteration (the copies back to
  the body's inputs must not overwrite one before reading it).
The runtime's checker is on (OPC_CHECK=1: races, and fresh device memory
NaN bits). Every program's net.c is compiled with -Werror (onnx_case), and
its GPU build against the real CUDA 13 headers (OPC_CUDA, default
/usr/local/cuda) where they are installed.
Refused with a clear error: a body with a Conv (a cuDNN call, which CUDA
does not allow in a conditional node's body) and a body whose carried value
changes shape.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, compare_exact, const, out, reference  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
SCAN_ROWS = 12


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def scripted_loop():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["y_in", "c"], ["y_mul"]),
         helper.make_node("Add", ["y_mul", "d"], ["y_out"])],
        "scripted_body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("y_in", F, [2, 3])],
        [vi("cond_out", B, []), vi("y_out", F, [2, 3])])
    return [helper.make_node("Loop", ["n", "true", "y"], ["y_final"], body=body, name="scripted")]


def while_loop():
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_in", "growth"], ["x_mul"]),
         helper.make_node("Add", ["x_mul", "step"], ["x_out"]),
         helper.make_node("ReduceSum", ["x_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["go"])],
        "while_body",
        [vi("k", I64, []), vi("c_in", B, []), vi("x_in", F, [4])],
        [vi("go", B, []), vi("x_out", F, [4])])
    return [helper.make_node("Loop", ["bound", "true", "x"], ["x_final"], body=body, name="while")]


def mixed_loop():
    body = helper.make_graph(
        [helper.make_node("Identity", ["m_cond"], ["m_go"]),
         helper.make_node("Add", ["acc_in", "z"], ["acc_out"]),
         helper.make_node("Add", ["count_in", "j"], ["count_out"])],
        "mixed_body",
        [vi("j", I64, []), vi("m_cond", B, []), vi("acc_in", F, [3]), vi("count_in", I64, [])],
        [vi("m_go", B, []), vi("acc_out", F, [3]), vi("count_out", I64, []),
         vi("acc_out", F, [3])])
    return [helper.make_node("Loop", ["m", "", "acc", "count"],
                             ["acc_final", "count_final", "acc_rows"], body=body, name="mixed")]


def swap_loop():
    """Carried values that trade places each iteration: the copies back must
    not overwrite one before the other is read."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["s_cond"], ["s_go"]),
         helper.make_node("Identity", ["a_in"], ["a_out"]),
         helper.make_node("Identity", ["b_in"], ["b_out"])],
        "swap_body",
        [vi("s_i", I64, []), vi("s_cond", B, []), vi("a_in", F, [3]), vi("b_in", F, [3])],
        [vi("s_go", B, []), vi("b_out", F, [3]), vi("a_out", F, [3])])
    return [helper.make_node("Loop", ["n", "", "acc", "z"], ["swap_a", "swap_b"], body=body,
                             name="swap")]


def loop_model():
    inits = [const("true", True, np.bool_), const("c", [[0.5], [1.5]]), const("d", [0.25, -1, 2]),
             const("growth", 1.25), const("step", 0.5), const("bound", 20, np.int64),
             const("acc", [1, 2, 3]), const("count", 100, np.int64)]
    inputs = [vi("n", I64, []), vi("y", F, [2, 3]), vi("x", F, [4]), vi("limit", F, []),
              vi("m", I64, []), vi("z", F, [3])]
    outputs = [out(o) for o in ("y_final", "x_final", "acc_final", "count_final", "swap_a",
                                "swap_b")]
    # the scan output's rows declared: the bound of the iterations it keeps
    outputs.insert(4, vi("acc_rows", F, [SCAN_ROWS, 3]))
    return onnx_case.model(scripted_loop() + while_loop() + mixed_loop() + swap_loop(), inputs,
                           outputs, inits, opset=13, name="loops")


def feeds(trips):
    return {"n": np.array(trips, np.int64),
            "y": np.array([[1, -2, 3], [0.5, 4, -1]], np.float32),
            "x": np.array([0.1, -0.2, 0.3, 0.4], np.float32),
            "limit": np.array(5.0 * trips + 2, np.float32),
            "m": np.array(trips, np.int64),
            "z": np.array([0.5, -1, 2], np.float32)}


def refused_models():
    w = np.ones((1, 1, 1, 1), np.float32)
    conv_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Conv", ["v_in", "w"], ["v_out"], name="body_conv")],
        "conv_body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [1, 1, 2, 2])],
        [vi("cond_out", B, []), vi("v_out", F, [1, 1, 2, 2])])
    conv = onnx_case.model(
        [helper.make_node("Loop", ["n", "true", "v"], ["v_final"], body=conv_body, name="conv_loop")],
        [vi("n", I64, []), vi("v", F, [1, 1, 2, 2])], [out("v_final")],
        [const("true", True, np.bool_), const("w", w)])
    grow_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Concat", ["g_in", "g_in"], ["g_out"], axis=0)],
        "grow_body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("g_in", F, [2])],
        [vi("cond_out", B, []), vi("g_out", F, [4])])
    grow = onnx_case.model(
        [helper.make_node("Loop", ["n", "true", "g"], ["g_final"], body=grow_body, name="grow_loop")],
        [vi("n", I64, []), vi("g", F, [2])], [out("g_final")], [const("true", True, np.bool_)])
    return [
        ("a Conv in the body", conv, "node 'conv_loop' (Loop): its body's node 'body_conv' (Conv)"),
        ("a carried value that grows", grow, "keeps its dtype and static shape"),
    ]


CUDA = os.environ.get("OPC_CUDA", "/usr/local/cuda")


def real_cuda_compile(opc, m, work, flags):
    """The GPU program's net.c against the real CUDA 13 headers with -Werror:
    [] (or no toolkit installed), else why not."""
    if not os.path.exists(os.path.join(CUDA, "include", "cuda_runtime.h")):
        print(f"note: no CUDA toolkit at {CUDA}: the real-header build is not checked")
        return []
    os.makedirs(work, exist_ok=True)
    path, net_c = os.path.join(work, "model.onnx"), os.path.join(work, "gpu_net.c")
    onnx.save(m, path)
    p = subprocess.run([opc, path, "-o", net_c, *flags], capture_output=True, text=True)
    if p.returncode != 0:
        return ["opc refused the GPU program: " + (p.stdout + p.stderr)[-600:]]
    cc = os.environ.get("CC", "cc").split()[0]
    p = subprocess.run([cc, "-c", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(CUDA, "include"),
                        net_c, "-o", os.path.join(work, "gpu_net.o")], capture_output=True, text=True)
    return [] if p.returncode == 0 else ["the real CUDA build fails: " + p.stderr[-600:]]


def check_program(opc, m, work, flags):
    exe, why = onnx_case.compile_cpu(opc, m, work, flags)
    label = " ".join(flags) or "CUDA graph"
    if why:
        return [f"{label}: opc refused the model: {why}"]
    failures = [f"{label}: {why}" for why in real_cuda_compile(opc, m, work, flags)]
    for trips in (0, 1, 3, 10):
        f = feeds(trips)
        want = reference(m, f)
        got = onnx_case.run_program(exe, m, f, work)
        if isinstance(got, str):
            return failures + [f"{label}, n = {trips}: {got}"]
        for o in m.graph.output:
            w = want[o.name]
            why = (compare_close(got[o.name], w, 1e-5) if w.dtype.kind == "f" and w.size
                   else compare_exact(got[o.name], w))
            if why:
                failures.append(f"{label}, n = {trips}, {o.name}: {why}")
    # more iterations than the scan output declares rows: an error, not rows lost
    got = onnx_case.run_program(exe, m, feeds(SCAN_ROWS + 1), work)
    want = f"ran {SCAN_ROWS + 1} iterations, more than the {SCAN_ROWS} rows its scan output"
    if not isinstance(got, str) or want not in got:
        failures.append(f"{label}, n = {SCAN_ROWS + 1}: expected the error '{want}', got "
                        f"{got if isinstance(got, str) else 'outputs'}")
    return failures


def main():
    opc, work = sys.argv[1:3]
    os.environ["OPC_CHECK"] = "1"
    m = loop_model()
    failures = check_program(opc, m, os.path.join(work, "graph"), ())
    failures += check_program(opc, m, os.path.join(work, "no-graph"), ("--no-cuda-graph",))
    return onnx_case.finish(opc, failures, refused_models(), work,
                            "loop: four run-time Loops match ONNX Runtime for trip counts "
                            "0, 1, 3 and 10, with the CUDA graph and without; "
                            f"{len(refused_models())} bodies refused")


if __name__ == "__main__":
    sys.exit(main())
