#!/usr/bin/env python3
"""The audio front end (DFT, STFT, the windows, MelWeightMatrix) end to
end against ONNX Runtime, on natural signals: sums of sines and a chirp,
as an audio model sees them, not noise.

usage: test_spectral.py OPC WORK_DIR

The cases cover what the ONNX node tests do not: batches, one-sided
transforms of odd lengths, zero-padding and truncating dft_length, an axis
with a dim after it, complex input, float64, the inverse round trip and
IRFFT (inverse one-sided, even and odd lengths and the default length), a
run-time axis (opset 20's input), STFT with a Hann window feeding a mel
spectrogram as audio front ends use it, STFT with a run-time window on a
complex signal and without a window, and the windows and MelWeightMatrix
in float64. Each case runs again with its inputs constants, for the
evaluators. The cases share programs (onnx_case.merged, onnx_case.batches:
48 inputs and outputs each), compiled with `opc --target cpu`; each output is compared with ONNX Runtime's
within 1e-5 of its largest magnitude (1e-3 for float16), and each round
trip with its own input too. Inputs that decide a shape given at run time
are refused by name.
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, reference, run_opc, value_info  # noqa: E402

OPSET = 20
RATE = 16000


def tone(batch, length, components=1, seed=0):
    """[batch, length, components]: two sines and a chirp per row, their
    frequencies shifted by the row (and the imaginary part a quarter
    period later, for complex signals)."""
    t = np.arange(length) / RATE
    rows = []
    for b in range(batch):
        f = 440.0 * (1 + 0.25 * b + 0.1 * seed)
        parts = []
        for c in range(components):
            phase = c * np.pi / 2
            parts.append(0.6 * np.sin(2 * np.pi * f * t + phase)
                         + 0.3 * np.sin(2 * np.pi * 2.7 * f * t + 0.4 + phase)
                         + 0.2 * np.sin(2 * np.pi * (150 * t + 0.5 * 9e5 * t * t) + phase))
        rows.append(np.stack(parts, -1))
    return np.stack(rows).astype(np.float32)


class Case:
    """One model: nodes over inputs (fed at run time) and inits
    (constants); outputs compared with ONNX Runtime, and `back` names an
    output that must also equal an input (a round trip)."""

    def __init__(self, name, nodes, inputs, outputs, inits=None, rel=1e-5, back=None):
        self.name, self.nodes, self.inputs, self.outputs = name, nodes, inputs, outputs
        self.inits, self.rel, self.back = inits or {}, rel, back

    def model(self):
        return onnx_case.model(
            self.nodes, [value_info(k, v) for k, v in self.inputs.items()],
            [onnx.ValueInfoProto(name=o) for o in self.outputs],
            [numpy_helper.from_array(np.asarray(v), k) for k, v in self.inits.items()],
            opset=OPSET, name=self.name)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def i64(v):
    return np.array(v, np.int64)


def dft_cases():
    c = tone(2, 24, 2)
    return [
        Case("dft_batch", [node("DFT", ["x"], ["y"])], {"x": tone(3, 50)}, ["y"]),
        Case("dft_onesided_odd", [node("DFT", ["x"], ["y"], onesided=1)], {"x": tone(2, 45)},
             ["y"]),
        Case("dft_padded", [node("DFT", ["x", "L"], ["y"], onesided=1)], {"x": tone(2, 50)},
             ["y"], {"L": i64(64)}),
        Case("dft_truncated", [node("DFT", ["x", "L"], ["y"])], {"x": tone(2, 50, 2)}, ["y"],
             {"L": i64(33)}),
        Case("dft_inner_axis", [node("DFT", ["x", "", "a"], ["y"])],
             {"x": tone(2, 48, 2).reshape(2, 16, 3, 2)}, ["y"], {"a": i64(1)}),
        Case("dft_f64", [node("DFT", ["x"], ["y"], onesided=1)],
             {"x": tone(2, 30).astype(np.float64)}, ["y"]),
        Case("dft_f16", [node("DFT", ["x"], ["y"])], {"x": tone(2, 30, 2).astype(np.float16)},
             ["y"], rel=2e-3),
        Case("dft_axis_at_run_time", [node("DFT", ["x", "", "a"], ["y"])],
             {"x": tone(2, 120, 2).reshape(2, 12, 10, 2), "a": i64(1)}, ["y"]),
        Case("dft_axis_at_run_time_negative", [node("DFT", ["x", "", "a"], ["y"])],
             {"x": tone(2, 120, 2, seed=1).reshape(2, 12, 10, 2), "a": i64(-2)}, ["y"]),
        Case("round_trip", [node("DFT", ["x"], ["s"]), node("DFT", ["s"], ["y"], inverse=1)],
             {"x": c}, ["s", "y"], back=("y", "x")),
        Case("irfft_even", [node("DFT", ["x", "L"], ["s"], onesided=1),
                            node("DFT", ["s", "L"], ["y"], onesided=1, inverse=1)],
             {"x": tone(2, 40)}, ["s", "y"], {"L": i64(40)}, back=("y", "x")),
        Case("irfft_odd", [node("DFT", ["x", "L"], ["s"], onesided=1),
                           node("DFT", ["s", "L"], ["y"], onesided=1, inverse=1)],
             {"x": tone(2, 45, seed=2)}, ["s", "y"], {"L": i64(45)}, back=("y", "x")),
        # 21 bins: the default length is 2 * (21 - 1) = 40
        Case("irfft_default_length", [node("DFT", ["s"], ["y"], onesided=1, inverse=1)],
             {"s": tone(3, 21, 2, seed=3)}, ["y"]),
    ]


def stft_cases():
    return [
        # An audio front end: a Hann window, a power spectrum, a mel filter bank.
        Case("stft_hann_mel",
             [node("HannWindow", ["W"], ["w"]),
              node("STFT", ["x", "step", "w"], ["s"]),
              node("Mul", ["s", "s"], ["sq"]),
              node("ReduceSum", ["sq", "last"], ["power"], keepdims=0),
              node("MelWeightMatrix", ["bins", "W", "rate", "lo", "hi"], ["mel_w"]),
              node("MatMul", ["power", "mel_w"], ["mel"])],
             {"x": tone(2, 400)}, ["s", "mel"],
             {"W": i64(64), "step": i64(16), "last": i64([-1]), "bins": i64(8),
              "rate": i64(RATE), "lo": np.float32(20), "hi": np.float32(8000)}),
        Case("stft_run_time_window_complex",
             [node("STFT", ["x", "step", "w", "F"], ["s"], onesided=0)],
             {"x": tone(1, 100, 2), "w": np.hamming(20).astype(np.float32)}, ["s"],
             {"step": i64(7), "F": i64(20)}),
        Case("stft_no_window", [node("STFT", ["x", "step", "", "F"], ["s"])],
             {"x": tone(3, 64)}, ["s"], {"step": np.array(15, np.int32),
                                         "F": np.array(16, np.int32)}),
    ]


def folded(cases):
    """The cases again with every input a constant, for opc's evaluators
    (fold_nn.c) instead of its kernels."""
    return [Case(c.name + "_folded", c.nodes, {}, c.outputs, {**c.inits, **c.inputs}, c.rel,
                 c.back) for c in cases]


def constant_cases():
    return [
        Case("windows", [node("HannWindow", ["n11"], ["hann"], periodic=0, output_datatype=11),
                         node("HammingWindow", ["n16"], ["hamming"]),
                         node("BlackmanWindow", ["n11"], ["blackman"], periodic=0),
                         node("HammingWindow", ["n16"], ["hamming_f64"], periodic=0, output_datatype=11),
                         node("BlackmanWindow", ["n16"], ["blackman16"])],
             {}, ["hann", "hamming", "blackman", "hamming_f64", "blackman16"],
             {"n11": i64(11), "n16": np.array(16, np.int32)}),
        Case("mel_f64", [node("MelWeightMatrix", ["n", "L", "r", "lo", "hi"], ["y"],
                              output_datatype=11)],
             {}, ["y"], {"n": i64(10), "L": i64(400), "r": i64(RATE), "lo": np.float32(0),
                         "hi": np.float32(8000)}),
    ]


def refusals():
    x = tone(2, 12, 2).reshape(2, 6, 2, 2)
    return [
        ("a run-time window size",
         Case("e1", [node("HannWindow", ["n"], ["y"])], {"n": i64(8)}, ["y"]).model(),
         "is not a compile-time constant"),
        ("a run-time axis deciding the shape",
         Case("e2", [node("DFT", ["x", "", "a"], ["y"], onesided=1)], {"x": x, "a": i64(1)},
              ["y"]).model(), "decides the output's shape"),
        ("a one-sided STFT of a complex signal",
         Case("e3", [node("STFT", ["x", "step", "", "F"], ["y"])], {"x": tone(1, 32, 2)},
              ["y"], {"step": i64(4), "F": i64(8)}).model(), "needs a real signal"),
        ("a mel band past the DFT's bins",
         Case("e4", [node("MelWeightMatrix", ["n", "L", "r", "lo", "hi"], ["y"])], {}, ["y"],
              {"n": i64(8), "L": i64(64), "r": i64(RATE), "lo": np.float32(0),
               "hi": np.float32(20000)}).model(), "outside the"),
        ("a mel band edge that is not a number",
         Case("e6", [node("MelWeightMatrix", ["n", "L", "r", "lo", "hi"], ["y"])], {}, ["y"],
              {"n": i64(8), "L": i64(64), "r": i64(RATE), "lo": np.float32("nan"),
               "hi": np.float32(8000)}).model(), "falls at DFT bin -1"),
        ("an IRFFT of one bin without dft_length",
         Case("e7", [node("DFT", ["x"], ["y"], inverse=1, onesided=1)], {"x": tone(2, 1, 2)},
              ["y"]).model(), "give dft_length"),
        ("a run-time frame_step",
         Case("e8", [node("STFT", ["x", "step"], ["y"])], {"x": tone(1, 32), "step": i64(4)},
              ["y"]).model(), "'step' is not a compile-time constant"),
        ("the complex dim as the axis",
         Case("e5", [node("DFT", ["x", "", "a"], ["y"])], {"x": x}, ["y"],
              {"a": i64(-1)}).model(), "out of range"),
    ]


def check(cases, got, want):
    failures = []
    for k, case in enumerate(cases):
        for o in case.outputs:
            name = "c%d_%s" % (k, o)
            why = compare_close(got[name], want[name], case.rel)
            if why:
                failures.append(f"{case.name} {o}: {why}")
        if case.back:
            y, x = case.back
            given = case.inputs[x] if x in case.inputs else case.inits[x]
            why = compare_close(got["c%d_%s" % (k, y)], given, case.rel)
            if why:
                failures.append(f"{case.name}: the round trip does not give its input back: {why}")
    return failures


def check_program(opc, cases, work):
    """The cases in one program, each output against ONNX Runtime's."""
    m = onnx_case.merged([c.model() for c in cases], OPSET)
    feeds = {"c%d_%s" % (k, name): v for k, c in enumerate(cases) for name, v in c.inputs.items()}
    want = reference(m, feeds)
    got, why = run_opc(opc, m, feeds, work)
    if why:
        return [f"{', '.join(c.name for c in cases)}: {why}"]
    return check(cases, got, want)


def main():
    opc, work = sys.argv[1:3]
    cases = dft_cases() + stft_cases()
    cases += folded(cases) + constant_cases()
    failures = []
    for k, run in enumerate(onnx_case.batches(cases, Case.model)):
        failures += check_program(opc, run[1], os.path.join(work, "program%d" % k))
    nfolded = sum(c.name.endswith('_folded') for c in cases)
    return onnx_case.finish(opc, failures, refusals(), work,
                            f"spectral: {len(cases)} cases ({nfolded} folded) match ONNX Runtime; "
                            "round trips hold; 8 refusals clear")


if __name__ == "__main__":
    sys.exit(main())
