#!/usr/bin/env python3
"""Small detectors for opc's tests, built with onnx.helper (issue 49).

  detectors.py NAME -o FILE.onnx     NAME: ssd_tiny or two_stage_tiny
  detectors.py --list

Both read a 96x96 photograph (photos.py) and end in outputs whose length
the data decides: boxes [n, 4] (x1, y1, x2, y2 in pixels), scores [n] and
labels [n].

  ssd_tiny        an SSD-style detector: four strided convolutions, class
                  and box heads on two levels (12x12 and 6x6, three anchors
                  a cell), the anchors decoded (centre moved by the deltas,
                  size scaled by their exponential), per-class
                  NonMaxSuppression, and the kept boxes and scores gathered
                  (Gather, GatherND).
  two_stage_tiny  a two-stage detector: the same backbone, a region
                  proposal head on the 12x12 level (objectness and deltas
                  per anchor), the best 64 proposals (TopK), one-class
                  NonMaxSuppression among them, RoiAlign of each kept
                  proposal on the feature map (its batch indices a
                  ConstantOfShape of the kept count), a fully connected
                  classifier, and each box's best class and its
                  probability (Softmax, ReduceMax, ArgMax).

Weights are random (seeded), then calibrated on the first four
photographs: each convolution's output channels get mean 0 and standard
deviation 1 there, as a BatchNormalization trained on them would give, so
that scores spread around the thresholds and the outputs depend on the
picture (how many boxes, where, which class). Needs numpy, onnx,
onnxruntime and the photographs.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photos  # noqa: E402

SIDE = 96
CLASSES = 4
ANCHORS = 3
OPSET = 17


class Builder:
    """Nodes and initializers, the weights drawn from one seeded generator."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, inputs, output, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def conv(self, x, cin, cout, k, stride, name, relu=True):
        w = self.rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)).astype(np.float32)
        b = self.rng.normal(0, 0.1, cout).astype(np.float32)
        y = self.node("Conv", [x, self.const(name + "_w", w), self.const(name + "_b", b)], name,
                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        return self.node("Relu", [y], name + "_relu") if relu else y

    def backbone(self):
        """The 12x12 (32 channels) and 6x6 (48) feature maps."""
        x = self.conv("image", 3, 16, 3, 2, "stem")
        x = self.conv(x, 16, 32, 3, 2, "stage1")
        f12 = self.conv(x, 32, 32, 3, 2, "stage2")
        f6 = self.conv(f12, 32, 48, 3, 2, "stage3")
        return [(f12, 32, 12), (f6, 48, 6)]

    def per_anchor(self, head, columns, name):
        """[1, A*columns, n, n] -> [1, n*n*A, columns], anchors cell by cell."""
        t = self.node("Transpose", [head], name + "_nhwc", perm=[0, 2, 3, 1])
        shape = self.const(name + "_shape", np.array([1, -1, columns], np.int64))
        return self.node("Reshape", [t, shape], name + "_rows")

    def decode(self, deltas, anchors, name):
        """Anchors [1, N, 4] (cx, cy, w, h) moved by deltas [1, N, 4]: boxes
        [1, N, 4] as (x1, y1, x2, y2)."""
        centre_of = self.const(name + "_anchor_centre", anchors[..., :2])
        size_of = self.const(name + "_anchor_size", anchors[..., 2:])
        split = self.const(name + "_split", np.array([2, 2], np.int64))
        self.nodes.append(helper.make_node("Split", [deltas, split], [name + "_dxy", name + "_dwh"],
                                           name=name + "_split", axis=2))
        shift = self.node("Mul", [name + "_dxy", self.const(name + "_k_xy", np.float32(0.1))], name + "_shift")
        shift = self.node("Mul", [shift, size_of], name + "_shift_px")
        centre = self.node("Add", [centre_of, shift], name + "_centre")
        grow = self.node("Mul", [name + "_dwh", self.const(name + "_k_wh", np.float32(0.2))], name + "_grow")
        grow = self.node("Exp", [grow], name + "_grow_exp")
        size = self.node("Mul", [size_of, grow], name + "_size")
        half = self.node("Mul", [size, self.const(name + "_half", np.float32(0.5))], name + "_half_size")
        lo = self.node("Sub", [centre, half], name + "_lo")
        hi = self.node("Add", [centre, half], name + "_hi")
        return self.node("Concat", [lo, hi], name + "_boxes", axis=2)

    def model(self, name, outputs):
        image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, SIDE, SIDE])
        outs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["n", 4]),
                helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n"]),
                helper.make_tensor_value_info("labels", TensorProto.INT64, ["n"])]
        for o, (produced, _) in zip(("boxes", "scores", "labels"), outputs):
            self.node("Identity", [produced], o)
        g = helper.make_graph(self.nodes, name, [image], outs, self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


def anchor_grid(n, scales):
    """(cx, cy, w, h) of each anchor of an n x n level, cell by cell."""
    step = SIDE / n
    rows = [[(x + 0.5) * step, (y + 0.5) * step, step * s, step * s]
            for y in range(n) for x in range(n) for s in scales]
    return np.array(rows, np.float32)


def ssd_tiny(seed=0):
    b = Builder(seed)
    logits, deltas, anchors = [], [], []
    for k, (f, c, n) in enumerate(b.backbone()):
        logits.append(b.per_anchor(b.conv(f, c, ANCHORS * CLASSES, 3, 1, f"cls{k}", relu=False),
                                   CLASSES, f"cls{k}"))
        deltas.append(b.per_anchor(b.conv(f, c, ANCHORS * 4, 3, 1, f"box{k}", relu=False), 4, f"box{k}"))
        anchors.append(anchor_grid(n, (1.5, 2.5, 3.5)))
    boxes = b.decode(b.node("Concat", deltas, "deltas", axis=1), np.concatenate(anchors)[None], "decode")
    probs = b.node("Sigmoid", [b.node("Concat", logits, "logits", axis=1)], "probs")
    scores = b.node("Transpose", [probs], "class_scores", perm=[0, 2, 1])
    kept = b.node("NonMaxSuppression", [boxes, scores, b.const("max_per_class", np.array([15], np.int64)),
                                        b.const("iou", np.array([0.45], np.float32)),
                                        b.const("score_threshold", np.array([0.9], np.float32))],
                  "kept")
    labels = b.node("Gather", [kept, b.const("class_column", np.array(1, np.int64))], "kept_class", axis=1)
    index = b.node("Gather", [kept, b.const("box_column", np.array(2, np.int64))], "kept_box", axis=1)
    flat = b.node("Squeeze", [boxes, b.const("image_axis", np.array([0], np.int64))], "all_boxes")
    box = b.node("Gather", [flat, index], "kept_boxes", axis=0)
    score = b.node("GatherND", [scores, kept], "kept_scores")
    return b.model("ssd_tiny", [(box, None), (score, None), (labels, None)])


def two_stage_tiny(seed=0):
    b = Builder(seed)
    (f, c, n), _ = b.backbone()
    rpn = b.conv(f, c, 32, 3, 1, "rpn")
    objectness = b.per_anchor(b.conv(rpn, 32, ANCHORS, 1, 1, "rpn_score", relu=False), 1, "rpn_score")
    deltas = b.per_anchor(b.conv(rpn, 32, ANCHORS * 4, 1, 1, "rpn_box", relu=False), 4, "rpn_box")
    proposals = b.decode(deltas, anchor_grid(n, (1.5, 2.5, 3.5))[None], "decode")   # [1, N, 4]
    flat_scores = b.node("Reshape", [objectness, b.const("score_flat", np.array([1, -1], np.int64))],
                         "objectness")
    b.nodes.append(helper.make_node("TopK", [flat_scores, b.const("proposals", np.array([64], np.int64))],
                                    ["best_scores", "best"], name="best", axis=1))
    best = b.node("Squeeze", ["best", b.const("batch_axis", np.array([0], np.int64))], "best_index")
    all_boxes = b.node("Squeeze", [proposals, b.const("image_axis", np.array([0], np.int64))], "all_boxes")
    boxes = b.node("Gather", [all_boxes, best], "best_boxes", axis=0)                 # [64, 4]
    probs = b.node("Sigmoid", ["best_scores"], "best_probs")                          # [1, 64]
    kept = b.node("NonMaxSuppression", [b.node("Unsqueeze", [boxes, b.const("one_image", np.array([0], np.int64))],
                                                "nms_boxes"),
                                        b.node("Unsqueeze", [probs, b.const("one_class", np.array([1], np.int64))],
                                               "nms_scores"),
                                        b.const("max_boxes", np.array([40], np.int64)),
                                        b.const("iou", np.array([0.5], np.float32)),
                                        b.const("score_threshold", np.array([0.75], np.float32))], "kept")
    index = b.node("Gather", [kept, b.const("box_column", np.array(2, np.int64))], "kept_index", axis=1)
    rois = b.node("Gather", [boxes, index], "rois", axis=0)                           # [k, 4]
    count = b.node("Gather", [b.node("Shape", [index], "kept_shape"), b.const("zero", np.array([0], np.int64))],
                   "kept_count")
    batch = b.node("ConstantOfShape", [count], "roi_batch",
                   value=numpy_helper.from_array(np.array([0], np.int64)))
    pooled = b.node("RoiAlign", [f, rois, batch], "pooled", output_height=4, output_width=4,
                    sampling_ratio=2, spatial_scale=n / SIDE, mode="avg")           # [k, 32, 4, 4]
    hidden = b.node("Flatten", [pooled], "pooled_flat", axis=1)
    w = b.rng.normal(0, np.sqrt(1.0 / (c * 16)), (c * 16, CLASSES)).astype(np.float32)
    logits = b.node("MatMul", [hidden, b.const("classifier_w", w)], "class_logits")
    logits = b.node("Mul", [logits, b.const("classifier_gain", np.float32(3.0))], "class_logits_scaled")
    probs = b.node("Softmax", [logits], "class_probs", axis=1)
    score = b.node("ReduceMax", [probs], "box_scores", axes=[1], keepdims=0)
    label = b.node("ArgMax", [probs], "box_labels", axis=1, keepdims=0)
    return b.model("two_stage_tiny", [(rois, None), (score, None), (label, None)])


MODELS = {"ssd_tiny": ssd_tiny, "two_stage_tiny": two_stage_tiny}


def calibrate(m, images):
    """Each Conv in order: its output channels' mean 0 and standard
    deviation 1 over images (ONNX Runtime runs the model cut there)."""
    import onnxruntime as ort
    inits = {i.name: i for i in m.graph.initializer}
    for node in m.graph.node:
        if node.op_type != "Conv":
            continue
        probe = onnx.ModelProto()
        probe.CopyFrom(m)
        del probe.graph.output[:]
        probe.graph.output.append(helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None))
        session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
        y = np.concatenate([session.run(None, {"image": image[None]})[0] for image in images])
        mean, std = y.mean(axis=(0, 2, 3)), y.std(axis=(0, 2, 3)) + 1e-6
        w, b = (numpy_helper.to_array(inits[k]) for k in node.input[1:3])
        inits[node.input[1]].CopyFrom(numpy_helper.from_array(
            (w / std[:, None, None, None]).astype(np.float32), node.input[1]))
        inits[node.input[2]].CopyFrom(numpy_helper.from_array(((b - mean) / std).astype(np.float32),
                                                              node.input[2]))
    return m


def build(name, seed=0):
    m = MODELS[name](seed)
    onnx.checker.check_model(m)
    images = photos.image_batch(list(range(4)), [4, 3, SIDE, SIDE]).astype(np.float32)
    return calibrate(m, images)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", nargs="?", choices=sorted(MODELS))
    ap.add_argument("-o", "--output")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list or not args.name:
        print("\n".join(MODELS))
        return 0
    onnx.save(build(args.name, args.seed), args.output or args.name + ".onnx")
    return 0


if __name__ == "__main__":
    sys.exit(main())
