#!/usr/bin/env python3
"""ONNX node conformance: compile every test model with opc for the CPU
runtime, run it on every test data set and compare with the expected outputs,
replaying the CUDA graph, with --no-cuda-graph, and compiled at -O0, all
under the runtime's race checker (OPC_CHECK=1).

usage: run.py --opc BUILD/opc [--data DIR] [--work DIR] [--jobs N]
              [--only SUBSTRING] [--no-cuda-check] [--ops ir/ops.c]

One line per test: PASS, FAIL (wrong output, crash, or a rejected float32
model whose operators opc supports) or REJECTED (opc declined it: unsupported
types or operators), then a total. Every passing net.c is also compiled and
linked against the real CUDA toolkit with -Wall -Werror. Exits non-zero on
any FAIL or CUDA build failure.

opc compiles static shapes, and takes float32 run-time inputs only. Many
tests feed a shape-deciding tensor (Reshape's shape, Resize's scales, Slice's
starts...) as a graph input. When opc rejects a test only for that reason,
or only because some inputs are not float32, the runner compiles it again
with those inputs bound to their test data (--const-input NAME=input_K.pb)
and reports it as "PASS (bound: NAMES)". A data set whose bound inputs
differ from data set 0 gets a program of its own.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

# Models opc rejects on purpose although their operators are in opc's set,
# their outputs are float32 and their inputs float32 or bindable, grouped by
# reason.
EXPECTED_REJECTIONS_BY_REASON = {
    "BatchNormalization in training mode (running mean/var outputs)": [
        "test_batchnorm_epsilon_training_mode", "test_batchnorm_example_training_mode",
    ],
    "Dropout in training mode: random masks, and opc compiles inference": [
        "test_training_dropout", "test_training_dropout_default",
        "test_training_dropout_zero_ratio",
    ],
    "the test data stores the bfloat16 input as uint16; --const-input refuses the mismatch": [
        "test_cast_BFLOAT16_to_FLOAT", "test_castlike_BFLOAT16_to_FLOAT_expanded",
    ],
}
EXPECTED_REJECTIONS = {t: reason for reason, tests in EXPECTED_REJECTIONS_BY_REASON.items()
                       for t in tests}

# The two rejections that --const-input cures (texts of frontend/onnx.c and
# ir/ops.c); the input they name is the one to bind.
BINDABLE_ERRORS = [
    re.compile(r"input '([^']*)' has data type \w+; opc compiles models whose inputs are"),
    re.compile(r"\binput '([^']*)' is not a compile-time constant"),
]
MAX_BIND_ROUNDS = 3  # binding one input can expose the next one that needs it
# Input types --const-input can bind: those opc holds as constants.
BINDABLE_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                  onnx.TensorProto.BFLOAT16, onnx.TensorProto.BOOL, onnx.TensorProto.INT8,
                  onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
                  onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32,
                  onnx.TensorProto.UINT64}

CUDA = os.environ.get("OPC_CUDA", "/usr/local/cuda")
TOLERANCE = 1e-4  # |got - expected| <= TOLERANCE + TOLERANCE * |expected|


def supported_ops(ops_c):
    """The ONNX operator names of opc's operator table (ir/ops.c)."""
    with open(ops_c, encoding="utf-8") as f:
        text = f.read()
    return set(re.findall(r'\[OP_\w+\]\s*=\s*\{\s*"(\w+)"', text)) - {"<invalid>"}


def graph_inputs(model):
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def all_float(values):
    return all(v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT for v in values)


def should_compile(model, ops):
    """True when opc ought to accept the model: known operators, float32
    outputs, and inputs that are float32 or can be bound at compile time."""
    used = {n.op_type for n in model.graph.node if n.domain in ("", "ai.onnx")}
    foreign = [n for n in model.graph.node if n.domain not in ("", "ai.onnx")]
    bindable = all(i.type.tensor_type.elem_type in BINDABLE_TYPES for i in graph_inputs(model))
    return all_float(model.graph.output) and bindable and not foreign and used <= ops


def compare(got, expected):
    """None if they agree within tolerance, else a description."""
    if got.shape != expected.shape:
        if got.size == expected.size:
            got = got.reshape(expected.shape)
        else:
            return "shape %s, expected %s" % (got.shape, expected.shape)
    expected = expected.astype(np.float32)
    nan_got, nan_exp = np.isnan(got), np.isnan(expected)
    if (nan_got != nan_exp).any():
        return "NaN at different positions"
    ok = ~nan_exp
    diff = np.abs(got[ok].astype(np.float64) - expected[ok])
    limit = TOLERANCE + TOLERANCE * np.abs(expected[ok].astype(np.float64))
    # Infinities of the same sign compare equal; inf - inf is NaN.
    same_inf = np.isinf(expected[ok]) & (got[ok] == expected[ok])
    bad = ~((diff <= limit) | same_inf)
    if bad.any():
        i = int(np.argmax(np.where(bad, diff, -1)))
        return "max error %.3g at flat index %d (got %r, expected %r)" % (
            diff[i], i, float(got[ok][i]), float(expected[ok][i]))
    return None


def run(cmd, timeout, cwd=None, env=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, "timed out after %ds" % timeout


def first_error(text):
    for line in text.splitlines():
        if "error" in line:
            return line.strip()
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(no message)"


def inputs_to_bind(text, inputs):
    """The graph inputs to bind when every error opc reported is one that
    binding cures; None when any error is of another kind."""
    names = []
    for line in text.splitlines():
        if not line.startswith("opc: error: "):
            continue
        match = next((m for m in (p.search(line) for p in BINDABLE_ERRORS) if m), None)
        if not match or match.group(1) not in inputs:
            return None
        names.append(match.group(1))
    return names or None


def opc_compile(args, model_path, exe, bound, flags=()):
    """Runs opc with `bound` ({input name: .pb path}) as --const-input."""
    # The CPU build doubles as a warnings check of the emitted code.
    env = dict(os.environ, CC=os.environ.get("CC", "cc") + " -Wall -Wextra -Werror")
    cmd = [args.opc, model_path, "-o", exe, "--target", "cpu"] + list(flags)
    for iname, path in bound.items():
        cmd += ["--const-input", "%s=%s" % (iname, path)]
    return run(cmd, 300, env=env)


def compile_binding(args, model_path, exe, inputs, set0):
    """Compiles, binding inputs to data set 0 where opc asks for it.
    Returns (exit code, output, {bound name: path})."""
    bound = {}
    for _ in range(MAX_BIND_ROUNDS + 1):
        code, out = opc_compile(args, model_path, exe, bound)
        if code is not None and code > 0:
            names = inputs_to_bind(out, inputs)
            paths = {n: os.path.join(set0, "input_%d.pb" % inputs.index(n))
                     for n in names or [] if n not in bound}
            if names and paths and all(os.path.exists(p) for p in paths.values()):
                bound.update(paths)
                continue
        break
    return code, out, bound


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def cuda_build(work, exe_name):
    """Compiles and links net.c against the real CUDA toolkit."""
    cmd = [os.environ.get("CC", "cc"), "-O2", "-Wall", "-Wextra", "-Werror", "-I" + CUDA + "/include",
           os.path.join(work, exe_name + ".c"), "-o", os.path.join(work, exe_name + "_cuda"),
           "-L" + CUDA + "/lib64", "-L" + CUDA + "/lib64/stubs",
           "-lcudnn", "-lcublas", "-lcudart", "-lcuda", "-lnvrtc", "-lm"]
    code, out = run(cmd, 120)
    return code == 0, out


def run_data_sets(args, test_dir, work, exe, model_path, inputs, outputs, sets, bound, flags):
    """Runs the program on every data set; returns what went wrong, or None."""
    for ds in sets:
        ds_dir = os.path.join(test_dir, ds)
        program = exe
        own = {n: os.path.join(ds_dir, os.path.basename(p)) for n, p in bound.items()}
        if any(not os.path.exists(p) or not same_bytes(p, bound[n]) for n, p in own.items()):
            # Other values for a bound input: other shapes, another program.
            program = os.path.join(work, ds)
            code, out = opc_compile(args, model_path, program, own, flags)
            if code != 0:
                return "%s: recompiling with its own bound inputs: %s" % (ds, first_error(out))
        cmd = [program]
        for k, iname in enumerate(inputs):
            path = os.path.join(ds_dir, "input_%d.pb" % k)
            if iname not in bound and os.path.exists(path):
                cmd += ["--input", "%s=%s" % (iname, path)]
        out_files = []
        for k, oname in enumerate(outputs):
            path = os.path.join(work, "%s_out_%d.npy" % (ds, k))
            cmd += ["--output", "%s=%s" % (oname, path)]
            out_files.append(path)
        code, text = run(cmd, 120, env=dict(os.environ, OPC_CHECK="1"))
        if code != 0:
            return "%s: the program %s: %s" % (
                ds, "timed out" if code is None else "exited with %d" % code, first_error(text))
        for k, path in enumerate(out_files):
            expected_pb = os.path.join(ds_dir, "output_%d.pb" % k)
            if not os.path.exists(expected_pb):
                continue
            tensor = onnx.TensorProto()
            with open(expected_pb, "rb") as f:
                tensor.ParseFromString(f.read())
            problem = compare(np.load(path), numpy_helper.to_array(tensor))
            if problem:
                return "%s output %d (%s): %s" % (ds, k, outputs[k], problem)
    return None


def check_test(test_dir, args, ops):
    """(status, name, message, cuda_ok, {bound input: .pb path})"""
    name = os.path.basename(test_dir)
    model_path = os.path.join(test_dir, "model.onnx")
    try:
        model = onnx.load(model_path)
    except Exception as exc:  # a model onnx itself cannot read
        return "REJECTED", name, "onnx cannot load it: %s" % exc, None, {}
    expect_ok = should_compile(model, ops) and name not in EXPECTED_REJECTIONS
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    exe = os.path.join(work, "net")
    inputs = [i.name for i in graph_inputs(model)]
    outputs = [o.name for o in model.graph.output]
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    set0 = os.path.join(test_dir, sets[0]) if sets else test_dir
    code, out, bound = compile_binding(args, model_path, exe, inputs, set0)
    if code is None or code < 0:
        return "FAIL", name, "opc crashed or hung: %s" % first_error(out), None, bound
    if code != 0:
        reason = first_error(out)
        if bound:
            reason = "with %s bound: %s" % (", ".join(sorted(bound)), reason)
        if expect_ok:
            return "FAIL", name, "rejected a supported float32 model: " + reason, None, bound
        return "REJECTED", name, reason, None, bound

    # Each model runs three ways, all under the CPU runtime's race checker:
    # replaying its CUDA graph, issuing directly, and compiled at -O0, so that
    # the optional passes are checked against the test data too.
    for mode, flags in (("graph", ()), ("direct", ("--no-cuda-graph",)), ("O0", ("-O0",))):
        program = exe + ("_" + mode if flags else "")
        if flags:
            code, out = opc_compile(args, model_path, program, bound, flags)
            if code != 0:
                return "FAIL", name, "with %s: %s" % (" ".join(flags), first_error(out)), None, bound
        problem = run_data_sets(args, test_dir, work, program, model_path, inputs, outputs, sets,
                                bound, flags)
        if problem:
            return "FAIL", name, "%s (%s mode)" % (problem, mode), None, bound
    cuda_ok = None
    if args.cuda_check:
        cuda_ok, text = cuda_build(work, "net")
        if not cuda_ok:
            return ("FAIL", name, "net.c does not build against CUDA: " + first_error(text),
                    False, bound)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    note = "listed in EXPECTED_REJECTIONS but passes: remove it" if name in EXPECTED_REJECTIONS else ""
    return "PASS", name, note, cuda_ok, bound


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--opc", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--work", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="run the tests whose name contains this")
    ap.add_argument("--ops", default=os.path.join(here, "..", "..", "ir", "ops.c"))
    ap.add_argument("--no-cuda-check", dest="cuda_check", action="store_false")
    ap.add_argument("--keep", action="store_true", help="keep the work folders of passing tests")
    args = ap.parse_args()
    args.opc = os.path.abspath(args.opc)
    if args.work is None:
        args.work = os.path.join(os.path.dirname(args.opc), "conformance-work")
    if args.cuda_check and not os.path.exists(os.path.join(CUDA, "include", "cudnn.h")):
        print("conformance: no CUDA toolkit at %s; skipping the CUDA build check" % CUDA)
        args.cuda_check = False
    ops = supported_ops(args.ops)
    tests = sorted(os.path.join(args.data, d) for d in os.listdir(args.data)
                   if os.path.exists(os.path.join(args.data, d, "model.onnx")))
    if args.only:
        tests = [t for t in tests if args.only in os.path.basename(t)]
    os.makedirs(args.work, exist_ok=True)

    counts = {"PASS": 0, "FAIL": 0, "REJECTED": 0}
    passed_bound = 0
    cuda_failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for status, name, message, cuda_ok, bound in pool.map(
                lambda t: check_test(t, args, ops), tests):
            counts[status] += 1
            if cuda_ok is False:
                cuda_failed += 1
            note = " (bound: %s)" % ", ".join(sorted(bound)) if bound and status != "REJECTED" else ""
            if status == "PASS" and bound:
                passed_bound += 1
            print("%-8s %s%s%s" % (status, name, note, ": " + message if message else ""),
                  flush=True)
    print("conformance: %d passed (%d with inputs bound at compile time), %d failed, "
          "%d rejected (unsupported)" % (counts["PASS"], passed_bound, counts["FAIL"],
                                         counts["REJECTED"]))
    if args.cuda_check:
        print("conformance: %d of %d passing programs failed to build against CUDA" % (
            cuda_failed, counts["PASS"] + cuda_failed))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
