#!/usr/bin/env python3
"""The error that 16-bit storage alone gives a model: the floor for
`opc --precision fp16|bf16`.

  storage_rounding.py MODEL.onnx --ref DIR [--precision fp16,bf16]
                      [--input-shape NAME=DIMS]

Runs the model node by node in ONNX Runtime (each node a one-node model of
the model's opset), rounding every float32 weight and every float32 value a
node writes to float16 or bfloat16 (to nearest even) before the next node
reads it; everything else is computed exactly as in float32. DIR is a
tests/zoo/reference.py folder: the test input, its reference and the
baseline (the mean over other inputs). Prints the relative L2 and
signal-relative errors of tests/zoo/compare.py for each output.

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
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
import compare  # noqa: E402


def round_to(a, precision):
    """float32 array rounded to float16 or bfloat16, back in float32."""
    a = np.asarray(a, np.float32)
    if precision == "fp16":
        return a.astype(np.float16).astype(np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return np.where(np.isfinite(a), bits.astype(np.uint32).view(np.float32), a)


def read_pairs(path):
    return [line.split("=", 1) for line in open(path).read().split("\n") if line]


def run_rounded(model, feeds, precision):
    """The graph's outputs, every float32 weight and node output rounded."""
    opsets = list(model.opset_import)
    values = dict(feeds)
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        values[t.name] = round_to(a, precision) if a.dtype == np.float32 else a
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for node in model.graph.node:
        if node.op_type == "Constant":
            a = numpy_helper.to_array(node.attribute[0].t)
            values[node.output[0]] = round_to(a, precision) if a.dtype == np.float32 else a
            continue
        ins = [n for n in node.input if n]
        graph = helper.make_graph(
            [node], "node",
            [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(values[n].dtype),
                                           values[n].shape) for n in ins],
            [helper.make_empty_tensor_value_info(n) for n in node.output if n])
        one = helper.make_model(graph, opset_imports=opsets, ir_version=model.ir_version)
        sess = ort.InferenceSession(one.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
        outs = sess.run(None, {n: values[n] for n in ins})
        for name, v in zip([n for n in node.output if n], outs):
            values[name] = round_to(v, precision) if v.dtype == np.float32 else v
    return [values[o.name] for o in model.graph.output]


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
