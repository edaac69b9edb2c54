"""Synthetic ONNX graphs of a given node count, for compile-time benchmarks.

  gen_graph.py chain|fanout|inception NODES OUT.onnx

chain      a line of Relu nodes;
fanout     blocks where one tensor feeds 32 branches (each adds its own
           constant, so that no two are the same) that a Sum joins;
inception  Inception-like blocks: four branches of 1x1 and 3x3 convolutions
           and a max pool, joined by a Concat.
Weights are small and seeded: the graphs exist to stress the compiler.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FANOUT_WIDTH = 32
CHANNELS = 4  # per inception branch


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0
        self.rng = np.random.default_rng(0)

    def name(self, kind):
        self.count += 1
        return f"{kind}{self.count}"

    def node(self, op, inputs, **attrs):
        out = self.name("t")
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name(op.lower()), **attrs))
        return out

    def weight(self, shape):
        w = self.name("w")
        data = self.rng.standard_normal(shape).astype(np.float32) * 0.3
        self.inits.append(numpy_helper.from_array(data, w))
        return w

    def conv(self, x, cin, cout, k):
        return self.node("Conv", [x, self.weight([cout, cin, k, k])], pads=[k // 2] * 4)


def chain(b, x, nodes):
    while len(b.nodes) < nodes:
        x = b.node("Relu", [x])
    return x, [1, 16]


def fanout(b, x, nodes):
    while len(b.nodes) + FANOUT_WIDTH + 1 <= nodes:
        branches = [b.node("Add", [x, b.weight([1, 16])]) for _ in range(FANOUT_WIDTH)]
        x = b.node("Sum", branches)
    return chain(b, x, nodes)[0], [1, 16]


def inception_block(b, x):
    c = CHANNELS
    one = b.conv(x, 4 * c, c, 1)
    three = b.conv(b.conv(x, 4 * c, c, 1), c, c, 3)
    five = b.conv(b.conv(b.conv(x, 4 * c, c, 1), c, c, 3), c, c, 3)
    pool = b.conv(b.node("MaxPool", [x], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), 4 * c, c, 1)
    return b.node("Concat", [one, three, five, pool], axis=1)


def inception(b, x, nodes):
    while len(b.nodes) + 9 <= nodes:
        x = inception_block(b, x)
    while len(b.nodes) < nodes:
        x = b.node("Relu", [x])
    return x, [1, 4 * CHANNELS, 8, 8]


def build(kind, nodes):
    b = Builder()
    out, shape = {"chain": chain, "fanout": fanout, "inception": inception}[kind](b, "x", nodes)
    graph = helper.make_graph(
        b.nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, shape)], b.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    onnx.save(build(sys.argv[1], int(sys.argv[2])), sys.argv[3])
