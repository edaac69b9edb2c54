#!/usr/bin/env python3
"""The error that 16-bit storage alone gives a model: the floor for
`opc --precision fp16|bf16`.

  storage_rounding.py MODEL.onnx --ref DIR [--precision fp16,bf16]

Runs the model in ONNX Runtime with every float32 weight and every float32
value a node writes rounded to float16 or bfloat16 (to nearest even)
before the next node reads it; everything else is computed exactly as in
float32 (tests/zoo/storage_floor.py, the floor the zoo's 16-bit bounds
follow). DIR is a tests/zoo/reference.py folder: the test input, its
reference and the baseline (the mean over other inputs). Prints the
relative L2 and signal-relative errors of tests/zoo/compare.py for each
output.

opc computes more of a model in float32 than this (Softmax, reductions,
normalisations, the accumulations of convolutions and GEMMs) and stores no
value a fused unit keeps inside, but it also rounds constants that this
rounds too; an opc program well above this floor loses precision somewhere
it need not.
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
import compare  # noqa: E402
import storage_floor  # noqa: E402


def read_pairs(path):
    return [line.split("=", 1) for line in open(path).read().split("\n") if line]


def run_rounded(model, feeds, precision):
    """The graph's outputs, every float32 weight and node output rounded."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(storage_floor.rounded_model(model, precision).SerializeToString(),
                                options, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--ref", required=True, help="a tests/zoo/reference.py folder")
    ap.add_argument("--precision", default="fp16,bf16")
    a = ap.parse_args()
    model = onnx.load(a.model)
    feeds = {n: np.load(f) for n, f in read_pairs(os.path.join(a.ref, "inputs.txt"))}
    refs = read_pairs(os.path.join(a.ref, "outputs.txt"))
    for precision in a.precision.split(","):
        outs = run_rounded(model, feeds, precision)
        for k, ((name, path), got) in enumerate(zip(refs, outs)):
            ref = np.load(path)
            base = os.path.join(a.ref, "baseline_%d.npy" % k)
            _, _, fig = compare.check(ref, got.astype(ref.dtype), precision,
                                      np.load(base) if os.path.exists(base) else None)
            print("%s %s %s: storage rounding alone: relative L2 %.3g, signal-relative %s" % (
                os.path.basename(a.model), precision, name, fig["rel_l2"],
                "%.3g" % fig["signal_rel"] if fig["signal_rel"] is not None else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
