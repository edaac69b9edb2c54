#!/usr/bin/env python3
"""The opset 18-23 normalisations and attention through opc, the CPU runtime
and the emitted program, against ONNX Runtime: RMSNormalization,
LayerNormalization on every axis with its Mean and InvStdDev outputs,
GroupNormalization (opset 18's scale per group, opset 21's per channel),
RotaryEmbedding and Attention.

To keep the suite cheap, the cases are batched: every case is a node with
inputs of its own, and all the cases of one opset are one model, so one
program per opset is compiled (at -O0, as the suite runs). Some cases take
their inputs as initializers: opc then folds them at compile time, so the
evaluators are checked by the same comparison.

Each output must be within TOLERANCE of ONNX Runtime's, measured against
the output's scale (its largest magnitude): the inputs are chosen so that
the outputs move with them (no saturation, variances near 1, rotations of
large angles), so an error of that size is a wrong formula, not rounding.
A NaN in a reference is an error.

Negative controls: the same outputs compared to references of slightly
wrong operators (another epsilon, the rotation the other way, other
groups, no causal mask, ...) must be rejected; a control that passes
fails the run, since it shows the comparison cannot tell right from wrong.

Errors: forms opc refuses must exit with status 2 and a message naming the
attribute or input.

usage: test_opset23.py OPC WORK_DIR [-k SUBSTRING]
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compile_cpu, reference, run_program, value_info  # noqa: E402

rng = np.random.default_rng(23)
TOLERANCE = 2e-5  # of the output's largest magnitude


def randn(*shape, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def uniform(lo, hi, *shape):
    return rng.uniform(lo, hi, shape).astype(np.float32)


class Case:
    """One node, its inputs (name -> array, None for an omitted optional
    input) and its number of outputs. Names are prefixed with the case's
    name in the batched model. `folded`: inputs become initializers."""

    def __init__(self, name, op, inputs, nout=1, folded=False, **attrs):
        self.name, self.op, self.inputs, self.nout = name, op, inputs, nout
        self.folded, self.attrs = folded, attrs

    def input_names(self):
        return [self.name + "_" + k if v is not None else "" for k, v in self.inputs.items()]

    def output_names(self):
        return ["%s_y%d" % (self.name, k) for k in range(self.nout)]


def batched_model(cases, opset):
    """All cases as one graph; returns the model and its feeds. Cases that
    share an array share the graph input (programs take at most 64)."""
    nodes, inputs, inits, outputs, feeds = [], [], [], [], {}
    shared = {}
    for c in cases:
        names = []
        for (k, v), name in zip(c.inputs.items(), c.input_names()):
            if v is not None and not c.folded:
                if id(v) in shared:
                    name = shared[id(v)]
                else:
                    shared[id(v)] = name
                    inputs.append(value_info(name, v))
                    feeds[name] = v
            elif v is not None:
                inits.append(numpy_helper.from_array(v, name))
            names.append(name)
        nodes.append(helper.make_node(c.op, names, c.output_names(), **c.attrs))
        outputs += [onnx.ValueInfoProto(name=o) for o in c.output_names()]
    return onnx_case.model(nodes, inputs, outputs, inits, opset, name="opset%d" % opset,
                           ir_version=10), feeds


def programs(cases, limit=64):
    """The cases in runs that one program takes: at most `limit` inputs
    and outputs (counted without sharing, to be safe)."""
    run, count = [], 0
    for c in cases:
        n = max(len(c.inputs), c.nout)
        if run and count + n > limit:
            yield run
            run, count = [], 0
        run.append(c)
        count += n
    if run:
        yield run


def measure(got, want):
    """The largest error of got against want, as a fraction of want's scale."""
    w = want.astype(np.float64)
    scale = float(np.abs(w).max()) if w.size else 0.0
    err = float(np.abs(got.astype(np.float64) - w).max()) if w.size else 0.0
    return err / scale if scale else err


def compare(got, want):
    """None when got agrees with want within TOLERANCE of want's scale,
    else what differs. NaN in want is an error, never a pass."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return "%s%s, expected %s%s" % (got.dtype, list(got.shape), want.dtype, list(want.shape))
    w = want.astype(np.float64)
    if np.isnan(w).any():
        return "the reference holds NaN"
    if np.isnan(got).any():
        return "the output holds NaN"
    scale = float(np.abs(w).max()) if w.size else 0.0
    err = float(np.abs(got.astype(np.float64) - w).max()) if w.size else 0.0
    if err > TOLERANCE * scale:
        return "max error %.3g, over %.0e of the output's scale %.3g" % (err, TOLERANCE, scale)
    return None


# ------------------------------------------------------------------ cases


def norm_cases():
    """RMSNormalization and LayerNormalization. x has a mean away from 0 and
    rows of different scales, so that the mean (LayerNorm), the mean square
    (RMSNorm) and epsilon all move the output."""
    x = randn(2, 3, 4, 5, scale=0.6, shift=0.3)
    x *= uniform(0.2, 2.0, 2, 3, 1, 1)
    cases = []
    for axis in (-1, -2, 0, 1, 3):
        a = axis % 4
        full = x.shape[a:]
        cases.append(Case("rms_axis%d" % (axis + 4), "RMSNormalization",
                          {"x": x, "scale": uniform(-1.5, 1.5, *full)}, axis=axis))
    cases.append(Case("rms_scalar_scale", "RMSNormalization",
                      {"x": x, "scale": np.array([1.7], np.float32)}, axis=2))
    # Scales broadcast along part of the row: the last dims, the first.
    for tag, axis, shape in (("last", -2, (5,)), ("first", -2, (4, 1)), ("lead", 1, (3, 1, 1))):
        cases.append(Case("rms_scale_" + tag, "RMSNormalization",
                          {"x": x, "scale": uniform(-1.5, 1.5, *shape)}, axis=axis))
    cases.append(Case("rms_eps", "RMSNormalization",
                      {"x": x * 0.1, "scale": uniform(0.5, 1.5, 5)}, epsilon=1e-2))
    cases.append(Case("rms_folded", "RMSNormalization",
                      {"x": x, "scale": uniform(-1.5, 1.5, 4, 5)}, folded=True, axis=-2))
    for axis in (-1, -3, 0, 2):
        a = axis % 4
        full = x.shape[a:]
        cases.append(Case("ln_axis%d" % (axis + 4), "LayerNormalization",
                          {"x": x, "scale": uniform(-1.5, 1.5, *full),
                           "bias": uniform(-1, 1, *full)}, nout=3, axis=axis))
    cases.append(Case("ln_no_bias", "LayerNormalization",
                      {"x": x, "scale": uniform(-1.5, 1.5, 5)}, nout=3, epsilon=0.05))
    cases.append(Case("ln_folded", "LayerNormalization",
                      {"x": x, "scale": uniform(-1.5, 1.5, 3, 4, 5),
                       "bias": uniform(-1, 1, 3, 4, 5)}, nout=3, folded=True, axis=1))
    return cases


def group_norm_cases(opset):
    """GroupNormalization: scale and bias per group before opset 21, per
    channel from it. Images and groups have different means and scales."""
    x = randn(2, 6, 3, 4, shift=0.5) * uniform(0.3, 3.0, 2, 6, 1, 1)
    cases = []
    for groups in (1, 3, 6):
        n = groups if opset < 21 else 6
        cases.append(Case("gn%d_groups%d" % (opset, groups), "GroupNormalization",
                          {"x": x, "scale": uniform(-1.5, 1.5, n), "bias": uniform(-1, 1, n)},
                          num_groups=groups))
    n = 2 if opset < 21 else 4
    cases.append(Case("gn%d_3d_eps" % opset, "GroupNormalization",
                      {"x": randn(3, 4, 7, scale=0.2), "scale": uniform(0.5, 1.5, n),
                       "bias": uniform(-1, 1, n)}, num_groups=2, epsilon=0.03))
    n = 2 if opset < 21 else 6
    cases.append(Case("gn%d_folded" % opset, "GroupNormalization",
                      {"x": x, "scale": uniform(-1.5, 1.5, n), "bias": uniform(-1, 1, n)},
                      folded=True, num_groups=2))
    return cases


def caches(positions, half):
    """cos and sin of angles that grow with the position, each pair its own
    frequency, as rotary embeddings use: large angles, so that the sign of
    sin (the direction) matters."""
    freq = 1.0 / (10.0 ** (np.arange(half) / half))
    angle = np.multiply.outer(np.arange(positions) * 0.7 + 0.3, freq)
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def rotary_cases():
    """RotaryEmbedding: 4-D [B, H, S, D] and 3-D [B, S, H D] inputs, the
    caches indexed by position_ids or given per token, halves or
    interleaved pairs, and a partial rotation (rotary_embedding_dim)."""
    b, h, s, d = 2, 3, 5, 8
    cases = []
    for interleaved in (0, 1):
        for rot in (0, 4):
            half = (rot or d) // 2
            cos, sin = caches(12, half)
            pos = rng.integers(0, 12, (b, s)).astype(np.int64)
            tag = "i%d_r%d" % (interleaved, rot)
            cases.append(Case("rope4d_" + tag, "RotaryEmbedding",
                              {"x": randn(b, h, s, d), "cos": cos, "sin": sin, "pos": pos},
                              interleaved=interleaved, rotary_embedding_dim=rot))
            cases.append(Case("rope3d_" + tag, "RotaryEmbedding",
                              {"x": randn(b, s, h * d), "cos": cos, "sin": sin, "pos": pos},
                              interleaved=interleaved, rotary_embedding_dim=rot, num_heads=h))
    cos, sin = caches(s, d // 2)
    per_token = (np.stack([cos, np.roll(cos, 1, 0)]), np.stack([sin, np.roll(sin, 1, 0)]))
    cases.append(Case("rope4d_no_pos", "RotaryEmbedding",
                      {"x": randn(b, h, s, d), "cos": per_token[0], "sin": per_token[1]}))
    cases.append(Case("rope3d_no_pos", "RotaryEmbedding",
                      {"x": randn(b, s, h * d), "cos": per_token[0], "sin": per_token[1]},
                      num_heads=h, interleaved=1))
    cases.append(Case("rope_folded", "RotaryEmbedding",
                      {"x": randn(b, h, s, d), "cos": cos, "sin": sin,
                       "pos": rng.integers(0, s, (b, s)).astype(np.int64)}, folded=True))
    return cases


def attention_cases():
    """Attention: 4-D and 3-D inputs, grouped-query attention (kv heads
    dividing the query heads), a value head size of its own, bool and
    float masks broadcast, is_causal with and without a past cache (its
    frontier moves by the past length), present outputs, scale and
    softcap. Scores are of order 1, so that the softmax is neither flat
    nor one-hot and every key moves the output."""
    b, s, t, d = 2, 5, 6, 8
    keep = rng.random((s, t)) < 0.7
    keep[:, 0] = True  # every query sees a key: no row is fully masked
    cases = [
        Case("att4d_plain", "Attention",
             {"q": randn(b, 4, s, d), "k": randn(b, 4, t, d), "v": randn(b, 4, t, d)}),
        Case("att4d_gqa_causal", "Attention",
             {"q": randn(b, 4, s, d), "k": randn(b, 2, s, d), "v": randn(b, 2, s, 6)},
             is_causal=1),
        Case("att3d_gqa", "Attention",
             {"q": randn(b, s, 4 * d), "k": randn(b, t, 2 * d), "v": randn(b, t, 2 * 6)},
             q_num_heads=4, kv_num_heads=2),
        Case("att4d_bool_mask", "Attention",
             {"q": randn(b, 2, s, d), "k": randn(b, 2, t, d), "v": randn(b, 2, t, d),
              "mask": keep}),
        Case("att3d_float_mask", "Attention",
             {"q": randn(b, s, 2 * d), "k": randn(b, t, d), "v": randn(b, t, d),
              "mask": randn(b, 1, s, t, scale=2.0)}, q_num_heads=2, kv_num_heads=1,
             softmax_precision=1),
        Case("att4d_past_causal", "Attention",
             {"q": randn(b, 4, 2, d), "k": randn(b, 2, 2, d), "v": randn(b, 2, 2, d),
              "mask": None, "past_k": randn(b, 2, 3, d), "past_v": randn(b, 2, 3, d)},
             nout=3, is_causal=1),
        Case("att3d_past_mask", "Attention",
             {"q": randn(b, 3, 2 * d), "k": randn(b, 3, 2 * d), "v": randn(b, 3, 2 * 4),
              "mask": randn(2, 3, 7), "past_k": randn(b, 2, 4, d),
              "past_v": randn(b, 2, 4, 4)}, nout=3, q_num_heads=2, kv_num_heads=2),
        Case("att4d_softcap", "Attention",
             {"q": randn(b, 2, s, d, scale=3.0), "k": randn(b, 2, t, d, scale=3.0),
              "v": randn(b, 2, t, d)}, scale=0.2, softcap=2.0),
        # Fewer queries than keys, no past: query i sees keys 0..i.
        Case("att4d_causal_short_q", "Attention",
             {"q": randn(1, 2, 3, d), "k": randn(1, 2, t, d), "v": randn(1, 2, t, d)},
             is_causal=1),
        # A query whose keys are all masked gives zeros.
        Case("att4d_masked_row", "Attention",
             {"q": randn(1, 2, 3, 4), "k": randn(1, 2, 4, 4), "v": randn(1, 2, 4, 4),
              "mask": np.array([[1, 0, 1, 1], [0, 0, 0, 0], [0, 1, 0, 0]], bool)}),
        Case("att_folded", "Attention",
             {"q": randn(1, 2, 3, 4), "k": randn(1, 1, 3, 4), "v": randn(1, 1, 3, 4),
              "mask": rng.random((3, 5)) < 0.8, "past_k": randn(1, 1, 2, 4),
              "past_v": randn(1, 1, 2, 4)}, nout=3, folded=True, is_causal=1),
    ]
    return cases


def swap_kv_heads(case):
    """The case with its two kv heads (3-D K and V) in the other order."""
    inputs = {}
    for k in ("k", "v"):
        x = case.inputs[k]
        halves = x.reshape(x.shape[0], x.shape[1], 2, -1)[:, :, ::-1]
        inputs[k] = np.ascontiguousarray(halves).reshape(x.shape)
    return altered(case, inputs=inputs)


def altered(case, op=None, inputs=None, **attrs):
    """The case with another operator, some inputs replaced or some
    attributes changed: a slightly wrong operator for a control."""
    new_inputs = dict(case.inputs, **(inputs or {}))
    return Case(case.name, op or case.op, new_inputs, case.nout, False,
                **dict(case.attrs, **attrs))


# Each control: the case, what is wrong, and the wrong operator. The
# program's output must be told apart from the wrong operator's.
CONTROLS = [
    ("rms_eps", "epsilon 1e-5 for 1e-2", lambda c: altered(c, epsilon=1e-5)),
    ("rms_axis3", "LayerNormalization's centring",
     lambda c: altered(c, op="LayerNormalization")),
    ("ln_no_bias", "epsilon 1e-5 for 0.05", lambda c: altered(c, epsilon=1e-5)),
    ("gn21_groups3", "6 groups for 3", lambda c: altered(c, num_groups=6)),
    ("gn18_3d_eps", "epsilon 1e-5 for 0.03", lambda c: altered(c, epsilon=1e-5)),
    ("rope4d_i0_r0", "the rotation the other way",
     lambda c: altered(c, inputs={"sin": -c.inputs["sin"]})),
    ("rope3d_i1_r4", "halves for interleaved pairs", lambda c: altered(c, interleaved=0)),
    ("rope4d_i1_r0", "positions off by one",
     lambda c: altered(c, inputs={"pos": (c.inputs["pos"] + 1) % 12})),
    ("att4d_gqa_causal", "no causal mask", lambda c: altered(c, is_causal=0)),
    ("att4d_past_causal", "the causal frontier not moved by the past",
     lambda c: altered(c, inputs={"mask": np.tril(np.ones((2, 5), bool))}, is_causal=0)),
    ("att3d_gqa", "the kv heads in the other order", swap_kv_heads),
    ("att3d_float_mask", "the mask negated",
     lambda c: altered(c, inputs={"mask": -c.inputs["mask"]})),
    ("att4d_softcap", "no softcap", lambda c: altered(c, softcap=0.0)),
    ("att4d_bool_mask", "no mask", lambda c: altered(c, inputs={"mask": None})),
]


def check_controls(cases, opset, got, report):
    by_name = {c.name: c for c in cases}
    for name, what, wrong_of in CONTROLS:
        if name not in by_name:
            continue
        case = by_name[name]
        m, feeds = batched_model([wrong_of(case)], opset)
        wrong = reference(m, feeds, optimise=False)
        o = case.output_names()[0]
        problem = compare(got[o], wrong[o])
        report(problem is not None, "control %s (%s)" % (name, what),
               "told apart: " + problem if problem else "the wrong operator was accepted")


def error_cases():
    """Forms opc refuses: (case, opset, words the message must hold)."""
    x = randn(2, 3, 4)
    cos, sin = caches(6, 2)
    pos = np.zeros((2, 3), np.int64)
    qkv = {"q": randn(1, 2, 4, 4), "k": randn(1, 2, 4, 4), "v": randn(1, 2, 4, 4)}
    return [
        (Case("rms_stash", "RMSNormalization", {"x": x, "scale": randn(4)}, stash_type=10),
         23, "stash_type"),
        (Case("rms_scale_shape", "RMSNormalization", {"x": x, "scale": randn(3)}), 23,
         "does not broadcast"),
        # A scale of 1s between its own dims: the kernel reads one run.
        (Case("rms_scale_gap", "RMSNormalization", {"x": randn(2, 3, 4, 5),
                                                    "scale": randn(3, 1, 5)}, axis=1), 23,
         "scale must vary along one run of the normalised dims"),
        (Case("gn21_per_group", "GroupNormalization",
              {"x": randn(2, 6, 3), "scale": randn(3), "bias": randn(3)}, num_groups=3), 21,
         "must have shape [6]"),
        (Case("gn18_per_channel", "GroupNormalization",
              {"x": randn(2, 6, 3), "scale": randn(6), "bias": randn(6)}, num_groups=3), 18,
         "must have shape [3]"),
        (Case("gn_groups", "GroupNormalization",
              {"x": randn(2, 6, 3), "scale": randn(6), "bias": randn(6)}, num_groups=4), 21,
         "num_groups"),
        (Case("rope_3d_no_heads", "RotaryEmbedding",
              {"x": randn(2, 3, 8), "cos": cos, "sin": sin, "pos": pos}), 23, "num_heads"),
        (Case("rope_odd_dim", "RotaryEmbedding",
              {"x": randn(2, 1, 3, 8), "cos": cos, "sin": sin, "pos": pos},
              rotary_embedding_dim=3), 23, "rotary_embedding_dim"),
        (Case("rope_cache_shape", "RotaryEmbedding",
              {"x": randn(2, 1, 3, 8), "cos": cos, "sin": sin, "pos": pos}), 23,
         "with position_ids it must be [max_position, 4]"),
        (Case("rope_pos_shape", "RotaryEmbedding",
              {"x": randn(2, 1, 3, 4), "cos": cos, "sin": sin, "pos": np.zeros((1, 3), np.int64)}),
         23, "position_ids"),
        (Case("att_qk_output", "Attention", qkv, nout=4), 23, "qk_matmul_output"),
        (Case("att_precision", "Attention", qkv, softmax_precision=10), 23,
         "softmax_precision"),
        (Case("att_heads", "Attention", dict(qkv, q=randn(1, 3, 4, 4))), 23,
         "must divide the 3 query heads"),
        (Case("att_3d_heads", "Attention",
              {"q": randn(1, 4, 8), "k": randn(1, 4, 8), "v": randn(1, 4, 8)}, q_num_heads=2),
         23, "kv_num_heads"),
        (Case("att_mask_shape", "Attention", dict(qkv, mask=randn(4, 3))), 23,
         "does not broadcast"),
        (Case("att_past_alone", "Attention",
              dict(qkv, mask=None, past_k=randn(1, 2, 3, 4))), 23,
         "past_key and past_value must be given together"),
        (Case("att_past_no_present", "Attention",
              dict(qkv, mask=None, past_k=randn(1, 2, 3, 4), past_v=randn(1, 2, 3, 4))), 23,
         "need the present_key and present_value outputs"),
    ]


def check_errors(opc, work, only, report):
    for case, opset, words in error_cases():
        if only not in case.name:
            continue
        m, _ = batched_model([case], opset)
        exe, why = compile_cpu(opc, m, os.path.join(work, "error_" + case.name))
        ok = exe is None and why[0] == 2 and words in why[1] and case.op in why[1]
        said = why[1].splitlines()[-1] if why else "opc accepted it"
        report(ok, "refuses %s" % case.name, ("" if ok else "expected status 2 and '%s'; " % words)
               + "status %s: %s" % (why[0] if why else 0, said))


def decoder_block(causal=1):
    """A Llama-style decoder block at opset 23: RMSNormalization, the Q, K
    and V projections, RotaryEmbedding on Q and K (3-D, position_ids),
    Attention (causal, 4 query heads sharing 2 kv heads), the output
    projection and the residual, RMSNormalization again and a SiLU-gated
    MLP with its residual. Weights are scaled by 1/sqrt(fan-in), so each
    stage keeps values of order 1 and the output depends on every part.
    Outputs: the block's output and its change to x (output - x), the part
    the block computes, compared on its own scale."""
    b, s, hidden, heads, kv_heads, d, ffn = 2, 6, 32, 4, 2, 8, 64
    w = lambda *shape: randn(*shape, scale=1.0 / np.sqrt(shape[0]))
    cos, sin = caches(16, d // 2)
    inits = {"norm1": uniform(0.5, 1.5, hidden), "wq": w(hidden, heads * d),
             "wk": w(hidden, kv_heads * d), "wv": w(hidden, kv_heads * d),
             "wo": w(heads * d, hidden), "norm2": uniform(0.5, 1.5, hidden),
             "wg": w(hidden, ffn), "wu": w(hidden, ffn), "wd": w(ffn, hidden),
             "cos": cos, "sin": sin}
    node = helper.make_node
    nodes = [
        node("RMSNormalization", ["x", "norm1"], ["h"], epsilon=1e-5),
        node("MatMul", ["h", "wq"], ["q"]),
        node("MatMul", ["h", "wk"], ["k"]),
        node("MatMul", ["h", "wv"], ["v"]),
        node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["qr"], num_heads=heads),
        node("RotaryEmbedding", ["k", "cos", "sin", "pos"], ["kr"], num_heads=kv_heads),
        node("Attention", ["qr", "kr", "v"], ["att"], q_num_heads=heads, kv_num_heads=kv_heads,
             is_causal=causal),
        node("MatMul", ["att", "wo"], ["o"]),
        node("Add", ["x", "o"], ["x2"]),
        node("RMSNormalization", ["x2", "norm2"], ["h2"], epsilon=1e-5),
        node("MatMul", ["h2", "wg"], ["gate"]),
        node("MatMul", ["h2", "wu"], ["up"]),
        node("Sigmoid", ["gate"], ["gate_sig"]),
        node("Mul", ["gate", "gate_sig"], ["silu"]),
        node("Mul", ["silu", "up"], ["gated"]),
        node("MatMul", ["gated", "wd"], ["down"]),
        node("Add", ["x2", "down"], ["y"]),
        node("Sub", ["y", "x"], ["delta"]),
    ]
    feeds = {"x": randn(b, s, hidden),
             "pos": (np.arange(s)[None, :] + np.array([[0], [7]])).astype(np.int64)}
    graph = helper.make_graph(
        nodes, "decoder", [value_info(k, v) for k, v in feeds.items()],
        [onnx.ValueInfoProto(name="y"), onnx.ValueInfoProto(name="delta")],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    return m, feeds


def check_decoder(opc, work, report):
    """The decoder block end to end, and a control: its causal mask left
    out (same weights: the generator is reseeded)."""
    global rng
    rng = np.random.default_rng(2323)
    m, feeds = decoder_block()
    want = reference(m, feeds, optimise=False)
    d = os.path.join(work, "decoder")
    exe, why = compile_cpu(opc, m, d)
    got = run_program(exe, m, feeds, d) if exe else "opc failed: %s" % (why,)
    if isinstance(got, str):
        report(False, "decoder block", got)
        return
    for o in ("y", "delta"):
        problem = compare(got[o], want[o])
        report(problem is None, "decoder block %s" % o,
               problem or "error %.1e of scale" % measure(got[o], want[o]))
    rng = np.random.default_rng(2323)
    wrong_m, wrong_feeds = decoder_block(causal=0)
    wrong = reference(wrong_m, wrong_feeds, optimise=False)
    problem = compare(got["delta"], wrong["delta"])
    report(problem is not None, "control decoder block (no causal mask)",
           "told apart: " + problem if problem else "the wrong block was accepted")


def main():
    opc, work = sys.argv[1:3]
    only = sys.argv[sys.argv.index("-k") + 1] if "-k" in sys.argv else ""
    failed = total = 0

    def report(ok, label, why):
        nonlocal failed, total
        total += 1
        failed += not ok
        print("%-6s %s%s" % ("PASS" if ok else "FAIL", label, ": " + why if why else ""))

    groups = {23: norm_cases() + group_norm_cases(21) + rotary_cases() + attention_cases(),
              18: group_norm_cases(18)}
    for opset, cases in groups.items():
        cases = [c for c in cases if only in c.name]
        for k, run in enumerate(programs(cases)):
            m, feeds = batched_model(run, opset)
            want = reference(m, feeds, optimise=False)
            label = "opset %d program %d" % (opset, k)
            d = os.path.join(work, "opset%d_%d" % (opset, k))
            exe, why = compile_cpu(opc, m, d)
            if not exe:
                report(False, label, "opc failed: %s" % (why,))
                continue
            got = run_program(exe, m, feeds, d)
            if isinstance(got, str):
                report(False, label, got)
                continue
            for c in run:
                for o in c.output_names():
                    problem = compare(got[o], want[o])
                    report(problem is None, o,
                           problem or "error %.1e of scale" % measure(got[o], want[o]))
            check_controls(run, opset, got, report)
    check_errors(opc, work, only, report)
    if only in "decoder":
        check_decoder(opc, work, report)
    print("opset23: %d of %d passed" % (total - failed, total))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
