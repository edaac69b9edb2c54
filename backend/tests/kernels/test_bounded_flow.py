#!/usr/bin/env python3
"""Tensors whose size the data decides, read by further nodes
(ir/bounds.c): elementwise kinds, reshapes and Gather take them, their
kernels run over the planned storage, and opc_live_dims writes each
output's dims of the run. Against ONNX Runtime, shapes and integers
exactly, floats within 1e-6 of their largest magnitude.

usage: test_bounded_flow.py OPC WORK_DIR

One program holds four chains:
- a detector's post-processing: NonMaxSuppression over anchor boxes on a
  grid and two classes' score fields; each selection's class and box index
  taken out with Gather, the boxes gathered and scaled (Mul by a [4]
  constant), the labels cast and shifted, and each selection's score
  gathered by class * boxes + box, an Add of two tensors of one origin;
- NonZero of a thresholded field ([2, N], the count on axis 1): cast,
  negated, scaled by a scalar (read at stride 0: no prefix layout needed)
  and unsqueezed;
- TopK with K a graph input: the values doubled and squeezed, the indices
  squeezed and used to gather rows of a table;
- torchvision's per-level post-processing (NonZero, Transpose, GatherND,
  Shape, Min, TopK over the candidates, a Gather of indices by indices,
  Slices, Concat, Size, NonZero over the chosen scores and over the
  order cast to bool).
The runtime's checker is on (OPC_CHECK=1): fresh device memory holds NaN
bits, so a kernel that read past a run would read garbage; the best
candidate is the last element, which an index clamped past the run reads.
It runs on two inputs whose selections differ in size, through the same
program, none reaching its bound; and again with --precision fp16 (floats
within 1e-3 of their largest magnitude). Negative control: ONNX Runtime's
outputs for another score threshold (a different count) must differ from
the program's.
Refused with a clear error: a scan (CumSum) along such a tensor, a broadcast
operand read at the planned strides where the run's layout differs, a
Gather along the run-time axis, and two such tensors of different origins.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, const, out, reference  # noqa: E402

SIDE, CLASSES, PER_CLASS, TOPK_LEN, LEVEL = 6, 2, 15, 20, 24
BOXES = SIDE * SIDE




def detector_nodes(score_threshold):
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "thr"], ["sel"]),
        helper.make_node("Gather", ["sel", "one"], ["cls"], axis=1),
        helper.make_node("Gather", ["sel", "two"], ["box"], axis=1),
        helper.make_node("Reshape", ["boxes", "rows4"], ["boxes2d"]),
        helper.make_node("Gather", ["boxes2d", "box"], ["picked"], axis=0),
        helper.make_node("Mul", ["picked", "scale"], ["det_boxes"]),
        helper.make_node("Cast", ["cls"], ["cls_f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["cls_f", "onef"], ["det_labels"]),
        helper.make_node("Mul", ["cls", "nboxes"], ["cls_base"]),
        helper.make_node("Add", ["cls_base", "box"], ["score_at"]),
        helper.make_node("Reshape", ["scores", "flat"], ["scores_flat"]),
        helper.make_node("Gather", ["scores_flat", "score_at"], ["det_scores"], axis=0),
    ]
    inits = [const("max", [PER_CLASS], np.int64), const("iou", [0.3]),
             const("thr", [score_threshold]), const("one", 1, np.int64), const("two", 2, np.int64),
             const("rows4", [BOXES, 4], np.int64), const("scale", [320, 320, 320, 320]),
             const("onef", 1.0), const("nboxes", BOXES, np.int64), const("flat", [-1], np.int64)]
    inputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, BOXES, 4]),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, CLASSES, BOXES])]
    return nodes, inits, inputs, ["det_boxes", "det_labels", "det_scores"]


def non_zero_nodes():
    nodes = [
        helper.make_node("Greater", ["field", "half"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["at"]),
        helper.make_node("Cast", ["at"], ["at_f"], to=TensorProto.FLOAT),
        helper.make_node("Neg", ["at_f"], ["nz_neg"]),
        helper.make_node("Mul", ["at_f", "three"], ["nz_scaled"]),
        helper.make_node("Unsqueeze", ["at", "zero"], ["nz_up"]),
    ]
    inits = [const("half", 0.5), const("zero", [0], np.int64), const("three", 3.0)]
    inputs = [helper.make_tensor_value_info("field", TensorProto.FLOAT, [4, 5])]
    return nodes, inits, inputs, ["nz_neg", "nz_scaled", "nz_up"]


def topk_nodes():
    nodes = [
        helper.make_node("TopK", ["series", "k"], ["values", "indices"], axis=1),
        helper.make_node("Mul", ["values", "twof"], ["doubled"]),
        helper.make_node("Squeeze", ["doubled", "zero"], ["top_values"]),
        helper.make_node("Squeeze", ["indices", "zero"], ["top_idx"]),
        helper.make_node("Gather", ["table", "top_idx"], ["top_rows"], axis=0),
    ]
    table = np.arange(TOPK_LEN * 3, dtype=np.float32).reshape(TOPK_LEN, 3) * 0.5 - 7
    inits = [const("twof", 2.0), const("table", table)]
    inputs = [helper.make_tensor_value_info("series", TensorProto.FLOAT, [1, TOPK_LEN]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [1])]
    return nodes, inits, inputs, ["top_values", "top_rows"]


def level_nodes():
    """torchvision's per-level post-processing as the TorchScript exporter
    writes it: the candidates over a threshold by NonZero, transposed to
    index rows for GatherND, their count by Shape, the best K = min(count,
    6) by TopK over them, the boxes of those by a Gather of indices by
    indices, cut in two by Slices and joined again by Concat; the boxes'
    Size, and a NonZero over the chosen scores and over the order cast to
    bool."""
    nodes = [
        helper.make_node("Greater", ["lvl_scores", "lvl_thr"], ["lvl_mask"]),
        helper.make_node("NonZero", ["lvl_mask"], ["lvl_nz"]),
        helper.make_node("Transpose", ["lvl_nz"], ["lvl_rows"], perm=[1, 0]),
        helper.make_node("GatherND", ["lvl_scores", "lvl_rows"], ["lvl_kept"]),
        helper.make_node("Squeeze", ["lvl_rows", "one_axis"], ["lvl_where"]),
        helper.make_node("Shape", ["lvl_kept"], ["lvl_count"]),
        helper.make_node("Min", ["lvl_count", "lvl_k"], ["lvl_topk"]),
        helper.make_node("TopK", ["lvl_kept", "lvl_topk"], ["lvl_best", "lvl_order"], axis=0),
        helper.make_node("Gather", ["lvl_where", "lvl_order"], ["lvl_picked"], axis=0),
        helper.make_node("Gather", ["lvl_boxes", "lvl_picked"], ["lvl_b"], axis=0),
        helper.make_node("Slice", ["lvl_b", "s0", "s2", "one_axis"], ["lvl_lo"]),
        helper.make_node("Slice", ["lvl_b", "s2", "s4", "one_axis"], ["lvl_hi"]),
        helper.make_node("Concat", ["lvl_hi", "lvl_lo"], ["lvl_swapped"], axis=1),
        helper.make_node("Size", ["lvl_b"], ["lvl_size"]),
        helper.make_node("Greater", ["lvl_best", "lvl_high"], ["lvl_top_mask"]),
        helper.make_node("NonZero", ["lvl_top_mask"], ["lvl_top_nz"]),
        helper.make_node("Cast", ["lvl_order"], ["lvl_order_b"], to=TensorProto.BOOL),
        helper.make_node("NonZero", ["lvl_order_b"], ["lvl_order_nz"]),
    ]
    inits = [const("lvl_thr", 0.3), const("one_axis", [1], np.int64), const("lvl_k", [6], np.int64),
             const("s0", [0], np.int64), const("s2", [2], np.int64), const("s4", [4], np.int64),
             const("lvl_high", 0.8)]
    inputs = [helper.make_tensor_value_info("lvl_scores", TensorProto.FLOAT, [LEVEL]),
              helper.make_tensor_value_info("lvl_boxes", TensorProto.FLOAT, [LEVEL, 4])]
    return nodes, inits, inputs, ["lvl_best", "lvl_picked", "lvl_swapped", "lvl_size",
                                  "lvl_top_nz", "lvl_order_nz"]


def flow_model(score_threshold=0.8):
    nodes, inits, inputs, outputs = [], [], [], []
    for part in (detector_nodes(score_threshold), non_zero_nodes(), topk_nodes(), level_nodes()):
        nodes += part[0]
        inits += part[1]
        inputs += part[2]
        outputs += part[3]
    return onnx_case.model(nodes, inputs, [out(o) for o in outputs], inits, opset=13,
                           name="bounded_flow")


def feeds(phase):
    """Image-like inputs; phase shifts the fields, so that the counts
    differ from one run to the next."""
    g = np.arange(SIDE, dtype=np.float64)
    cy, cx = np.meshgrid(g, g, indexing="ij")
    h, w = 2.0 + np.sin(cx * 1.3 + cy * 0.7 + phase), 2.0 + np.cos(cx * 0.6 - cy + phase)
    boxes = np.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], -1).reshape(1, BOXES, 4)
    scores = np.stack([0.5 + 0.5 * np.sin(0.9 * cx * (c + 1) - 0.5 * cy + phase + c)
                       for c in range(CLASSES)]).reshape(1, CLASSES, BOXES)
    fy, fx = np.meshgrid(np.arange(4.0), np.arange(5.0), indexing="ij")
    field = 0.5 + 0.5 * np.sin(fx * 1.1 + fy * 0.8 + 2 * phase)
    series = np.round(np.sin(np.arange(TOPK_LEN) * 0.7 + phase) * 8) / 8
    level = 0.5 + 0.5 * np.sin(np.arange(LEVEL) * 0.9 + 3 * phase)
    # fewer than 6 candidates in one phase, more in the other: K both ways
    level = np.where(np.arange(LEVEL) % (2 + 4 * phase) == 0, level, 0.1)
    # the best candidate last: an index clamped into the data past the run
    # (GatherND's, under the checker's NaN bits) reads it, so a TopK that
    # looked past its run would take copies of it
    level[-1] = 0.99
    lvl_boxes = np.stack([np.arange(LEVEL) * 0.5, np.cos(np.arange(LEVEL)),
                          np.arange(LEVEL) * 0.5 + 2, np.sin(np.arange(LEVEL)) + 3], -1)
    return {"boxes": boxes.astype(np.float32), "scores": scores.astype(np.float32),
            "field": field.astype(np.float32), "series": series[None].astype(np.float32),
            "k": np.array([7 + 5 * phase], np.int64), "lvl_scores": level.astype(np.float32),
            "lvl_boxes": lvl_boxes.astype(np.float32)}


def refused_models():
    x = [helper.make_tensor_value_info("field", TensorProto.FLOAT, [4, 5])]

    def nz(extra, inits=()):
        nodes = [helper.make_node("NonZero", ["field"], ["at"], name="nz")] + extra
        return onnx_case.model(nodes, x, [out("y")], [const("zero", [0], np.int64), *inits])
    two = helper.make_tensor_value_info("other", TensorProto.FLOAT, [4, 5])
    both = onnx_case.model(
        [helper.make_node("NonZero", ["field"], ["a"]), helper.make_node("NonZero", ["other"], ["b"]),
         helper.make_node("Add", ["a", "b"], ["y"], name="add")], x + [two], [out("y")])
    return [
        ("a scan", nz([helper.make_node("CumSum", ["at", "axis1"], ["y"], name="scan")],
                      [const("axis1", 1, np.int64)]),
         "node 'scan' (CumSum): input 'at' has a size known only at run time"),
        ("an operand at the planned strides",
         nz([helper.make_node("Add", ["at", "col"], ["y"], name="add")],
            [const("col", [[1], [2]], np.int64)]), "every dim before the run-time one is 1"),
        ("a Gather along the run-time axis",
         nz([helper.make_node("Gather", ["at", "zero"], ["y"], axis=1, name="g")]),
         "Gather along the run-time axis"),
        ("two origins", both, "their sizes one origin"),
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
        # the run-time dim of each chain: selections, nonzeros, K
        sizes.append((len(want["det_scores"]), want["nz_neg"].shape[1], len(want["top_values"]),
                       len(want["lvl_best"])))
        other = reference(flow_model(score_threshold=0.45), f)
        if compare_close(got["det_scores"], other["det_scores"], rel) is None:
            failures.append(f"phase {phase}: the reference with another threshold matches too")
    return failures, sizes


def main():
    opc, work = sys.argv[1:3]
    # The runtime's checker: races, and fresh device memory filled with NaN
    # bits, so that a kernel reading past a run's elements reads garbage.
    os.environ["OPC_CHECK"] = "1"
    m = flow_model()
    failures, sizes = check_program(opc, m, os.path.join(work, "program"), (), 1e-6)
    # float16: the same dims and integers; the values within float16's
    # rounding (2^-11 of a value) of the largest, should any be stored in it
    failures += check_program(opc, m, os.path.join(work, "fp16"), ("--precision", "fp16"), 1e-3)[0]
    if sizes and sizes[0] == sizes[1]:
        failures.append(f"the two inputs give the same sizes {sizes[0]}: they test one count")
    bounds = (CLASSES * PER_CLASS, 20, TOPK_LEN, LEVEL)
    if any(s == b for size in sizes for s, b in zip(size, bounds)):
        failures.append(f"a size {sizes} reaches its bound {bounds}: the case tests no shorter run")
    return onnx_case.finish(opc, failures, refused_models(), work,
                            f"bounded flow: {len(m.graph.output)} outputs match ONNX Runtime on "
                            f"two inputs (sizes {sizes[0] if sizes else None} and "
                            f"{sizes[1] if sizes else None}), in float32 and float16; another "
                            f"threshold differs; {len(refused_models())} readers refused")


if __name__ == "__main__":
    sys.exit(main())
