#!/usr/bin/env python3
"""ONNX Runtime's outputs for a model, on the test input and on others.

  reference.py MODEL.onnx --seed S --outdir DIR [--others N]
               [--input-shape NAME=DIMS ...] [--input-kind NAME=KIND ...]
               [--opt disable|basic|extended|all] [--threads T]

Draw 0 is the test input; draws 1..N (default 4) are other inputs, whose
outputs say how much of the output the input decides. Writes, in DIR:

  input_<k>.npy, ref_<k>.npy   draw 0's graph input k and output k
  inputs.txt, outputs.txt      one "NAME=PATH" line per input / output
                               (PATH absolute; split at the first '=')
  other<d>/...                 the same for draw d
  baseline_<k>.npy             the mean of output k over draws 1..N
                               (floating outputs)
  floor_<P>_<k>.npy            for draws 0 and 1 (DIR and other1), output k
                               with every weight and stored value rounded
                               to P (compare.FLOOR_PRECISIONS: bf16;
                               storage_floor.py), the floor under opc's
                               programs in P (floating outputs)
  meta.json                    seed, model, onnxruntime version, shapes, and
                               each floating output's input sensitivity,
                               ||ref - baseline|| / ||ref||

A NaN in any reference output is an error (exit 1): a check against it
could not fail.

Inputs, by the model's metadata_props "opc.input_kind.NAME" (or
--input-kind, for a model used as shipped) and type (make_input); a
dynamic shape is given with --input-shape NAME=1x3x48x320:
  image             photographs (tools/models/photos.py), resized to the
                    input's height and width and normalised as torchvision
                    does; draw d of a batch of B takes photographs
                    (S + d*B + j) mod count, j < B
  text              lines of text rendered black on white
                    (tools/models/ppocr.py), normalised as PP-OCR does;
                    draw d of seed S starts with ppocr.TEXTS[(S + d) mod count]
  mask              integer or bool padding mask: per row (last axis,
                    length L) a random count in [1, L-1] of leading ones,
                    then zeros
  float, no kind    standard normal
  integer or bool   token ids, uniform in [LO, HI) with "opc.input_range.NAME"
                    = "LO,HI" (default [0, 100), bool [0, 2))
Random draws come from numpy's default_rng([S, d]), inputs in graph order.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "models"))
import photos  # noqa: E402
import ppocr  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import FLOOR_PRECISIONS, sensitivity  # noqa: E402
import storage_floor  # noqa: E402

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
DEFAULT_OTHERS = 4


def make_input(rng, name, type_str, shape, props, seed=0, draw=0):
    """One graph input of draw `draw` (see the module's docstring); `rng`
    gives the random draws, `seed` and `draw` choose photographs."""
    if type_str not in _DTYPES:
        raise ValueError("input %r has type %s; supported: %s"
                         % (name, type_str, ", ".join(sorted(_DTYPES))))
    dtype = _DTYPES[type_str]
    shape = tuple(shape)
    kind = props.get("opc.input_kind." + name, "ids" if dtype not in (
        np.float32, np.float16, np.float64) else "normal")
    if kind == "image":
        if dtype != np.float32 or len(shape) != 4 or shape[1] not in (1, 3):
            raise ValueError("image input %r must be float32 (N, 1 or 3, H, W), is %s %r"
                             % (name, type_str, shape))
        n = shape[0]
        return photos.image_batch([(seed + draw * n + j) % photos.count() for j in range(n)],
                                  shape)
    if kind == "text":
        rows = max(1, shape[2] // ppocr.LINE_HEIGHT) if len(shape) == 4 else 1
        return ppocr.text_image(ppocr.draw_texts(seed, draw, rows), shape)
    if kind == "normal":
        if dtype == np.float32:
            return rng.standard_normal(size=shape, dtype=np.float32)
        return np.ascontiguousarray(rng.standard_normal(size=shape).astype(dtype))
    if kind == "mask":
        if len(shape) < 1 or shape[-1] < 1:
            raise ValueError("mask input %r needs a non-empty last axis, has %r"
                             % (name, shape))
        length = shape[-1]
        if length > 1:
            # Two tokens at least where the row has room: over one key,
            # attention's softmax is 1 whatever the queries, and the zoo's
            # strength check then found a zeroed query channel harmless
            # (bert_tiny, OPC_ZOO_SEED=357578736).
            ones = rng.integers(min(2, length - 1), length, size=shape[:-1], dtype=np.int64)
        else:
            ones = np.ones(shape[:-1], np.int64)
        x = np.arange(length, dtype=np.int64) < ones[..., None]
        return np.ascontiguousarray(x.astype(dtype))
    if kind != "ids":
        raise ValueError("input %r: unknown opc.input_kind %r (image, text, mask or ids)"
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


def draw_inputs(sess, props, seed, draw, shapes=None):
    """{name: array} for every graph input of the session, draw `draw`;
    `shapes` gives the shapes of inputs whose shape is dynamic."""
    rng = np.random.default_rng([seed, draw])
    feeds = {}
    for inp in sess.get_inputs():
        shape = []
        for d in (shapes or {}).get(inp.name, inp.shape):
            if not isinstance(d, int) or d < 0:
                raise ValueError("input %r has a non-static shape %r" % (inp.name, inp.shape))
            shape.append(d)
        feeds[inp.name] = make_input(rng, inp.name, inp.type, shape, props, seed, draw)
    return feeds


def write_draw(outdir, sess, feeds, outs):
    """input_<k>.npy, ref_<k>.npy, inputs.txt and outputs.txt in outdir."""
    os.makedirs(outdir, exist_ok=True)
    in_lines, out_lines = [], []
    for k, inp in enumerate(sess.get_inputs()):
        path = os.path.join(outdir, "input_%d.npy" % k)
        np.save(path, feeds[inp.name])
        in_lines.append("%s=%s" % (inp.name, path))
    for k, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        path = os.path.join(outdir, "ref_%d.npy" % k)
        np.save(path, np.ascontiguousarray(v))
        out_lines.append("%s=%s" % (o.name, path))
    with open(os.path.join(outdir, "inputs.txt"), "w") as f:
        f.write("".join(l + "\n" for l in in_lines))
    with open(os.path.join(outdir, "outputs.txt"), "w") as f:
        f.write("".join(l + "\n" for l in out_lines))


def floor_sessions(ort, path):
    """precision -> an ONNX Runtime session of the model as storage_floor
    rounds it (no graph optimisation, which could drop the casts)."""
    import onnx

    model = onnx.load(path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return {p: ort.InferenceSession(storage_floor.rounded_model(model, p).SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
            for p in FLOOR_PRECISIONS}


def write_floors(outdir, floors, feeds, outs):
    """floor_<P>_<k>.npy: each floating output under each precision's
    storage rounding."""
    for p, sess in floors.items():
        for k, v in enumerate(sess.run(None, feeds)):
            if outs[k].dtype.kind == "f":
                np.save(os.path.join(outdir, "floor_%s_%d.npy" % (p, k)),
                        np.ascontiguousarray(v, dtype=outs[k].dtype))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--others", type=int, default=DEFAULT_OTHERS,
                    help="other inputs, for the input sensitivity (default %d)" % DEFAULT_OTHERS)
    ap.add_argument("--input-shape", action="append", default=[], metavar="NAME=DIMS",
                    help="the shape of an input whose shape is dynamic, like x=1x3x48x320")
    ap.add_argument("--input-kind", action="append", default=[], metavar="NAME=KIND",
                    help="what an input takes (image, text, mask, ids), over the metadata's")
    ap.add_argument("--opt", default="disable",
                    choices=["disable", "basic", "extended", "all"],
                    help="onnxruntime graph optimisation level (default: disable)")
    ap.add_argument("--threads", type=int, default=0,
                    help="intra-op threads (0 = onnxruntime default)")
    a = ap.parse_args(argv)
    if a.others < 1:
        ap.error("--others must be at least 1")

    import onnxruntime as ort

    levels = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[a.opt]
    so.log_severity_level = 3
    if a.threads:
        so.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    props = dict(sess.get_modelmeta().custom_metadata_map)
    shapes = {}
    for spec in a.input_shape:
        name, _, dims = spec.partition("=")
        shapes[name] = [int(d) for d in dims.split("x")]
    for spec in a.input_kind:
        name, _, kind = spec.partition("=")
        props["opc.input_kind." + name] = kind
    outdir = os.path.abspath(a.outdir)

    floors = floor_sessions(ort, a.model)
    draws = []
    for d in range(a.others + 1):
        try:
            feeds = draw_inputs(sess, props, a.seed, d, shapes)
        except ValueError as err:
            sys.exit("reference.py: %s" % err)
        outs = [np.ascontiguousarray(v) for v in sess.run(None, feeds)]
        for o, v in zip(sess.get_outputs(), outs):
            if v.dtype.kind == "f" and np.isnan(v).any():
                sys.exit("reference.py: ONNX Runtime's output %r for draw %d has %d NaN: a "
                         "reference a check cannot fail against" % (o.name, d,
                                                                     int(np.isnan(v).sum())))
        folder = outdir if d == 0 else os.path.join(outdir, "other%d" % d)
        write_draw(folder, sess, feeds, outs)
        if d < 2:
            write_floors(folder, floors, feeds, outs)
        draws.append((feeds, outs))

    meta = {"model": os.path.abspath(a.model), "seed": a.seed, "others": a.others,
            "onnxruntime": ort.__version__, "opt": a.opt, "inputs": [], "outputs": []}
    feeds, outs = draws[0]
    for k, inp in enumerate(sess.get_inputs()):
        meta["inputs"].append({"name": inp.name, "shape": list(feeds[inp.name].shape),
                               "dtype": str(feeds[inp.name].dtype),
                               "path": os.path.join(outdir, "input_%d.npy" % k)})
    for k, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        entry = {"name": o.name, "shape": list(v.shape), "dtype": str(v.dtype),
                 "path": os.path.join(outdir, "ref_%d.npy" % k)}
        if v.dtype.kind == "f":
            baseline = np.mean([other[1][k].astype(np.float64) for other in draws[1:]], axis=0)
            path = os.path.join(outdir, "baseline_%d.npy" % k)
            np.save(path, baseline)
            entry["baseline"] = path
            entry["sensitivity"] = sensitivity(v, baseline)
        meta["outputs"].append(entry)
    with open(os.path.join(outdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("reference: %s seed=%d, %d inputs, %d outputs, %d other draws (onnxruntime %s, "
          "opt=%s) -> %s" % (os.path.basename(a.model), a.seed, len(feeds), len(outs), a.others,
                             ort.__version__, a.opt, outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
