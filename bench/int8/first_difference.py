#!/usr/bin/env python3
"""Where an int8 QDQ model's outputs from opc and ONNX Runtime part.

Makes every QuantizeLinear's output a graph output, runs the model on one
input with opc (CPU runtime) and with ONNX Runtime at its default
optimisations (which fuse the QDQ patterns into QLinearConv, QLinearAdd,
...), and lists, in graph order, the first quantized tensors that differ:
how many elements, by how many quanta, and the operator behind the Q.

For a first difference at Q(Add(DQ(a), DQ(b))) it recomputes that Add from
ONNX Runtime's own a and b in two ways and says which of the two programs
each matches:
- the float path ONNX defines: Q((a - za) * sa + (b - zb) * sb);
- two roundings a fused QLinearAdd may use instead, ra = sa / sy and
  rb = sb / sy in float32: scales divided out first,
  round((a - za) * ra + (b - zb) * rb) + zy, and the zero points folded
  into one offset, round(a * ra + b * rb + (zy - za * ra - zb * rb)).
  ONNX Runtime 1.32 matched one of the two on each model tried (not the
  same one), and the float path on neither.

usage: first_difference.py OPC MODEL.onnx INPUT.npy WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def with_quantized_outputs(m):
    """m with every QuantizeLinear output (but the input's) appended to its
    outputs; gives the names appended."""
    inputs = {i.name for i in m.graph.input}
    names = [n.output[0] for n in m.graph.node
             if n.op_type == "QuantizeLinear" and n.input[0] not in inputs]
    for name in names:
        m.graph.output.append(onnx.ValueInfoProto(name=name))
    return names


def run_opc(opc, path, names, feed_name, feed, work):
    exe = os.path.join(work, "net")
    subprocess.run([opc, path, "-o", exe, "--target", "cpu"], check=True, capture_output=True)
    args = [exe, "--input", f"{feed_name}={feed}"]
    for i, name in enumerate(names):
        args += ["--output", f"{name}={work}/out{i}.npy"]
    subprocess.run(args, check=True, capture_output=True)
    return [np.load(f"{work}/out{i}.npy") for i in range(len(names))]


def explain_add(m, q_name, values):
    """For Q(Add(DQ(a), DQ(b))): the two formulas' results from ONNX
    Runtime's a and b, or None when q_name is not that pattern."""
    producer = {o: n for n in m.graph.node for o in n.output}
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    q = producer[q_name]
    add = producer.get(q.input[0])
    if add is None or add.op_type != "Add":
        return None
    deqs = [producer.get(i) for i in add.input]
    if any(d is None or d.op_type != "DequantizeLinear" or d.input[0] not in values for d in deqs):
        return None
    f32 = np.float32
    (qa, qb) = (values[d.input[0]].astype(np.int32) for d in deqs)
    (sa, za), (sb, zb) = ((f32(init[d.input[1]]), np.int32(init[d.input[2]])) for d in deqs)
    sy, zy = f32(init[q.input[1]]), init[q.input[2]]
    info = np.iinfo(zy.dtype)
    float_path = ((qa - za).astype(f32) * sa + (qb - zb).astype(f32) * sb) / sy
    ra, rb = f32(sa / sy), f32(sb / sy)
    prescaled = (qa - za).astype(f32) * ra + (qb - zb).astype(f32) * rb
    offset = qa.astype(f32) * ra + qb.astype(f32) * rb + (f32(zy) - f32(za) * ra - f32(zb) * rb)
    results = {name: np.clip(np.rint(v) + np.int32(zy), info.min, info.max).astype(zy.dtype)
               for name, v in (("the float path", float_path), ("scales divided out first", prescaled))}
    results["zero points folded into one offset"] = np.clip(
        np.rint(offset), info.min, info.max).astype(zy.dtype)
    return results


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    opc, model, feed, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    m = onnx.load(model)
    outputs = [o.name for o in m.graph.output]
    quantized = with_quantized_outputs(m)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    names = outputs + quantized
    x = np.load(feed)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
        None, {m.graph.input[0].name: x})
    got = run_opc(opc, path, names, m.graph.input[0].name, feed, work)
    ort_values = dict(zip(names, want))
    for name, g, w in zip(outputs, got, want):
        diff = np.abs(g.astype(np.float64) - w)
        print(f"output {name}: {int((diff > 0).sum())} of {diff.size} differ, largest "
              f"{diff.max():.4g} (largest |value| {np.abs(w).max():.4g}); top-1 opc "
              f"{int(g.argmax())}, ONNX Runtime {int(w.argmax())}")
    producer = {o: n for n in m.graph.node for o in n.output}
    same = 0
    for name, g, w in list(zip(names, got, want))[len(outputs):]:
        diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
        if not diff.any():
            same += 1
            continue
        source = producer.get(producer[name].input[0])
        print(f"{same} quantized tensors equal, then {name} (Q of "
              f"{source.op_type if source else 'an input'}): {int((diff > 0).sum())} of "
              f"{diff.size} differ, by at most {int(diff.max())} quanta")
        for formula, v in (explain_add(m, name, ort_values) or {}).items():
            print(f"  {formula}, from ONNX Runtime's inputs: {int((v != g).sum())} differ from "
                  f"opc, {int((v != w).sum())} from ONNX Runtime")
        return
    print(f"all {same} quantized tensors equal")


if __name__ == "__main__":
    main()
