#!/usr/bin/env python3
"""LSTM, GRU and RNN through opc's kernels, the CPU runtime and the
emitted program, against ONNX Runtime.

The cases are those the compile-time evaluator is checked on
(tests/fold/generated.py's RECURRENT: every attribute, both layouts,
sequence_lens), here with every input given at run time, so that the node
must run as kernels: opc's --stats must still show it after the passes.
Each case runs once more with W, R, B and P as initializers (the weights
file, as exported models have them), X and the states still inputs.
Two longer cases (81 steps, 3 batch entries, 70 hidden units) follow,
so that the CPU runtime splits the launches into parts that start inside
a run (opc_rnn_output, opc_rnn_bias), the directions run on two threads,
and the dot products have a vector part and a remainder.
Outputs must agree within 1e-4 (relative plus absolute). Each case's
controls (its outputs without one attribute or input, or in the other
layout's order) must be told apart: a control the program agrees with
fails the run.

usage: test_recurrent.py OPC WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "fold"))
import generated  # noqa: E402
from test_fold_nn import compare  # noqa: E402


def still_there(stats, kind):
    """Whether --stats shows a node of `kind` left after the passes."""
    for line in stats.splitlines():
        m = re.match(r"(\S+)\s+(\d+)\s+(\d+)\s*$", line)
        if m and m.group(1) == kind:
            return m.group(3) != "0"
    return False


def run(opc, work, name, model, data, expected):
    """None when the program's outputs agree with `expected`, else what
    went wrong; "output K: ..." when only the values disagree."""
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    exe = os.path.join(d, "net")
    p = subprocess.run([opc, path, "-o", exe, "--target", "cpu", "--stats"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return "opc failed: %s" % (p.stdout + p.stderr).strip()[-400:]
    kind = model.graph.node[0].op_type
    if not still_there(p.stdout + p.stderr, kind):
        return "the %s node did not stay run-time work" % kind
    cmd = [exe]
    for inp, a in zip(model.graph.input, data):
        f = os.path.join(d, inp.name + ".npy")
        np.save(f, a)
        cmd += ["--input", "%s=%s" % (inp.name, f)]
    outs = [os.path.join(d, "out_%d.npy" % k) for k in range(len(model.graph.output))]
    for o, f in zip(model.graph.output, outs):
        cmd += ["--output", "%s=%s" % (o.name, f)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return "the program failed (exit %d): %s" % (p.returncode, p.stderr.strip()[-300:])
    for k, (f, want) in enumerate(zip(outs, expected)):
        problem = compare(np.load(f), want)
        if problem:
            return "output %d: %s" % (k, problem)
    shutil.rmtree(d)
    return None


def with_constant_weights(model, data):
    """The model with its weight inputs (W, R, B, P) made initializers,
    and the data of the inputs left."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    weights = {"w", "r", "b", "p"}
    kept, left = [], []
    for inp, a in zip(model.graph.input, data):
        if inp.name in weights:
            model.graph.initializer.append(onnx.numpy_helper.from_array(a, inp.name))
        else:
            kept.append(inp)
            left.append(a)
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return model, left


def long_cases():
    """A bidirectional LSTM and a GRU under linear_before_reset, sequence-
    major, with sequence_lens, long enough for the runtime's parts."""
    for name, op, args, attrs, outputs in (
            ("long_lstm_bidirectional", "LSTM", dict(c0=True, peep=True, lens=[81, 40, 7]),
             dict(direction="bidirectional"), 3),
            ("long_gru_linear_before_reset", "GRU", dict(lens=[60, 81, 1]),
             dict(linear_before_reset=1), 2)):
        attrs = dict(attrs, hidden_size=70)
        dirs = 2 if attrs.get("direction") == "bidirectional" else 1
        inputs = generated.recurrent_inputs(op, 81, 3, 20, 70, dirs, **args)
        expected = generated.recurrent_expected(op, inputs, attrs, outputs, 14)
        m = generated.model(op, inputs, attrs, 14, outputs)
        yield name, m, [a for _, a in inputs if a is not None], expected


def main():
    opc, work = sys.argv[1:3]
    failed = total = 0
    for name, model, data, expected in list(generated.recurrent_cases()) + list(long_cases()):
        for suffix, (m, d) in (("", (model, data)),
                               ("_const_weights", with_constant_weights(model, data))):
            problem = run(opc, work, name + suffix, m, d, expected)
            failed += problem is not None
            total += 1
            print("%-8s %s%s" % ("FAIL" if problem else "PASS", name + suffix,
                                 ": " + problem if problem else ""))
    for name, model, data, wrong in generated.recurrent_controls():
        problem = run(opc, work, name, model, data, wrong)
        caught = problem is not None and re.match(r"output \d+: ", problem)
        failed += not caught
        total += 1
        print("%-8s %s: %s" % ("CAUGHT" if caught else "FAIL", name,
                               problem or "the deliberately wrong outputs were accepted"))
    print("recurrent: %d of %d passed" % (total - failed, total))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
