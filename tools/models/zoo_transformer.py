"""Small transformers written from their papers, in torch.onnx.export style
(opset 17; see torchlike.py).

swin       Liu et al. 2021, "Swin Transformer: Hierarchical Vision Transformer
           using Shifted Windows" (a small Swin: 64x64, C = 32, depths 2-2-2)
bert_tiny  Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional
           Transformers for Language Understanding" (L = 2, H = 128, A = 2)
"""

import math

import numpy as np
from onnx import TensorProto

from torchlike import Exporter, TNet


# ===================================================================
# Swin Transformer
# ===================================================================

def relative_position_index(ws):
    """[ws*ws, ws*ws] index into the (2ws-1)^2 bias table: for tokens i, j of
    a window at (yi, xi), (yj, xj): (yi-yj+ws-1) * (2ws-1) + (xi-xj+ws-1)."""
    yy, xx = np.meshgrid(np.arange(ws), np.arange(ws), indexing="ij")
    y = yy.reshape(-1)
    x = xx.reshape(-1)
    dy = y[:, None] - y[None, :] + ws - 1
    dx = x[:, None] - x[None, :] + ws - 1
    return (dy * (2 * ws - 1) + dx).astype(np.int64)


def _roll(e, x, shift, scope):
    """torch.roll(x, (shift, shift), dims=(1, 2)) the way the exporter writes
    it: per dim, Concat(x[-shift:], x[:-shift])."""
    for axis in (1, 2):
        a = e.slice(x, axis, -shift, None, scope)
        b = e.slice(x, axis, 0, -shift, scope)
        x = e.op("Concat", [a, b], x.shape, scope, axis=axis)
    return x


def _window_partition(e, x, ws, scope):
    """[B, H, W, C] -> [B * nW, ws, ws, C]"""
    b, h, w, c = x.shape
    x = e.reshape(x, [b, h // ws, ws, w // ws, ws, c], scope)
    x = e.transpose(x, (0, 1, 3, 2, 4, 5), scope)
    return e.reshape(x, [-1, ws, ws, c], scope)


def _window_reverse(e, x, ws, b, h, w, scope):
    """[B * nW, ws, ws, C] -> [B, H, W, C]"""
    x = e.reshape(x, [b, h // ws, w // ws, ws, ws, -1], scope)
    x = e.transpose(x, (0, 1, 3, 2, 4, 5), scope)
    return e.reshape(x, [b, h, w, -1], scope)


def _shift_mask(e, h, w, ws, shift, scope):
    """The SW-MSA mask [nW, N, N], computed in the forward pass from constants
    only: label the 9 regions of a zero image mask by slice assignment
    (ScatterND with constant indices and updates), partition it into windows,
    subtract the labels pairwise and fill: != 0 -> -100, == 0 -> 0."""
    img = e.const_tensor(np.zeros((1, h, w, 1), np.float32), scope)
    regions = (slice(0, -ws), slice(-ws, -shift), slice(-shift, None))
    cnt = 0
    for hs in regions:
        for wsl in regions:
            rows = np.arange(h)[hs]
            cols = np.arange(w)[wsl]
            r, c = np.meshgrid(rows, cols, indexing="ij")
            idx = np.stack([np.zeros_like(r), r, c, np.zeros_like(r)], axis=-1)
            idx = idx.reshape(1, len(rows), len(cols), 1, 4).astype(np.int64)
            upd = np.full((1, len(rows), len(cols), 1), cnt, np.float32)
            img = e.op("ScatterND", [img, e.const(idx, scope), e.const(upd, scope)],
                       img.shape, scope)
            cnt += 1
    mw = _window_partition(e, img, ws, scope)                # [nW, ws, ws, 1]
    mw = e.reshape(mw, [-1, ws * ws], scope)                 # [nW, N]
    nw, n = mw.shape
    a = e.unsqueeze(mw, 1, scope)                            # [nW, 1, N]
    b = e.unsqueeze(mw, 2, scope)                            # [nW, N, 1]
    d = e.op("Sub", [a, b], (nw, n, n), scope)
    zero = e.f32(0.0, scope)
    ne = e.op("Not", [e.op("Equal", [d, zero], d.shape, scope)], d.shape, scope)
    m1 = e.op("Where", [ne, e.f32(-100.0, scope), d], d.shape, scope)
    eq = e.op("Equal", [d, e.f32(0.0, scope)], d.shape, scope)
    return e.op("Where", [eq, e.f32(0.0, scope), m1], d.shape, scope)


def _window_attention(e, x, heads, ws, mask, scope):
    """W-MSA / SW-MSA on [B * nW, N, C] windows, with the relative position
    bias B gathered from the learned table: softmax(QK^T/sqrt(d) + B [+ mask]) V."""
    net = e.net
    bw, n, c = x.shape
    hd = c // heads
    qkv = e.linear(x, 3 * c, scope + "/qkv")
    qkv = e.reshape(qkv, [bw, n, 3, heads, hd], scope)
    qkv = e.transpose(qkv, (2, 0, 3, 1, 4), scope)           # [3, B*nW, h, N, d]
    q = e.gather(qkv, 0, 0, scope)
    k = e.gather(qkv, 1, 0, scope)
    v = e.gather(qkv, 2, 0, scope)
    q = e.op("Mul", [q, e.f32(hd ** -0.5, scope)], q.shape, scope)
    kt = e.transpose(k, (0, 1, 3, 2), scope)
    attn = e.op("MatMul", [q, kt], (bw, heads, n, n), scope)

    key = scope.strip("/").replace("/", ".")
    table = e.param(key + ".relative_position_bias_table",
                    net.normal(((2 * ws - 1) ** 2, heads), 0.5))
    index = e.const(relative_position_index(ws).reshape(-1), scope)
    bias = e.op("Gather", [table, index], (n * n, heads), scope, axis=0)
    bias = e.reshape(bias, [n, n, -1], scope)
    bias = e.transpose(bias, (2, 0, 1), scope)
    bias = e.unsqueeze(bias, 0, scope)
    attn = e.op("Add", [attn, bias], attn.shape, scope)

    if mask is not None:
        nw = mask.shape[0]
        attn = e.reshape(attn, [bw // nw, nw, heads, n, n], scope)
        mk = e.unsqueeze(e.unsqueeze(mask, 1, scope), 0, scope)
        attn = e.op("Add", [attn, mk], attn.shape, scope)
        attn = e.reshape(attn, [-1, heads, n, n], scope)
    attn = e.op("Softmax", [attn], attn.shape, scope + "/softmax", axis=-1)
    y = e.op("MatMul", [attn, v], (bw, heads, n, hd), scope)
    y = e.transpose(y, (0, 2, 1, 3), scope)
    y = e.reshape(y, [bw, n, c], scope)
    return e.linear(y, c, scope + "/proj")


def _swin_block(e, x, res, heads, ws, shift, scope):
    b, _, c = x.shape
    h = w = res
    shortcut = x
    y = e.layer_norm(x, scope + "/norm1")
    y = e.reshape(y, [b, h, w, c], scope)
    mask = None
    if shift:
        y = _roll(e, y, -shift, scope)
        mask = _shift_mask(e, h, w, ws, shift, scope)
    y = _window_partition(e, y, ws, scope)
    y = e.reshape(y, [-1, ws * ws, c], scope)
    y = _window_attention(e, y, heads, ws, mask, scope + "/attn")
    y = e.reshape(y, [-1, ws, ws, c], scope)
    y = _window_reverse(e, y, ws, b, h, w, scope)
    if shift:
        y = _roll(e, y, shift, scope)
    y = e.reshape(y, [b, h * w, c], scope)
    x = e.op("Add", [shortcut, y], x.shape, scope)

    y = e.layer_norm(x, scope + "/norm2")
    y = e.linear(y, 4 * c, scope + "/mlp/fc1")
    y = e.gelu(y, scope + "/mlp/act")
    y = e.linear(y, c, scope + "/mlp/fc2", gain=2.0)
    return e.op("Add", [x, y], x.shape, scope)


def _patch_merging(e, x, res, scope):
    """Concatenate each 2x2 neighbourhood (x0 = [0::2, 0::2], x1 = [1::2, 0::2],
    x2 = [0::2, 1::2], x3 = [1::2, 1::2]), LayerNorm, Linear 4C -> 2C (no bias)."""
    b, _, c = x.shape
    x = e.reshape(x, [b, res, res, c], scope)
    parts = []
    for r0, c0 in ((0, 0), (1, 0), (0, 1), (1, 1)):
        p = e.slice(x, 1, r0, None, scope, step=2)
        parts.append(e.slice(p, 2, c0, None, scope, step=2))
    x = e.op("Concat", parts, (b, res // 2, res // 2, 4 * c), scope, axis=-1)
    x = e.reshape(x, [b, -1, 4 * c], scope)
    x = e.layer_norm(x, scope + "/norm")
    return e.linear(x, 2 * c, scope + "/reduction", bias=False)


def swin(batch=1, seed=0, image=64, patch=4, window=4, dim=32,
         depths=(2, 2, 2), heads=(2, 4, 8), classes=1000):
    # The shifted-window mask is built from shapes alone: opc must fold all
    # of it (tests/zoo/zoo_test.py checks opc.must_fold).
    net = TNet("swin", seed, batch,
               doc="small Swin Transformer (Liu et al. 2021), %dx%d, window %d, "
                   "C=%d, depths %s; torch.onnx.export style, opset 17, random weights"
               % (image, image, window, dim, "-".join(map(str, depths))),
               metadata={"opc.must_fold": "ScatterND,Equal,Not,Where,Sub"})
    e = Exporter(net)
    x = net.tensor_input("input", (batch, 3, image, image))

    # patch embedding: Conv 4x4/4 -> flatten(2).transpose(1, 2) -> LayerNorm
    res = image // patch
    w = net.normal((dim, 3, patch, patch), math.sqrt(1.0 / (3 * patch * patch)))
    x = e.op("Conv", [x, e.param("patch_embed.proj.weight", w),
                      e.param("patch_embed.proj.bias", net.normal((dim,), 0.02))],
             (batch, dim, res, res), "/patch_embed/proj",
             dilations=[1, 1], group=1, kernel_shape=[patch, patch],
             pads=[0, 0, 0, 0], strides=[patch, patch])
    x = e.reshape(x, [batch, dim, res * res], "/patch_embed")
    x = e.transpose(x, (0, 2, 1), "/patch_embed")
    x = e.layer_norm(x, "/patch_embed/norm")

    c = dim
    for i, (depth, nh) in enumerate(zip(depths, heads)):
        # a stage no larger than one window gets one window and no shift
        ws = min(window, res)
        for j in range(depth):
            shift = window // 2 if (j % 2 == 1 and res > window) else 0
            x = _swin_block(e, x, res, nh, ws, shift, "/layers.%d/blocks.%d" % (i, j))
        if i < len(depths) - 1:
            x = _patch_merging(e, x, res, "/layers.%d/downsample" % i)
            res //= 2
            c *= 2

    x = e.layer_norm(x, "/norm")
    x = e.transpose(x, (0, 2, 1), "/avgpool")
    x = e.op("GlobalAveragePool", [x], (batch, c, 1), "/avgpool")
    x = e.op("Flatten", [x], (batch, c), "", axis=1)
    y = e.gemm(x, classes, "/head", out="logits")
    net.tensor_output(y)
    return net


# ===================================================================
# BERT encoder
# ===================================================================

def _heads_view(e, x, heads, scope):
    """transpose_for_scores: x.view(x.size()[:-1] + (heads, d)).permute(0, 2, 1, 3),
    the new shape built from Shape/Gather like the traced exporter does."""
    b, s, h = x.shape
    dims = []
    for d in range(2):
        sh = e.op("Shape", [x], (3,), scope)
        g = e.gather(sh, d, 0, scope)
        dims.append(e.unsqueeze(g, 0, scope))
    shape = e.op("Concat", dims + [e.i64([heads], scope), e.i64([h // heads], scope)],
                 (4,), scope, axis=0)
    y = e.op("Reshape", [x, shape], (b, s, heads, h // heads), scope)
    return e.transpose(y, (0, 2, 1, 3), scope)


def _bert_layer(e, x, ext_mask, heads, inter, eps, scope, out=None):
    b, s, h = x.shape
    hd = h // heads
    sa = scope + "/attention/self"
    q = _heads_view(e, e.linear(x, h, sa + "/query"), heads, sa)
    k = _heads_view(e, e.linear(x, h, sa + "/key"), heads, sa)
    v = _heads_view(e, e.linear(x, h, sa + "/value"), heads, sa)
    kt = e.transpose(k, (0, 1, 3, 2), sa)
    scores = e.op("MatMul", [q, kt], (b, heads, s, s), sa)
    scores = e.op("Div", [scores, e.f32(math.sqrt(hd), sa)], scores.shape, sa)
    scores = e.op("Add", [scores, ext_mask], scores.shape, sa)
    probs = e.op("Softmax", [scores], scores.shape, sa, axis=-1)
    ctx = e.op("MatMul", [probs, v], (b, heads, s, hd), sa)
    ctx = e.transpose(ctx, (0, 2, 1, 3), sa)
    # context.view(context.size()[:-2] + (all_head_size,))
    dims = []
    for d in range(2):
        sh = e.op("Shape", [ctx], (4,), sa)
        dims.append(e.unsqueeze(e.gather(sh, d, 0, sa), 0, sa))
    shape = e.op("Concat", dims + [e.i64([h], sa)], (3,), sa, axis=0)
    ctx = e.op("Reshape", [ctx, shape], (b, s, h), sa)

    so = scope + "/attention/output"
    y = e.linear(ctx, h, so + "/dense")
    y = e.op("Add", [y, x], x.shape, so)
    x = e.layer_norm(y, so + "/LayerNorm", eps)

    y = e.linear(x, inter, scope + "/intermediate/dense")
    y = e.gelu(y, scope + "/intermediate/intermediate_act_fn")
    y = e.linear(y, h, scope + "/output/dense", gain=2.0)
    y = e.op("Add", [y, x], x.shape, scope + "/output")
    return e.layer_norm(y, scope + "/output/LayerNorm", eps, out=out)


def bert_tiny(batch=1, seed=0, seq=32, hidden=128, layers=2, heads=2, inter=512,
              vocab=1000, max_pos=64, type_vocab=2):
    eps = 1e-12
    net = TNet("bert", seed, batch,
               doc="BERT encoder (Devlin et al. 2019), L=%d H=%d A=%d I=%d, vocab %d, "
                   "sequence %d; torch.onnx.export style, opset 17, random weights"
               % (layers, hidden, heads, inter, vocab, seq),
               metadata={"opc.input_range.input_ids": "0,%d" % vocab,
                         "opc.input_kind.attention_mask": "mask"})
    e = Exporter(net)
    ids = net.tensor_input("input_ids", (batch, seq), TensorProto.INT64)
    mask = net.tensor_input("attention_mask", (batch, seq), TensorProto.INT64)

    # embeddings: word (run-time ids) + token type (buffered zeros, expanded
    # to the input's batch) + absolute position (buffered arange)
    sc = "/embeddings"
    word = e.param("embeddings.word_embeddings.weight", net.normal((vocab, hidden), 1.0))
    pos_t = e.param("embeddings.position_embeddings.weight", net.normal((max_pos, hidden), 0.5))
    typ_t = e.param("embeddings.token_type_embeddings.weight",
                    net.normal((type_vocab, hidden), 0.5))
    pos_ids = e.const_tensor(np.arange(max_pos, dtype=np.int64)[None], sc)
    pos_ids = e.slice(pos_ids, 1, 0, seq, sc)
    tt = e.const_tensor(np.zeros((1, max_pos), np.int64), sc)
    tt = e.slice(tt, 1, 0, seq, sc)
    sh = e.op("Shape", [ids], (2,), sc)
    n = e.unsqueeze(e.gather(sh, 0, 0, sc), 0, sc)
    shape = e.op("Concat", [n, e.i64([seq], sc)], (2,), sc, axis=0)
    tt = e.op("Expand", [tt, shape], (batch, seq), sc)

    x = e.op("Gather", [word, ids], (batch, seq, hidden), sc + "/word_embeddings", axis=0)
    t = e.op("Gather", [typ_t, tt], (batch, seq, hidden), sc + "/token_type_embeddings",
             axis=0)
    x = e.op("Add", [x, t], x.shape, sc)
    p = e.op("Gather", [pos_t, pos_ids], (1, seq, hidden), sc + "/position_embeddings",
             axis=0)
    x = e.op("Add", [x, p], x.shape, sc)
    x = e.layer_norm(x, sc + "/LayerNorm", eps)

    # extended mask: attention_mask[:, None, None, :], (1 - m) * -10000
    m = e.unsqueeze(e.unsqueeze(mask, 1, ""), 2, "")
    m = e.op("Cast", [m], m.shape, "", to=TensorProto.FLOAT)
    m = e.op("Sub", [e.f32(1.0), m], m.shape, "")
    m = e.op("Mul", [m, e.f32(-10000.0)], m.shape, "")

    for i in range(layers):
        x = _bert_layer(e, x, m, heads, inter, eps, "/encoder/layer.%d" % i,
                        out="last_hidden_state" if i == layers - 1 else None)
    last = x

    # pooler: tanh(dense(h[:, 0]))
    f = e.gather(last, 0, 1, "/pooler")
    y = e.gemm(f, hidden, "/pooler/dense")
    y = net.node("Tanh", [y.name], "/pooler/activation/Tanh", y.shape, out="pooler_output")
    net.tensor_output(last)
    net.tensor_output(y)
    return net
