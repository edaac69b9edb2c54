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

Tests of one opset share a program (onnx_case.merged: each test's names
prefixed), compared test by test; where a shared program cannot be built
or run, or keeps a node unfolded, each of its tests is tried alone, which
names the culprit.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend",
                                "tests", "kernels"))
from onnx_case import batches, merged  # noqa: E402

KINDS = {
    "Conv", "ConvTranspose", "BatchNormalization", "InstanceNormalization",
    "LayerNormalization", "LRN", "MeanVarianceNormalization", "LpNormalization",
    "MaxPool", "MaxUnpool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
    "GlobalLpPool", "Pad", "Gemm", "MatMul", "DepthToSpace", "SpaceToDepth", "Resize",
    "Upsample", "RoiAlign", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "LSTM", "GRU", "RNN",
    "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "DFT", "STFT",
    "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix",
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
        self.name, self.kind, self.model_path, self.model = name, kind, model_path, model
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
    verdicts = run_and_compare(exe, os.path.join(work, t.name), [t])
    if verdicts is None:
        return "FAIL", "the program failed: %s" % out.strip()[-300:]
    if verdicts[0] is None:
        os.remove(exe)  # a failing test's program stays to be looked at
    return verdicts[0] or ("PASS", "")


def run_and_compare(exe, work, tests, prefixes=None):
    """Runs the program and compares each test's outputs: a verdict per
    test (None: right; else ("FAIL", why)), or None where it fails to run."""
    prefixes = prefixes or [""] * len(tests)
    cmd, files = [exe], []
    for t, prefix in zip(tests, prefixes):
        files.append([])
        for k, oname in enumerate(t.outputs):
            files[-1].append(os.path.join(work, "%sout_%d.npy" % (prefix, k)))
            cmd += ["--output", "%s%s=%s" % (prefix, oname, files[-1][-1])]
    code, _ = run(cmd)
    if code != 0:
        return None
    verdicts = []
    for t, paths in zip(tests, files):
        problems = [(k, compare(np.load(path), t.expected(k))) for k, path in enumerate(paths)]
        problems = [(k, p) for k, p in problems if p]
        verdicts.append(("FAIL", "output %d: %s" % problems[0]) if problems else None)
    return verdicts


def check_batch(opc, work, tests, opset):
    """The tests in one program, every input bound: a (status, message)
    per test, or None where the program cannot be built or run, or keeps
    a node unfolded (each test is then tried alone)."""
    ir_version = max(t.model.ir_version for t in tests)
    d = os.path.join(work, "batch-%s" % tests[0].name)
    os.makedirs(d, exist_ok=True)
    path, exe = os.path.join(d, "model.onnx"), os.path.join(d, "net")
    onnx.save(merged([t.model for t in tests], opset, ir_version), path)
    cmd = [opc, path, "--target", "cpu", "-o", exe, "--stats"]
    prefixes = ["c%d_" % k for k in range(len(tests))]
    for t, prefix in zip(tests, prefixes):
        for iname, f in zip(t.inputs, t.input_files):
            cmd += ["--const-input", "%s%s=%s" % (prefix, iname, f)]
    code, out = run(cmd)
    if code != 0 or not all(folded(out, t.kind) for t in tests):
        return None
    verdicts = run_and_compare(exe, d, tests, prefixes)
    if verdicts is None:
        return None
    shutil.rmtree(d)
    return [v or ("PASS", "(in a shared program)") for v in verdicts]


def check_all(opc, work, tests, pool):
    """(test, status, message) for every test, in order: those of one
    opset in shared programs, the rest (expected rejections, and a shared
    program's tests where it fails) alone."""
    shared = [t for t in tests if t.name not in EXPECTED_REJECTIONS]
    runs = list(batches(shared, lambda t: t.model))
    futures = [(run, pool.submit(check_batch, opc, work, run, opset)) for opset, run in runs
               if len(run) > 1]
    results = {}
    for run, fut in futures:
        verdicts = fut.result()
        if verdicts:
            results.update((t.name, v) for t, v in zip(run, verdicts))
    alone = [(t, pool.submit(check, opc, work, t)) for t in tests if t.name not in results]
    results.update((t.name, fut.result()) for t, fut in alone)
    return [(t,) + tuple(results[t.name]) for t in tests]


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
    opc = os.path.abspath(args.opc)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for t, status, message in check_all(opc, work, tests, pool):
            tally[t.kind][status] += 1
            failures += status == "FAIL"
            print("%-8s %s%s" % (status, t.name, ": " + message if message else ""), flush=True)
        for t, status, message in check_all(opc, work, controls, pool):
            status, message = control_status(status, message)
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
