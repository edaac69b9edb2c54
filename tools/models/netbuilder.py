"""Small deterministic graph-building layer over onnx.helper.

Every model in the zoo is written against the `Net` class below.  It keeps
track of NCHW shapes itself (so that the model code can compute paddings and
channel counts), hands out unique, hierarchical node names
("mixed_5b/branch3x3/conv") and draws all weights from one seeded numpy
Generator in program order, so a (name, batch, seed) triple always produces
the same bytes.

Only the ops the opc compiler is meant to support are emitted:
Conv, BatchNormalization, Relu, Clip, LRN, MaxPool, AveragePool,
GlobalAveragePool, Concat, Add, Sum, Mul, Sigmoid, Gemm, MatMul, Flatten,
Reshape, Softmax, Dropout, Constant, Shape, Gather, Unsqueeze, Cast, Pad.
A subclass may allow more ops, and a newer opset, for the helpers at the end
of `Net` (HardSwish, HardSigmoid, Split, Transpose, Resize; zoo_mobile.py).
"""

import contextlib
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8

ALLOWED_OPS = frozenset("""
Conv BatchNormalization Relu Clip LRN MaxPool AveragePool GlobalAveragePool
Concat Add Sum Mul Sigmoid Gemm MatMul Flatten Reshape Softmax Dropout
Constant Shape Gather Unsqueeze Cast Pad""".split())


def _pair(v):
    if isinstance(v, (tuple, list)):
        assert len(v) == 2
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _pads4(p):
    """int | (ph, pw) | (top, left, bottom, right) -> ONNX 4-tuple."""
    if isinstance(p, (tuple, list)) and len(p) == 4:
        return tuple(int(x) for x in p)
    ph, pw = _pair(p)
    return (ph, pw, ph, pw)


def _out_dim(n, k, s, pb, pe, dil=1, ceil_mode=False):
    span = n + pb + pe - dil * (k - 1) - 1
    if ceil_mode:
        o = -(-span // s) + 1
        # a window may not start inside the end padding (ONNX/PyTorch rule)
        if (o - 1) * s >= n + pb:
            o -= 1
    else:
        o = span // s + 1
    assert o >= 1, "non-positive output size"
    return o


def valid_tap_fraction(n, k, s, pb, pe, dil=1):
    """The fraction of a conv's taps along one axis that read the input
    rather than its zero padding, over all output positions."""
    o = _out_dim(n, k, s, pb, pe, dil)
    inside = sum(1 for i in range(o) for t in range(k) if 0 <= i * s - pb + t * dil < n)
    return inside / float(o * k)


def same_pads(n, k, s):
    """TensorFlow 'SAME' padding (begin, end) for one spatial axis."""
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def max_gain(n):
    """E[max(0, Z_1..Z_n)^2] for iid standard normals (numerical integral;
    pure python, deterministic).  Used to estimate the scale after MaxPool."""
    acc = 0.0
    h = 1e-3
    for i in range(1, 8001):
        x = i * h
        cdf = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        acc += x * x * n * cdf ** (n - 1) * pdf
    return acc * h


def gauss_act_ms(f, var):
    """(E[f(Z)^2], E[f(Z)^2; f(Z) > 0]) for Z ~ N(0, var): the mean square
    after an elementwise activation f (midpoint rule over +-8 sigma; pure
    python, deterministic)."""
    sd = math.sqrt(var)
    n = 8000
    h = 16.0 * sd / n
    ms = pos = 0.0
    for i in range(n):
        z = -8.0 * sd + (i + 0.5) * h
        y = f(z)
        p = y * y * math.exp(-0.5 * z * z / var) / (sd * math.sqrt(2.0 * math.pi)) * h
        ms += p
        if y > 0:
            pos += p
    return ms, pos


def hard_sigmoid(z, alpha=1.0 / 6.0, beta=0.5):
    return min(max(alpha * z + beta, 0.0), 1.0)


def hard_swish(z):
    return z * hard_sigmoid(z)


class Tensor:
    """A named value with a statically known shape.

    `ms` is an analytic estimate of the value's mean square for a N(0,1)
    network input and `pos` the part of it carried by non-negative terms
    (post-ReLU values).  They are propagated with simple rules (He-initialised
    conv: ms *= gain, pos = 0; ReLU: ms = pos + (ms - pos) / 2; Add: both
    add up, ...) and used to give every
    BatchNormalization running statistics that match the scale of its input,
    the way a trained network's BN does, so activations stay O(1) however
    deep the net is.  Pure python floats: no platform-dependent maths."""
    __slots__ = ("name", "shape", "ms", "pos")

    def __init__(self, name, shape, ms=1.0, pos=0.0):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.ms = float(ms)
        self.pos = min(float(pos), self.ms)

    @property
    def relu_ms(self):
        return self.pos + (self.ms - self.pos) / 2

    @property
    def c(self):
        return self.shape[1]

    @property
    def h(self):
        return self.shape[2]

    @property
    def w(self):
        return self.shape[3]

    def __repr__(self):
        return "Tensor(%r, %r)" % (self.name, self.shape)


class Net:
    # What a subclass may change: the operators it may emit, its opset and
    # whether conv's estimate leaves out the taps that read zero padding
    # (which matters for big kernels and dilations on small maps).
    allowed_ops = ALLOWED_OPS
    opset = OPSET
    count_padding = False

    def __init__(self, name, seed=0, batch=1, bn_eps=1e-5, doc=""):
        self.model_name = name
        self.batch = int(batch)
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.bn_eps = float(bn_eps)
        self.doc = doc
        self.nodes = []
        self.inits = []
        self.inputs = []
        self.outputs = []
        self.value_shapes = {}       # tensor name -> shape (for self-check)
        self.value_ms = {}           # tensor name -> estimated mean square
        self._node_names = set()
        self._tensor_names = set()
        self._scope = []
        self._shared = {}            # cached shared initializers

    # ------------------------------------------------------------ naming
    @contextlib.contextmanager
    def scope(self, name):
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def qual(self, local):
        return "/".join(self._scope + [local]) if local else "/".join(self._scope)

    def _claim_node(self, name):
        if name in self._node_names:
            raise ValueError("duplicate node name %r" % name)
        self._node_names.add(name)
        return name

    def _claim_tensor(self, name):
        if name in self._tensor_names:
            raise ValueError("duplicate tensor name %r" % name)
        self._tensor_names.add(name)
        return name

    # ------------------------------------------------------ primitives
    def input(self, name, c, h, w):
        t = Tensor(self._claim_tensor(name), (self.batch, c, h, w))
        self.inputs.append(helper.make_tensor_value_info(
            t.name, TensorProto.FLOAT, list(t.shape)))
        self.value_shapes[t.name] = t.shape
        return t

    def output(self, t):
        """Mark a tensor as graph output (name it via node(..., out=NAME))."""
        self.outputs.append(helper.make_tensor_value_info(
            t.name, TensorProto.FLOAT, list(t.shape)))

    def init(self, name, arr):
        """Add an initializer (name is taken as-is, must be unique)."""
        self._claim_tensor(name)
        self.inits.append(numpy_helper.from_array(np.array(arr, order="C"), name))
        return name

    def shared_const(self, name, arr):
        """Initializer shared by many nodes (e.g. ReLU6 bounds)."""
        if name not in self._shared:
            self._shared[name] = self.init(name, arr)
        return self._shared[name]

    def node(self, op, inputs, name, shape=None, out=None, ms=1.0, pos=0.0,
             **attrs):
        """Emit one node with a single output.  `name` is local to the scope
        unless it already contains the scope.  Returns a Tensor."""
        assert op in self.allowed_ops, op
        full = self.qual(name)
        self._claim_node(full)
        oname = self._claim_tensor(out if out is not None else full)
        self.nodes.append(helper.make_node(op, list(inputs), [oname],
                                           name=full, **attrs))
        if shape is not None:
            self.value_shapes[oname] = tuple(shape)
        t = Tensor(oname, shape if shape is not None else (), ms, pos)
        self.value_ms[oname] = t.ms
        return t

    # ---------------------------------------------------------- random
    def normal(self, shape, std, mean=0.0):
        a = self.rng.standard_normal(size=shape, dtype=np.float32)
        return (a * np.float32(std) + np.float32(mean)).astype(np.float32)

    # ---------------------------------------------------------- layers
    def conv(self, x, cout, k, stride=1, pads=0, group=1, dilation=1,
             bias=False, name="conv", gain=2.0, weight_std=None, weight=None):
        """Conv with He-style init: std = sqrt(gain / fan_in).
        gain=2 for convs whose input went through a ReLU (He et al.),
        gain=1 for convs that follow a linear op (e.g. pointwise after
        depthwise) so that the forward variance is preserved."""
        kh, kw = _pair(k)
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        p = _pads4(pads)
        cin = x.c
        assert cin % group == 0 and cout % group == 0
        fan_in = (cin // group) * kh * kw
        std = weight_std if weight_std is not None else math.sqrt(gain / fan_in)
        full = self.qual(name)
        if weight is None:
            weight = self.normal((cout, cin // group, kh, kw), std)
            wms = std * std * fan_in          # E[sum_k w_k^2] per output
        else:
            wms = gain                        # caller passes the effective gain
        assert weight.shape == (cout, cin // group, kh, kw)
        wname = self.init(full + ".weight", weight.astype(np.float32))
        ins = [x.name, wname]
        if bias:
            ins.append(self.init(full + ".bias", self.normal((cout,), 0.01)))
        oh = _out_dim(x.h, kh, sh, p[0], p[2], dh)
        ow = _out_dim(x.w, kw, sw, p[1], p[3], dw)
        if self.count_padding:
            wms *= (valid_tap_fraction(x.h, kh, sh, p[0], p[2], dh)
                    * valid_tap_fraction(x.w, kw, sw, p[1], p[3], dw))
        attrs = dict(kernel_shape=[kh, kw], strides=[sh, sw], pads=list(p))
        if (dh, dw) != (1, 1):
            attrs["dilations"] = [dh, dw]
        if group != 1:
            attrs["group"] = group
        return self.node("Conv", ins, name, (x.shape[0], cout, oh, ow),
                         ms=x.ms * wms + (1e-4 if bias else 0.0), **attrs)

    def bn(self, x, name="bn", gamma_scale=1.0, eps=None):
        """Inference-mode BatchNormalization: scale ~ 1, bias ~ 0 (small
        noise), mean ~ 0 and var ~ E[x^2] of its input (+-20% noise), i.e.
        var ~ 1 wherever the signal is already unit-scale."""
        c = x.c
        full = self.qual(name)
        g = (1.0 + self.normal((c,), 0.1)) * np.float32(gamma_scale)
        b = self.normal((c,), 0.05)
        m = self.normal((c,), 0.05 * math.sqrt(x.ms))
        v = (self.rng.uniform(0.8, 1.2, size=c) * x.ms).astype(np.float32)
        ins = [x.name,
               self.init(full + ".scale", g.astype(np.float32)),
               self.init(full + ".bias", b),
               self.init(full + ".mean", m),
               self.init(full + ".var", v)]
        return self.node("BatchNormalization", ins, name, x.shape,
                         ms=float(gamma_scale) ** 2 * 1.01 + 0.0025,
                         epsilon=float(self.bn_eps if eps is None else eps),
                         momentum=0.9)

    def relu(self, x, name="relu"):
        return self.node("Relu", [x.name], name, x.shape,
                         ms=x.relu_ms, pos=x.relu_ms)

    def relu6(self, x, name="relu6"):
        lo = self.shared_const("relu6.min", np.array(0.0, np.float32))
        hi = self.shared_const("relu6.max", np.array(6.0, np.float32))
        return self.node("Clip", [x.name, lo, hi], name, x.shape,
                         ms=min(x.relu_ms, 36.0), pos=min(x.relu_ms, 36.0))

    def sigmoid(self, x, name="sigmoid"):
        return self.node("Sigmoid", [x.name], name, x.shape, ms=0.3, pos=0.3)

    def silu(self, x, name="silu"):
        """SiLU (swish), x * sigmoid(x), as exporters write it: Sigmoid, Mul."""
        with self.scope(name):
            s = self.sigmoid(x)
            return self.node("Mul", [x.name, s.name], "mul", x.shape,
                             ms=x.relu_ms, pos=x.relu_ms)

    def scale_channels(self, x, s, name="scale"):
        """x * s with s of shape (N, C, 1, 1) in (0, 1): squeeze-excitation.
        The scale estimate is the gate's own (0.3 for a Sigmoid)."""
        assert s.shape == (x.shape[0], x.c, 1, 1), (x, s)
        return self.node("Mul", [x.name, s.name], name, x.shape, ms=x.ms * s.ms,
                         pos=x.pos * s.ms)

    def conv_bn_relu(self, x, cout, k, stride=1, pads=0, name="", **kw):
        with self.scope(name) if name else contextlib.nullcontext():
            y = self.conv(x, cout, k, stride, pads, **kw)
            y = self.bn(y)
            return self.relu(y)

    def maxpool(self, x, k, stride, pads=0, ceil_mode=False, name="maxpool"):
        kh, kw = _pair(k)
        sh, sw = _pair(stride)
        p = _pads4(pads)
        oh = _out_dim(x.h, kh, sh, p[0], p[2], ceil_mode=ceil_mode)
        ow = _out_dim(x.w, kw, sw, p[1], p[3], ceil_mode=ceil_mode)
        attrs = dict(kernel_shape=[kh, kw], strides=[sh, sw], pads=list(p))
        if ceil_mode:
            attrs["ceil_mode"] = 1
        # underlying (pre-ReLU) variance, then the expected max of k*k values
        ms = (2.0 * x.pos + (x.ms - x.pos)) * max_gain(kh * kw)
        return self.node("MaxPool", [x.name], name, (x.shape[0], x.c, oh, ow),
                         ms=ms, pos=ms, **attrs)

    def avgpool(self, x, k, stride, pads=0, count_include_pad=False,
                ceil_mode=False, name="avgpool"):
        kh, kw = _pair(k)
        sh, sw = _pair(stride)
        p = _pads4(pads)
        oh = _out_dim(x.h, kh, sh, p[0], p[2], ceil_mode=ceil_mode)
        ow = _out_dim(x.w, kw, sw, p[1], p[3], ceil_mode=ceil_mode)
        attrs = dict(kernel_shape=[kh, kw], strides=[sh, sw], pads=list(p),
                     count_include_pad=1 if count_include_pad else 0)
        if ceil_mode:
            attrs["ceil_mode"] = 1
        return self.node("AveragePool", [x.name], name, (x.shape[0], x.c, oh, ow),
                         ms=x.ms, pos=x.pos, **attrs)

    def gap(self, x, name="gap"):
        return self.node("GlobalAveragePool", [x.name], name, (x.shape[0], x.c, 1, 1),
                         ms=x.ms, pos=x.pos)

    def lrn(self, x, size=5, alpha=1e-4, beta=0.75, bias=1.0, name="lrn"):
        return self.node("LRN", [x.name], name, x.shape, ms=x.ms, pos=x.pos,
                         size=size,
                         alpha=float(alpha), beta=float(beta), bias=float(bias))

    def concat(self, xs, name="concat", axis=1):
        shp = list(xs[0].shape)
        for t in xs[1:]:
            assert len(t.shape) == len(shp)
            for d in range(len(shp)):
                if d != axis:
                    assert t.shape[d] == shp[d], (t, xs[0])
        shp[axis] = sum(t.shape[axis] for t in xs)
        ms = sum(t.ms * t.shape[axis] for t in xs) / shp[axis]
        return self.node("Concat", [t.name for t in xs], name, shp, axis=axis,
                         ms=ms, pos=sum(t.pos * t.shape[axis] for t in xs) / shp[axis])

    def add(self, a, b, name="add"):
        assert a.shape == b.shape, (a, b)
        return self.node("Add", [a.name, b.name], name, a.shape, ms=a.ms + b.ms,
                         pos=a.pos + b.pos)

    def sum(self, xs, name="sum"):
        for t in xs[1:]:
            assert t.shape == xs[0].shape
        return self.node("Sum", [t.name for t in xs], name, xs[0].shape,
                         ms=sum(t.ms for t in xs), pos=sum(t.pos for t in xs))

    def mul_scalar(self, x, value, name="mul"):
        full = self.qual(name)
        cname = self.init(full + ".value", np.array(value, np.float32))
        v = float(np.float32(value))
        return self.node("Mul", [x.name, cname], name, x.shape, ms=x.ms * v * v,
                         pos=x.pos * v * v if v >= 0 else 0.0)

    def pad(self, x, pads, name="pad"):
        """Opset-13 Pad, mode=constant (value 0), pads given as an int64
        initializer [x1_begin, x2_begin, ..., x1_end, x2_end, ...]."""
        assert len(pads) == 2 * len(x.shape)
        full = self.qual(name)
        pname = self.init(full + ".pads", np.array(pads, np.int64))
        r = len(x.shape)
        shp = tuple(x.shape[i] + pads[i] + pads[i + r] for i in range(r))
        return self.node("Pad", [x.name, pname], name, shp, mode="constant",
                         ms=x.ms, pos=x.pos)

    def flatten(self, x, name="flatten"):
        n = x.shape[0]
        rest = int(np.prod(x.shape[1:]))
        return self.node("Flatten", [x.name], name, (n, rest), axis=1,
                         ms=x.ms, pos=x.pos)

    def dropout(self, x, ratio=None, name="dropout"):
        ins = [x.name]
        if ratio is not None:
            full = self.qual(name)
            ins.append(self.init(full + ".ratio", np.array(ratio, np.float32)))
        return self.node("Dropout", ins, name, x.shape, ms=x.ms, pos=x.pos)

    def gemm(self, x, nout, name="fc", out=None, gain=1.0, transB=1):
        """Fully connected layer; PyTorch-style Gemm(transB=1) by default."""
        n, nin = x.shape
        full = self.qual(name)
        std = math.sqrt(gain / nin)
        w = self.normal((nout, nin) if transB else (nin, nout), std)
        wname = self.init(full + ".weight", w)
        bname = self.init(full + ".bias", self.normal((nout,), 0.01))
        attrs = dict(alpha=1.0, beta=1.0)
        if transB:
            attrs["transB"] = 1
        return self.node("Gemm", [x.name, wname, bname], name, (n, nout),
                         out=out, ms=x.ms * gain, **attrs)

    # -------------------------------------- ops a subclass must allow
    def hardswish(self, x, name="hardswish"):
        """HardSwish (opset 14), x * relu6(x + 3) / 6 as one node, the way
        torch exports nn.Hardswish."""
        ms, pos = gauss_act_ms(hard_swish, x.ms)
        return self.node("HardSwish", [x.name], name, x.shape, ms=ms, pos=pos)

    def hardsigmoid(self, x, alpha=1.0 / 6.0, beta=0.5, name="hardsigmoid"):
        """HardSigmoid, clip(alpha * x + beta, 0, 1); torch's nn.Hardsigmoid
        is alpha = 1/6, beta = 0.5."""
        ms, _ = gauss_act_ms(lambda z: hard_sigmoid(z, alpha, beta), x.ms)
        return self.node("HardSigmoid", [x.name], name, x.shape, ms=ms, pos=ms,
                         alpha=float(alpha), beta=float(beta))

    def split(self, x, sizes, axis=1, name="split"):
        """Opset-13 Split with the sizes as an int64 input (torch's chunk);
        returns one Tensor per output, named NAME_0, NAME_1, ..."""
        assert sum(sizes) == x.shape[axis], (x, sizes)
        full = self.qual(name)
        sname = self.init(full + ".split", np.array(sizes, np.int64))
        self._claim_node(full)
        outs = []
        for k, size in enumerate(sizes):
            shp = list(x.shape)
            shp[axis] = size
            t = Tensor(self._claim_tensor("%s_%d" % (full, k)), shp, x.ms, x.pos)
            self.value_shapes[t.name] = t.shape
            self.value_ms[t.name] = t.ms
            outs.append(t)
        self.nodes.append(helper.make_node("Split", [x.name, sname],
                                           [t.name for t in outs], name=full,
                                           axis=axis))
        return outs

    def reshape(self, x, shape, name="reshape"):
        """Reshape to an int64 initializer shape (one entry may be -1)."""
        out = list(shape)
        if -1 in out:
            known = int(np.prod([d for d in out if d != -1]))
            out[out.index(-1)] = int(np.prod(x.shape)) // known
        assert int(np.prod(out)) == int(np.prod(x.shape)), (x, shape)
        full = self.qual(name)
        sname = self.init(full + ".shape", np.array(shape, np.int64))
        return self.node("Reshape", [x.name, sname], name, out, ms=x.ms, pos=x.pos)

    def transpose(self, x, perm, name="transpose"):
        return self.node("Transpose", [x.name], name, [x.shape[p] for p in perm],
                         ms=x.ms, pos=x.pos, perm=list(perm))

    def resize(self, x, sizes=None, scales=None, mode="linear",
               coord="pytorch_half_pixel", name="resize", out=None):
        """Opset-13 Resize as torch exports F.interpolate: roi left out,
        then either `scales` (float32, every axis) or `sizes` (int64, every
        axis) as an initializer; nearest_mode floor, cubic_coeff_a -0.75."""
        assert (sizes is None) != (scales is None)
        full = self.qual(name)
        if sizes is not None:
            shp = [int(d) for d in sizes]
            ins = [x.name, "", "", self.init(full + ".sizes", np.array(shp, np.int64))]
        else:
            shp = [int(math.floor(d * s)) for d, s in zip(x.shape, scales)]
            ins = [x.name, "", self.init(full + ".scales", np.array(scales, np.float32))]
        assert len(shp) == len(x.shape)
        return self.node("Resize", ins, name, shp, out=out, ms=x.ms, pos=x.pos, mode=mode,
                         coordinate_transformation_mode=coord,
                         nearest_mode="floor", cubic_coeff_a=-0.75)

    # ------------------------------------------------------------ model
    def to_model(self, check=True):
        graph = helper.make_graph(self.nodes, self.model_name, self.inputs,
                                  self.outputs, initializer=self.inits,
                                  doc_string=self.doc)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="opc-zoo", producer_version="1",
                                  ir_version=IR_VERSION)
        metadata = dict(getattr(self, "metadata", None) or {})
        # Every zoo input of an image's shape takes photographs
        # (tests/zoo/reference.py reads this).
        for i in self.inputs:
            dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
            if (i.type.tensor_type.elem_type == TensorProto.FLOAT and len(dims) == 4
                    and dims[1] in (1, 3)):
                metadata.setdefault("opc.input_kind." + i.name, "image")
        if metadata:
            helper.set_model_props(model, dict(sorted(metadata.items())))
        if check:
            onnx.checker.check_model(model)
            self._verify_shapes(model)
            for n in model.graph.node:
                assert n.op_type in self.allowed_ops, n.op_type
        return model

    def _verify_shapes(self, model):
        """Cross-check our own shape bookkeeping against ONNX shape inference."""
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        got = {}
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            dims = vi.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in dims):
                got[vi.name] = tuple(d.dim_value for d in dims)
        for name, shp in self.value_shapes.items():
            if name in got and got[name] != tuple(shp):
                raise AssertionError("shape mismatch for %s: ours %s, onnx %s"
                                     % (name, shp, got[name]))
