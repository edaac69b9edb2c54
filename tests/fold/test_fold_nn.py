#!/usr/bin/env python3
"""The compile-time evaluators of the network operators (ir/fold_nn.c)
against the ONNX node tests.

usage: test_fold_nn.py OPC DATA_DIR [--jobs N] [--only SUBSTRING] [--work DIR]

For every node test whose single operator is one of the kinds fold_nn.c
evaluates, every graph input is bound to data set 0 with --const-input, so
the whole graph is constant. opc must then fold the node away (--stats
shows none of its kind after the passes), and the program, which only
returns the stored values, must give the test's expected outputs: within
1e-4 (relative plus absolute) for floats, exactly for integers.

Tests opc rejects for a stated reason are listed in EXPECTED_REJECTIONS
with that reason; opc must reject them. Anything else that fails fails the
run. The figures per kind end the output.

The controls of generated.py are models checked against deliberately
wrong outputs (those of the node less one attribute or input): each must
fail on its values ("CAUGHT"); one that passes fails the run, since the
check would then not tell that attribute's effect from its absence.
"""
import argparse
import collections
import concurrent.futures
import os
import re
import subprocess
import sys
import shutil
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

KINDS = {
    "Conv", "ConvTranspose", "BatchNormalization", "InstanceNormalization",
    "LayerNormalization", "LRN", "MeanVarianceNormalization", "LpNormalization",
    "MaxPool", "MaxUnpool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
    "GlobalLpPool", "Pad", "Gemm", "MatMul", "DepthToSpace", "SpaceToDepth", "Resize",
    "Upsample", "RoiAlign", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "LSTM", "GRU", "RNN",
    "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv",
}

TOLERANCE = 1e-4

# Tests opc rejects on purpose, by reason; the message opc prints must
# contain the pattern.
EXPECTED_REJECTIONS_BY_REASON = {}
EXPECTED_REJECTIONS = {t: r for r, tests in EXPECTED_REJECTIONS_BY_REASON.items() for t in tests}


def run(cmd, timeout=120):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, "timed out after %ds" % timeout


def node_tests(data, only):
    """(name, kind) of the node tests of the kinds above, expanded
    variants (several nodes) left out."""
    root = os.path.join(data, "node")
    for name in sorted(os.listdir(root)):
        if only and only not in name:
            continue
        path = os.path.join(root, name, "model.onnx")
        if not os.path.exists(path):
            continue
        graph = onnx.load(path).graph
        if len(graph.node) == 1 and graph.node[0].op_type in KINDS:
            yield name, graph.node[0].op_type


def compare(got, expected):
    """None when they agree, else what differs."""
    if got.shape != expected.shape:
        if got.size != expected.size:
            return "shape %s, expected %s" % (got.shape, expected.shape)
        got = got.reshape(expected.shape)
    if expected.dtype.kind in "iub":
        if got.dtype != expected.dtype or not np.array_equal(got, expected):
            return "integers differ: got %s %r, expected %s %r" % (
                got.dtype, got.ravel()[:8], expected.dtype, expected.ravel()[:8])
        return None
    g, e = got.astype(np.float64), expected.astype(np.float64)
    if (np.isnan(g) != np.isnan(e)).any():
        return "NaN at different positions"
    ok = ~np.isnan(e)
    diff = np.abs(g[ok] - e[ok])
    bad = ~((diff <= TOLERANCE + TOLERANCE * np.abs(e[ok])) | (g[ok] == e[ok]))
    if bad.any():
        i = int(np.argmax(np.where(bad, diff, -1)))
        return "max error %.3g (got %r, expected %r)" % (diff[i], g[ok][i], e[ok][i])
    return None


def folded(stats, kind):
    """Whether --stats shows no node of `kind` left after the passes."""
    for line in stats.splitlines():
        m = re.match(r"(\S+)\s+(\d+)\s+(\d+)\s*$", line)
        if m and m.group(1) == kind:
            return m.group(3) == "0"
    return True  # folded while importing: never counted


class Test:
    """One model to compile with every input bound: its graph's input and
    output names, the data files to bind, the expected outputs."""

    def __init__(self, name, kind, model_path, model, input_files, expected):
        init = {t.name for t in model.graph.initializer}
        self.name, self.kind, self.model_path = name, kind, model_path
        self.inputs = [i.name for i in model.graph.input if i.name not in init]
        self.outputs = [o.name for o in model.graph.output]
        self.input_files = input_files
        self.expected = expected  # a function: output k -> numpy array


def node_test(data, name, kind):
    test = os.path.join(data, "node", name)
    path = os.path.join(test, "model.onnx")
    set0 = os.path.join(test, "test_data_set_0")
    model = onnx.load(path)
    files = [os.path.join(set0, "input_%d.pb" % k) for k in range(len(model.graph.input))]
    expected = lambda k: numpy_helper.to_array(
        onnx.load_tensor(os.path.join(set0, "output_%d.pb" % k)))
    return Test(name, kind, path, model, [f for f in files if os.path.exists(f)], expected)


def generated_tests(work, only, controls=False):
    """The cases of generated.py (or its controls), written out as models
    and .pb files."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import generated
    for name, model, inputs, outputs in (generated.controls() if controls else generated.cases()):
        name = "gen_" + name
        if only and only not in name:
            continue
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        onnx.save(model, path)
        files = []
        for k, a in enumerate(inputs):
            files.append(os.path.join(d, "input_%d.pb" % k))
            with open(files[-1], "wb") as f:
                f.write(numpy_helper.from_array(a).SerializeToString())
        yield Test(name, model.graph.node[0].op_type, path, model, files,
                   lambda k, outputs=outputs: outputs[k])


def check(opc, work, t):
    """(status, message): PASS, REJECTED (as expected), or FAIL."""
    exe = os.path.join(work, t.name, "net")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    cmd = [opc, t.model_path, "--target", "cpu", "-o", exe, "--stats"]
    for iname, path in zip(t.inputs, t.input_files):
        cmd += ["--const-input", "%s=%s" % (iname, path)]
    code, out = run(cmd)
    expected_reason = EXPECTED_REJECTIONS.get(t.name)
    if expected_reason:
        if code and code > 0 and expected_reason[1] in out:
            return "REJECTED", expected_reason[0]
        return "FAIL", "expected a rejection (%s), got: %s" % (expected_reason[0], out.strip()[-300:])
    if code != 0:
        return "FAIL", "opc failed: %s" % out.strip()[-400:]
    if not folded(out, t.kind):
        return "FAIL", "the %s node was not folded" % t.kind
    cmd = [exe]
    files = []
    for k, oname in enumerate(t.outputs):
        files.append(os.path.join(work, t.name, "out_%d.npy" % k))
        cmd += ["--output", "%s=%s" % (oname, files[-1])]
    code, out = run(cmd)
    if code != 0:
        return "FAIL", "the program failed: %s" % out.strip()[-300:]
    for k, path in enumerate(files):
        problem = compare(np.load(path), t.expected(k))
        if problem:
            return "FAIL", "output %d: %s" % (k, problem)
    os.remove(exe)  # a failing test's program stays to be looked at
    return "PASS", ""


def control_status(status, message):
    """A control passes (CAUGHT) when its program ran and an output
    disagreed with the wrong values."""
    if status == "FAIL" and re.match(r"output \d+: ", message):
        return "CAUGHT", message
    if status == "PASS":
        return "FAIL", "the deliberately wrong outputs were accepted"
    return "FAIL", message


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("opc")
    ap.add_argument("data")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    owned = not args.work
    work = args.work or tempfile.mkdtemp(prefix="fold_nn_")
    tests = [node_test(args.data, name, kind) for name, kind in node_tests(args.data, args.only)]
    tests += list(generated_tests(work, args.only))
    controls = list(generated_tests(work, args.only, controls=True))
    tally = collections.defaultdict(collections.Counter)
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [(t, pool.submit(check, os.path.abspath(args.opc), work, t)) for t in tests]
        for t, fut in futures:
            status, message = fut.result()
            tally[t.kind][status] += 1
            failures += status == "FAIL"
            print("%-8s %s%s" % (status, t.name, ": " + message if message else ""), flush=True)
        futures = [(t, pool.submit(check, os.path.abspath(args.opc), work, t)) for t in controls]
        for t, fut in futures:
            status, message = control_status(*fut.result())
            tally["control"][status] += 1
            failures += status == "FAIL"
            print("%-8s %s%s" % (status, t.name, ": " + message if message else ""), flush=True)
    print()
    print("%-28s %6s %9s %5s" % ("kind", "passed", "rejected", "failed"))
    for kind in sorted(tally):
        t = tally[kind]
        print("%-28s %6d %9d %5d" % (kind, t["PASS"] + t["CAUGHT"], t["REJECTED"], t["FAIL"]))
    total = sum(tally.values(), collections.Counter())
    print("%-28s %6d %9d %5d" % ("total", total["PASS"] + total["CAUGHT"], total["REJECTED"],
                                 total["FAIL"]))
    for names in EXPECTED_REJECTIONS_BY_REASON.values():
        for n in names:
            if args.only in n and n not in {t.name for t in tests}:
                print("stale rejection entry: %s" % n)
                failures += 1
    if owned and not failures:
        shutil.rmtree(work)
    elif owned:
        print("the failing tests' files are in %s" % work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
