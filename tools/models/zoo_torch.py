"""torch_export_cnn: a small CNN written the way `torch.onnx.export`
(opset 13) writes models, built by hand with onnx.helper.

It deliberately carries the exporter's idioms:
  * names like "/conv1/Conv", "/conv1/Conv_output_0", "conv1.weight", "input.1"
  * a conv weight delivered by a Constant node instead of an initializer
  * F.pad -> Pad(data, pads=Constant int64[8], constant_value=Constant 0.0)
  * ReLU6 -> Clip(x, Constant 0.0, Constant 6.0)  (opset-13 min/max inputs)
  * x.view(x.size(0), -1) -> Shape -> Gather(Constant 0) -> Unsqueeze(axes
    Constant [0]) -> Concat(.., Constant [-1]) -> Cast(INT64) -> Reshape
  * squeeze-excitation: GlobalAveragePool -> 1x1 convs -> Sigmoid -> Mul
    (broadcast [N,C,1,1] * [N,C,H,W])
  * x @ W + b written as MatMul + Add, then a Gemm(transB=1) classifier
  * two graph outputs, one of which ("features") is also consumed inside.
"""

import math

import numpy as np
from onnx import TensorProto

from netbuilder import Net, _out_dim
from torchlike import Exporter


class _Exporter(Exporter):
    """torchlike's exporter naming, with this model's layer helpers."""

    def constant(self, arr, scope=""):
        return self.const(arr, scope)

    def he(self, shape, fan_in, gain=2.0):
        return self.net.normal(shape, math.sqrt(gain / fan_in))

    def conv(self, x, cout, k, s, p, scope, bias=True, weight_const=False):
        cin = x.c
        w = self.he((cout, cin, k, k), cin * k * k)
        key = scope.strip("/").replace("/", ".")
        wname = (self.constant(w, scope) if weight_const
                 else self.net.init(key + ".weight", w))
        ins = [x.name, wname]
        if bias:
            ins.append(self.net.init(key + ".bias", self.net.normal((cout,), 0.01)))
        oh = _out_dim(x.h, k, s, p, p)
        ow = _out_dim(x.w, k, s, p, p)
        return self.op("Conv", ins, (x.shape[0], cout, oh, ow), scope,
                       dilations=[1, 1], group=1, kernel_shape=[k, k],
                       pads=[p, p, p, p], strides=[s, s])

    def bn(self, x, scope):
        key = scope.strip("/").replace("/", ".")
        c = x.c
        n = self.net
        ins = [x.name,
               n.init(key + ".weight", (1.0 + n.normal((c,), 0.1)).astype(np.float32)),
               n.init(key + ".bias", n.normal((c,), 0.05)),
               n.init(key + ".running_mean", n.normal((c,), 0.05)),
               n.init(key + ".running_var", n.rng.uniform(0.8, 1.2, size=c).astype(np.float32))]
        return self.op("BatchNormalization", ins, x.shape, scope,
                       epsilon=1e-5, momentum=0.9)


def torch_export_cnn(batch=1, seed=0, image=96):
    net = Net("torch_jit", seed, batch,
              doc="small CNN in torch.onnx.export (opset 13) style, random weights")
    e = _Exporter(net)
    x = net.input("input.1", 3, image, image)

    # conv1: weight from a Constant node
    x = e.conv(x, 16, 3, 2, 1, "/conv1", weight_const=True)
    x = e.op("Relu", [x.name], x.shape, "/relu1")

    # explicit F.pad(x, (1, 1, 1, 1)) then an unpadded conv
    pads = e.constant(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
    zero = e.constant(np.array(0.0, np.float32))
    shp = (x.shape[0], x.c, x.h + 2, x.w + 2)
    x = e.op("Pad", [x.name, pads, zero], shp, "", mode="constant")
    x = e.conv(x, 32, 3, 1, 0, "/conv2", bias=False)
    x = e.bn(x, "/bn2")
    x = e.op("Relu", [x.name], x.shape, "/relu2")
    x = e.op("MaxPool", [x.name], (x.shape[0], x.c, x.h // 2, x.w // 2), "/pool",
             ceil_mode=0, kernel_shape=[2, 2], pads=[0, 0, 0, 0], strides=[2, 2])

    # basic residual block
    skip = x
    y = e.conv(x, 32, 3, 1, 1, "/layer1/conv1", bias=False)
    y = e.bn(y, "/layer1/bn1")
    y = e.op("Relu", [y.name], y.shape, "/layer1/relu")
    y = e.conv(y, 32, 3, 1, 1, "/layer1/conv2", bias=False)
    y = e.bn(y, "/layer1/bn2")
    y = e.op("Add", [y.name, skip.name], y.shape, "/layer1")
    x = e.op("Relu", [y.name], y.shape, "/layer1/relu_1")

    # squeeze-excitation
    s = e.op("GlobalAveragePool", [x.name], (x.shape[0], x.c, 1, 1), "/se/avgpool")
    s = e.conv(s, 8, 1, 1, 0, "/se/fc1")
    s = e.op("Relu", [s.name], s.shape, "/se/relu")
    s = e.conv(s, 32, 1, 1, 0, "/se/fc2")
    s = e.op("Sigmoid", [s.name], s.shape, "/se/sigmoid")
    x = e.op("Mul", [x.name, s.name], x.shape, "/se")

    # ReLU6 via Clip with Constant bounds
    lo = e.constant(np.array(0.0, np.float32), "/act")
    hi = e.constant(np.array(6.0, np.float32), "/act")
    x = e.op("Clip", [x.name, lo, hi], x.shape, "/act")

    x = e.conv(x, 64, 3, 2, 1, "/conv3", bias=False)
    x = e.bn(x, "/bn3")
    x = e.op("Relu", [x.name], x.shape, "/relu3")
    g = e.op("GlobalAveragePool", [x.name], (x.shape[0], 64, 1, 1), "/avgpool")

    # x.view(x.size(0), -1)
    shape = e.op("Shape", [g.name], (4,))
    idx0 = e.constant(np.array(0, np.int64))
    n = e.op("Gather", [shape.name, idx0], (), axis=0)
    axes = e.constant(np.array([0], np.int64))
    n1 = e.op("Unsqueeze", [n.name, axes], (1,))
    minus1 = e.constant(np.array([-1], np.int64))
    cat = e.op("Concat", [n1.name, minus1], (2,), axis=0)
    cat = e.op("Cast", [cat.name], (2,), to=TensorProto.INT64)
    feats = net.node("Reshape", [g.name, cat.name], "/Reshape", (batch, 64), out="features")

    # x @ W + b
    w1 = net.init("fc1.weight_t", e.he((64, 128), 64, 1.0))
    h = e.op("MatMul", [feats.name, w1], (batch, 128), "/fc1")
    b1 = net.init("fc1.bias", net.normal((128,), 0.01))
    h = e.op("Add", [h.name, b1], (batch, 128), "/fc1")
    h = e.op("Relu", [h.name], (batch, 128), "/fc1")
    h = e.op("Dropout", [h.name], (batch, 128), "/drop")

    w2 = net.init("fc2.weight", e.he((1000, 128), 128, 1.0))
    b2 = net.init("fc2.bias", net.normal((1000,), 0.01))
    y = net.node("Gemm", [h.name, w2, b2], "/fc2/Gemm", (batch, 1000), out="logits",
                 alpha=1.0, beta=1.0, transB=1)
    net.output(y)
    net.output(feats)
    return net
