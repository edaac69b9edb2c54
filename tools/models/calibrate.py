"""Calibrates a zoo network's random weights on photographs, as training
would: every BatchNormalization gets the mean and variance its input has on
the calibration photographs, and every biased convolution that no
BatchNormalization follows is centred and scaled the same way (a
data-dependent initialisation, Kraehenbuehl et al. 2016).

Without it, random weights fed with natural images still leave most of the
output to constants: the per-channel offsets that ReLUs add up layer after
layer dominate what the input decides, and some channels are never active.
Calibrated, each layer passes on what distinguishes one image from another.

How: the model built at batch len(photos) is rewritten so that each such
layer normalises with the statistics of the batch itself (training-mode
batch normalisation) and reports them as extra outputs; one ONNX Runtime run
gives every layer's statistics at once, each computed on an input already
normalised upstream. They are rounded to 4 significant digits, so that the
last bits of ONNX Runtime's sums on one CPU or another rarely change the
model's bytes, and written into the model of any batch (its weights have the
same names).
"""

import numpy as np
import onnx
from onnx import helper, numpy_helper

SIGNIFICANT = 4
# The mean a calibrated layer's output has over the photographs (its own
# bias adds a little to each channel), except at the graph's outputs. A
# random network at zero mean sits where it amplifies any perturbation
# layer after layer (the chaotic side of the order-to-chaos transition of
# random networks: Poole et al. 2016, Schoenholz et al. 2017), which a
# trained one does not: rounding every value of the calibrated Inception-V3
# to bfloat16 moved its logits by 0.24 of their input-dependent part. With
# this shift, 0.066, and the input still decides as much of the output.
SHIFT = 0.5


def _round(a):
    return np.array([float("%.*g" % (SIGNIFICANT, v)) for v in a.ravel()],
                    np.float32).reshape(a.shape)


class _Graph:
    """Values of initializers and Constant nodes by name, to read and replace."""

    def __init__(self, model):
        self.model = model
        self.inits = {t.name: t for t in model.graph.initializer}
        self.consts = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}

    def value(self, name):
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        if name in self.consts:
            return numpy_helper.to_array(self.consts[name].attribute[0].t)
        return None

    def set(self, name, array):
        tensor = numpy_helper.from_array(np.ascontiguousarray(array, np.float32), name)
        if name in self.inits:
            self.inits[name].CopyFrom(tensor)
        else:
            self.consts[name].attribute[0].t.CopyFrom(tensor)


def _opset(model):
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def calibration_layers(model):
    """The layers to calibrate, in graph order: ("bn", node) for every
    BatchNormalization, ("conv", node) for a Conv or Gemm with a bias that
    is a weight and whose output feeds no BatchNormalization."""
    g = _Graph(model)
    readers = {}
    for n in model.graph.node:
        for name in n.input:
            readers.setdefault(name, []).append(n.op_type)
    layers = []
    for n in model.graph.node:
        if n.op_type == "BatchNormalization":
            layers.append(("bn", n))
        elif (n.op_type in ("Conv", "Gemm") and len(n.input) > 2 and
              g.value(n.input[1]) is not None and g.value(n.input[2]) is not None and
              "BatchNormalization" not in readers.get(n.output[0], [])):
            if n.op_type == "Gemm" and any(a.name == "transA" and a.i for a in n.attribute):
                continue
            layers.append(("conv", n))
    return layers


def _batch_norm_nodes(model, x, rank, out, scope, scale=None, shift=None, eps=1e-5):
    """Nodes computing out = (x - mean) / sqrt(var + eps) * scale + shift with
    the batch's own per-channel mean and variance (over every axis but 1);
    returns (nodes, new initializers, mean name, var name)."""
    opset = _opset(model)
    axes = [0] + list(range(2, rank))
    inits = []
    nodes = []

    def reduce_mean(src, dst):
        if opset >= 18:
            inits.append(numpy_helper.from_array(np.array(axes, np.int64), dst + ".axes"))
            return helper.make_node("ReduceMean", [src, dst + ".axes"], [dst], keepdims=1)
        return helper.make_node("ReduceMean", [src], [dst], axes=axes, keepdims=1)

    mean, var = scope + "/mean", scope + "/var"
    nodes.append(reduce_mean(x, mean))
    nodes.append(helper.make_node("Sub", [x, mean], [scope + "/centred"]))
    nodes.append(helper.make_node("Mul", [scope + "/centred", scope + "/centred"],
                                  [scope + "/square"]))
    nodes.append(reduce_mean(scope + "/square", var))
    inits.append(numpy_helper.from_array(np.array(eps, np.float32), scope + "/eps"))
    nodes.append(helper.make_node("Add", [var, scope + "/eps"], [scope + "/var_eps"]))
    nodes.append(helper.make_node("Sqrt", [scope + "/var_eps"], [scope + "/std"]))
    y = scope + "/normed"
    nodes.append(helper.make_node("Div", [scope + "/centred", scope + "/std"],
                                  [y if scale is not None or shift is not None else out]))
    channel_shape = [1, -1] + [1] * (rank - 2)
    for k, (arr, op) in enumerate(((scale, "Mul"), (shift, "Add"))):
        if arr is None:
            continue
        name = "%s/%s" % (scope, op.lower())
        inits.append(numpy_helper.from_array(
            np.ascontiguousarray(arr, np.float32).reshape(channel_shape), name))
        last = k == 1 or shift is None
        nodes.append(helper.make_node(op, [y, name], [out if last else y + "_scaled"]))
        y = y + "_scaled"
    return nodes, inits, mean, var


def _ranks(model):
    inferred = onnx.shape_inference.infer_shapes(model)
    return {v.name: len(v.type.tensor_type.shape.dim) for v in
            list(inferred.graph.value_info) + list(inferred.graph.input) +
            list(inferred.graph.output)}


def statistics(model, batch):
    """Each calibrated layer's per-channel (mean, var) on `batch` (the inputs
    of `model`, a dict), with every layer normalised by its batch statistics."""
    import onnxruntime as ort
    g = _Graph(model)
    layers = calibration_layers(model)
    ranks = _ranks(model)
    outputs_of_graph = {o.name for o in model.graph.output}
    work = onnx.ModelProto()
    work.CopyFrom(model)
    replaced = {}
    extra_inits, outputs = [], []
    for k, (kind, n) in enumerate(layers):
        scope = "calibrate/%d" % k
        shift = 0.0 if n.output[0] in outputs_of_graph else SHIFT
        if kind == "bn":
            eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
            nodes, inits, mean, var = _batch_norm_nodes(
                model, n.input[0], ranks[n.output[0]], n.output[0], scope, g.value(n.input[1]),
                g.value(n.input[2]) + shift,
                eps)
        else:
            raw = scope + "/raw"
            # the conv's own bias stays as a small offset after the centring
            nodes, inits, mean, var = _batch_norm_nodes(
                model, raw, ranks[n.output[0]], n.output[0], scope, None, g.value(n.input[2]) + shift,
                0.0)
        replaced[id(n)] = (kind, nodes, scope)
        extra_inits += inits
        outputs += [mean, var]
    new_nodes = []
    for n in model.graph.node:
        if id(n) not in replaced:
            new_nodes.append(n)
            continue
        kind, nodes, scope = replaced[id(n)]
        if kind == "conv":
            conv = onnx.NodeProto()
            conv.CopyFrom(n)
            conv.output[0] = scope + "/raw"
            new_nodes.append(conv)
        new_nodes += nodes
    del work.graph.node[:]
    work.graph.node.extend(new_nodes)
    work.graph.initializer.extend(extra_inits)
    read = {name for n in work.graph.node for name in n.input}
    kept = [t for t in work.graph.initializer if t.name in read]
    del work.graph.initializer[:]
    work.graph.initializer.extend(kept)
    for name in outputs:
        work.graph.output.append(helper.make_empty_tensor_value_info(name))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(work.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    values = session.run(outputs, batch)
    stats = []
    for k, (kind, n) in enumerate(layers):
        mean, var = values[2 * k].ravel(), values[2 * k + 1].ravel()
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(var))):
            raise ValueError("calibration: %s %r has non-finite statistics" % (n.op_type, n.name))
        stats.append((kind, n, _round(mean), _round(np.maximum(var, 1e-12)),
                      0.0 if n.output[0] in outputs_of_graph else SHIFT))
    return stats


def apply(model, stats):
    """Writes the statistics into `model` (of any batch; same weight names)."""
    g = _Graph(model)
    for kind, n, mean, var, shift in stats:
        if kind == "bn":
            g.set(n.input[2], g.value(n.input[2]) + np.float32(shift))
            g.set(n.input[3], mean)
            g.set(n.input[4], var)
            continue
        std = np.sqrt(var).astype(np.float32)
        w, b = g.value(n.input[1]), g.value(n.input[2])
        # out' = (conv(x, w) + b - mean) / std + b + shift
        if n.op_type == "Conv":
            w = w / std.reshape([-1] + [1] * (w.ndim - 1))
        else:
            trans_b = any(a.name == "transB" and a.i for a in n.attribute)
            w = w / (std[:, None] if trans_b else std[None, :])
        g.set(n.input[1], w)
        g.set(n.input[2], (b - mean) / std + b + np.float32(shift))
    return model
