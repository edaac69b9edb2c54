#!/usr/bin/env python3
"""Reductions over tensors whose size the data decides (ir/bounds.c's
T_BOUND_REDUCE): every Reduce* kind and ArgMax/ArgMin, along the run-time
axis (a static output: the kernel reads the run's length on the device and
reduces the run's elements alone) and across it (the output stays bounded),
keepdims 0 and 1. Against ONNX Runtime, shapes and integers exactly, floats
within 1e-5 of their largest magnitude.

usage: test_bounded_reduce.py OPC WORK_DIR

The bounded tensors:
- rows [N, 3]: rows of a table picked by NonZero of a mask, the table a
  MatMul's output (so that, with --precision fp16, the rows are float16
  and ReduceMax, ReduceMin and ReduceMean run in float16; opc's kernel
  takes them, cuDNN not reading a run-time length);
- the best K [1, K] of a series by TopK with K a graph input (never 0:
  ArgMax and ArgMin along its run, which ONNX Runtime refuses empty);
- boxes [M, 4] chosen by NonMaxSuppression, reduced to their largest
  coordinate as torchvision's batched_nms does (Faster R-CNN's ReduceMax),
  and offset by class: [M, 4] plus [M, 1], two bounded operands of one
  origin broadcast (ir/bounds.c's elementwise rule); those boxes and
  their scores into NonMaxSuppression again, as batched_nms does (its
  kernel reading the boxes' count of this run; no limit, INT64_MAX), and
  the result through an If on whether there were rows (a run-time
  condition; the then branch an empty constant, the else branch bounded),
  its head keep[:5] as torchvision's post_nms_top_n (a Slice of a run's
  head: a count of its own), and the rows' head rows[:6] likewise.
Three inputs: two of different counts and one whose mask is empty, where
the reductions along the run give the empty set's values (-inf for Max,
+inf for Min, 0 for Sum and Mean as ONNX Runtime gives, 1 for Prod,
-inf for LogSum and LogSumExp). None of the counts reaches its bound.
The runtime's checker is on (OPC_CHECK=1): fresh device memory holds NaN
bits, and the storage past each run is the table's last rows repeated
(the largest values), so a kernel that reduced over the bound would fail.
Again with --precision fp16 (within 1e-2: float16's rounding of the
table). Negative control: ONNX Runtime's outputs for another mask
threshold must differ from the program's.
Refused with a clear error: a reduction of such a tensor not in prefix
layout (rows of NonZero's [2, N] coordinates), read at the planned strides.
With a CUDA toolkit (OPC_CUDA, default /usr/local/cuda) the float16
program's net.c for the GPU compiles against its real headers with -Werror
(kernels-nvrtc compiles the kernels themselves with NVRTC).
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, compare_exact, const, out, real_cuda_compile, reference  # noqa: E402

TABLE, SERIES, SIDE, PER_CLASS, CLASSES = 24, 16, 5, 20, 2
BOXES = SIDE * SIDE
KINDS = ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1",
         "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
OPSET = 18




def reduce(kind, x, y, axes, keepdims):
    inputs = [x] + (["axes_" + "_".join(map(str, axes))] if axes is not None else [])
    return helper.make_node(kind, inputs, [y], keepdims=keepdims, name=y)


def rows_nodes(threshold):
    """rows [N, 3] (bounded along axis 0), each kind reduced along the run
    (axis 0), across it (axis 1) and over everything."""
    nodes = [
        helper.make_node("MatMul", ["table_in", "mix"], ["table"]),
        helper.make_node("Greater", ["mask_in", "thr"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Squeeze", ["nz", "axes_0"], ["picked"]),
        helper.make_node("Gather", ["table", "picked"], ["rows"], axis=0),
    ]
    outputs = []
    # (the program's main takes 64 inputs and outputs: keepdims both ways
    # along the run, one way across it, alternating by kind)
    for k, kind in enumerate(KINDS):
        for axes, tag, keep in (([0], "run", 0), ([0], "run", 1), ([1], "across", k % 2)):
            name = f"{kind}_{tag}_k{keep}"
            nodes.append(reduce(kind, "rows", name, axes, keep))
            outputs.append(name)
        if kind in ("ReduceMax", "ReduceSum", "ReduceMean", "ReduceProd"):
            nodes.append(reduce(kind, "rows", f"{kind}_all", None, 0))
            outputs.append(f"{kind}_all")
    for kind in ("ArgMax", "ArgMin"):
        for keep in (0, 1):
            name = f"{kind}_across_k{keep}"
            nodes.append(helper.make_node(kind, ["rows"], [name], axis=1, keepdims=keep))
            outputs.append(name)
    # the rows' head, rows[:6] (a count of its own, within 6), scaled and
    # summed along the run
    nodes += [helper.make_node("Slice", ["rows", "axes_0", "six"], ["rows_head"]),
              helper.make_node("Mul", ["rows_head", "half"], ["head_scaled"]),
              reduce("ReduceSum", "rows_head", "head_sum", [0], 0)]
    outputs += ["head_scaled", "head_sum"]
    # noop_with_empty_axes: nothing reduced, the output bounded as its input
    nodes.append(helper.make_node("ReduceSum", ["rows"], ["noop"], noop_with_empty_axes=1))
    outputs.append("noop")
    mix = np.array([[1.0, 0.5, -0.25], [0.0, 1.0, 0.5], [0.25, 0.0, 1.0]], np.float32)
    inits = [const("mix", mix), const("thr", threshold), const("axes_0", [0], np.int64),
             const("six", [6], np.int64), const("half", 0.5),
             const("axes_1", [1], np.int64)]
    inputs = [helper.make_tensor_value_info("table_in", TensorProto.FLOAT, [TABLE, 3]),
              helper.make_tensor_value_info("mask_in", TensorProto.FLOAT, [TABLE])]
    return nodes, inits, inputs, outputs


def topk_nodes():
    """The best K [1, K] (bounded along axis 1): ArgMax/ArgMin along the run
    and reductions along and across it."""
    nodes = [helper.make_node("TopK", ["series", "k"], ["best", "order"], axis=1)]
    outputs = []
    for kind in ("ArgMax", "ArgMin"):
        for keep in (0, 1):
            name = f"top_{kind}_k{keep}"
            nodes.append(helper.make_node(kind, ["best"], [name], axis=1, keepdims=keep,
                                          select_last_index=keep))
            outputs.append(name)
    for kind, axes, keep in (("ReduceSum", [1], 0), ("ReduceMin", [1], 1),
                             ("ReduceMean", [0], 0), ("ReduceMax", None, 1)):
        name = f"top_{kind}_{'all' if axes is None else axes[0]}_k{keep}"
        nodes.append(reduce(kind, "best", name, axes, keep))
        outputs.append(name)
    inputs = [helper.make_tensor_value_info("series", TensorProto.FLOAT, [1, SERIES]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [1])]
    return nodes, [], inputs, outputs


def nms_nodes():
    """torchvision's batched_nms offsets, as Faster R-CNN exports them: the
    largest coordinate of the chosen boxes (ReduceMax over everything,
    keepdims 0), each box's class times it plus 1 as its offset [M],
    unsqueezed to [M, 1] and added to the boxes [M, 4] (two bounded
    operands of one origin, broadcast along the other axis; the offsets
    first in a Sub)."""
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "score_thr"],
                         ["sel"]),
        helper.make_node("Gather", ["sel", "one"], ["cls"], axis=1),
        helper.make_node("Gather", ["sel", "two"], ["box"], axis=1),
        helper.make_node("Reshape", ["boxes", "rows4"], ["boxes2d"]),
        helper.make_node("Gather", ["boxes2d", "box"], ["chosen"], axis=0),
        helper.make_node("ReduceMax", ["chosen"], ["max_coordinate"], keepdims=0),
        reduce("ReduceMax", "chosen", "box_extent", [1], 0),
        helper.make_node("Cast", ["cls"], ["cls_f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["max_coordinate", "onef"], ["span"]),
        helper.make_node("Mul", ["cls_f", "span"], ["offsets"]),
        helper.make_node("Unsqueeze", ["offsets", "axes_1"], ["offsets2d"]),
        helper.make_node("Add", ["chosen", "offsets2d"], ["boxes_for_nms"]),
        helper.make_node("Sub", ["offsets2d", "chosen"], ["boxes_back"]),
        # the boxes offset by class and their scores into NonMaxSuppression
        # again (boxes of a run, T_BOUND_COUNTS), no limit: INT64_MAX
        helper.make_node("Mul", ["cls", "nboxes"], ["cls_base"]),
        helper.make_node("Add", ["cls_base", "box"], ["score_at"]),
        helper.make_node("Reshape", ["scores", "flat"], ["scores_flat"]),
        helper.make_node("Gather", ["scores_flat", "score_at"], ["chosen_scores"], axis=0),
        helper.make_node("Unsqueeze", ["boxes_for_nms", "axes_0"], ["nms_boxes"]),
        helper.make_node("Unsqueeze", ["chosen_scores", "axes_01"], ["nms_scores"]),
        helper.make_node("NonMaxSuppression", ["nms_boxes", "nms_scores", "no_limit", "iou2"],
                         ["kept_rows"]),
        helper.make_node("Gather", ["kept_rows", "two"], ["keep"], axis=1),
        # `if no rows: an empty keep, else: keep`, the condition run-time
        # data: an If of a static branch [0] and a bounded one
        helper.make_node("Size", ["rows"], ["rows_size"]),
        helper.make_node("Equal", ["rows_size", "zero_i"], ["no_rows"]),
        helper.make_node("If", ["no_rows"], ["keep_if"], then_branch=helper.make_graph(
            [helper.make_node("Constant", [], ["none"], value=numpy_helper.from_array(
                np.zeros(0, np.int64)))], "then", [], [out("none")]),
            else_branch=helper.make_graph(
                [helper.make_node("Gather", ["kept_rows", "two"], ["kept"], axis=1)], "else",
                [], [out("kept")])),
        # the head of a run, keep[:post_nms_top_n] (Slice, start 0): a count
        # of its own, the run's within the end
        helper.make_node("Slice", ["keep_if", "axes_0", "five"], ["keep_top"]),
    ]
    inits = [const("max", [PER_CLASS], np.int64), const("iou", [0.3]),
             const("score_thr", [0.6]), const("one", 1, np.int64), const("two", 2, np.int64),
             const("rows4", [BOXES, 4], np.int64), const("onef", 1.0),
             const("nboxes", BOXES, np.int64), const("flat", [-1], np.int64),
             const("axes_01", [0, 1], np.int64), const("no_limit", [2**63 - 1], np.int64),
             const("iou2", [0.1]), const("zero_i", 0, np.int64),
             const("five", [5], np.int64)]
    inputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, BOXES, 4]),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, CLASSES, BOXES])]
    return nodes, inits, inputs, ["max_coordinate", "box_extent", "boxes_for_nms", "boxes_back",
                                  "keep", "keep_if", "keep_top"]


def reduce_model(threshold=0.5):
    nodes, inits, inputs, outputs = [], [], [], []
    for part in (rows_nodes(threshold), topk_nodes(), nms_nodes()):
        nodes += part[0]
        inits += part[1]
        inputs += part[2]
        outputs += part[3]
    return onnx_case.model(nodes, inputs, [out(o) for o in outputs], inits, opset=OPSET,
                           name="bounded_reduce")


def feeds(phase):
    """Phase 0 and 1 pick different counts of rows, boxes and K; phase 2
    picks no rows at all."""
    i = np.arange(TABLE, dtype=np.float64)
    # positive values (LogSum), the largest last: the storage past a run
    # gathers them (the indices there are the checker's NaN bits, clamped)
    table = np.stack([1 + i * 0.25, 2 + np.cos(i), 1.5 + np.sin(i * 0.7)], -1)
    table[-1] = [40.0, 50.0, 60.0]
    mask = 0.5 + 0.5 * np.sin(i * (0.9 + 0.4 * phase) + phase)
    mask[-1] = 0.0  # the last row never picked
    if phase == 2:
        mask[:] = 0.0
    series = np.round(np.sin(np.arange(SERIES) * 0.7 + phase) * 8) / 8
    g = np.arange(SIDE, dtype=np.float64)
    cy, cx = np.meshgrid(g, g, indexing="ij")
    h, w = 2.0 + np.sin(cx * 1.3 + cy * 0.7 + phase), 2.0 + np.cos(cx * 0.6 - cy + phase)
    boxes = np.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], -1).reshape(1, BOXES, 4)
    scores = np.stack([0.5 + 0.5 * np.sin(0.9 * cx * (c + 1) - 0.5 * cy + phase + c)
                       for c in range(CLASSES)]).reshape(1, CLASSES, BOXES)
    return {"table_in": table.astype(np.float32), "mask_in": mask.astype(np.float32),
            "series": series[None].astype(np.float32), "k": np.array([3 + 4 * (phase % 2)], np.int64),
            "boxes": boxes.astype(np.float32), "scores": scores.astype(np.float32)}


def refused_models():
    """Rows of NonZero's [2, N] coordinates: the run-time dim is the second,
    its elements not the storage's first."""
    x = [helper.make_tensor_value_info("field", TensorProto.FLOAT, [4, 5])]
    nodes = [helper.make_node("NonZero", ["field"], ["at"], name="nz"),
             helper.make_node("ReduceMax", ["at", "one"], ["y"], keepdims=0, name="max")]
    m = onnx_case.model(nodes, x, [out("y")], [const("one", [1], np.int64)], opset=OPSET)
    return [("a reduction of a run not in prefix layout", m,
             "node 'max' (ReduceMax): input 'at' has a size known only at run time")]


def compare(got, want, rel):
    """Floats within rel of the largest finite magnitude, infinities and
    their signs exactly; integers exactly."""
    if want.dtype.kind != "f":
        return compare_exact(got, want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    inf = np.isinf(want)
    if (got[inf] != want[inf]).any():
        return f"infinities differ: got {got[inf]}, expected {want[inf]}"
    if inf.all() or want.size == 0:
        return None
    finite_got, finite_want = np.where(inf, 0, got), np.where(inf, 0, want)
    if not np.abs(finite_want).max():
        return compare_exact(finite_got, finite_want)
    return compare_close(finite_got, finite_want, rel)


def check_program(opc, m, work, flags, rel):
    """Failures of one compilation of m on the three inputs, and the counts."""
    exe, why = onnx_case.compile_cpu(opc, m, work, flags)
    if why:
        return [f"{' '.join(flags) or 'float32'}: opc refused the model: {why}"], [], None
    net_c = open(os.path.join(work, "net.c")).read() if os.path.exists(
        os.path.join(work, "net.c")) else ""
    failures, counts = [], []
    for phase in (0, 1, 2):
        f = feeds(phase)
        want = reference(m, f)
        got = onnx_case.run_program(exe, m, f, work)
        if isinstance(got, str):
            return [got], [], net_c
        for o in m.graph.output:
            why = compare(got[o.name], want[o.name], rel)
            if why:
                failures.append(f"{' '.join(flags) or 'float32'}, phase {phase}, {o.name}: {why}")
        # the run-time dims: rows, K, boxes
        counts.append((len(want["noop"]), len(want["top_ReduceMean_0_k0"]),
                       len(want["box_extent"]), len(want["keep"])))
        other = reference(reduce_model(threshold=0.3), f)
        if phase < 2 and all(compare(got[n], other[n], rel) is None
                             for n in ("ReduceSum_run_k0", "ReduceMax_all", "keep")):
            failures.append(f"phase {phase}: the reference with another threshold matches too")
    return failures, counts, net_c


def main():
    opc, work = sys.argv[1:3]
    # The runtime's checker: races, and fresh device memory filled with NaN
    # bits, so that a kernel reading past a run's elements reads garbage.
    os.environ["OPC_CHECK"] = "1"
    m = reduce_model()
    failures, counts, _ = check_program(opc, m, os.path.join(work, "program"), (), 1e-5)
    # float16: ReduceMax, ReduceMin and ReduceMean of the rows run in it
    half, _, net_c = check_program(opc, m, os.path.join(work, "fp16"), ("--precision", "fp16"),
                                   1e-2)
    failures += half
    for kernel in ("opc_reduce_max_f16", "opc_reduce_min_f16", "opc_reduce_sum_f16"):
        if net_c is not None and kernel not in net_c:
            failures.append(f"fp16: the program calls no {kernel}: the case tests float32 only")
    why = real_cuda_compile(opc, m, os.path.join(work, "cuda"), ("--precision", "fp16"))
    if why:
        failures.append(why)
    if counts:
        if len(set(counts[:2])) != 2 or counts[2][0] != 0:
            failures.append(f"the counts {counts}: two inputs of different counts and one empty "
                            "were meant")
        bounds = (TABLE, SERIES, PER_CLASS * CLASSES, PER_CLASS * CLASSES)
        if any(c == b for cs in counts for c, b in zip(cs, bounds)):
            failures.append(f"a count {counts} reaches its bound {bounds}: no shorter run")
    return onnx_case.finish(opc, failures, refused_models(), work,
                            f"bounded reduce: {len(m.graph.output)} outputs match ONNX Runtime on "
                            f"three inputs (counts {counts}), in float32 and float16; another "
                            f"threshold differs; {len(refused_models())} refused")


if __name__ == "__main__":
    sys.exit(main())
