#!/usr/bin/env python3
"""Make reference inputs/outputs for an ONNX model with onnxruntime (CPU).

  reference.py MODEL.onnx --seed S --outdir DIR [--opt disable|basic|extended|all]
                          [--threads T]

Writes, in DIR:
  input_<k>.npy   float32, C order, drawn from numpy default_rng(S) standard
                  normal in graph-input order (k = 0, 1, ...)
  inputs.txt      one "NAME=PATH" line per graph input (PATH absolute)
  ref_<k>.npy     onnxruntime's value of graph output k
  outputs.txt     one "NAME=PATH" line per graph output (PATH absolute)
  meta.json       seed, model, onnxruntime version, shapes

The NAME=PATH files split at the first '='.
"""

import argparse
import json
import os
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--opt", default="disable",
                    choices=["disable", "basic", "extended", "all"],
                    help="onnxruntime graph optimisation level (default: disable)")
    ap.add_argument("--threads", type=int, default=0,
                    help="intra-op threads (0 = onnxruntime default)")
    a = ap.parse_args(argv)

    import onnxruntime as ort

    levels = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[a.opt]
    if a.threads:
        so.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])

    outdir = os.path.abspath(a.outdir)
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    feeds = {}
    in_lines = []
    meta = {"model": os.path.abspath(a.model), "seed": a.seed,
            "onnxruntime": ort.__version__, "opt": a.opt,
            "inputs": [], "outputs": []}
    for k, inp in enumerate(sess.get_inputs()):
        if inp.type != "tensor(float)":
            sys.exit("reference.py: input %r has type %s; only float32 inputs "
                     "are supported" % (inp.name, inp.type))
        shape = []
        for d in inp.shape:
            if not isinstance(d, int) or d < 0:
                sys.exit("reference.py: input %r has a non-static shape %r"
                         % (inp.name, inp.shape))
            shape.append(d)
        x = rng.standard_normal(size=tuple(shape), dtype=np.float32)
        x = np.ascontiguousarray(x, dtype=np.float32)
        path = os.path.join(outdir, "input_%d.npy" % k)
        np.save(path, x)
        feeds[inp.name] = x
        in_lines.append("%s=%s" % (inp.name, path))
        meta["inputs"].append({"name": inp.name, "shape": shape, "path": path})

    outs = sess.run(None, feeds)
    out_lines = []
    for k, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        v = np.ascontiguousarray(v)
        path = os.path.join(outdir, "ref_%d.npy" % k)
        np.save(path, v)
        out_lines.append("%s=%s" % (o.name, path))
        meta["outputs"].append({"name": o.name, "shape": list(v.shape),
                                "dtype": str(v.dtype), "path": path})
        if not np.all(np.isfinite(v)):
            print("reference.py: warning: output %r has non-finite values" % o.name,
                  file=sys.stderr)

    with open(os.path.join(outdir, "inputs.txt"), "w") as f:
        f.write("".join(l + "\n" for l in in_lines))
    with open(os.path.join(outdir, "outputs.txt"), "w") as f:
        f.write("".join(l + "\n" for l in out_lines))
    with open(os.path.join(outdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("reference: %s seed=%d inputs=%d outputs=%d (onnxruntime %s, opt=%s) -> %s"
          % (os.path.basename(a.model), a.seed, len(in_lines), len(out_lines),
             ort.__version__, a.opt, outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
