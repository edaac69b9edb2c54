"""The error that storing values in 16 bits alone gives a model, computed by
ONNX Runtime: the floor under `opc --precision fp16|bf16`.

rounded_model(model, precision) is the model with every float32 weight
rounded to float16 or bfloat16 (to nearest even) and every float32 value a
node writes rounded the same way before any node reads it (a Cast to the
16-bit type and back after each node); everything else is computed exactly
as in float32. ONNX Runtime's Cast rounds to nearest even, as round_to
does, so the values are those of rounding each stored tensor by hand.

opc computes more of a model in float32 than this (Softmax, reductions,
normalisations, the accumulations of convolutions and GEMMs) and stores no
value a fused unit keeps inside, but it also transforms weights before
rounding them (folded BatchNormalization) and sums in another order. The
zoo holds its bfloat16 programs to a bound of their own precision or
compare.FLOOR_FACTOR times this floor, whichever is larger: a model that
amplifies rounding gets a wider bound only as far as the oracle shows the
rounding itself costs.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, version_converter

CAST_TO = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
# Cast takes bfloat16 from opset 13: an older model (PP-OCR's are opset 12)
# is converted first (onnx.version_converter keeps what it computes).
CAST_BFLOAT16_OPSET = 13


def _opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def round_to(a, precision):
    """float32 array rounded to float16 or bfloat16 (nearest even), back in
    float32; NaN and infinities pass."""
    a = np.asarray(a, np.float32)
    if precision == "fp16":
        return a.astype(np.float16).astype(np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return np.where(np.isfinite(a), bits.astype(np.uint32).view(np.float32), a)


def _float_values(model):
    """Names of the values shape inference types as float32."""
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    return {v.name for v in list(g.value_info) + list(g.output) + list(g.input)
            if v.type.tensor_type.elem_type == TensorProto.FLOAT}


def rounded_model(model, precision):
    """A copy of `model` (a ModelProto) that stores every float32 weight and
    node output in `precision` ("fp16" or "bf16")."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    if _opset(m) < CAST_BFLOAT16_OPSET:
        m = version_converter.convert_version(m, CAST_BFLOAT16_OPSET)
    floats = _float_values(m)
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(round_to(numpy_helper.to_array(t), precision),
                                               t.name))
    nodes = []
    for n in m.graph.node:
        nodes.append(n)
        for k, out in enumerate(n.output):
            if out and out in floats:
                n.output[k] = out + "__exact"
                nodes.append(helper.make_node("Cast", [n.output[k]], [out + "__stored"],
                                              to=CAST_TO[precision]))
                nodes.append(helper.make_node("Cast", [out + "__stored"], [out],
                                              to=TensorProto.FLOAT))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m
