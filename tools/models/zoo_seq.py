"""Sequence models in torch.onnx.export style: recurrent layers and an
opset-23 decoder (issue 50).

crnn       Shi et al. 2017, "An End-to-End Trainable Neural Network for
           Image-based Sequence Recognition" (CRNN): conv stack over a
           32-pixel line, two bidirectional LSTMs, a CTC head
gru_kws    a keyword-spotting GRU over MFCC-like frames (batch_first, as
           speech models write it), last step, Linear to the keywords
decoder23  a Llama-style decoder (Touvron et al. 2023) at opset 23:
           RMSNormalization, RotaryEmbedding, causal GQA Attention, SwiGLU

The recurrent layers are written as the TorchScript exporter writes
nn.LSTM / nn.GRU: one ONNX LSTM/GRU node in the [seq, batch, ...] layout
with its W, R, B initializers and all of its outputs named, the
bidirectional Y [T, 2, N, H] turned into [T, N, 2H] by Transpose(0, 2, 1, 3)
and Reshape(0, 0, -1), batch_first handled by Transposes around the node.
GRU has linear_before_reset = 1, as torch's GRU computes it.
"""

import math

import numpy as np
from onnx import TensorProto, helper

from netbuilder import Tensor
from torchlike import TORCH_OPS, Exporter, TNet

SEQ_OPS = TORCH_OPS | frozenset("""
LSTM GRU Squeeze LogSoftmax RMSNormalization Attention RotaryEmbedding""".split())


class SeqNet(TNet):
    allowed_ops = SEQ_OPS

    def __init__(self, name, seed=0, batch=1, doc="", metadata=None, opset=17):
        super().__init__(name, seed, batch, doc=doc, metadata=metadata)
        self.opset = opset


class SeqExporter(Exporter):
    def recurrent(self, op, x, hidden, scope, bidirectional, gates, input_gain=1.0, **attrs):
        """nn.LSTM / nn.GRU on x [T, N, C]: one node with outputs Y, Y_h
        (and Y_c), weights uniform in +-1/sqrt(hidden) as torch draws them
        (here normal with that std; the input weights input_gain times
        that). Returns Y [T, dirs, N, hidden]."""
        t, n, c = x.shape
        dirs = 2 if bidirectional else 1
        std = 1.0 / math.sqrt(hidden)
        key = scope.strip("/").replace("/", ".")
        w = self.param(key + ".weight_ih",
                       self.net.normal((dirs, gates * hidden, c), std * input_gain))
        r = self.param(key + ".weight_hh", self.net.normal((dirs, gates * hidden, hidden), std))
        b = self.param(key + ".bias", self.net.normal((dirs, 2 * gates * hidden), std))
        name = self._op_name(scope, op)
        outs = [name + "_output_%d" % k for k in range(3 if op == "LSTM" else 2)]
        for o in outs:
            self.net._claim_tensor(o)
        self.net._claim_node(name)
        if bidirectional:
            attrs["direction"] = "bidirectional"
        self.net.nodes.append(helper.make_node(op, [x.name, w, r, b], outs, name=name,
                                               hidden_size=hidden, **attrs))
        shape = (t, dirs, n, hidden)
        self.net.value_shapes[outs[0]] = shape
        self.net.value_shapes[outs[1]] = (dirs, n, hidden)
        return Tensor(outs[0], shape)

    def bilstm(self, x, hidden, scope, input_gain=1.0):
        """nn.LSTM(bidirectional=True) on [T, N, C] -> [T, N, 2H]."""
        y = self.recurrent("LSTM", x, hidden, scope, True, 4, input_gain)
        y = self.transpose(y, (0, 2, 1, 3), scope)
        t, n = x.shape[:2]
        return self.op("Reshape", [y, self.i64([0, 0, -1], scope)], (t, n, 2 * hidden), scope)

    def conv_bn_relu(self, x, cout, scope):
        """Conv 3x3 pad 1 (no bias) + BatchNormalization + Relu; the BN's
        statistics come from calibrate.py."""
        n, cin, h, w = x.shape
        key = scope.strip("/").replace("/", ".")
        wt = self.param(key + ".conv.weight",
                        self.net.normal((cout, cin, 3, 3), math.sqrt(2.0 / (cin * 9))))
        y = self.op("Conv", [x, wt], (n, cout, h, w), scope + "/conv",
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
        bn = [self.param(key + ".bn." + p, v) for p, v in (
            ("weight", 1.0 + self.net.normal((cout,), 0.1)),
            ("bias", self.net.normal((cout,), 0.05)),
            ("running_mean", np.zeros(cout)), ("running_var", np.ones(cout)))]
        y = self.op("BatchNormalization", [y] + bn, y.shape, scope + "/bn", epsilon=1e-5)
        return self.op("Relu", [y], y.shape, scope + "/relu")

    def maxpool(self, x, kh, kw, scope):
        n, c, h, w = x.shape
        return self.op("MaxPool", [x], (n, c, h // kh, w // kw), scope,
                       kernel_shape=[kh, kw], strides=[kh, kw])


# ===================================================================
# CRNN
# ===================================================================

def crnn(batch=1, seed=0, width=128, classes=37, hidden=48):
    """[N, 1, 32, W] line image -> CTC log-probabilities [W/4, N, classes]."""
    net = SeqNet("crnn", seed, batch,
                 doc="CRNN (Shi et al. 2017): 4 conv-BN-ReLU-pool layers, 2 bidirectional "
                     "LSTMs (hidden %d), Linear + LogSoftmax CTC head over %d classes; "
                     "torch.onnx.export style, opset 17, random weights" % (hidden, classes))
    e = SeqExporter(net)
    x = net.tensor_input("input", (batch, 1, 32, width))
    # 32 x W -> 16 x W/2 -> 8 x W/4 -> 4 x W/4 -> 1 x W/4
    for i, (cout, kh, kw) in enumerate([(16, 2, 2), (32, 2, 2), (64, 2, 1), (64, 4, 1)]):
        x = e.conv_bn_relu(x, cout, "/cnn/%d" % i)
        x = e.maxpool(x, kh, kw, "/cnn/%d/pool" % i)
    n, c, _, t = x.shape
    x = e.op("Squeeze", [x, e.i64([2])], (n, c, t), "")
    x = e.transpose(x, (2, 0, 1), "")                         # [T, N, C]
    # The conv features reach the LSTMs with a mean of 0.5 (calibrate.py)
    # and a small input-dependent part: input weights 4x torch's init make
    # the gates follow the input (sensitivity 0.28 to 0.54 over 18 input
    # seeds; 0.19 to 0.40 at 1x, where the zoo asks for 0.2).
    x = e.bilstm(x, hidden, "/rnn/0", input_gain=4.0)
    x = e.bilstm(x, hidden, "/rnn/1", input_gain=4.0)
    # A trained CTC head is peaked (most frames are sure of blank or one
    # character). With torch's small init the log-probabilities sit near
    # -log(classes) for every input and the input decides 3% of them; a
    # weight std of sqrt(300 / 2H) spreads the logits.
    x = e.linear(x, classes, "/fc", gain=300.0)
    y = net.node("LogSoftmax", [x.name], "/LogSoftmax", x.shape, out="log_probs", axis=2)
    net.tensor_output(y)
    return net


# ===================================================================
# GRU keyword spotter
# ===================================================================

def gru_kws(batch=1, seed=0, frames=49, features=40, hidden=64, keywords=12):
    """MFCC-like frames [N, T, F] (batch_first) -> keyword logits [N, 12]."""
    net = SeqNet("gru_kws", seed, batch,
                 doc="keyword spotting GRU: %d frames of %d features, GRU(hidden %d, "
                     "batch_first), last step, Linear to %d keywords; torch.onnx.export "
                     "style, opset 17, random weights" % (frames, features, hidden, keywords))
    e = SeqExporter(net)
    x = net.tensor_input("mfcc", (batch, frames, features))
    x = e.transpose(x, (1, 0, 2), "/gru")                     # batch_first -> [T, N, F]
    y = e.recurrent("GRU", x, hidden, "/gru", False, 3, linear_before_reset=1)
    y = e.op("Squeeze", [y, e.i64([1], "/gru")], (frames, batch, hidden), "/gru")
    y = e.transpose(y, (1, 0, 2), "/gru")                     # [N, T, H]
    last = e.gather(y, -1, 1, "")                             # out[:, -1]
    z = e.gemm(last, keywords, "/fc", out="logits")
    net.tensor_output(z)
    return net


# ===================================================================
# Llama-style decoder at opset 23
# ===================================================================

def _rms_norm(e, x, scope, out=None):
    key = scope.strip("/").replace("/", ".")
    g = e.param(key + ".weight", 1.0 + e.net.normal((x.shape[-1],), 0.1))
    name = e._op_name(scope, "RMSNormalization")
    return e.net.node("RMSNormalization", [x.name, g], name, x.shape,
                      out=out or name + "_output_0", axis=-1, epsilon=1e-5)


def _heads(e, x, heads, scope):
    """[B, S, heads * D] -> [B, heads, S, D]"""
    b, s, h = x.shape
    y = e.reshape(x, [b, s, heads, h // heads], scope)
    return e.transpose(y, (0, 2, 1, 3), scope)


def _decoder_layer(e, x, cos, sin, heads, kv_heads, inter, scope):
    b, s, h = x.shape
    d = h // heads
    sa = scope + "/self_attn"
    y = _rms_norm(e, x, scope + "/input_layernorm")
    q = _heads(e, e.linear(y, h, sa + "/q_proj", bias=False), heads, sa)
    k = _heads(e, e.linear(y, kv_heads * d, sa + "/k_proj", bias=False), kv_heads, sa)
    v = _heads(e, e.linear(y, kv_heads * d, sa + "/v_proj", bias=False), kv_heads, sa)
    q = e.op("RotaryEmbedding", [q, cos, sin], q.shape, sa)
    k = e.op("RotaryEmbedding", [k, cos, sin], k.shape, sa)
    a = e.op("Attention", [q, k, v], q.shape, sa, is_causal=1)
    a = e.transpose(a, (0, 2, 1, 3), sa)
    a = e.reshape(a, [b, s, h], sa)
    a = e.linear(a, h, sa + "/o_proj", bias=False)
    x = e.op("Add", [x, a], x.shape, scope)

    mlp = scope + "/mlp"
    y = _rms_norm(e, x, scope + "/post_attention_layernorm")
    gate = e.linear(y, inter, mlp + "/gate_proj", bias=False)
    up = e.linear(y, inter, mlp + "/up_proj", bias=False)
    sg = e.op("Sigmoid", [gate], gate.shape, mlp + "/act_fn")
    silu = e.op("Mul", [gate, sg], gate.shape, mlp + "/act_fn")
    y = e.op("Mul", [silu, up], gate.shape, mlp)
    y = e.linear(y, h, mlp + "/down_proj", bias=False, gain=2.0)
    return e.op("Add", [x, y], x.shape, scope)


def decoder23(batch=1, seed=0, seq=16, hidden=64, layers=2, heads=4, kv_heads=2,
              inter=128, vocab=256, theta=10000.0):
    """token ids [N, S] -> next-token logits [N, S, vocab]."""
    net = SeqNet("decoder23", seed, batch,
                 doc="Llama-style decoder, %d layers, hidden %d, %d query / %d key-value "
                     "heads, SwiGLU %d, vocab %d, sequence %d; opset 23 RMSNormalization, "
                     "RotaryEmbedding, Attention (causal); random weights"
                     % (layers, hidden, heads, kv_heads, inter, vocab, seq),
                 metadata={"opc.input_range.input_ids": "0,%d" % vocab}, opset=23)
    e = SeqExporter(net)
    ids = net.tensor_input("input_ids", (batch, seq), TensorProto.INT64)
    table = e.param("embed_tokens.weight", net.normal((vocab, hidden), 1.0))
    x = e.op("Gather", [table, ids], (batch, seq, hidden), "/embed_tokens", axis=0)
    # rotary caches for positions 0..S-1 (no position_ids: [N, S, D/2])
    d = hidden // heads
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.arange(seq)[:, None] * inv[None, :]
    cos = e.const(np.broadcast_to(np.cos(ang), (batch, seq, d // 2)).astype(np.float32),
                  "/rotary_emb")
    sin = e.const(np.broadcast_to(np.sin(ang), (batch, seq, d // 2)).astype(np.float32),
                  "/rotary_emb")
    for i in range(layers):
        x = _decoder_layer(e, x, cos, sin, heads, kv_heads, inter, "/layers.%d" % i)
    x = _rms_norm(e, x, "/norm")
    w = e.param("lm_head.weight_t", net.normal((hidden, vocab), math.sqrt(1.0 / hidden)))
    y = net.node("MatMul", [x.name, w], "/lm_head/MatMul", (batch, seq, vocab), out="logits")
    net.tensor_output(y)
    return net
