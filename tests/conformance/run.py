#!/usr/bin/env python3
"""ONNX node conformance: compile every test model with opc for the CPU
runtime, run it on every test data set and compare with the expected outputs,
replaying the CUDA graph, with --no-cuda-graph, and compiled at -O0, all
under the runtime's race checker (OPC_CHECK=1). The three runs use the
runtime's kernels for three instruction sets (OPC_KERNEL_ISA): the widest
the CPU has, AVX2 and plain x86-64.

usage: run.py --opc BUILD/opc [--data DIR] [--work DIR] [--jobs N]
              [--only SUBSTRING] [--passing FILE] [--write-passing FILE]
              [--no-cuda-check] [--ops ir/ops.def] [--reasons FILE]

One line per test: PASS, FAIL (wrong output, crash, or a rejected float32
model whose operators opc supports) or REJECTED (opc declined it: unsupported
types or operators). An output passes only with the expected shape and
element type; integers and booleans must be equal, floats within 1e-4 abs +
1e-4 rel, NaN and infinities exactly where expected. Every passing net.c is
also compiled and linked against the real CUDA toolkit (OPC_CUDA, default
/usr/local/cuda) with -Wall -Wextra -Werror; where there is no toolkit, against
what `opc --cflags cuda` and `--libs cuda` find (OPC_CUDA_HOME, or PyPI's CUDA
wheels); without either the run stops with an error (--no-cuda-check skips
that check, for runs by hand).
The CUDA-graph program is compiled at opc's -O1 by CC or cc, as users build;
the other two modes' programs and the CUDA build at -O0 by OPC_TEST_CC,
clang where meson found one (see build_program, o0_cc and cuda_build). main
is the same in every net.c, so each build links it compiled once
(compile_mains; opc's own builds take it from opc's cache).

The run is held to the list of passing tests (--passing, default
passing.txt beside this script: "TEST PASS" or "TEST PASS-BOUND" a line):
a listed test that is rejected, fails, or passes only bound where the list
says PASS fails the run, and so does a listed test missing from the data.
Tests passing beyond the list are named in the last line; --write-passing
FILE writes the run's own list (a whole run only). With --only, only the
tests run are held to the list. Exits non-zero on any FAIL (a CUDA build
failure included), any test no longer passing as listed, or a listed test
not in the data.

opc compiles static shapes, and takes float32 run-time inputs only. Many
tests feed a shape-deciding tensor (Reshape's shape, Resize's scales, Slice's
starts...) as a graph input. When opc rejects a test only for that reason,
or only because some inputs are not float32 (or are sequences or optionals,
whose .pb files opc reads too), the runner compiles it again
with those inputs bound to their test data (--const-input NAME=input_K.pb)
and reports it as "PASS (bound: NAMES)". A data set whose bound inputs
differ from data set 0 gets a program of its own.

The run ends with two figures out of all the node tests (see README.md):
"unbound", the tests that pass with no input bound at compile time (the way
onnx2c's figure is counted), and "bound", those that pass allowing bound
inputs (a superset). Every test that does not pass unbound gets a reason
category drawn from opc's first error message ("unsupported operator
ScatterND", "run-time input of type i64", ...): for a PASS (bound) the error
of the unbound compile, for a REJECTED the error that remains after binding.
The categories are tallied, most frequent first, before the figures, and
every test's status, category and message go to FILE (default
WORK/reasons.txt, tab-separated). A line before the figures gives the
CPU seconds (user + sys) of each step: opc and the C compiler, the
programs, the CUDA build and this script.
"""
import argparse
import collections
import concurrent.futures
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import numpy as np
import onnx
import onnx.defs
from onnx import numpy_helper

# Models opc rejects on purpose although their operators are in opc's set,
# their outputs are float32 and their inputs float32 or bindable, grouped by
# reason.
EXPECTED_REJECTIONS_BY_REASON = {
    "Dropout in training mode with a ratio other than 0: random masks": [
        "test_training_dropout", "test_training_dropout_default",
        "test_training_dropout_mask", "test_training_dropout_default_mask",
    ],
}
EXPECTED_REJECTIONS = {t: reason for reason, tests in EXPECTED_REJECTIONS_BY_REASON.items()
                       for t in tests}

# Tests whose data (Debian's libonnx-testdata 1.12) contradicts their own
# model or the spec as later onnx reads it: each with the text its failure
# must contain, and why. Such a failure is reported as a rejection with
# that reason; any other failure of the test is still a failure.
DATA_DISAGREES = {
    "test_cast_FLOAT_to_BFLOAT16": (
        "wrong output values",
        "the 1.12 data truncates float32 to bfloat16; onnx's reference evaluator since "
        "rounds to nearest even, as opc does"),
    "test_castlike_FLOAT_to_BFLOAT16": (
        "shape [1], expected [3,4]",
        "the model declares input 'like' [3,4]; its data set holds [1]"),
    "test_castlike_FLOAT_to_BFLOAT16_expanded": (
        "shape [1], expected [3,4]",
        "the model declares input 'like' [3,4]; its data set holds [1]"),
    "test_castlike_BFLOAT16_to_FLOAT": (
        "shape [1], expected [3,4]",
        "the model declares input 'like' [3,4]; its data set holds [1]"),
    "test_castlike_BFLOAT16_to_FLOAT_expanded": (
        "shape [1], expected [3,4]",
        "the model declares input 'like' [3,4]; its data set holds [1]"),
    "test_adam_multiple": (
        "values out of tolerance",
        "the outputs were computed with epsilon 1e-2, which the 1.12 model's node lacks "
        "(the default is 1e-6; later onnx sets the attribute)"),
}

# The rejections that --const-input cures (texts of frontend/onnx.c,
# ir/infer.c and ir/ops.c); the input they name is the one to bind.
BINDABLE_ERRORS = [
    re.compile(r"depends on graph input '([^']*)'"),
    re.compile(r"input '([^']*)' has data type \w+; opc compiles models whose inputs are"),
    re.compile(r"\binput '([^']*)' is not a compile-time constant"),
    # a sequence or optional graph input: bound, its structure is known
    re.compile(r"^opc: error: .*?: input '([^']*)' is not a tensor but (?:a sequence|an optional)"),
]
MAX_BIND_ROUNDS = 8  # binding one input can expose the next one that needs it
# Input types --const-input can bind: those opc holds as constants.
BINDABLE_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                  onnx.TensorProto.BFLOAT16, onnx.TensorProto.BOOL, onnx.TensorProto.INT8,
                  onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
                  onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32,
                  onnx.TensorProto.UINT64}

CUDA = os.environ.get("OPC_CUDA", "/usr/local/cuda")
# The CUDA check's compile and link words (cuda_words): the toolkit at CUDA
# where it has one, else what `opc --cflags cuda` and `--libs cuda` find
# (OPC_CUDA_HOME, or PyPI's CUDA wheels), as on a machine with no toolkit.
CUDA_CFLAGS, CUDA_LIBS = [], []
TOLERANCE = 1e-4  # |got - expected| <= TOLERANCE + TOLERANCE * |expected|


def supported_ops(ops_def):
    """The ONNX operator names of opc's operator table (ir/ops.def). A
    table this cannot read would make every rejection look expected, so it
    stops the run instead."""
    with open(ops_def, encoding="utf-8") as f:
        text = f.read()
    names = set(re.findall(r'^\s*OP\(\s*\w+\s*,\s*"(\w+)"', text, re.M))
    if len(names) < 50:
        sys.exit("run.py: found %d operators in %s; has its format changed?" % (len(names), ops_def))
    return names


def graph_inputs(model):
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


# The element types a value may have at run time (net.c's storage types).
RUN_TIME_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                  onnx.TensorProto.BFLOAT16,
                  onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16,
                  onnx.TensorProto.INT8, onnx.TensorProto.UINT64, onnx.TensorProto.UINT32,
                  onnx.TensorProto.UINT16, onnx.TensorProto.UINT8, onnx.TensorProto.BOOL}

# The backend's refusal of an (operator, type) pair its run-time type table
# (backend/types.c) does not list: a stated limit, not a failure.
NO_KERNEL_FOR_TYPE = re.compile(r"\bruns on [\w, ]+ only\b")


def run_time_types(values):
    return all(v.type.tensor_type.elem_type in RUN_TIME_TYPES for v in values)


def should_compile(model, ops):
    """True when opc ought to accept the model: known operators, outputs of
    run-time types, and inputs that are of run-time types or can be bound
    at compile time."""
    used = {n.op_type for n in model.graph.node if n.domain in ("", "ai.onnx")}
    foreign = [n for n in model.graph.node if n.domain not in ("", "ai.onnx")]
    bindable = all(i.type.tensor_type.elem_type in BINDABLE_TYPES for i in graph_inputs(model))
    return run_time_types(model.graph.output) and bindable and not foreign and used <= ops


def compare(got, expected):
    """None when `got` is `expected`, else what differs. The shape and the
    element type must be the expected ones (no reshaping, no conversion);
    integers and booleans must be equal; floats agree within TOLERANCE
    (abs and rel), computed in float64, which holds float16, float32 and
    float64 values exactly. NaN and infinities must be where the expected
    output has them and nowhere else, infinities with the same sign."""
    if got.shape != expected.shape:
        return "shape %s, expected %s" % (got.shape, expected.shape)
    if got.dtype != expected.dtype:
        return "element type %s, expected %s" % (got.dtype, expected.dtype)
    got, expected = got.ravel(), expected.ravel()
    if not np.issubdtype(expected.dtype, np.floating):
        bad = got != expected
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return "%d of %d elements differ, the first at flat index %d (got %r, expected %r)" % (
                int(bad.sum()), got.size, i, got[i].item(), expected[i].item())
        return None
    got, expected = got.astype(np.float64), expected.astype(np.float64)
    finite = np.isfinite(expected)
    # NaN and infinities exactly where expected: NaN for NaN, an infinity of
    # the same sign for an infinity, and a finite value elsewhere.
    special_ok = np.where(np.isnan(expected), np.isnan(got), got == expected)
    bad_special = np.where(finite, ~np.isfinite(got), ~special_ok)
    if bad_special.any():
        i = int(np.flatnonzero(bad_special)[0])
        return "NaN or infinity differs in %d of %d values, the first at flat index %d (got %r, expected %r)" % (
            int(bad_special.sum()), got.size, i, got[i].item(), expected[i].item())
    # Every finite expected value has a finite one here: within tolerance?
    with np.errstate(over="ignore"):  # an overflow to inf fails below anyway
        diff = np.abs(np.where(finite, got, 0.0) - np.where(finite, expected, 0.0))
    limit = TOLERANCE + TOLERANCE * np.abs(np.where(finite, expected, 0.0))
    bad = ~(diff <= limit)
    if bad.any():
        i = int(np.argmax(np.where(bad, diff, -1)))
        return "%d of %d values out of tolerance; max error %.3g at flat index %d (got %r, expected %r)" % (
            int(bad.sum()), got.size, diff[i], i, got[i].item(), expected[i].item())
    return None


# CPU seconds (user + sys) of the processes the runner started, by step,
# each with those of the processes it waited for (opc's C compiler). Wall
# time says little on a shared machine; these say where the work goes.
CPU_SECONDS = collections.Counter()
CPU_SECONDS_LOCK = threading.Lock()


def run(cmd, timeout, cwd=None, env=None, step="other"):
    """Runs cmd, its stdout and stderr together; returns (exit status, or
    None when it ran past `timeout` seconds and was killed, and the
    output). Its CPU seconds go to CPU_SECONDS[step]."""
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        lock = threading.Lock()
        state = {"reaped": False, "timed_out": False}

        def kill():
            # Only a process not yet reaped: its pid cannot be another's.
            with lock:
                if not state["reaped"]:
                    state["timed_out"] = True
                    os.kill(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        # Wait for the exit without reaping; wait4 then reaps it and gives
        # its resource usage, which subprocess's own wait would discard.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        with lock:
            state["reaped"] = True
            _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        with CPU_SECONDS_LOCK:
            CPU_SECONDS[step] += usage.ru_utime + usage.ru_stime
        log.seek(0)
        text = log.read().decode("utf-8", "replace")
    if state["timed_out"]:
        return None, "timed out after %ds" % timeout
    return proc.returncode, text


def first_error(text):
    for line in text.splitlines():
        if "error" in line:
            return line.strip()
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(no message)"


def opc_errors(text, model_path):
    """opc's error messages in its output, without "opc: error: MODEL: "."""
    errors = []
    for line in text.splitlines():
        if line.startswith("opc: error: "):
            line = line[len("opc: error: "):].strip()
            if line.startswith(model_path + ": "):
                line = line[len(model_path) + 2:]
            errors.append(line)
    return errors


NODE_PREFIX = re.compile(r"^node '.*?' \(([\w.]+)\): ")
QUOTED = re.compile(r"'([^']*)'")


def categorise(message, names=()):
    """A reason category for one of opc's error messages (prefix stripped):
    the operator, type or restriction that stopped it, with the names of
    the test's tensors and nodes (`names`) and its numbers taken out, so
    that the same obstacle reads the same in every test."""
    match = re.match(r"unsupported operators: (.*)", message)
    if match:
        ops = sorted(set(re.findall(r"([\w.]+) \(node ", match.group(1))))
        return "unsupported operator%s %s" % ("s" if len(ops) > 1 else "", ", ".join(ops))
    match = re.match(r"input '.*' has data type (\w+); opc compiles models with float32", message)
    if match:
        return "run-time input of type %s" % match.group(1)
    match = re.match(r"output '.*' is (\w+); opc programs return float32 outputs only", message)
    if match:
        return "output of type %s" % match.group(1)
    if re.match(r"input '.*' is not a tensor", message):
        return "input not a tensor (sequence, map or optional)"
    match = re.match(r"--const-input [^ ]*: (.*)", message)
    if match:
        return "--const-input refuses the test data: " + generalise(match.group(1), names)
    op = ""
    match = NODE_PREFIX.match(message)
    if match:
        op, message = match.group(1), message[match.end():]
    if re.search(r"\binput '.*' (is not|must be) a compile-time constant", message):
        return "shape input not a compile-time constant" + (" (%s)" % op if op else "")
    message = generalise(message, names)
    return "%s: %s" % (op, message) if op else message


def generalise(message, names):
    """The message with the test's own names and numbers blanked."""
    message = QUOTED.sub(lambda m: "'…'" if m.group(1) in names else m.group(0), message)
    message = re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?\b", "N", message)
    message = re.sub(r"\[[N, x]*\]", "[…]", message)
    return message


def model_names(model):
    """The names of the model's tensors and nodes, which messages quote."""
    names = {n.name for n in model.graph.node}
    for n in model.graph.node:
        names.update(n.input)
        names.update(n.output)
    names.update(v.name for v in list(model.graph.input) + list(model.graph.output))
    names.update(t.name for t in model.graph.initializer)
    names.discard("")
    return names


def input_uses(model, inputs):
    """The operator inputs that the graph inputs `inputs` feed, named after
    the operator's schema ("Reshape.shape", "Gather.indices")."""
    opsets = {o.domain or "": o.version for o in model.opset_import}
    uses = set()
    for node in model.graph.node:
        for k, tensor in enumerate(node.input):
            if tensor not in inputs:
                continue
            slot = str(k)
            try:
                params = onnx.defs.get_schema(node.op_type, opsets.get(node.domain or "", 1),
                                              node.domain or "").inputs
                slot = params[min(k, len(params) - 1)].name
            except Exception:  # an operator onnx does not know
                pass
            uses.add("%s.%s" % (node.op_type, slot))
    return sorted(uses)


def reason_of(text, model_path, names):
    """The category and the message of opc's first error in `text`."""
    errors = opc_errors(text, model_path)
    if not errors:
        message = first_error(text)
        return "no opc error: " + generalise(message, names), message
    return categorise(errors[0], names), errors[0]


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


def opc_compile(args, model_path, exe, bound, flags=(), step="opc and cc -O1"):
    """Runs opc with `bound` ({input name: .pb path}) as --const-input, for
    args.target (cpu unless the caller's args say otherwise, as
    tools/gpu/conformance_cuda.py's do)."""
    # The build doubles as a warnings check of the emitted code.
    env = dict(os.environ, CC=os.environ.get("CC", "cc") + " -Wall -Wextra -Werror")
    cmd = [args.opc, model_path, "-o", exe, "--target", getattr(args, "target", "cpu")]
    if getattr(args, "precision", None):
        cmd += ["--precision", args.precision]
    cmd += list(flags)
    for iname, path in bound.items():
        cmd += ["--const-input", "%s=%s" % (iname, path)]
    return run(cmd, 300, env=env, step=step)


@functools.lru_cache(maxsize=None)
def cpu_build_flags(opc):
    """The compiler and linker words opc builds CPU programs with (its
    --cflags cpu and --libs cpu)."""
    words = []
    for what in ("--cflags", "--libs"):
        code, out = run([opc, what, "cpu"], 60, step="opc emit")
        if code != 0:
            sys.exit("run.py: %s %s cpu failed: %s" % (opc, what, first_error(out)))
        words.append(out.split())
    return tuple(words)


def build_program(args, model_path, program, bound, flags):
    """Compiles the model into the executable `program`. With no flags (the
    CUDA-graph mode) opc builds it, at -O1, as it builds any program. The
    other modes' CPU programs are built here at -O0 from the net.c opc
    emits: the same compiler words, warnings and -Werror, but a quarter of
    the compile time; their kernels are the runtime's, optimised anyway.
    The -O1 build, with the warnings that need optimisation, is the
    CUDA-graph program's and the CUDA check's."""
    if not flags or getattr(args, "target", "cpu") != "cpu":
        return opc_compile(args, model_path, program, bound, flags)
    code, out = opc_compile(args, model_path, program + ".c", bound, flags, step="opc emit")
    if code != 0:
        return code, out
    cflags, libs = cpu_build_flags(args.opc)
    cmd = (o0_cc() + O0_WORDS + list(cflags)
           + apart(getattr(args, "main_o0", None), program + ".c") + ["-o", program] + list(libs))
    code, text = run(cmd, 300, step="cc -O0")
    return code, out + text


def compile_binding(args, model_path, exe, inputs, set0):
    """Compiles, binding inputs to data set 0 where opc asks for it.
    Returns (exit code, output, {bound name: path}, output of the first,
    unbound, compile)."""
    bound = {}
    unbound_out = None
    for _ in range(MAX_BIND_ROUNDS + 1):
        code, out = opc_compile(args, model_path, exe, bound)
        if unbound_out is None:
            unbound_out = out
        if code is not None and code > 0:
            names = inputs_to_bind(out, inputs)
            paths = {n: os.path.join(set0, "input_%d.pb" % inputs.index(n))
                     for n in names or [] if n not in bound}
            if names and paths and all(os.path.exists(p) for p in paths.values()):
                bound.update(paths)
                continue
        break
    return code, out, bound, unbound_out


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


O0_WORDS = ["-O0", "-Wall", "-Wextra", "-Werror"]


def o0_cc():
    """The compiler of the -O0 programs: OPC_TEST_CC, which meson sets to
    clang where there is one (a third to a half of gcc's -O0 time on a
    net.c, and a second compiler's warnings), else CC or cc. The -O1
    programs are built by CC or cc, as users build."""
    return os.environ.get("OPC_TEST_CC", os.environ.get("CC", "cc")).split()
CUDA_WORDS = O0_WORDS


def apart(main_object, c_file):
    """The words that build c_file, with main from main_object when there
    is one (-DOPC_MAIN_APART), else compiled with the model."""
    return ["-DOPC_MAIN_APART", c_file, main_object] if main_object else [c_file]


def compile_mains(args):
    """main is the same in every net.c (opc --emit-main writes it alone), so
    the -O0 programs and the CUDA check build it once, here, with their own
    words, and link it with each net.c built with -DOPC_MAIN_APART; opc's
    own builds (the -O1 programs) take theirs from opc's cache. Sets
    args.main_o0 and args.main_cuda to the objects."""
    source = os.path.join(args.work, "main.c")
    code, out = run([args.opc, "--emit-main", source], 60, step="opc emit")
    if code != 0:
        sys.exit("run.py: opc --emit-main failed: " + first_error(out))
    builds = [("main_o0", o0_cc(), O0_WORDS, [], "cc -O0")]
    if args.cuda_check:
        builds.append(("main_cuda", o0_cc(), CUDA_WORDS, CUDA_CFLAGS, "CUDA build"))
    for attr, cc, words, includes, step in builds:
        obj = os.path.join(args.work, attr + ".o")
        code, out = run(cc + words + includes + ["-c", source, "-o", obj], 120, step=step)
        if code != 0:
            sys.exit("run.py: the programs' main (%s) does not compile: %s" % (source, first_error(out)))
        setattr(args, attr, obj)


def cuda_build(work, exe_name, main_object=None):
    """Compiles and links net.c against the real CUDA toolkit, at -O0 by
    the -O0 programs' compiler (o0_cc): the same net.c was built at -O1
    by CC with the same warnings against the CPU runtime's headers (and
    ran), and clang's uninitialised-use warnings need no optimisation.
    gcc at -O1 took 1.7 times as long; gcc's flow-based warnings on the
    CUDA headers' own code are the zoo's (its optimised CUDA build)."""
    cmd = (o0_cc() + CUDA_WORDS + CUDA_CFLAGS
           + apart(main_object, os.path.join(work, exe_name + ".c"))
           + ["-o", os.path.join(work, exe_name + "_cuda")] + CUDA_LIBS)
    code, out = run(cmd, 120, step="CUDA build")
    return code == 0, out


def cuda_words(opc):
    """Sets CUDA_CFLAGS and CUDA_LIBS (above); exits naming where it looked
    when there is no CUDA to build against."""
    global CUDA_CFLAGS, CUDA_LIBS
    if os.path.exists(os.path.join(CUDA, "include", "cudnn.h")):
        CUDA_CFLAGS = ["-I" + CUDA + "/include"]
        CUDA_LIBS = ["-L" + CUDA + "/lib64", "-L" + CUDA + "/lib64/stubs", "-lcudnn", "-lcublasLt",
                     "-lcublas", "-lcudart", "-lcuda", "-lnvrtc", "-lm"]
        return
    words = []
    for flag in ("--cflags", "--libs"):
        code, out = run([opc, flag, "cuda"], 60, step="opc emit")
        if code != 0:
            sys.exit("conformance: no CUDA toolkit at %s (no include/cudnn.h), and opc %s cuda "
                     "found none: %s. Every passing net.c must build against CUDA: set OPC_CUDA "
                     "to a toolkit or OPC_CUDA_HOME to CUDA's wheels, or pass --no-cuda-check to "
                     "run without that check by hand." % (CUDA, flag, first_error(out)))
        words.append(out.split())
    CUDA_CFLAGS, CUDA_LIBS = words
    print("conformance: no CUDA toolkit at %s; the CUDA check builds with opc --cflags/--libs "
          "cuda: %s" % (CUDA, " ".join(CUDA_CFLAGS)))


def run_data_sets(args, test_dir, work, exe, model_path, inputs, outputs, sets, bound, flags,
                  isa, slot=contextlib.nullcontext()):
    """Runs the program on every data set, each run holding `slot` (the GPU
    runner bounds how many programs share the device); returns (category,
    what went wrong), or None."""
    for ds in sets:
        ds_dir = os.path.join(test_dir, ds)
        program = exe
        own = {n: os.path.join(ds_dir, os.path.basename(p)) for n, p in bound.items()}
        if any(not os.path.exists(p) or not same_bytes(p, bound[n]) for n, p in own.items()):
            # Other values for a bound input: other shapes, another program.
            program = os.path.join(work, ds)
            code, out = build_program(args, model_path, program, own, flags)
            if code != 0:
                return ("rejected a data set's own bound inputs",
                        "%s: recompiling with its own bound inputs: %s" % (ds, first_error(out)))
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
        env = dict(os.environ, OPC_CHECK="1")
        if isa:
            env["OPC_KERNEL_ISA"] = isa
        with slot:
            code, text = run(cmd, 120, env=env, step="program runs")
        if code != 0:
            category = ("the program timed out" if code is None else
                        "the program crashed" if code < 0 else "the program exited with an error")
            return category, "%s: the program %s: %s" % (
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
                kind = ("shape" if problem.startswith("shape") else
                        "type" if problem.startswith("element type") else
                        "NaN or infinity" if problem.startswith("NaN") else "values")
                return ("wrong output " + kind,
                        "%s output %d (%s): %s" % (ds, k, outputs[k], problem))
    return None


# One test's outcome. status: PASS, FAIL or REJECTED; bound: {input name:
# .pb path} bound at compile time (a PASS with any is a bound pass); reason:
# the category of what kept it from passing unbound ("" for an unbound PASS);
# message: what is printed after its name.
# uses: for a bound pass, the operator inputs its bound inputs feed.
Result = collections.namedtuple("Result", "status name message cuda_ok bound reason uses",
                                defaults=((),))


def check_test(test_dir, args, ops):
    """Compiles and runs one test; returns its Result."""
    name = os.path.basename(test_dir)
    model_path = os.path.join(test_dir, "model.onnx")
    try:
        model = onnx.load(model_path)
    except Exception as exc:  # a model onnx itself cannot read
        return Result("REJECTED", name, "onnx cannot load it: %s" % exc, None, {},
                      "onnx cannot load the model")
    expect_ok = should_compile(model, ops) and name not in EXPECTED_REJECTIONS
    names = model_names(model)
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    exe = os.path.join(work, "net")
    inputs = [i.name for i in graph_inputs(model)]
    outputs = [o.name for o in model.graph.output]
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    set0 = os.path.join(test_dir, sets[0]) if sets else test_dir
    code, out, bound, unbound_out = compile_binding(args, model_path, exe, inputs, set0)
    # Why the first compile, with nothing bound, failed: the reason a PASS
    # (bound) does not count unbound.
    unbound_reason = reason_of(unbound_out, model_path, names)[0] if bound else ""

    def fail(category, message, cuda_ok=None):
        if name in DATA_DISAGREES and DATA_DISAGREES[name][0] in category + " " + message:
            return Result("REJECTED", name, message, None, bound,
                          "test data disagrees: " + DATA_DISAGREES[name][1])
        return Result("FAIL", name, message, cuda_ok, bound, "FAIL: " + category)

    if code is None or code < 0:
        return fail("opc crashed or hung", "opc crashed or hung: %s" % first_error(out))
    if code != 0:
        # What still stops it with every bindable input bound.
        reason, message = reason_of(out, model_path, names)
        if bound:
            message = "with %s bound: %s" % (", ".join(sorted(bound)), message)
        if expect_ok and not NO_KERNEL_FOR_TYPE.search(message):
            return fail("rejected a supported model: " + reason,
                        "rejected a supported model: " + message)
        if bound and reason.startswith("--const-input"):
            # Binding did not take: the input's type is what stops it.
            reason = unbound_reason
        if name in EXPECTED_REJECTIONS:
            reason = "expected rejection: " + EXPECTED_REJECTIONS[name]
        return Result("REJECTED", name, message, None, bound, reason)

    # Each model runs three ways, all under the CPU runtime's race checker:
    # replaying its CUDA graph, issuing directly, and compiled at -O0, so that
    # the optional passes are checked against the test data too. Each way
    # runs the runtime's kernels built for another instruction set.
    for mode, flags, isa in (("graph", (), None), ("direct", ("--no-cuda-graph",), "avx2"),
                             ("O0", ("-O0",), "x86-64")):
        program = exe + ("_" + mode if flags else "")
        if flags:
            code, out = build_program(args, model_path, program, bound, flags)
            if code != 0:
                return fail("rejected with " + " ".join(flags),
                            "with %s: %s" % (" ".join(flags), first_error(out)))
        problem = run_data_sets(args, test_dir, work, program, model_path, inputs, outputs, sets,
                                bound, flags, isa)
        if problem:
            return fail(problem[0], "%s (%s mode, %s kernels)" % (problem[1], mode, isa or "widest"))
    cuda_ok = None
    if args.cuda_check:
        cuda_ok, text = cuda_build(work, "net", getattr(args, "main_cuda", None))
        if not cuda_ok:
            return fail("net.c does not build against CUDA",
                        "net.c does not build against CUDA: " + first_error(text), False)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    note = "listed in EXPECTED_REJECTIONS but passes: remove it" if name in EXPECTED_REJECTIONS else ""
    return Result("PASS", name, note, cuda_ok, bound, unbound_reason,
                  tuple(input_uses(model, set(bound))))


def write_reasons(path, results):
    """One line per test, tab-separated: name, status (PASS, PASS-BOUND,
    REJECTED, FAIL), reason category ("-" for an unbound PASS), message."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("# test\tstatus\treason (why it does not pass unbound)\tmessage\n")
        for r in sorted(results, key=lambda r: r.name):
            status = "PASS-BOUND" if r.status == "PASS" and r.bound else r.status
            message = r.message
            if status == "PASS-BOUND":
                message = "bound: %s, feeding %s%s" % (", ".join(sorted(r.bound)), ", ".join(r.uses),
                                                       "; " + message if message else "")
            f.write("%s\t%s\t%s\t%s\n" % (r.name, status, r.reason or "-",
                                          " ".join(message.split()) or "-"))


def print_reasons(results, reasons_path):
    """The categories of the tests that do not pass unbound, most frequent
    first, with how many of each pass bound, are rejected or fail."""
    tally = collections.defaultdict(collections.Counter)
    for r in results:
        if r.status == "PASS" and not r.bound:
            continue
        tally[r.reason]["PASS-BOUND" if r.status == "PASS" else r.status] += 1
    total = sum(sum(c.values()) for c in tally.values())
    if not total:
        return
    print("conformance: why %d tests do not pass unbound, by reason (every test in %s):"
          % (total, reasons_path))
    print("  tests  bound-pass  rejected  failed  reason")
    for reason, c in sorted(tally.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        print("  %5d  %10s  %8s  %6s  %s" % (
            sum(c.values()), c["PASS-BOUND"] or "", c["REJECTED"] or "", c["FAIL"] or "", reason))
    # An operator missing from a test's several unsupported operators counts
    # there too: the tests each missing operator blocks.
    blocked = collections.Counter()
    for r in results:
        match = re.match(r"unsupported operators? (.*)", r.reason or "")
        if match:
            blocked.update(match.group(1).split(", "))
    print_tally("unsupported operators, by the tests they stop", blocked)
    # What the bound passes need to pass unbound: run-time values of these.
    print_tally("operator inputs that the bound passes bind",
                collections.Counter(u for r in results if r.status == "PASS" for u in r.uses))


def print_tally(title, counter):
    if counter:
        text = ", ".join("%s %d" % kv for kv in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
        print("\n".join(textwrap.wrap(text, 100, initial_indent="conformance: %s: " % title,
                                      subsequent_indent="    ")))


def listed_status(r):
    """The status a passing list records: PASS-BOUND for a bound pass."""
    return "PASS-BOUND" if r.status == "PASS" and r.bound else r.status


def read_passing(path):
    """{test: PASS or PASS-BOUND} from the passing list: a line per test,
    its name and status; # starts a comment."""
    listed = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            words = line.split("#")[0].split()
            if not words:
                continue
            if len(words) != 2 or words[1] not in ("PASS", "PASS-BOUND") or words[0] in listed:
                sys.exit("run.py: %s:%d: want 'TEST PASS' or 'TEST PASS-BOUND', each test once; got %r"
                         % (path, number, line.strip()))
            listed[words[0]] = words[1]
    return listed


def write_passing(path, results):
    with open(path, "w", encoding="utf-8") as f:
        f.write("# The ONNX node tests that pass (tests/conformance/run.py holds every run to\n"
                "# this list): PASS with every input given at run time, PASS-BOUND with some\n"
                "# bound at compile time. Written by run.py --write-passing.\n")
        for r in sorted(results, key=lambda r: r.name):
            if r.status == "PASS":
                f.write("%s %s\n" % (r.name, listed_status(r)))


def compare_with_list(results, listed):
    """The tests that no longer pass as listed, as (name, why), and those
    that pass beyond the list, as "name (status)"."""
    regressions, gains = [], []
    for r in sorted(results, key=lambda r: r.name):
        was, now = listed.get(r.name), listed_status(r)
        if was == now:
            continue
        if was is None:
            if r.status == "PASS":
                gains.append("%s (%s)" % (r.name, now))
        elif was == "PASS-BOUND" and now == "PASS":
            gains.append("%s (PASS, listed PASS-BOUND)" % r.name)
        else:
            why = "listed %s, now %s" % (was, now)
            if now == "PASS-BOUND":
                why += " (bound: %s)" % ", ".join(sorted(r.bound))
            regressions.append((r.name, why + (": " + r.message if r.message else "")))
    return regressions, gains


def print_cpu_seconds(wall):
    """Where the run's CPU time went, by step (see CPU_SECONDS)."""
    steps = dict(CPU_SECONDS)
    steps["this script"] = time.process_time()
    text = ", ".join("%s %.1f" % kv for kv in sorted(steps.items(), key=lambda kv: -kv[1]))
    print("\n".join(textwrap.wrap(
        "%s; %.1f in all, in %.0f s of wall time" % (text, sum(steps.values()), wall), 100,
        initial_indent="conformance: CPU seconds (user+sys) by step: ", subsequent_indent="    ")))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--opc", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--work", default=None)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only", default=None, help="run the tests whose name contains this")
    ap.add_argument("--ops", default=os.path.join(here, "..", "..", "ir", "ops.def"))
    ap.add_argument("--passing", default=os.path.join(here, "passing.txt"),
                    help="the list of passing tests the run is held to")
    ap.add_argument("--write-passing", default=None, metavar="FILE",
                    help="write this run's passing tests to FILE (a whole run only)")
    ap.add_argument("--no-cuda-check", dest="cuda_check", action="store_false",
                    help="by hand only: skip building each passing net.c against CUDA")
    ap.add_argument("--keep", action="store_true", help="keep the work folders of passing tests")
    ap.add_argument("--reasons", default=None,
                    help="where to write every test's status and reason (default WORK/reasons.txt)")
    args = ap.parse_args()
    if args.write_passing and args.only:
        ap.error("--write-passing needs the whole set; drop --only")
    wall_start = time.monotonic()
    args.opc = os.path.abspath(args.opc)
    if args.work is None:
        args.work = os.path.join(os.path.dirname(args.opc), "conformance-work")
    if args.reasons is None:
        args.reasons = os.path.join(args.work, "reasons.txt")
    if args.cuda_check:
        cuda_words(args.opc)
    listed = read_passing(args.passing)
    ops = supported_ops(args.ops)
    tests = sorted(os.path.join(args.data, d) for d in os.listdir(args.data)
                   if os.path.exists(os.path.join(args.data, d, "model.onnx")))
    missing = sorted(set(listed) - {os.path.basename(t) for t in tests})
    if args.only:
        tests = [t for t in tests if args.only in os.path.basename(t)]
    os.makedirs(args.work, exist_ok=True)
    compile_mains(args)

    counts = {"PASS": 0, "FAIL": 0, "REJECTED": 0}
    passed_bound = 0
    cuda_failed = 0
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for r in pool.map(lambda t: check_test(t, args, ops), tests):
            results.append(r)
            counts[r.status] += 1
            if r.cuda_ok is False:
                cuda_failed += 1
            note = (" (bound: %s)" % ", ".join(sorted(r.bound))
                    if r.bound and r.status != "REJECTED" else "")
            if r.status == "PASS" and r.bound:
                passed_bound += 1
            print("%-8s %s%s%s" % (r.status, r.name, note, ": " + r.message if r.message else ""),
                  flush=True)
    write_reasons(args.reasons, results)
    print_reasons(results, args.reasons)
    if args.write_passing:
        write_passing(args.write_passing, results)
    print_cpu_seconds(time.monotonic() - wall_start)
    if args.cuda_check:
        print("conformance: %d of %d passing programs failed to build against CUDA" % (
            cuda_failed, counts["PASS"] + cuda_failed))
    else:
        print("conformance: --no-cuda-check: no net.c was built against CUDA")
    # The figures: unbound is how onnx2c's figure is counted; bound allows
    # --const-input, and includes every unbound pass.
    print("conformance: of %d node tests, %d pass unbound (no input bound at compile time), "
          "%d pass bound (%d of them with inputs bound); %d failed, %d rejected" % (
              len(tests), counts["PASS"] - passed_bound, counts["PASS"], passed_bound,
              counts["FAIL"], counts["REJECTED"]))
    # Held to the list: what passed must still pass as it did. With --only,
    # only the tests run are.
    regressions, gains = compare_with_list(results, listed)
    for name in missing:
        print("conformance: %s is in %s but not in %s" % (name, args.passing, args.data))
    if regressions:
        print("conformance: %d tests no longer pass as %s lists them:" % (len(regressions), args.passing))
        for name, why in regressions:
            print("  %s: %s" % (name, why))
    if args.write_passing:
        print("conformance: wrote %d passing tests to %s" % (counts["PASS"], args.write_passing))
    if gains:
        print("conformance: %d tests pass beyond %s; add them (run.py --write-passing %s): %s" % (
            len(gains), args.passing, args.passing, ", ".join(gains)))
    return 1 if counts["FAIL"] or regressions or missing else 0


if __name__ == "__main__":
    sys.exit(main())
