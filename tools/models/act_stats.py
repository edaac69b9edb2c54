#!/usr/bin/env python3
"""Print activation statistics of every float tensor of a zoo model
(debug aid for the weight initialisation; needs onnxruntime).

  act_stats.py NAME [--batch N] [--seed S] [--every K] [--worst K]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

import build  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=0, help="print every K-th tensor")
    ap.add_argument("--worst", type=int, default=10, help="print the K largest rms")
    a = ap.parse_args()
    net = build.build_net(a.name, a.batch, a.seed)
    model = net.to_model()
    est = net.value_ms
    inferred = onnx.shape_inference.infer_shapes(model)
    have = {o.name for o in model.graph.output}
    for vi in inferred.graph.value_info:
        if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT and vi.name not in have:
            model.graph.output.append(vi)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(a.seed)
    feeds = {i.name: rng.standard_normal(i.shape, dtype=np.float32) for i in sess.get_inputs()}
    names = [o.name for o in sess.get_outputs()]
    vals = sess.run(None, feeds)
    rows = [(n, float(np.sqrt(np.mean(np.square(v.astype(np.float64))))),
             float(np.max(np.abs(v))), est.get(n, float("nan")) ** 0.5)
            for n, v in zip(names, vals)]
    if a.every:
        for n, r, m, e in rows[::a.every]:
            print("%-70s rms=%10.4g (est %8.3g) absmax=%10.4g" % (n, r, e, m))
    print("-- largest rms --")
    for n, r, m, e in sorted(rows, key=lambda t: -t[1])[:a.worst]:
        print("%-70s rms=%10.4g (est %8.3g) absmax=%10.4g" % (n, r, e, m))
    print("-- smallest rms --")
    for n, r, m, e in sorted(rows, key=lambda t: t[1])[:a.worst]:
        print("%-70s rms=%10.4g (est %8.3g) absmax=%10.4g" % (n, r, e, m))
    bad = [n for n, r, m, e in rows if not np.isfinite(m)]
    print("non-finite tensors: %d" % len(bad))


if __name__ == "__main__":
    main()
