#!/usr/bin/env python3
"""Run-time shape values (ir/symbolic.c): Shape and Size of a tensor whose
size the data decides run on the device, and the shape arithmetic on them
(Gather, Unsqueeze, Concat, Div, Add, Sub) too, but opc knows each element
symbolically, a constant or the run-time size of an origin, so that a
Reshape to such a shape compiles (ir/bounds.c). Against ONNX Runtime,
shapes and integers exactly, floats within 1e-6 of their largest magnitude.

usage: test_shape_values.py OPC WORK_DIR

One program holds two chains:
- RetinaNet's box clipping as torchvision's TorchScript export writes it:
  the boxes of the candidates over a threshold (NonZero, Gather), Flatten,
  x and y columns cut by Slices of step 2, clipped by Max and Min,
  unsqueezed and joined along a new last axis ([N, 2, 2]), then reshaped
  to Concat(Unsqueeze(Gather(Shape(flat), 0)), Unsqueeze(Gather(Shape(flat),
  1))), i.e. [N, 4]; then batched NMS's offsets added, [N, 1] of the same
  origin broadcast along the boxes' other axis (ir/bounds.c), and a
  NonMaxSuppression whose limit is INT64_MAX, as batched NMS passes it,
  over all boxes and over the clipped candidates (a run's boxes and
  scores, of one origin);
- rows of a table picked by TopK with a run-time K ([K, 2, 2]), reshaped
  to the constant [-1, 4], flattened, and reshaped to [(Size + 4) / 4 - 1,
  Shape[1] * 2]: arithmetic on the run's size that stays exact; and the
  TopK's values times its indices, two outputs of one origin, and the
  first 8 of its values (5 and 8 of them kept).
The runtime's checker is on (OPC_CHECK=1): fresh device memory holds NaN
bits, so a copy that read past a run would show it. Two inputs of
different counts, none at its bound. Negative control: ONNX Runtime's
outputs for another threshold (another count) must differ from the
program's. Refused with a clear error: a shape naming another origin's
size than the data's, an element count that does not match, the run's
size twice, a multiple of it, a broadcast of two tensors of one origin
where one is not in prefix layout, and a Slice counted from the run's end.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, compare_exact, const, out, reference  # noqa: E402

BOXES, SERIES, SIDE = 24, 16, 8.0




def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def retinanet_nodes(threshold):
    nodes = [
        node("Greater", ["scores", "thr"], ["mask"]),
        node("NonZero", ["mask"], ["nz"]),
        node("Squeeze", ["nz", "i0"], ["keep"]),
        node("Gather", ["boxes", "keep"], ["kept"], axis=0),
        node("Flatten", ["kept"], ["flat"], axis=1),
        node("Slice", ["flat", "s0", "s4", "i1", "s2"], ["xs"]),
        node("Slice", ["flat", "s1", "s4", "i1", "s2"], ["ys"]),
        node("Max", ["xs", "zero"], ["x_lo"]),
        node("Min", ["x_lo", "side"], ["x_clip"]),
        node("Max", ["ys", "zero"], ["y_lo"]),
        node("Min", ["y_lo", "side"], ["y_clip"]),
        node("Unsqueeze", ["x_clip", "i2"], ["x_up"]),
        node("Unsqueeze", ["y_clip", "i2"], ["y_up"]),
        node("Concat", ["x_up", "y_up"], ["pairs"], axis=2),
        node("Shape", ["flat"], ["shape_a"]),
        node("Gather", ["shape_a", "g0"], ["rows"], axis=0),
        node("Shape", ["flat"], ["shape_b"]),
        node("Gather", ["shape_b", "g1"], ["cols"], axis=0),
        node("Unsqueeze", ["rows", "i0"], ["rows1"]),
        node("Unsqueeze", ["cols", "i0"], ["cols1"]),
        node("Concat", ["rows1", "cols1"], ["target"], axis=0),
        node("Reshape", ["pairs", "target"], ["clipped"]),
        node("Mul", ["clipped", "two"], ["clipped2"]),
        # torchvision's batched NMS offsets: boxes [N, 4] plus per-box
        # offsets [N, 1] of one origin, broadcast along the other axis
        node("Cast", ["keep"], ["keep_f"], to=TensorProto.FLOAT),
        node("Mul", ["keep_f", "side"], ["offsets"]),
        node("Unsqueeze", ["offsets", "i1"], ["offsets1"]),
        node("Add", ["clipped", "offsets1"], ["shifted"]),
        # and its NonMaxSuppression's limit, INT64_MAX: the bound is the
        # box count (a double of 2^63 once overflowed it)
        node("Unsqueeze", ["boxes", "i0"], ["boxes3"]),
        node("Reshape", ["scores", "one_one"], ["scores3"]),
        node("NonMaxSuppression", ["boxes3", "scores3", "no_limit", "iou"], ["nms_all"]),
        # NonMaxSuppression over the candidates, a run's boxes and scores
        node("Unsqueeze", ["clipped", "i0"], ["kept3"]),
        node("Gather", ["scores", "keep"], ["kept_scores"], axis=0),
        node("Reshape", ["kept_scores", "one_one"], ["kept_scores3"]),
        node("NonMaxSuppression", ["kept3", "kept_scores3", "no_limit", "iou"], ["nms_run"]),
    ]
    inits = [const("thr", threshold), const("i0", [0], np.int64), const("i1", [1], np.int64),
             const("i2", [2], np.int64), const("s0", [0], np.int64), const("s1", [1], np.int64),
             const("s2", [2], np.int64), const("s4", [4], np.int64), const("zero", 0.0),
             const("side", SIDE), const("g0", 0, np.int64), const("g1", 1, np.int64),
             const("two", 2.0), const("one_one", [1, 1, -1], np.int64),
             const("no_limit", [2**63 - 1], np.int64), const("iou", [0.3])]
    inputs = [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [BOXES]),
              helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [BOXES, 4])]
    return nodes, inits, inputs, ["clipped2", "rows", "shifted", "nms_all", "nms_run"]


def topk_nodes():
    nodes = [
        node("TopK", ["series", "k"], ["top", "order"], axis=0),
        node("Gather", ["table", "order"], ["picked"], axis=0),
        node("Reshape", ["picked", "minus4"], ["by_const"]),
        node("Flatten", ["picked"], ["flattened"], axis=1),
        node("Add", ["flattened", "by_const"], ["sum4"]),
        node("Size", ["picked"], ["size"]),
        node("Add", ["size", "four"], ["size4"]),
        node("Div", ["size4", "four"], ["quarter"]),
        node("Sub", ["quarter", "one"], ["count"]),
        node("Unsqueeze", ["count", "i0"], ["count1"]),
        node("Shape", ["picked"], ["shape_p"]),
        node("Slice", ["shape_p", "s1", "s2", "i0"], ["inner"]),
        node("Mul", ["inner", "two_i"], ["inner2"]),
        node("Concat", ["count1", "inner2"], ["target4"], axis=0),
        node("Reshape", ["picked", "target4"], ["by_size"]),
        node("Sub", ["by_size", "sum4"], ["topk_rows"]),
        # TopK's values and indices: one count, one origin (ir/bounds.c)
        node("Cast", ["order"], ["order_f"], to=TensorProto.FLOAT),
        node("Mul", ["top", "order_f"], ["top_by_order"]),
        # the first 8 of the run, as torchvision keeps its detections:
        # min(K, 8), an origin of its own
        node("Slice", ["top", "zero_i", "eight", "zero_i"], ["top_first"]),
        node("Mul", ["top_first", "two_f"], ["top_first2"]),
    ]
    table = np.arange(SERIES * 4, dtype=np.float32).reshape(SERIES, 2, 2) * 0.25 - 3
    inits = [const("table", table), const("minus4", [-1, 4], np.int64),
             const("four", 4, np.int64), const("one", 1, np.int64),
             const("two_i", 2, np.int64), const("zero_i", [0], np.int64),
             const("eight", [8], np.int64), const("two_f", 2.0)]
    inputs = [helper.make_tensor_value_info("series", TensorProto.FLOAT, [SERIES]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [1])]
    return nodes, inits, inputs, ["topk_rows", "count", "top_by_order", "top_first2"]


def values_model(threshold=0.6):
    nodes, inits, inputs, outputs = [], [], [], []
    for part in (retinanet_nodes(threshold), topk_nodes()):
        nodes += part[0]
        inits += part[1]
        inputs += part[2]
        outputs += part[3]
    return onnx_case.model(nodes, inputs, [out(o) for o in outputs], inits, opset=13,
                           name="shape_values")


def feeds(phase):
    i = np.arange(BOXES, dtype=np.float64)
    scores = 0.5 + 0.5 * np.sin(i * 0.8 + 2 * phase)
    # boxes reaching past both edges, so that the clip matters
    boxes = np.stack([i * 0.5 - 2, np.cos(i) * 3, i * 0.5 + 1, np.sin(i) * 5 + 6], -1)
    series = np.sin(np.arange(SERIES) * 1.7 + phase)
    return {"scores": scores.astype(np.float32), "boxes": boxes.astype(np.float32),
            "series": series.astype(np.float32), "k": np.array([5 + 6 * phase], np.int64)}


def refused_models():
    """Reshapes to shapes opc cannot prove: each error names the node and
    its shape input."""
    x = [helper.make_tensor_value_info("field", TensorProto.FLOAT, [4, 5]),
         helper.make_tensor_value_info("other", TensorProto.FLOAT, [40]),
         helper.make_tensor_value_info("pair", TensorProto.FLOAT, [1, 2])]
    inits = [const("i0", [0], np.int64), const("i1", [1], np.int64), const("i2", [2], np.int64),
             const("g1", 1, np.int64), const("c2", [2], np.int64), const("c3", [3], np.int64),
             const("minus1", [-1], np.int64)]
    base = [node("NonZero", ["field"], ["nz"]),   # [2, N], N <= 20
            node("NonZero", ["other"], ["nz2"]),  # [1, M], M <= 40
            node("NonZero", ["pair"], ["nz3"]),   # [2, P], P <= 2
            node("Shape", ["nz"], ["s"]),
            node("Slice", ["s", "i1", "i2", "i0"], ["n"]),
            node("Shape", ["nz2"], ["s2"]),
            node("Slice", ["s2", "i1", "i2", "i0"], ["m"]),
            node("Shape", ["nz3"], ["s3"]),
            node("Slice", ["s3", "i1", "i2", "i0"], ["p"])]

    def case(data, extra, last=None):
        nodes = base + extra + [last or node("Reshape", [data, "t"], ["y"], name="reshape")]
        return onnx_case.model(nodes, x, [out("y")], inits)
    return [
        # [M] for [2, N]: 40 elements at the bounds, but two origins
        ("another origin's size", case("nz", [node("Identity", ["m"], ["t"])]),
         "node 'reshape' (Reshape): shape input 't' is known only at run time: its element 0 "
         "is the run-time size of 'nz2', a size that data 'nz' does not have"),
        ("an element count that does not match",
         case("nz", [node("Concat", ["n", "c3"], ["t"], axis=0)]),
         "node 'reshape' (Reshape): cannot reshape"),
        # [P, P] for [2, P]: 4 elements at the bounds, P * P in a run
        ("the run's size twice", case("nz3", [node("Concat", ["p", "p"], ["t"], axis=0)]),
         "the run's size squared"),
        # [2 * N] for [2, N]: a flattening, whose run-time axis would be 2 N
        ("a multiple of the run's size", case("nz", [node("Mul", ["n", "c2"], ["t"])]),
         "its element 0 is 2 * the run-time size of 'nz'; opc reshapes to a run-time size "
         "itself, not to a multiple"),
        ("a Slice of a run's elements counted from its end",
         case("nz2", [], node("Slice", ["nz2", "i0", "minus1", "i1"], ["y"], name="cut")),
         "node 'cut' (Slice): input 'nz2' has a size known only at run time (the output of a "
         "NonZero, i64[1,<=40]); it cuts the run-time axis other than to its first elements"),
        # [1, 2, N] plus [2, N], one origin: the first is read at the
        # planned strides, which its run's elements do not keep
        ("a broadcast of one origin out of prefix layout",
         case("nz", [node("Unsqueeze", ["nz", "i0"], ["nz_up"])],
              node("Add", ["nz_up", "nz"], ["y"], name="add")),
         "node 'add' (Add): input 'nz_up' has a size known only at run time (the output of a "
         "Unsqueeze, i64[1,2,<=20]); its other operands would be read at the planned strides"),
    ]


def merged_twins(opc, work):
    """Two equal NonZeros, each with a chain of its own (RetinaNet's
    per-level candidates: a Transpose, a Split, a Squeeze whose Shape sizes
    a TopK), which eliminate-common makes one: the second chain's run-time
    sizes must follow the merge (passes/rewrite.c), or its Split writes no
    dims of the run and its readers see fresh memory. Against ONNX
    Runtime, exactly; failures as strings."""
    nodes = [helper.make_node("Greater", ["x", "t"], ["m"]),
             helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("NonZero", ["m"], ["nz1"]),
             helper.make_node("Transpose", ["nz"], ["tr"], perm=[1, 0]),
             helper.make_node("Transpose", ["nz1"], ["tr1"], perm=[1, 0]),
             helper.make_node("Split", ["tr1", "sz"], ["s0"], axis=1),
             helper.make_node("Squeeze", ["s0", "ax"], ["rows"]),
             helper.make_node("Shape", ["rows"], ["count"]),
             helper.make_node("GatherND", ["x", "tr"], ["kept"])]
    x = np.linspace(0, 1, 10).astype(np.float32)
    m = onnx_case.model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [10])],
                        [out("count"), out("rows"), out("kept")],
                        [const("t", 0.45), const("sz", [1], np.int64),
                         const("ax", [1], np.int64)], opset=17)
    want = reference(m, {"x": x})
    got, why = onnx_case.run_opc(opc, m, {"x": x}, os.path.join(work, "twins"))
    if got is None:
        return [f"merged twins: {why}"]
    return [f"merged twins, {name}: {problem}" for name in ("count", "rows", "kept")
            if (problem := (compare_close if name == "kept" else compare_exact)(
                *((got[name], want[name], 1e-6) if name == "kept" else (got[name], want[name]))))]


def main():
    opc, work = sys.argv[1:3]
    os.environ["OPC_CHECK"] = "1"
    m = values_model()
    failures, sizes = [], []
    exe, why = onnx_case.compile_cpu(opc, m, os.path.join(work, "program"))
    if why:
        failures.append(f"opc refused the model: {why}")
    runs = []
    if exe:
        ran, runs = onnx_case.run_phases(exe, m, feeds, os.path.join(work, "program"), 1e-6)
        failures += ran
    for phase, (f, want, got) in enumerate(runs):
        sizes.append((len(want["clipped2"]), len(want["topk_rows"])))
        other = reference(values_model(threshold=0.3), f)
        if compare_close(got["clipped2"], other["clipped2"], 1e-6) is None:
            failures.append(f"phase {phase}: the reference with another threshold matches too")
    if len(sizes) == 2 and (sizes[0][0] == sizes[1][0] or sizes[0][1] == sizes[1][1]):
        failures.append(f"the two inputs give sizes {sizes}: a chain tests one count")
    if any(s[0] >= BOXES or s[1] >= SERIES for s in sizes):
        failures.append(f"a size {sizes} reaches its bound: the case tests no shorter run")
    failures += merged_twins(opc, work)
    return onnx_case.finish(opc, failures, refused_models(), work,
                            f"shape values: {len(m.graph.output)} outputs match ONNX Runtime "
                            f"on two inputs (sizes {sizes}); another threshold differs; "
                            f"{len(refused_models())} readers refused")


if __name__ == "__main__":
    sys.exit(main())
