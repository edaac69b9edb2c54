#!/usr/bin/env python3
"""Concat along the run-time axis (ir/bounds.c): tensors whose size the
data decides, of different origins, and static ones, joined one run after
another; the output is a bound of its own, whose size opc_concat_runs sums
on the device. Against ONNX Runtime, shapes and integers exactly, floats
within 1e-6 of their largest magnitude.

usage: test_bounded_concat.py OPC WORK_DIR

One program, torchvision's per-class candidates before its batched NMS:
- three sources of rows: TopK with a run-time K (a class's best boxes),
  NonZero of a thresholded score field (the boxes over it) and a second
  TopK whose K is 0 in one of the two runs (an empty run);
- two static tensors: a constant (held in the weights, a launch of its
  own) and one computed from an input (in the arena);
- joined along axis 0 three times: the boxes [N, 4] (float32), their
  scores [N] and their box indices [N] (int64);
- read downstream: scaled (Mul by a [4] constant), two columns taken by
  Gather, the best by TopK over the joined scores, and NonMaxSuppression
  over the joined boxes and scores (unsqueezed to [1, N, 4], [1, 1, N]),
  torchvision's batched NMS (the boxes offset by their indices' join,
  [N, 1] broadcast to [N, 4]; max_output_boxes_per_class 2^63 - 1, as
  torchvision exports it), and over one class's gathered rows, whose
  storage past the run holds real rows (a Gather clamps the indices
  there): NMS must scan the run alone; torchvision's If around it (its
  condition an int64 ReduceProd of the boxes' Shape, an empty then branch) and another If taking its static then branch in one
  run; the first 17 kept (a Slice of the run's first elements: 17 of 19,
  16 of 16);
- an elementwise node over two joins (scores and indices), which share an
  origin: their inputs are of the same origins, input by input.
The runtime's checker is on (OPC_CHECK=1): fresh device memory holds NaN
bits, so rows taken past a run would show. Two inputs give different
counts, through the same program, none at its bound; and again with
--precision fp16. Negative control: ONNX Runtime's outputs on the other
input differ from the program's.
Refused with a clear error: NonMaxSuppression of boxes of run-time count
with static scores, a Concat along the run-time axis of an input not in
prefix layout (NonZero's [2, N] along N), and one joining an input bounded
along another axis; an Add of two tensors of different origins stays
refused (test_bounded_flow.py).
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, const, out, reference  # noqa: E402

A, B, C, FIXED, COMPUTED = 12, 10, 6, 2, 3
BOUND = A + FIXED + B + COMPUTED + C




def branch(name, rows, kept=None):
    """An If branch: the box column of NonMaxSuppression's rows `kept`
    (of run-time count), or the static `rows`."""
    out = name + "_out"
    if kept:
        nodes = [helper.make_node("Gather", [kept, name + "_two"], [out], axis=1)]
        inits = [const(name + "_two", 2, np.int64)]
    else:
        nodes = [helper.make_node("Constant", [], [out],
                                  value=numpy_helper.from_array(np.array(rows, np.int64)))]
        inits = []
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(
        out, TensorProto.INT64, None)], inits)


def concat_model():
    nodes = [
        # a class's best K boxes (TopK with K an input)
        helper.make_node("TopK", ["scores_a", "k_a"], ["top_a", "idx_a"], axis=0),
        helper.make_node("Gather", ["boxes_a", "idx_a"], ["rows_a"], axis=0),
        # the boxes over a threshold (NonZero)
        helper.make_node("Greater", ["scores_b", "thr"], ["mask_b"]),
        helper.make_node("NonZero", ["mask_b"], ["nz_b"]),
        helper.make_node("Squeeze", ["nz_b", "zero"], ["idx_b"]),
        helper.make_node("Gather", ["boxes_b", "idx_b"], ["rows_b"], axis=0),
        helper.make_node("Gather", ["scores_b", "idx_b"], ["top_b"], axis=0),
        # another class, whose K may be 0
        helper.make_node("TopK", ["scores_c", "k_c"], ["top_c", "idx_c"], axis=0),
        helper.make_node("Gather", ["boxes_c", "idx_c"], ["rows_c"], axis=0),
        # a static tensor in the arena, computed from an input
        helper.make_node("Mul", ["extra", "half"], ["rows_s"]),
        helper.make_node("ReduceMax", ["rows_s"], ["score_s"], axes=[1], keepdims=0),
        # the joins: constant rows in the weights, static rows in the arena
        helper.make_node("Concat", ["rows_a", "fixed", "rows_b", "rows_s", "rows_c"], ["boxes"],
                         axis=0),
        helper.make_node("Concat", ["top_a", "fixed_scores", "top_b", "score_s", "top_c"],
                         ["scores"], axis=0),
        helper.make_node("Concat", ["idx_a", "fixed_idx", "idx_b", "idx_s", "idx_c"],
                         ["indices"], axis=0),
        # readers
        helper.make_node("Mul", ["boxes", "scale"], ["scaled"]),
        helper.make_node("Cast", ["indices"], ["indices_f"], to=TensorProto.FLOAT),
        helper.make_node("Gather", ["boxes", "cols"], ["corners"], axis=1),
        helper.make_node("TopK", ["scores", "k_best"], ["best", "best_at"], axis=0),
        # torchvision's batched NMS over the joined candidates: the boxes
        # offset by their indices' join ([N, 1] broadcast to [N, 4])
        helper.make_node("Unsqueeze", ["indices_f", "one"], ["offsets"]),
        helper.make_node("Add", ["boxes", "offsets"], ["shifted"]),
        helper.make_node("Unsqueeze", ["shifted", "zero"], ["nms_boxes"]),
        helper.make_node("Unsqueeze", ["scores", "zero_one"], ["nms_scores"]),
        helper.make_node("NonMaxSuppression", ["nms_boxes", "nms_scores", "max", "iou"],
                         ["kept"]),
        # and over one class's gathered rows, whose storage past the run
        # holds real rows (the Gather clamps the garbage indices there)
        helper.make_node("Unsqueeze", ["rows_b", "zero"], ["nms_rows_b"]),
        helper.make_node("Unsqueeze", ["top_b", "zero_one"], ["nms_top_b"]),
        helper.make_node("NonMaxSuppression", ["nms_rows_b", "nms_top_b", "max", "iou"],
                         ["kept_b"]),
        # torchvision's `if boxes.numel() == 0` around its batched NMS:
        # an If whose then branch is empty, the else branch the kept boxes
        helper.make_node("Shape", ["boxes"], ["boxes_shape"]),
        helper.make_node("ReduceProd", ["boxes_shape"], ["boxes_numel"], keepdims=0),
        helper.make_node("Equal", ["boxes_numel", "zero_scalar"], ["no_boxes"]),
        helper.make_node("If", ["no_boxes"], ["keep"], then_branch=branch("none", []),
                         else_branch=branch("box_of", [7, 8, 9], "kept")),
        # keep[:detections_per_img]: the first 17, more than one run has
        helper.make_node("Slice", ["keep", "zero", "seventeen", "zero"], ["top_kept"]),
        # and one whose then branch (three static rows) is taken in phase 1
        helper.make_node("Less", ["k_best", "six"], ["fewer"]),
        helper.make_node("Squeeze", ["fewer", "zero"], ["fewer_scalar"]),
        helper.make_node("If", ["fewer_scalar"], ["picked"],
                         then_branch=branch("three", [7, 8, 9]),
                         else_branch=branch("box_of_b", [7, 8, 9], "kept_b")),
        # two joins of runs of one origin, input by input: one origin
        helper.make_node("Mul", ["indices_f", "scores"], ["weighted"]),
    ]
    inits = [const("thr", 0.6), const("zero", [0], np.int64),
             const("one", [1], np.int64), const("zero_scalar", 0, np.int64),
             const("six", [6], np.int64), const("seventeen", [17], np.int64),
             const("zero_one", [0, 1], np.int64), const("half", 0.5),
             const("fixed", [[0, 0, 2, 2], [1, 1, 3, 4]]), const("fixed_scores", [0.55, 0.35]),
             const("fixed_idx", [100, 101], np.int64), const("idx_s", [200, 201, 202], np.int64),
             const("scale", [320, 240, 320, 240]), const("cols", [0, 2], np.int64),
             const("max", [2**63 - 1], np.int64), const("iou", [0.4])]
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("scores_a", f, [A]),
              helper.make_tensor_value_info("boxes_a", f, [A, 4]),
              helper.make_tensor_value_info("k_a", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("scores_b", f, [B]),
              helper.make_tensor_value_info("boxes_b", f, [B, 4]),
              helper.make_tensor_value_info("scores_c", f, [C]),
              helper.make_tensor_value_info("boxes_c", f, [C, 4]),
              helper.make_tensor_value_info("k_c", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("extra", f, [COMPUTED, 4]),
              helper.make_tensor_value_info("k_best", TensorProto.INT64, [1])]
    outputs = ["boxes", "scores", "indices", "scaled", "corners", "best", "best_at", "weighted",
               "shifted", "kept", "kept_b", "keep", "picked",
               "top_kept"]
    return onnx_case.model(nodes, inputs, [out(o) for o in outputs], inits, opset=13,
                           name="bounded_concat")


def boxes(n, phase, shift):
    """n image-like boxes [y1, x1, y2, x2] on a diagonal, some overlapping."""
    t = np.arange(n, dtype=np.float64)
    y, x = 1.5 * t + np.sin(t + phase), 1.2 * t + shift + np.cos(t * 0.7 + phase)
    h, w = 2.5 + np.sin(t * 1.3 + phase), 2.0 + np.cos(t * 0.9 - phase)
    return np.stack([y, x, y + h, x + w], -1).astype(np.float32)


def scores(n, phase, seed):
    """Distinct scores in (0, 1): no ties in TopK or NMS."""
    t = np.arange(n, dtype=np.float64)
    s = 0.5 + 0.45 * np.sin(t * (0.9 + 0.1 * seed) + phase + seed)
    return (s + t * 1e-4).astype(np.float32)


def feeds(phase):
    """phase 0 and 1 give different counts; K of the third class is 0 in
    phase 1: an empty run."""
    return {"scores_a": scores(A, phase, 0), "boxes_a": boxes(A, phase, 0),
            "k_a": np.array([5 + 3 * phase], np.int64),
            "scores_b": scores(B, 2 * phase, 1), "boxes_b": boxes(B, phase, 3),
            "scores_c": scores(C, phase, 2), "boxes_c": boxes(C, phase, 5),
            "k_c": np.array([4 - 4 * phase], np.int64),
            "extra": boxes(COMPUTED, phase, 7) * 2,
            "k_best": np.array([6 - phase], np.int64)}


def refused_models():
    field = [helper.make_tensor_value_info("field", TensorProto.FLOAT, [4, 5])]
    series = [helper.make_tensor_value_info("series", TensorProto.FLOAT, [2, 2]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [1])]
    strided = onnx_case.model(
        [helper.make_node("NonZero", ["field"], ["at"]),
         helper.make_node("Concat", ["at", "at"], ["y"], axis=1, name="join")],
        field, [out("y")])
    # TopK along axis 0 of [2, 6] and along axis 1: joined along axis 0
    across = onnx_case.model(
        [helper.make_node("TopK", ["series", "k"], ["u", "ui"], axis=0),
         helper.make_node("TopK", ["series", "k"], ["v", "vi"], axis=1),
         helper.make_node("Concat", ["u", "v"], ["y"], axis=0, name="across")],
        series, [out("y")])
    # NonMaxSuppression of boxes of run-time count, scores of a static one
    cands = [helper.make_tensor_value_info("cand", TensorProto.FLOAT, [6, 4]),
             helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
             helper.make_tensor_value_info("sc", TensorProto.FLOAT, [1, 1, 6])]
    mixed = onnx_case.model(
        [helper.make_node("TopK", ["cand", "k"], ["v", "i"], axis=0),
         helper.make_node("Unsqueeze", ["v", "zero"], ["bx"]),
         helper.make_node("NonMaxSuppression", ["bx", "sc"], ["y"], name="nms")],
        cands, [out("y")], [const("zero", [0], np.int64)])
    # two joins of runs of different origins: sizes that may differ
    other = onnx_case.model(
        [helper.make_node("TopK", ["cand", "k"], ["v", "i"], axis=0),
         helper.make_node("TopK", ["cand", "k2"], ["w", "j"], axis=0),
         helper.make_node("Concat", ["v", "v"], ["vv"], axis=0),
         helper.make_node("Concat", ["v", "w"], ["vw"], axis=0),
         helper.make_node("Add", ["vv", "vw"], ["y"], name="add")],
        cands + [helper.make_tensor_value_info("k2", TensorProto.INT64, [1])], [out("y")])
    return [
        ("two joins of different origins", other, "their sizes one origin"),
        ("boxes and scores of different counts", mixed,
         "boxes and scores of one run-time count only"),
        ("a run-time axis after a dim of 2", strided,
         "every dim before the run-time one is 1"),
        ("an input bounded along another axis", across,
         "Concat joins it only along its run-time axis"),
    ]


def check_program(opc, m, work, flags, rel):
    """Failures of one compilation of m on both inputs, and the sizes."""
    exe, why = onnx_case.compile_cpu(opc, m, work, flags)
    if why:
        return [f"{' '.join(flags) or 'float32'}: opc refused the model: {why}"], []
    failures, runs = onnx_case.run_phases(exe, m, feeds, work, rel,
                                          f"{' '.join(flags) or 'float32'}, ")
    sizes = []
    for phase, (f, want, got) in enumerate(runs):
        sizes.append((len(want["boxes"]), len(want["kept"])))
        other = reference(m, feeds(1 - phase))
        if compare_close(got["boxes"], other["boxes"], rel) is None:
            failures.append(f"phase {phase}: the other input's reference matches too")
    return failures, sizes


def main():
    opc, work = sys.argv[1:3]
    os.environ["OPC_CHECK"] = "1"
    m = concat_model()
    failures, sizes = check_program(opc, m, os.path.join(work, "program"), (), 1e-6)
    failures += check_program(opc, m, os.path.join(work, "fp16"), ("--precision", "fp16"),
                              1e-3)[0]
    if sizes and sizes[0] == sizes[1]:
        failures.append(f"the two inputs give the same sizes {sizes[0]}: they test one count")
    if any(s[0] >= BOUND for s in sizes):
        failures.append(f"a join {sizes} reaches its bound {BOUND}: no shorter run is tested")
    return onnx_case.finish(opc, failures, refused_models(), work,
                            f"bounded concat: {len(m.graph.output)} outputs match ONNX Runtime "
                            f"on two inputs (joined rows, boxes NMS kept: {sizes}), in float32 and "
                            f"float16; the other input differs; {len(refused_models())} readers "
                            f"refused")


if __name__ == "__main__":
    sys.exit(main())
