#!/usr/bin/env python3
"""Make reference inputs/outputs for an ONNX model with onnxruntime (CPU).

  reference.py MODEL.onnx --seed S --outdir DIR [--opt disable|basic|extended|all]
                          [--threads T]

Writes, in DIR:
  input_<k>.npy   one per graph input in graph-input order (k = 0, 1, ...), C
                  order, of the input's element type, all drawn from one numpy
                  default_rng(S) (see make_input for the convention):
                    float32             standard normal
                    float16, double     standard normal, cast
                    int8..int64, uint8..uint64, bool
                                        token ids, uniform integers in [LO, HI)
                                        (default [0, 100)), or with
                                        metadata_props "opc.input_kind.NAME" =
                                        "mask" an attention mask: per row
                                        (last axis, length L) a random number in
                                        [1, L-1] of ones, then zeros (padding)
                  The model's metadata_props set the range of an integer input:
                  "opc.input_range.NAME" = "LO,HI" (HI exclusive).
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

# onnxruntime's NodeArg.type -> numpy dtype
_DTYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64,
    "tensor(float16)": np.float16, "tensor(bool)": np.bool_,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16,
    "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64,
}

DEFAULT_INT_RANGE = (0, 100)


def make_input(rng, name, type_str, shape, props):
    """One graph input, drawn from `rng`.

    type_str is onnxruntime's input type ("tensor(float)", ...), shape a tuple
    of ints, props the model's metadata_props (dict).  float32 is
    rng.standard_normal(size=shape, dtype=float32), exactly as before integer
    inputs were supported, so float models draw the same numbers.  Integer and
    bool inputs are token ids in [LO, HI), LO,HI from metadata_props
    "opc.input_range.NAME" (default 0,100; bool 0,2), or, with metadata_props
    "opc.input_kind.NAME" = "mask", a padding mask: every row (last axis, length
    L) starts with a random number in [1, L-1] (1 if L == 1) of ones, the rest
    zeros, so each row has at least one 1 and, if L > 1, at least one 0."""
    if type_str not in _DTYPES:
        raise ValueError("input %r has type %s; supported: %s"
                         % (name, type_str, ", ".join(sorted(_DTYPES))))
    dtype = _DTYPES[type_str]
    shape = tuple(shape)
    if dtype == np.float32:
        x = rng.standard_normal(size=shape, dtype=np.float32)
        return np.ascontiguousarray(x, dtype=np.float32)
    if dtype in (np.float16, np.float64):
        x = rng.standard_normal(size=shape, dtype=np.float64)
        return np.ascontiguousarray(x.astype(dtype))
    kind = props.get("opc.input_kind." + name, "ids")
    if kind == "mask":
        if len(shape) < 1 or shape[-1] < 1:
            raise ValueError("mask input %r needs a non-empty last axis, has %r"
                             % (name, shape))
        length = shape[-1]
        if length > 1:
            ones = rng.integers(1, length, size=shape[:-1], dtype=np.int64)
        else:
            ones = np.ones(shape[:-1], np.int64)
        x = np.arange(length, dtype=np.int64) < ones[..., None]
        return np.ascontiguousarray(x.astype(dtype))
    if kind != "ids":
        raise ValueError("input %r: unknown opc.input_kind %r (ids or mask)"
                         % (name, kind))
    spec = props.get("opc.input_range." + name)
    if spec is not None:
        lo, hi = (int(v) for v in spec.split(","))
    elif dtype == np.bool_:
        lo, hi = 0, 2
    else:
        lo, hi = DEFAULT_INT_RANGE
    info = np.iinfo(np.uint8 if dtype == np.bool_ else dtype)
    if not (lo < hi and info.min <= lo and hi - 1 <= info.max):
        raise ValueError("input %r: bad range [%d, %d) for %s" % (name, lo, hi, type_str))
    x = rng.integers(lo, hi, size=shape, dtype=np.int64)
    return np.ascontiguousarray(x.astype(dtype))


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
    props = dict(sess.get_modelmeta().custom_metadata_map)
    for k, inp in enumerate(sess.get_inputs()):
        if inp.type not in _DTYPES:
            sys.exit("reference.py: input %r has type %s; supported: %s"
                     % (inp.name, inp.type, ", ".join(sorted(_DTYPES))))
        shape = []
        for d in inp.shape:
            if not isinstance(d, int) or d < 0:
                sys.exit("reference.py: input %r has a non-static shape %r"
                         % (inp.name, inp.shape))
            shape.append(d)
        try:
            x = make_input(rng, inp.name, inp.type, shape, props)
        except ValueError as err:
            sys.exit("reference.py: %s" % err)
        path = os.path.join(outdir, "input_%d.npy" % k)
        np.save(path, x)
        feeds[inp.name] = x
        in_lines.append("%s=%s" % (inp.name, path))
        meta["inputs"].append({"name": inp.name, "shape": shape,
                               "dtype": str(x.dtype), "path": path})

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
