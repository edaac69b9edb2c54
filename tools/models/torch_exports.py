#!/usr/bin/env python3
"""Real torch exports of issue 50's sequence models, for the zoo.

    /work/torchenv/bin/python tools/models/torch_exports.py [--out DIR] [NAME ...]

zoo_seq.py writes crnn, gru_kws and decoder23 the way the exporters write
them; this script has torch itself write them. Three small torch modules,
random weights from a fixed seed, each exported by the TorchScript exporter
(torch.onnx.export(..., dynamo=False), opset 17) and by the dynamo exporter
(dynamo=True; the decoder at opset 23):

  crnn      4 x (Conv 3x3 + BatchNorm + ReLU + MaxPool) over a [1, 1, 32, 128]
            grey line, a 2-layer bidirectional nn.LSTM (hidden 48), Linear
            and LogSoftmax to 37 CTC classes: log_probs [32, 1, 37]
  gru_kws   nn.GRU(40, 64, batch_first=True) over mfcc [1, 49, 40], the last
            step, Linear to 12 keywords: logits [1, 12]
  decoder   a Llama-style decoder: embedding, 2 blocks of F.rms_norm,
            q/k/v projections, rotary embedding, causal
            F.scaled_dot_product_attention with 4 query heads over 2
            key-value heads (enable_gqa), SwiGLU; input_ids [1, 16] ->
            logits [1, 16, 256]

The files (NAME_torchscript.onnx, NAME_dynamo.onnx; the decoder's dynamo
export is decoder23_dynamo.onnx) go to tests/zoo/exports, where
tests/zoo/zoo_test.py takes them as they are. Each carries the zoo's input
metadata (opc.input_kind / opc.input_range), so tests/zoo/reference.py
draws the right inputs: photographs for the CRNN, normals for the GRU,
token ids for the decoder.

Weights: the CRNN's BatchNorms get their statistics from the zoo's
calibration photographs (photos.py) in one training-mode pass, as
calibrate.py does for the hand-written zoo; as in zoo_seq.crnn, the LSTMs'
input weights are 4x torch's init and the CTC head is peaked, so that the
input decides the output (the zoo asks for 0.2 of it). This script needs
torch (a tool, not a dependency of the project); the zoo test does not.
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import photos  # noqa: E402

SEED = 50          # issue 50
OUT = os.path.join(ROOT, "tests", "zoo", "exports")


# ===================================================================
# The modules
# ===================================================================

class CRNN(nn.Module):
    """Shi et al. 2017, small: [N, 1, 32, 128] -> [32, N, classes]."""

    def __init__(self, classes=37, hidden=48):
        super().__init__()
        layers, cin = [], 1
        # 32 x 128 -> 16 x 64 -> 8 x 32 -> 4 x 32 -> 1 x 32
        for cout, pool in [(16, (2, 2)), (32, (2, 2)), (64, (2, 1)), (64, (4, 1))]:
            layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                       nn.ReLU(), nn.MaxPool2d(pool)]
            cin = cout
        self.cnn = nn.Sequential(*layers)
        self.rnn = nn.LSTM(cin, hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        f = self.cnn(x).squeeze(2).permute(2, 0, 1)      # [T, N, C]
        y, _ = self.rnn(f)
        return F.log_softmax(self.fc(y), dim=2)


class GRUKWS(nn.Module):
    """A keyword spotter: mfcc [N, T, F] (batch_first) -> [N, keywords]."""

    def __init__(self, features=40, hidden=64, keywords=12):
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, keywords)

    def forward(self, x):
        y, _ = self.gru(x)
        return self.fc(y[:, -1])


# The TorchScript exporter (torch 2.15, opset 17) rejects two of the
# decoder's calls: "Exporting the operator 'aten::rms_norm' to ONNX opset
# version 17 is not supported", and "conversion of
# scaled_dot_product_attention not implemented if enable_gqa is True". For
# it, TORCHSCRIPT_FORMS writes them as Llama's own code (Hugging Face's
# LlamaRMSNorm and repeat_kv) does; the dynamo exporter gets the calls.
TORCHSCRIPT_FORMS = False


def rms_norm(x, weight, eps=1e-5):
    if TORCHSCRIPT_FORMS:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
    return F.rms_norm(x, (x.shape[-1],), weight, eps=eps)


def attention(q, k, v):
    """Causal attention, 4 query heads over 2 key-value heads."""
    if TORCHSCRIPT_FORMS:
        rep = q.shape[1] // k.shape[1]
        k, v = (t.repeat_interleave(rep, dim=1) for t in (k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class DecoderBlock(nn.Module):
    def __init__(self, hidden, heads, kv_heads, inter):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, hidden // heads
        self.input_norm = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.post_norm = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def split(self, x, heads):
        b, s, _ = x.shape
        return x.view(b, s, heads, self.d).transpose(1, 2)

    def forward(self, x, cos, sin):
        b, s, h = x.shape
        y = rms_norm(x, self.input_norm)
        q = self.split(self.q_proj(y), self.heads)
        k = self.split(self.k_proj(y), self.kv_heads)
        v = self.split(self.v_proj(y), self.kv_heads)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = attention(q, k, v)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, h))
        y = rms_norm(x, self.post_norm)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Decoder(nn.Module):
    """Llama-style (Touvron et al. 2023): ids [N, S] -> logits [N, S, vocab]."""

    def __init__(self, seq=16, hidden=64, layers=2, heads=4, kv_heads=2, inter=128, vocab=256,
                 theta=10000.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(DecoderBlock(hidden, heads, kv_heads, inter)
                                    for _ in range(layers))
        self.norm = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        d = hidden // heads
        inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.lm_head(rms_norm(x, self.norm))


# ===================================================================
# Weights
# ===================================================================

def crnn_model():
    torch.manual_seed(SEED)
    m = CRNN()
    with torch.no_grad():
        for name, p in m.rnn.named_parameters():
            # the conv features reach the LSTM with a mean of ~0.5 and a small
            # input-dependent part: 4x torch's input weights make the gates
            # follow the input (zoo_seq.crnn measured this)
            if name.startswith("weight_ih"):
                p.mul_(4.0)
        # a peaked CTC head, as a trained one is
        m.fc.weight.normal_(0.0, math.sqrt(300.0 / m.fc.in_features))
        for bn in m.cnn:
            if isinstance(bn, nn.BatchNorm2d):
                # mean 0.5 on the photographs, as calibrate.py shifts the
                # zoo's layers: at mean 0 the ReLU silenced whole channels
                # of the first layer on a flat photograph (clock_motion),
                # which zeroing them could not move (the strength check)
                bn.weight.copy_(1 + 0.1 * torch.randn(bn.num_features))
                bn.bias.copy_(0.5 + 0.05 * torch.randn(bn.num_features))
    calibrate_bn(m, (1, 32, 128))
    return m.eval()


def calibrate_bn(m, chw):
    """Every BatchNorm's running statistics from the zoo's calibration
    photographs, in one training-mode pass (the cumulative average,
    momentum None), as a trained network would have them."""
    c, h, w = chw
    x = torch.from_numpy(photos.image_batch(list(range(photos.CALIBRATION)),
                                            (photos.CALIBRATION, c, h, w)))
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
    m.train()
    with torch.no_grad():
        m.cnn(x)
    m.eval()


def gru_model():
    torch.manual_seed(SEED)
    return GRUKWS().eval()


def decoder_model():
    torch.manual_seed(SEED)
    m = Decoder()
    with torch.no_grad():
        m.embed.weight.normal_(0.0, 1.0)
    return m.eval()


# name -> (model, example input, input name, output name, metadata, dynamo opset)
def specs():
    return {
        "crnn": (crnn_model, lambda: torch.from_numpy(photos.image_batch([0], (1, 1, 32, 128))),
                 "input", "log_probs", {"opc.input_kind.input": "image"}, 17),
        "gru_kws": (gru_model, lambda: torch.randn(1, 49, 40), "mfcc", "logits", {}, 17),
        "decoder": (decoder_model, lambda: torch.randint(0, 256, (1, 16)), "input_ids", "logits",
                    {"opc.input_range.input_ids": "0,256"}, 23),
    }


# ===================================================================
# Export
# ===================================================================

def export(name, exporter, out_dir):
    make, example, input_name, output_name, metadata, dynamo_opset = specs()[name]
    model, x = make(), example()
    dynamo = exporter == "dynamo"
    opset = dynamo_opset if dynamo else 17
    stem = name + ("23" if dynamo and opset == 23 else "") + "_" + exporter
    path = os.path.join(out_dir, stem + ".onnx")
    kw = dict(input_names=[input_name], output_names=[output_name], opset_version=opset,
              dynamo=dynamo)
    if dynamo:
        kw["external_data"] = False
    global TORCHSCRIPT_FORMS
    TORCHSCRIPT_FORMS = not dynamo
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, **kw)
    m = onnx.load(path)
    m.doc_string = "%s, torch %s, torch.onnx.export(dynamo=%s, opset_version=%d), seed %d; " \
        "tools/models/torch_exports.py" % (name, torch.__version__, dynamo, opset, SEED)
    del m.metadata_props[:]
    for k, v in metadata.items():
        m.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    check_against_torch(model, x, path)
    return path, m


def check_against_torch(model, x, path):
    """ONNX Runtime's output for the export must be torch's."""
    import onnxruntime as ort
    with torch.no_grad():
        want = model(x).numpy()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    if got.shape != want.shape or not err < 1e-5:
        raise SystemExit("%s: ONNX Runtime %r against torch %r, relative L2 %.3g"
                         % (path, got.shape, want.shape, err))
    return err


def op_histogram(m):
    counts = {}
    for n in m.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return " ".join("%s:%d" % kv for kv in sorted(counts.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", default=list(specs()))
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--exporter", choices=["torchscript", "dynamo"], action="append")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.names:
        for exporter in a.exporter or ["torchscript", "dynamo"]:
            path, m = export(name, exporter, a.out)
            print("%s: opset %d, %d nodes, %d bytes: %s" % (
                os.path.relpath(path), m.opset_import[0].version, len(m.graph.node),
                os.path.getsize(path), op_histogram(m)))


if __name__ == "__main__":
    main()
