"""Graph building in `torch.onnx.export` style at opset 17, for the transformer
models of the zoo (zoo_transformer.py).

`TNet` extends netbuilder.Net: it allows the extra ops a transformer export
uses (LayerNormalization, Transpose, Softmax, Slice, ScatterND, Where, ...),
inputs and outputs of any rank and element type, opset 17, and model
metadata_props (used for the input convention of tests/zoo/reference.py).
The shapes the model code passes are still cross-checked against strict ONNX
shape inference, and all weights still come from the one seeded Generator.

`Exporter` names things the way the TorchScript exporter does:
"/layers.0/blocks.1/attn/MatMul", output "<node>_output_0", Constant nodes
"/.../Constant_3", parameters "layers.0.blocks.1.attn.qkv.weight".
"""

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from netbuilder import ALLOWED_OPS, Net, Tensor

OPSET = 17

TORCH_OPS = ALLOWED_OPS | frozenset("""
LayerNormalization Transpose Softmax Slice ScatterND Equal Not Where Sub Div
Erf Tanh Expand""".split())

INT64_MAX = 9223372036854775807


class TNet(Net):
    allowed_ops = TORCH_OPS
    opset = OPSET

    def __init__(self, name, seed=0, batch=1, doc="", metadata=None):
        super().__init__(name, seed, batch, doc=doc)
        self.metadata = dict(metadata or {})

    def tensor_input(self, name, shape, elem=TensorProto.FLOAT):
        t = Tensor(self._claim_tensor(name), shape)
        self.inputs.append(helper.make_tensor_value_info(name, elem, list(t.shape)))
        self.value_shapes[name] = t.shape
        return t

    def tensor_output(self, t, elem=TensorProto.FLOAT):
        self.outputs.append(helper.make_tensor_value_info(t.name, elem, list(t.shape)))

    def _verify_shapes(self, model):
        """Every shape the model code gave must equal strict ONNX shape
        inference's, with data propagation (to see through Shape -> Gather ->
        Concat -> Reshape/Expand chains)."""
        import onnx
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True,
                                                     data_prop=True)
        got = {}
        for vi in (list(inferred.graph.value_info) + list(inferred.graph.output)
                   + list(inferred.graph.input)):
            dims = vi.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in dims):
                got[vi.name] = tuple(d.dim_value for d in dims)
        for n in model.graph.node:
            if n.op_type == "Constant":
                got[n.output[0]] = tuple(n.attribute[0].t.dims)
        for name, shp in self.value_shapes.items():
            if got.get(name) != tuple(shp):
                raise AssertionError("shape of %s: ours %s, onnx %s"
                                     % (name, shp, got.get(name)))


def _key(scope):
    """'/layers.0/blocks.1/attn/qkv' -> 'layers.0.blocks.1.attn.qkv'"""
    return scope.strip("/").replace("/", ".")


class Exporter:
    def __init__(self, net):
        self.net = net
        self.counts = {}

    # ------------------------------------------------------------ names
    def _op_name(self, scope, op):
        key = (scope, op)
        k = self.counts.get(key, 0)
        self.counts[key] = k + 1
        base = "%s/%s" % (scope, op) if scope else "/" + op
        return base if k == 0 else "%s_%d" % (base, k)

    def op(self, op, inputs, shape, scope="", **attrs):
        """One node; `inputs` are Tensors or tensor names."""
        name = self._op_name(scope, op)
        ins = [i.name if isinstance(i, Tensor) else i for i in inputs]
        return self.net.node(op, ins, name, shape, out=name + "_output_0", **attrs)

    def const(self, arr, scope=""):
        """A Constant node (how the exporter emits folded shapes, indices,
        scalars and buffers); returns the output name."""
        arr = np.array(arr, order="C")
        name = self._op_name(scope, "Constant")
        out = name + "_output_0"
        self.net._claim_node(name)
        self.net._claim_tensor(out)
        self.net.nodes.append(helper.make_node(
            "Constant", [], [out], name=name, value=numpy_helper.from_array(arr, out)))
        self.net.value_shapes[out] = tuple(arr.shape)
        return out

    def const_tensor(self, arr, scope=""):
        arr = np.asarray(arr)
        return Tensor(self.const(arr, scope), arr.shape)

    def i64(self, values, scope=""):
        return self.const(np.array(values, np.int64), scope)

    def f32(self, value, scope=""):
        return self.const(np.array(value, np.float32), scope)

    def param(self, key, arr):
        return self.net.init(key, np.asarray(arr, np.float32))

    # ----------------------------------------------------------- shapes
    def reshape(self, x, shape, scope):
        shape = list(shape)
        out = list(shape)
        if -1 in out:
            known = int(np.prod([d for d in out if d != -1]))
            out[out.index(-1)] = int(np.prod(x.shape)) // known
        assert int(np.prod(out)) == int(np.prod(x.shape)), (x, shape)
        return self.op("Reshape", [x, self.i64(shape, scope)], out, scope)

    def transpose(self, x, perm, scope):
        return self.op("Transpose", [x], [x.shape[p] for p in perm], scope, perm=list(perm))

    def unsqueeze(self, x, axis, scope):
        shp = list(x.shape)
        shp.insert(axis if axis >= 0 else len(shp) + 1 + axis, 1)
        return self.op("Unsqueeze", [x, self.i64([axis], scope)], shp, scope)

    def slice(self, x, axis, start, end, scope, step=1):
        """x[..., start:end:step, ...] as Slice with Constant starts/ends/axes
        (/steps); end=None means to the end (INT64_MAX, as the exporter writes it)."""
        n = x.shape[axis]
        rng = range(n)[slice(start, end, step)]
        shp = list(x.shape)
        shp[axis] = len(rng)
        ins = [x, self.i64([start], scope),
               self.i64([INT64_MAX if end is None else end], scope),
               self.i64([axis], scope)]
        if step != 1:
            ins.append(self.i64([step], scope))
        return self.op("Slice", ins, shp, scope)

    def gather(self, x, index, axis, scope):
        """x[..., index, ...] with a scalar Constant index (drops the axis)."""
        shp = list(x.shape)
        del shp[axis]
        return self.op("Gather", [x, self.i64(index, scope)], shp, scope, axis=axis)

    # ----------------------------------------------------------- layers
    def linear(self, x, nout, scope, bias=True, gain=1.0):
        """nn.Linear on a rank >= 3 input: MatMul with the transposed weight,
        then Add of the bias (what the exporter emits for 3-D inputs)."""
        nin = x.shape[-1]
        w = self.net.normal((nin, nout), math.sqrt(gain / nin))
        key = _key(scope)
        y = self.op("MatMul", [x, self.param(key + ".weight_t", w)],
                    list(x.shape[:-1]) + [nout], scope)
        if bias:
            b = self.param(key + ".bias", self.net.normal((nout,), 0.02))
            y = self.op("Add", [b, y], y.shape, scope)
        return y

    def gemm(self, x, nout, scope, out=None, gain=1.0):
        """nn.Linear on a 2-D input: Gemm(transB=1)."""
        n, nin = x.shape
        key = _key(scope)
        w = self.param(key + ".weight", self.net.normal((nout, nin), math.sqrt(gain / nin)))
        b = self.param(key + ".bias", self.net.normal((nout,), 0.02))
        name = self._op_name(scope, "Gemm")
        return self.net.node("Gemm", [x.name, w, b], name, (n, nout),
                             out=out or name + "_output_0",
                             alpha=1.0, beta=1.0, transB=1)

    def layer_norm(self, x, scope, eps=1e-5, out=None):
        c = x.shape[-1]
        key = _key(scope)
        g = self.param(key + ".weight", 1.0 + self.net.normal((c,), 0.1))
        b = self.param(key + ".bias", self.net.normal((c,), 0.05))
        name = self._op_name(scope, "LayerNormalization")
        return self.net.node("LayerNormalization", [x.name, g, b], name, x.shape,
                             out=out or name + "_output_0", axis=-1, epsilon=float(eps))

    def gelu(self, x, scope):
        """nn.GELU() at opset < 20: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        d = self.op("Div", [x, self.f32(1.4142135381698608, scope)], x.shape, scope)
        e = self.op("Erf", [d], x.shape, scope)
        a = self.op("Add", [e, self.f32(1.0, scope)], x.shape, scope)
        m = self.op("Mul", [x, a], x.shape, scope)
        return self.op("Mul", [m, self.f32(0.5, scope)], x.shape, scope)
