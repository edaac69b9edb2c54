#!/usr/bin/env python3
"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss through opc, the
CPU runtime and the emitted program, against ONNX Runtime.

Each case builds a one-node model, runs ONNX Runtime on it for the expected
outputs, then compiles it with `opc --target cpu` and compares; every case
runs three ways: labels as an int64 initializer (checked by opc when it
compiles), and as a run-time input of int64 and of int32. Two more cases
check constant labels outside [0, C) that are not ignore_index (a clear
error) and such a label at run time (a NaN loss, where ONNX Runtime
raises an error).

usage: test_losses.py OPC WORK_DIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

TOLERANCE = 1e-4
OPSET = 13


def make_model(op, shape, labels, attrs, weight=None, weight_const=False, log_prob=False,
               split_view=False, labels_type=None):
    """A model computing `op` on input x of `shape` (or on the second half of
    an x twice as tall, split along dim 0, when split_view)."""
    nodes, inits, inputs = [], [], []
    x_shape = [shape[0] * 2] + list(shape[1:]) if split_view else list(shape)
    inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape))
    scores = "x"
    if split_view:
        nodes.append(helper.make_node("Split", ["x", "halves"], ["top", "bottom"], axis=0))
        inits.append(numpy_helper.from_array(np.array([shape[0], shape[0]], np.int64), "halves"))
        scores = "bottom"
    if labels_type is None:
        inits.append(numpy_helper.from_array(labels.astype(np.int64), "labels"))
    else:
        inputs.append(helper.make_tensor_value_info("labels", labels_type, list(labels.shape)))
    node_inputs = [scores, "labels"]
    if weight is not None:
        node_inputs.append("w")
        if weight_const:
            inits.append(numpy_helper.from_array(weight.astype(np.float32), "w"))
        else:
            inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(weight.shape)))
    outputs = ["loss"] + (["log_prob"] if log_prob else [])
    nodes.append(helper.make_node(op, node_inputs, outputs, **attrs))
    out_info = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    graph = helper.make_graph(nodes, "loss", inputs, out_info, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def compare(got, want):
    if got.size != want.size:
        return f"shape {got.shape}, expected {want.shape}"
    got = got.reshape(want.shape).astype(np.float64)
    want = want.astype(np.float64)
    if (np.isnan(got) != np.isnan(want)).any():
        return f"NaN at different positions: got {got}, expected {want}"
    ok = ~np.isnan(want)
    bad = np.abs(got[ok] - want[ok]) > TOLERANCE + TOLERANCE * np.abs(want[ok])
    if bad.any():
        i = int(np.argmax(bad))
        return f"got {got[ok][i]!r}, expected {want[ok][i]!r}"
    return None


def compile_model(opc, model, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    path = os.path.join(work, "model.onnx")
    onnx.save(model, path)
    exe = os.path.join(work, "net")
    p = subprocess.run([opc, path, "-o", exe, "--target", "cpu"], capture_output=True, text=True)
    return exe, p


LABEL_DTYPES = {TensorProto.INT64: np.int64, TensorProto.INT32: np.int32}


def run_case(opc, work, name, op, shape, labels, attrs, weight=None, weight_const=False,
             log_prob=False, split_view=False, seed=0, labels_type=None):
    rng = np.random.default_rng(seed)
    model = make_model(op, shape, labels, attrs, weight, weight_const, log_prob, split_view,
                       labels_type)
    x_shape = [d for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = rng.standard_normal([d.dim_value for d in x_shape]).astype(np.float32)
    feeds = {"x": x}
    if labels_type is not None:
        feeds["labels"] = labels.astype(LABEL_DTYPES[labels_type])
    if weight is not None and not weight_const:
        feeds["w"] = weight.astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)

    exe, p = compile_model(opc, model, os.path.join(work, name))
    if p.returncode != 0:
        return f"opc failed: {(p.stdout + p.stderr).strip()[-400:]}"
    cmd = [exe]
    for k, v in feeds.items():
        f = os.path.join(work, name, f"{k}.npy")
        np.save(f, v)
        cmd += ["--input", f"{k}={f}"]
    outs = [os.path.join(work, name, f"out_{k}.npy") for k in range(len(want))]
    for o, f in zip([o.name for o in model.graph.output], outs):
        cmd += ["--output", f"{o}={f}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return f"net failed: exit {p.returncode}: {p.stderr.strip()[-300:]}"
    for k, (f, w) in enumerate(zip(outs, want)):
        problem = compare(np.load(f), w)
        if problem:
            return f"output {k}: {problem}"
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    return None


def expect_error(opc, work, name, model, message):
    _, p = compile_model(opc, model, os.path.join(work, name))
    text = p.stdout + p.stderr
    if p.returncode == 0:
        return "opc accepted the model"
    if message not in text:
        return f"expected '{message}' in: {text.strip()[-300:]}"
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    return None


def main():
    opc, work = sys.argv[1:3]
    rng = np.random.default_rng(7)
    nll, sce = "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"
    w5 = rng.uniform(0.2, 2.0, 5)
    w7 = rng.uniform(0.2, 2.0, 7)
    lab_2d = np.array([[0, 2, 4], [2, 1, 3], [4, 4, 2], [0, 1, 2]])       # N=4, d1=3
    lab_4d = rng.integers(0, 7, (3, 2, 4))                               # N=3, d1=2, d2=4
    lab_4d[0, 1, 2] = lab_4d[2, 0, 0] = 0                                # ignored with ii=0
    lab_neg = np.array([[1, -1, 4, 0], [-1, 3, 3, 2]])                    # N=2, d1=4
    cases = [
        ("nll_mean_const_weight_ii", nll, [4, 5, 3], lab_2d,
         {"reduction": "mean", "ignore_index": 2}, dict(weight=w5, weight_const=True)),
        ("nll_none_negative_ii", nll, [2, 5, 4], lab_neg,
         {"reduction": "none", "ignore_index": -1}, {}),
        ("nll_mean_negative_ii_no_weight", nll, [2, 5, 4], lab_neg,
         {"reduction": "mean", "ignore_index": -1}, {}),
        ("nll_sum_runtime_weight", nll, [4, 5, 3], lab_2d, {"reduction": "sum"},
         dict(weight=w5)),
        ("nll_default_mean_2d", nll, [4, 5], np.array([4, 0, 3, 3]), {}, {}),
        ("sce_mean_weight_ii_log_prob", sce, [3, 7, 2, 4], lab_4d,
         {"reduction": "mean", "ignore_index": 0}, dict(weight=w7, log_prob=True)),
        ("sce_none_no_weight", sce, [3, 7, 2, 4], lab_4d, {"reduction": "none"}, {}),
        ("sce_sum_split_view", sce, [4, 5, 3], lab_2d, {"reduction": "sum"},
         dict(split_view=True, weight=w5, weight_const=True)),
        ("sce_none_log_prob_view", sce, [2, 5, 4], lab_neg,
         {"reduction": "none", "ignore_index": -1}, dict(log_prob=True, split_view=True)),
    ]
    failed = runs = 0
    ways = [("", None), ("_runtime_i64", TensorProto.INT64), ("_runtime_i32", TensorProto.INT32)]
    for k, (name, op, shape, labels, attrs, extra) in enumerate(cases):
        for suffix, labels_type in ways:
            problem = run_case(opc, work, name + suffix, op, shape, labels, attrs, seed=k,
                               labels_type=labels_type, **extra)
            failed += problem is not None
            runs += 1
            print(f"{'FAIL' if problem else 'PASS':8} {name + suffix}"
                  f"{': ' + problem if problem else ''}")

    bad_label = make_model(sce, [3, 5], np.array([0, 5, 1]), {"ignore_index": -1})
    problem = expect_error(opc, work, "error_label_out_of_range", bad_label,
                           "label 5 (element 1 of 'labels')")
    failed += problem is not None
    print(f"{'FAIL' if problem else 'PASS':8} error_label_out_of_range{': ' + problem if problem else ''}")
    problem = runtime_label_out_of_range(opc, work)
    failed += problem is not None
    print(f"{'FAIL' if problem else 'PASS':8} runtime_label_out_of_range"
          f"{': ' + problem if problem else ''}")
    print(f"losses: {runs + 2 - failed} passed, {failed} failed")
    return 1 if failed else 0


def runtime_label_out_of_range(opc, work):
    """A run-time label outside [0, C): NaN for that label's loss and for
    the mean; the other losses as ONNX Runtime gives them with the label
    replaced by an ignored one."""
    nll = "NegativeLogLikelihoodLoss"
    labels = np.array([0, 7, 1, -1])
    outputs = []
    for reduction in ["none", "mean"]:
        model = make_model(nll, [4, 5], labels, {"reduction": reduction, "ignore_index": -1},
                           labels_type=TensorProto.INT64)
        name = "runtime_label_out_of_range_" + reduction
        exe, p = compile_model(opc, model, os.path.join(work, name))
        if p.returncode != 0:
            return f"opc failed: {p.stderr.strip()[-300:]}"
        x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
        d = os.path.join(work, name)
        np.save(os.path.join(d, "x.npy"), x)
        np.save(os.path.join(d, "labels.npy"), labels)
        out = os.path.join(d, "out.npy")
        p = subprocess.run([exe, "--input", "x=" + os.path.join(d, "x.npy"), "--input",
                            "labels=" + os.path.join(d, "labels.npy"), "--output", "loss=" + out],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return f"net failed: {p.stderr.strip()[-300:]}"
        outputs.append(np.load(out))
    none, mean = outputs
    want = -x[np.arange(4), np.where(labels < 0, 0, np.minimum(labels, 4))]
    want[3] = 0.0
    if not np.isnan(none[1]) or not np.isnan(mean):
        return f"expected NaN for the bad label: none={none}, mean={mean}"
    if compare(np.delete(none, 1), np.delete(want, 1)):
        return f"other losses: got {none}, expected {want} (NaN at 1)"
    return None


if __name__ == "__main__":
    sys.exit(main())
