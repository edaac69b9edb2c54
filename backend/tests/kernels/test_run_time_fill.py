#!/usr/bin/env python3
"""Tensors made to a run-time shape (ir/bounds.c's T_BOUND_FILL) and
RoiAlign over a run's boxes (T_BOUND_ROIS). Against ONNX Runtime, shapes
and integers exactly, floats within 1e-5 of their largest magnitude.

usage: test_run_time_fill.py OPC WORK_DIR

One program holds, over the scores above a threshold (NonZero, Gather)
(the first five as SSDlite needs them, the rest as Faster R-CNN does):
- ConstantOfShape of the kept scores' Shape, an int64 label and a float
  (SSDlite's `full_like(score, label)`), the float one times the scores;
- Expand of the scores as a column to [Shape, 4] (Concat of the Shape and
  a constant), and of a constant row [1, 4] to that shape;
- torch's expand with -1 as the TorchScript export writes it: Where(Equal(
  shape, -1), ones, shape), the shape from the kept scores' dims;
- Range from 0 by 1 to the kept count (torch.arange(n)), gathering them;
- RoiAlign over the kept boxes, batch_indices a ConstantOfShape of zeros
  as torchvision's MultiScaleRoIAlign makes them, both modes;
- the box head (roi_head_nodes): ScatterElements of two NonZero-chosen
  levels' RoiAligns into zeros of the boxes' count, Gemm, Softmax, a
  reshape merging the run with the classes, Range over the class count
  and a Slice to the run's own size.
The runtime's checker is on (OPC_CHECK=1): fresh device memory holds NaN
bits, so a kernel that read past a run (RoiAlign's rois) would read
garbage. Two inputs of different counts, none at its bound; negative
control: ONNX Runtime's outputs for another threshold must differ. The
GPU program's net.c builds against the real CUDA headers with -Werror
where the toolkit is installed (OPC_CUDA, default /usr/local/cuda).
Refused with a clear error: Range from 1 to the run's size, ConstantOfShape
to twice the run's size, and
Expand of static data of more than one along the run-time axis (which at
the bound would broadcast).
"""
import os
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, const, out, real_cuda_compile, reference  # noqa: E402

BOXES, SIDE = 16, 12


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def fill_model(threshold=0.5):
    label = helper.make_tensor("label", TensorProto.INT64, [1], [3])
    half = helper.make_tensor("half", TensorProto.FLOAT, [1], [0.5])
    zero = helper.make_tensor("zero", TensorProto.INT64, [1], [0])
    nodes = [
        node("Greater", ["scores", "thr"], ["mask"]),
        node("NonZero", ["mask"], ["nz"]),
        node("Squeeze", ["nz", "i0"], ["keep"]),
        node("Gather", ["scores", "keep"], ["kept"], axis=0),
        node("Shape", ["kept"], ["count"]),
        # full_like(score, label), and a float fill times the scores
        node("ConstantOfShape", ["count"], ["labels"], value=label),
        node("ConstantOfShape", ["count"], ["halves"], value=half),
        node("Mul", ["kept", "halves"], ["halved"]),
        # Expand to [N, 4]: a column of the run, a constant row
        node("Concat", ["count", "four"], ["shape4"], axis=0),
        node("Unsqueeze", ["kept", "i1"], ["column"]),
        node("Expand", ["column", "shape4"], ["spread"]),
        node("Expand", ["row", "shape4"], ["rows"]),
        # torch's expand_as, as the TorchScript export writes it:
        # Where(Equal(shape, -1), ones, shape)
        node("Equal", ["shape4", "minus_ones"], ["is_any"]),
        node("Where", ["is_any", "ones", "shape4"], ["resolved"]),
        node("Expand", ["column", "resolved"], ["spread_any"]),
        # torch.arange(n) over the kept count, its numbers gathering them
        node("Gather", ["count", "s0"], ["count0"], axis=0),
        node("Range", ["s0", "count0", "s1"], ["ids"]),
        node("Gather", ["kept", "ids"], ["by_ids"], axis=0),
        # RoiAlign over the kept boxes, batch_indices zeros of their count
        node("Gather", ["boxes", "keep"], ["rois"], axis=0),
        node("ConstantOfShape", ["count"], ["batch"], value=zero),
        node("RoiAlign", ["feature", "rois", "batch"], ["pooled"], output_height=3,
             output_width=2, sampling_ratio=2, spatial_scale=0.5),
        node("RoiAlign", ["feature", "rois", "batch"], ["pooled_max"], output_height=2,
             output_width=2, sampling_ratio=0, mode="max", spatial_scale=0.5),
    ] + roi_head_nodes()
    inits = roi_head_inits() + [
             const("thr", threshold), const("i0", [0], np.int64), const("i1", [1], np.int64),
             const("four", [4], np.int64), const("row", [[1.5, -2.0, 0.25, 8.0]]),
             const("minus_ones", [-1, -1], np.int64), const("s0", 0, np.int64),
             const("s1", 1, np.int64),
             const("ones", [1, 1], np.int64)]
    inputs = [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [BOXES]),
              helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [BOXES, 4]),
              helper.make_tensor_value_info("feature", TensorProto.FLOAT, [1, 2, SIDE, SIDE])]
    outputs = ["labels", "halved", "spread", "rows", "spread_any", "ids", "by_ids", "pooled",
               "pooled_max",
               "probs", "per_class", "ranked", "head"]
    return onnx_case.model(nodes, inputs, [out(o) for o in outputs], inits, opset=16,
                           name="run_time_fill")


def roi_head_nodes():
    """Faster R-CNN's box head as the TorchScript export writes it: the kept
    boxes split in two levels by width (NonZero of a run), each level's
    RoiAlign put back in place by ScatterElements into zeros of the boxes'
    count, the index expanded to the pooled shape; Flatten, Gemm, Softmax,
    the [N, 3] scores reshaped to [-1, 1] (the run times 3), Range over the
    class count (Gather(Shape, 1): a constant in every run), and a Slice
    to the run's own size."""
    nodes = []
    for level, cmp in (("big", "Greater"), ("small", "LessOrEqual")):
        nodes += [
            node(cmp, ["widths", "five"], [f"is_{level}"]),
            node("NonZero", [f"is_{level}"], [f"nz_{level}"]),
            node("Squeeze", [f"nz_{level}", "i0"], [f"idx_{level}"]),
            node("Gather", ["rois", f"idx_{level}"], [f"rois_{level}"], axis=0),
            node("Gather", ["batch", f"idx_{level}"], [f"batch_{level}"], axis=0),
            node("RoiAlign", ["feature", f"rois_{level}", f"batch_{level}"], [f"pooled_{level}"],
                 output_height=2, output_width=2, sampling_ratio=2, spatial_scale=0.5),
            node("Reshape", [f"idx_{level}", "column4"], [f"idx4_{level}"]),
            node("Shape", [f"pooled_{level}"], [f"shape_{level}"]),
            node("Expand", [f"idx4_{level}", f"shape_{level}"], [f"index_{level}"]),
        ]
    return [
        node("Gather", ["rois", "c2"], ["right"], axis=1),
        node("Gather", ["rois", "c0"], ["left"], axis=1),
        node("Sub", ["right", "left"], ["widths"]),
    ] + nodes + [
        node("Shape", ["rois"], ["rois_shape"]),
        node("Slice", ["rois_shape", "i0", "i1"], ["roi_count"]),
        node("Concat", ["roi_count", "pooled_dims"], ["all_shape"], axis=0),
        node("ConstantOfShape", ["all_shape"], ["zeros"]),
        node("ScatterElements", ["zeros", "index_big", "pooled_big"], ["placed"], axis=0),
        node("ScatterElements", ["placed", "index_small", "pooled_small"], ["features"], axis=0),
        node("Flatten", ["features"], ["flat"]),
        node("Gemm", ["flat", "fc", "fc_bias"], ["logits"]),
        node("Softmax", ["logits"], ["probs"], axis=1),
        node("Reshape", ["probs", "minus1_1"], ["per_class"]),
        node("Shape", ["probs"], ["probs_shape"]),
        node("Gather", ["probs_shape", "g1"], ["classes"], axis=0),
        node("Range", ["r0", "classes", "r1"], ["class_ids"]),
        node("Cast", ["class_ids"], ["class_f"], to=TensorProto.FLOAT),
        node("Add", ["probs", "class_f"], ["ranked"]),
        node("Slice", ["probs_shape", "i0", "i1"], ["probs_count"]),
        node("Slice", ["ranked", "i0", "probs_count", "i0"], ["head"]),
    ]


def roi_head_inits():
    fc = np.sin(np.arange(24).reshape(8, 3) * 0.7) * 2
    return [const("five", 5.0), const("c0", 0, np.int64), const("c2", 2, np.int64),
            const("column4", [-1, 1, 1, 1], np.int64), const("pooled_dims", [2, 2, 2], np.int64),
            const("fc", fc), const("fc_bias", [0.1, -0.2, 0.3]),
            const("minus1_1", [-1, 1], np.int64), const("g1", 1, np.int64),
            const("r0", 0, np.int64), const("r1", 1, np.int64)]


def feeds(phase):
    i = np.arange(BOXES, dtype=np.float64)
    scores = 0.5 + 0.5 * np.sin(i * 0.9 + 2 * phase)
    x0, y0 = (i * 1.3) % 16, (i * 2.1 + 3 * phase) % 14
    boxes = np.stack([x0, y0, x0 + 3 + i % 5, y0 + 2 + (i * 3) % 7], -1)
    yy, xx = np.mgrid[0:SIDE, 0:SIDE] / SIDE
    feature = np.stack([np.sin(4 * xx + 3 * yy + phase), xx * yy - 0.5 * xx])[None]
    return {"scores": scores.astype(np.float32), "boxes": boxes.astype(np.float32),
            "feature": feature.astype(np.float32)}


def refused_models():
    x = [helper.make_tensor_value_info("field", TensorProto.FLOAT, [12])]
    inits = [const("i0", [0], np.int64), const("i1", [1], np.int64),
             const("two", [2], np.int64), const("column12", np.ones((12, 1))),
             const("one", 1, np.int64), const("zero", 0, np.int64)]
    base = [node("NonZero", ["field"], ["nz"]),
            node("Squeeze", ["nz", "i0"], ["keep"]),
            node("Shape", ["keep"], ["count"])]

    def case(extra):
        return onnx_case.model(base + extra, x, [out("y")], inits)
    return [
        ("a Range from 1 to the run's size",
         case([node("Gather", ["count", "zero"], ["n"], axis=0),
               node("Range", ["one", "n", "one"], ["y"], name="range")]),
         "node 'range' (Range): limit 'n' is known only at run time (the run-time size of 'nz'): "
         "opc runs Range to it only from 0 by 1"),
        ("a fill of twice the run's size",
         case([node("Mul", ["count", "two"], ["twice"]),
               node("ConstantOfShape", ["twice"], ["y"], name="fill")]),
         "node 'fill' (ConstantOfShape): shape input 'twice' is known only at run time: its "
         "element 0 is 2 * the run-time size of 'nz'; opc fills a run-time size itself"),
        # [12, 1] to [N, 1]: at the bound it broadcasts, in a shorter run not
        ("an Expand of static rows to the run's count",
         case([node("Concat", ["count", "i1"], ["shape2"], axis=0),
               node("Expand", ["column12", "shape2"], ["y"], name="expand")]),
         "node 'expand' (Expand): shape input 'shape2' is known only at run time: its element "
         "for axis 0 is the run-time size of 'nz', which data 'column12' of 12 there "
         "broadcasts with only where the run has that size"),
    ]


def main():
    opc, work = sys.argv[1:3]
    os.environ["OPC_CHECK"] = "1"
    ort.set_default_logger_severity(3)  # its RoiAlign's note on max mode, for every session
    m = fill_model()
    failures, counts = [], []
    exe, why = onnx_case.compile_cpu(opc, m, os.path.join(work, "program"))
    if why:
        failures.append(f"opc refused the model: {why}")
    runs = []
    if exe:
        ran, runs = onnx_case.run_phases(exe, m, feeds, os.path.join(work, "program"), 1e-5)
        failures += ran
    for phase, (f, want, got) in enumerate(runs):
        counts.append(len(want["labels"]))
        other = reference(fill_model(threshold=0.8), f)
        if compare_close(got["pooled"], other["pooled"], 1e-5) is None:
            failures.append(f"phase {phase}: the reference with another threshold matches too")
    if len(counts) == 2 and (counts[0] == counts[1] or max(counts) >= BOXES or min(counts) == 0):
        failures.append(f"the two inputs keep {counts} boxes: not two counts under the bound")
    cuda = real_cuda_compile(opc, m, os.path.join(work, "cuda"))
    if cuda:
        failures.append(cuda)
    return onnx_case.finish(opc, failures, refused_models(), work,
                            f"run-time fills: {len(m.graph.output)} outputs match ONNX Runtime "
                            f"on two inputs (counts {counts}); another threshold differs; "
                            f"{len(refused_models())} refusals")


if __name__ == "__main__":
    sys.exit(main())
