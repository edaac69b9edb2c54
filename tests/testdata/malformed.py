#!/usr/bin/env python3
"""Feeds opc damaged copies of test-data models and checks what it makes of
each: a clean rejection, or a program that computes what ONNX Runtime
computes from the same copy.

Usage: malformed.py OPC TESTDATA [--models N] [--flips N] [--weighted N]
                    [--weight-flips N] [--seed S] [--jobs J] [--only TEXT]
                    [--save DIR] [--perturb]

The copies (all seeded):
  bytes    of every N-th model of the suites (--models): zero-filled,
           truncated at several lengths, bits flipped anywhere, and an
           empty file; mostly broken protobuf;
  values   of the same models (--flips each): one bit flipped in one value
           the protobuf holds (a weight, an attribute, an input's or
           output's element type or dimension), so the copy stays
           well-formed protobuf but may no longer make sense;
  weights  of every N-th model that has weights (--weighted, PyTorch's
           converted tests; --weight-flips each): one bit of one weight.

Every copy must end one of two ways, and the output says which:
  (a) rejected  opc exits 2, and the first line on stderr other than opc's
                own warnings starts with 'opc: error: ';
  (b) matches   `opc COPY -o net --target cpu` builds a program that, run
                under the CPU runtime's race checker (OPC_CHECK=1), gives
                what ONNX Runtime (CPU, graph optimisations off) gives for
                the same copy and inputs: shapes, types, integers and
                booleans exactly, floats within abs+rel 1e-4, NaN and Inf
                only where the reference has them. The largest difference
                is printed.
Anything else fails the test:
  - a crash, signal, timeout or usage error of opc, or exit 2 because the C
    compiler refused what opc wrote;
  - opc compiles a copy that is not well-formed protobuf (Python's parser
    decides, independently of opc), or one ONNX Runtime refuses to load or
    run: opc accepted something broken. One exception, from the
    specification: when ONNX Runtime has no kernel for an operator at that
    opset or type (NOT_IMPLEMENTED, as for opset 6's BatchNormalization) and
    the ONNX checker with strict shape inference accepts the copy, the copy
    is valid, and ONNX's reference evaluator is the oracle instead;
  - the program fails, or its outputs differ from the oracle's;
  - the oracle's output has a NaN where the model's expected output (test
    data set 0) has none, and the damage changed none of the model's
    numbers: nothing then says the NaN is the copy's and not the oracle's
    own failing. When it did change one (a variance flipped negative gives
    sqrt(-v)), opc must have the NaN at the same places; the output counts
    them.
Inputs are the model's test_data_set_0/input_*.pb where they fit the copy's
declared inputs (type and shape), else drawn (seeded) in its declared type
and shape from the test data's own values. When ONNX Runtime refuses to run
on them, or a loss's labels fall outside the classes (undefined in ONNX:
ONNX Runtime reads past the end, opc gives NaN), the damage made the test
data wrong for the copy: every input is then drawn afresh (small integers,
floats in [-1, 1)), and the oracle must take those.

--perturb makes one element of every program output wrong before the
comparison: every (b) must then fail, which shows the comparison can.
--only checks the copies whose label holds TEXT (they draw the inputs of a
full run); --save writes the failing copies to DIR. The run ends with a
tally of (a), (b) (by oracle) and failures.
"""
import argparse
import collections
import concurrent.futures
import os
import pickle
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.shape_inference
from onnx import ModelProto, TensorProto, helper, numpy_helper

SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
WEIGHTED_SUITES = ["pytorch-converted", "pytorch-operator"]
TOLERANCE = 1e-4  # |got - expected| <= TOLERANCE + TOLERANCE * |expected|

def pick_models(root, count):
    """Every k-th model, so that a spread of sizes and operators is covered."""
    models = []
    for suite in SUITES:
        base = os.path.join(root, suite)
        if os.path.isdir(base):
            models += [os.path.join(base, d, "model.onnx") for d in sorted(os.listdir(base))
                       if os.path.isfile(os.path.join(base, d, "model.onnx"))]
    step = max(1, len(models) // count)
    return models[::step][:count]


def pick_weighted(root, count):
    """Every k-th model with initializers: the node tests have almost no
    weights for value damage to flip."""
    models = []
    for suite in WEIGHTED_SUITES:
        base = os.path.join(root, suite)
        for d in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            path = os.path.join(base, d, "model.onnx")
            if os.path.isfile(path) and load_model(open(path, "rb").read()).graph.initializer:
                models.append(path)
    step = max(1, len(models) // count) if count else 1
    return models[::step][:count]


def load_model(blob):
    model = ModelProto()
    model.ParseFromString(blob)
    return model


def well_formed(blob):
    try:
        load_model(blob)
        return True
    except Exception:
        return False


# ------------------------------------------------------------ damage

def byte_variants(data, rng):
    yield "zero-filled", bytes(len(data))
    for cut in sorted({1, 2, 9, len(data) // 4, len(data) // 2, len(data) - 3, len(data) - 1}):
        if 0 < cut < len(data):
            yield f"truncated to {cut} bytes", data[:cut]
    for i in range(4):
        blob = bytearray(data)
        # Early bytes hold the structure (field tags and lengths), later
        # ones mostly weights: flip some of each.
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(min(len(blob), 64)) if rng.random() < 0.5 else rng.randrange(len(blob))
            blob[pos] ^= 1 << rng.randrange(8)
        yield f"bit flip {i}", bytes(blob)


def tensors_of(model):
    """The model's weights: initializers and Constant nodes' values."""
    found = [(f"initializer '{t.name}'", t) for t in model.graph.initializer]
    for node in model.graph.node:
        for a in node.attribute:
            if a.type == a.TENSOR:
                found.append((f"node '{node.name}' ({node.op_type}) attribute '{a.name}'", a.t))
    return [(where, t) for where, t in found if numpy_helper.to_array(t).size]


def flip_targets(model):
    """{kind: [(what, function that flips one bit of it given rng)]} for
    the values a flip can reach, by kind: weight, attribute, input type,
    input dimension, output type, output dimension."""
    targets = collections.defaultdict(list)
    for where, t in tensors_of(model):
        targets["weight"].append((f"weight of {where}", lambda rng, t=t: flip_tensor(t, rng)))
    for node in model.graph.node:
        for a in node.attribute:
            where = f"attribute '{a.name}' of node '{node.name}' ({node.op_type})"
            if a.type == a.INT:
                flip = lambda rng, a=a: setattr(a, "i", flip_int(a.i, rng))
            elif a.type == a.INTS and a.ints:
                flip = lambda rng, a=a: flip_repeated(a.ints, flip_int, rng)
            elif a.type == a.FLOAT:
                flip = lambda rng, a=a: setattr(a, "f", flip_float(a.f, rng))
            elif a.type == a.FLOATS and a.floats:
                flip = lambda rng, a=a: flip_repeated(a.floats, flip_float, rng)
            else:
                continue
            targets["attribute"].append((where, flip))
    weights = {t.name for t in model.graph.initializer}
    for kind, values in (("input", [v for v in model.graph.input if v.name not in weights]),
                         ("output", model.graph.output)):
        for v in values:
            if not v.type.HasField("tensor_type"):
                continue
            tt = v.type.tensor_type
            targets[kind + " type"].append((
                f"element type of {kind} '{v.name}'",
                lambda rng, tt=tt: setattr(tt, "elem_type", tt.elem_type ^ (1 << rng.randrange(5)))))
            dims = [d for d in tt.shape.dim if d.HasField("dim_value")]
            if dims:
                # Low bits only: a few times larger at most, so that the
                # program and the oracle stay quick.
                targets[kind + " dimension"].append((
                    f"a dimension of {kind} '{v.name}'",
                    lambda rng, dims=dims: flip_dim(rng.choice(dims), rng)))
    return targets


def flip_int(value, rng):
    # The low seven bits: a one-byte varint's payload.
    return value ^ (1 << rng.randrange(7))


def flip_float(value, rng):
    # The sign, the exponent and the top of the mantissa: lower bits barely
    # change the value.
    bits = struct.unpack("<I", struct.pack("<f", value))[0] ^ (1 << rng.randrange(20, 32))
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def flip_repeated(values, flip, rng):
    k = rng.randrange(len(values))
    values[k] = flip(values[k], rng)


def flip_dim(dim, rng):
    dim.dim_value ^= 1 << rng.randrange(3)


def flip_tensor(t, rng):
    """Flips one bit of one element, as flip_float or flip_int would."""
    arr = numpy_helper.to_array(t).copy()
    flat = arr.reshape(-1)
    k = rng.randrange(flat.size)
    if arr.dtype == np.float32:
        flat[k] = flip_float(float(flat[k]), rng)
    elif arr.dtype.kind in "iu":
        flat[k] = flip_int(int(flat[k]), rng)
    elif arr.dtype == np.bool_:
        flat[k] = not flat[k]
    else:
        bits = flat.view(np.dtype("u%d" % arr.dtype.itemsize))
        bits[k] ^= 1 << rng.randrange(8 * arr.dtype.itemsize)
    t.CopyFrom(numpy_helper.from_array(arr, t.name))


def value_variants(data, rng, count, kinds=None):
    """`count` copies, each with one bit of one value flipped: a kind of
    value first (of `kinds`, default all), so that a model's many weights
    or attributes do not crowd out its inputs and outputs, then one of
    that kind."""
    for i in range(count):
        model = load_model(data)
        targets = flip_targets(model)
        available = sorted(k for k in targets if kinds is None or k in kinds)
        if not available:
            return
        what, flip = rng.choice(targets[rng.choice(available)])
        flip(rng)
        yield f"value flip {i}, {what}", model.SerializeToString()


# ------------------------------------------------------------ inputs

def graph_inputs(model):
    weights = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in weights]


def declared_shape(value):
    tt = value.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]


def fits(value, tensor):
    """Whether test data `tensor` can feed the copy's input `value`."""
    if tensor.data_type != value.type.tensor_type.elem_type:
        return False
    shape = declared_shape(value)
    return shape is None or (len(shape) == len(tensor.dims) and
                             all(d is None or d == t for d, t in zip(shape, tensor.dims)))


def draw(value, np_rng, pool):
    """A seeded array of the input's declared type and shape (unknown
    dimensions 1), or None when there is none to draw. Its values are drawn
    from `pool`, the test data's own values for this input when there are
    any, so that they stay in the operator's domain (a Log's inputs
    positive, a Gather's indices in range); else uniform in [-1, 1), or 0 to
    2 for integers."""
    shape = declared_shape(value)
    elem = value.type.tensor_type.elem_type
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    except Exception:
        return None
    if shape is None or dtype.kind not in "fiub":
        return None
    shape = [1 if d is None else d for d in shape]
    if pool is not None and pool.size and pool.dtype.kind in "fiub":
        arr = np_rng.choice(pool.reshape(-1), size=shape)
        if dtype.kind in "iu" and arr.dtype.kind == "f":
            info = np.iinfo(dtype)  # a float cast to an integer type it overflows is undefined
            arr = np.clip(np.nan_to_num(np.round(arr)), info.min, info.max)
        return arr.astype(dtype)
    if dtype.kind == "f":
        return np_rng.uniform(-1, 1, shape).astype(dtype)
    if dtype.kind == "b":
        return np_rng.integers(0, 2, shape).astype(dtype)
    return np_rng.integers(0, 3, shape).astype(dtype)


def make_inputs(model, test_dir, work, np_rng, test_data=True):
    """{name: (program's file, array)}, or a string saying why not. With
    test_data false, every input is drawn, none from the test data."""
    inputs = {}
    for k, value in enumerate(graph_inputs(model)):
        pb = os.path.join(test_dir, "test_data_set_0", f"input_{k}.pb")
        pool = None
        if test_data and os.path.exists(pb):
            tensor = TensorProto()
            tensor.ParseFromString(open(pb, "rb").read())
            pool = numpy_helper.to_array(tensor)
            if fits(value, tensor):
                inputs[value.name] = (pb, pool)
                continue
        arr = draw(value, np_rng, pool)
        if arr is None:
            return f"cannot draw input '{value.name}'"
        path = os.path.join(work, f"input_{k}.npy")
        np.save(path, arr)
        inputs[value.name] = (path, arr)
    return inputs


def bad_labels(model, inputs):
    """The name of a loss's label input holding a class outside [0, C) other
    than ignore_index, or None. ONNX leaves such a label undefined; ONNX
    Runtime reads past the class axis without a word and opc gives NaN, so
    the two cannot be compared (a flipped ignore_index, or a class count a
    flip shrank, turns the test data's labels into such)."""
    losses = [n for n in model.graph.node
              if n.op_type in ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
              and len(n.input) > 1 and n.input[1] in inputs]
    if not losses:
        return None
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        return None
    dims = {v.name: [d.dim_value if d.HasField("dim_value") else None
                     for d in v.type.tensor_type.shape.dim]
            for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    for node in losses:
        labels = inputs[node.input[1]][1]
        scores = dims.get(node.input[0]) or []
        if len(scores) < 2 or scores[1] is None:
            # Shape inference cannot follow the expanded tests' Reshapes:
            # the scores are then the fed input shaped [N, C, rest of the
            # labels' shape].
            scores = next((list(arr.shape) for name, (_, arr) in inputs.items()
                           if arr.ndim == labels.ndim + 1 and arr.shape[0] == labels.shape[0]
                           and arr.shape[2:] == labels.shape[1:]), [])
        if len(scores) < 2 or scores[1] is None:
            continue
        ignore = next((a.i for a in node.attribute if a.name == "ignore_index"), None)
        bad = ((labels < 0) | (labels >= scores[1])) & (labels != ignore)
        if bad.any():
            return node.input[1]
    return None


def expected_outputs(model, test_dir):
    """{output name: the original model's expected output} from data set 0."""
    expected = {}
    for k, value in enumerate(model.graph.output):
        pb = os.path.join(test_dir, "test_data_set_0", f"output_{k}.pb")
        if os.path.exists(pb):
            tensor = TensorProto()
            tensor.ParseFromString(open(pb, "rb").read())
            try:
                expected[value.name] = numpy_helper.to_array(tensor)
            except Exception:
                pass
    return expected


# ------------------------------------------------------------ oracles

def first_line(text):
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""


def ort_worker(model_path, inputs_path, outputs_path):
    """Runs the copy with ONNX Runtime. Exit 3: refused to load, 4: to run."""
    import onnxruntime as ort
    ort.set_default_logger_severity(3)  # errors only: its warnings are not verdicts
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    try:
        session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        # The temporary path tells nothing.
        print("load: " + first_line(str(exc).replace(f"Load model from {model_path} failed:", "")))
        return 3
    with open(inputs_path, "rb") as f:
        feeds = pickle.load(f)
    try:
        names = [o.name for o in session.get_outputs()]
        results = session.run(names, feeds)
    except Exception as exc:
        print("run: " + first_line(str(exc)))
        return 4
    with open(outputs_path, "wb") as f:
        pickle.dump(dict(zip(names, results)), f)
    return 0


def reference_worker(model_path, inputs_path, outputs_path):
    """Checks the copy against the ONNX specification (onnx.checker, with
    strict shape inference) and runs it with ONNX's reference evaluator.
    Exit 3: the checker refuses it, 4: the evaluator fails."""
    import warnings
    import onnx
    from onnx.reference import ReferenceEvaluator
    warnings.filterwarnings("ignore")  # numpy's, on damaged values
    model = onnx.load(model_path)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        print("the ONNX checker refuses it: " + first_line(str(exc)))
        return 3
    with open(inputs_path, "rb") as f:
        feeds = pickle.load(f)
    try:
        names = [o.name for o in model.graph.output]
        results = ReferenceEvaluator(model).run(names, feeds)
    except Exception as exc:
        print("ONNX's reference evaluator fails: " + first_line(str(exc)))
        return 4
    with open(outputs_path, "wb") as f:
        pickle.dump({n: np.asarray(r) for n, r in zip(names, results)}, f)
    return 0


WORKERS = {"--ort-worker": ort_worker, "--reference-worker": reference_worker}


def run_oracle(worker, model_path, inputs, work, timeout):
    """(outputs by name, None), or (None, why not). Each oracle runs in a
    process of its own, so that a crash on a damaged model cannot take the
    test down."""
    feeds = os.path.join(work, "feeds.pkl")
    results = os.path.join(work, "oracle.pkl")
    with open(feeds, "wb") as f:
        pickle.dump({name: arr for name, (_, arr) in inputs.items()}, f)
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), worker, model_path,
                            feeds, results], capture_output=True, text=True, errors="replace",
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if p.returncode != 0:
        if p.returncode < 0:
            return None, f"died of signal {-p.returncode}"
        return None, first_line(p.stdout) or first_line(p.stderr) or f"exit {p.returncode}"
    with open(results, "rb") as f:
        return pickle.load(f), None


def reference_for(model_path, inputs, work, timeout):
    """The outputs to compare with, the oracle's name, and why there are
    none (then outputs None).

    ONNX Runtime refuses a copy for two kinds of reasons: the copy is
    broken (opc must not have compiled it), or ONNX Runtime has no kernel
    for an operator at that opset or type (NOT_IMPLEMENTED: BatchNormalization
    and Add of opset 6, as PyTorch's old test models use, or EyeLike on
    uint8). In the second case the ONNX checker, with strict shape
    inference, shows from the specification whether the copy is valid; if
    it is, ONNX's own reference evaluator gives the outputs instead."""
    ref, refused = run_oracle("--ort-worker", model_path, inputs, work, timeout)
    if ref is not None:
        return ref, "ONNX Runtime", None
    if "NOT_IMPLEMENTED" not in refused:
        return None, None, f"ONNX Runtime refuses it: {refused}"
    ref, why = run_oracle("--reference-worker", model_path, inputs, work, timeout)
    if ref is None:
        return None, None, f"ONNX Runtime has no kernel ({refused}), and {why}"
    return ref, "ONNX's reference evaluator (ONNX Runtime has no kernel; the ONNX checker " \
                "accepts the copy)", None


# ------------------------------------------------------------ comparison

def compare(got, ref):
    """(largest |got - ref| over the finite elements, None) if they agree,
    else (None, what differs). Shapes, types, integers and booleans must be
    equal; floats within TOLERANCE; NaN and Inf only where ref has them."""
    if got.shape != ref.shape:
        return None, f"shape {list(got.shape)}, expected {list(ref.shape)}"
    if got.dtype != ref.dtype:
        return None, f"type {got.dtype}, expected {ref.dtype}"
    if ref.dtype.kind != "f":
        if not np.array_equal(got, ref):
            k = int(np.flatnonzero(got.reshape(-1) != ref.reshape(-1))[0])
            return None, f"{got.reshape(-1)[k]!r} at flat index {k}, expected {ref.reshape(-1)[k]!r}"
        return 0.0, None
    got, ref = got.astype(np.float64).reshape(-1), ref.astype(np.float64).reshape(-1)
    nan_got, nan_ref = np.isnan(got), np.isnan(ref)
    if (nan_got != nan_ref).any():
        k = int(np.flatnonzero(nan_got != nan_ref)[0])
        return None, f"NaN at other places (flat index {k}: {got[k]!r}, expected {ref[k]!r})"
    ok = ~nan_ref
    with np.errstate(invalid="ignore"):
        diff = np.abs(got[ok] - ref[ok])
        # Infinities of the same sign agree; inf - inf is NaN.
        same = (got[ok] == ref[ok]) | (diff <= TOLERANCE + TOLERANCE * np.abs(ref[ok]))
    if not same.all():
        k = int(np.flatnonzero(~same)[0])
        return None, f"{got[ok][k]!r} at finite index {k}, expected {ref[ok][k]!r}"
    finite = np.isfinite(ref[ok])
    return (float(diff[finite].max()) if finite.any() else 0.0), None


def constants(model):
    """The model's numbers: its weights, and its attributes' values."""
    values = [numpy_helper.to_array(t) for _, t in tensors_of(model)]
    for node in model.graph.node:
        for a in node.attribute:
            values.append(np.array([a.f, a.i] + list(a.floats) + list(a.ints), np.float64))
    return values


def constants_changed(model, original):
    mine, theirs = constants(model), constants(original)
    return len(mine) != len(theirs) or any(
        a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        for a, b in zip(mine, theirs))


def new_nans(name, ref, expected):
    """How many NaNs the reference has where the original model's expected
    output has none (all of them when the shapes differ)."""
    if ref.dtype.kind != "f":
        return 0
    orig = expected.get(name)
    if orig is not None and orig.shape == ref.shape and orig.dtype.kind == "f":
        return int((np.isnan(ref) & ~np.isnan(orig)).sum())
    return int(np.isnan(ref).sum())


# ------------------------------------------------------------ one copy

def check_copy(args, case):
    """Returns (verdict, message): verdict 'a', 'b' (compared with ONNX
    Runtime), 'b-ref' (with ONNX's reference evaluator) or 'FAIL'."""
    label, test_dir, blob, index = case
    work = os.path.join(args.tmp, f"case{index}")
    os.makedirs(work)
    try:
        return check_in(args, label, test_dir, blob, work, index)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_in(args, label, test_dir, blob, work, index):
    path = os.path.join(work, "broken.onnx")
    with open(path, "wb") as f:
        f.write(blob)
    parsed = well_formed(blob)
    exe = os.path.join(work, "net")
    try:
        p = subprocess.run([args.opc, path, "-o", exe, "--target", "cpu"], capture_output=True,
                           text=True, errors="replace", timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return "FAIL", "opc timed out"
    # opc's warnings (a declared shape that inference contradicts) may come
    # before its error; the first other line must be the error.
    lines = [line for line in p.stderr.splitlines() if not line.startswith("opc: warning: ")]
    first = lines[0] if lines else ""
    if p.returncode == 2 and first.startswith("opc: error: "):
        if "the C compiler" in p.stderr:
            return "FAIL", "the C compiler refused what opc wrote: " + first
        return "a", first
    if p.returncode != 0:
        return "FAIL", f"opc exit {p.returncode}: {first}"
    if not parsed:
        return "FAIL", "opc compiled a copy that is not well-formed protobuf"

    model = load_model(blob)
    np_rng = np.random.default_rng(args.seed + index)
    inputs = make_inputs(model, test_dir, work, np_rng)
    if isinstance(inputs, str):
        return "FAIL", "opc compiled it, but " + inputs
    ref, oracle, refused = None, None, None
    if bad_labels(model, inputs):
        refused = "the test data's labels are out of range for it"
    else:
        ref, oracle, refused = reference_for(path, inputs, work, args.timeout)
    redrawn = ""
    if ref is None and (refused.startswith("ONNX Runtime refuses it: run: ") or
                        refused.startswith("the test data's labels")):
        # The inputs, not the copy, are wrong: the damage can make the test
        # data's values so (labels beyond a class count a flipped bit
        # shrank, or past a flipped ignore_index). ONNX leaves the outputs
        # undefined then: ONNX Runtime refuses or reads past the end, opc's
        # kernels clamp the index or give NaN. Inputs drawn afresh, small
        # integers that index most axes, must do instead; the oracle must
        # take them.
        inputs = make_inputs(model, test_dir, work, np_rng, test_data=False)
        if isinstance(inputs, str):
            return "FAIL", f"opc compiled it, but {refused}, and {inputs}"
        ref, oracle, refused = reference_for(path, inputs, work, args.timeout)
        redrawn = " (the test data's do not fit the copy, all drawn)"
    if ref is None:
        return "FAIL", f"opc compiled it, but {refused}"

    cmd = [exe]
    for name, (file, _) in inputs.items():
        cmd += ["--input", f"{name}={file}"]
    outputs = [v.name for v in model.graph.output]
    for k, name in enumerate(outputs):
        cmd += ["--output", f"{name}={os.path.join(work, f'out_{k}.npy')}"]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                             timeout=args.timeout, env=dict(os.environ, OPC_CHECK="1"))
    except subprocess.TimeoutExpired:
        return "FAIL", "the program timed out"
    if run.returncode != 0:
        lines = (run.stderr or run.stdout).strip().splitlines()
        return "FAIL", f"the program exited with {run.returncode}: {lines[0] if lines else ''}"

    expected = expected_outputs(model, test_dir)
    original = load_model(open(os.path.join(test_dir, "model.onnx"), "rb").read())
    worst, nans = 0.0, 0
    for k, name in enumerate(outputs):
        got = np.load(os.path.join(work, f"out_{k}.npy"))
        if args.perturb:
            got = perturbed(got)
        if name not in ref:
            return "FAIL", f"{oracle} has no output '{name}'"
        # A NaN in the reference that the model's expected output lacks is
        # a pass only when the damage changed a number of the model (a
        # weight flipped to a negative variance gives sqrt(-v) = NaN), and
        # opc has it at the same places (compare). Otherwise nothing says
        # the NaN is the copy's and not the reference's own failing.
        added = new_nans(name, ref[name], expected)
        if added and not constants_changed(model, original):
            return "FAIL", (f"{oracle}'s output '{name}' has {added} NaN(s) the expected output "
                            "lacks, and the damage changed none of the model's numbers")
        err, problem = compare(got, ref[name])
        if problem:
            return "FAIL", f"output '{name}' differs from {oracle}'s: {problem}"
        worst, nans = max(worst, err), nans + added
    drawn = [n for n, (file, _) in inputs.items() if file.endswith(".npy")]
    note = f", inputs drawn: {', '.join(drawn)}{redrawn}" if drawn else ""
    verdict = "b" if oracle == "ONNX Runtime" else "b-ref"
    if nans:
        note += f", {nans} NaN(s) from the damaged numbers, at the same places"
    return verdict, f"max |diff| {worst:.3g} over {len(outputs)} output(s), against {oracle}{note}"


def perturbed(arr):
    """arr with one element made wrong (--perturb): its first finite one
    moved by 1 + its size, so that neither a huge value nor the tolerance
    absorbs the change; with none finite, its first element made 0."""
    arr = arr.copy()
    flat = arr.reshape(-1)
    if flat.size == 0:
        return arr
    if arr.dtype == np.bool_:
        flat[0] = not flat[0]
        return arr
    finite = np.flatnonzero(np.isfinite(flat)) if arr.dtype.kind == "f" else [0]
    if len(finite) == 0:
        flat[0] = 0
        return arr
    k = finite[0]
    flat[k] = flat[k] - 1 - abs(flat[k]) if flat[k] > 0 else flat[k] + 1 + abs(flat[k])
    return arr


def save_copy(folder, label, blob):
    os.makedirs(folder, exist_ok=True)
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:150]
    with open(os.path.join(folder, name + ".onnx"), "wb") as f:
        f.write(blob)


def main():
    if len(sys.argv) == 5 and sys.argv[1] in WORKERS:
        return WORKERS[sys.argv[1]](*sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("opc")
    ap.add_argument("testdata")
    ap.add_argument("--models", type=int, default=12)
    ap.add_argument("--weighted", type=int, default=8)
    ap.add_argument("--flips", type=int, default=3, help="value flips per spread model")
    ap.add_argument("--weight-flips", type=int, default=3, help="weight flips per weighted model")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="check only the copies whose label has this")
    ap.add_argument("--save", default=None, help="write the failing copies to this folder")
    ap.add_argument("--perturb", action="store_true",
                    help="make one element of each program output wrong (every (b) must fail)")
    args = ap.parse_args()
    args.opc = os.path.abspath(args.opc)
    # Two generators, so that the byte damage stays what it was before
    # the value damage was added.
    rng, value_rng = random.Random(args.seed), random.Random(args.seed + 1)
    cases = [("empty file", args.testdata, b"")]
    spread = pick_models(args.testdata, args.models)
    for model in spread + pick_weighted(args.testdata, args.weighted):
        data = open(model, "rb").read()
        name = os.path.relpath(os.path.dirname(model), args.testdata)
        if model in spread:
            damage = list(byte_variants(data, rng)) + list(value_variants(data, value_rng,
                                                                            args.flips))
        else:
            damage = list(value_variants(data, value_rng, args.weight_flips, ["weight"]))
        cases += [(f"{name}: {label}", os.path.dirname(model), blob) for label, blob in damage]

    # Numbered before --only picks, so that a copy draws the same inputs.
    cases = [(label, test_dir, blob, i) for i, (label, test_dir, blob) in enumerate(cases)
             if args.only in label]
    tally = {"a": 0, "b": 0, "b-ref": 0, "FAIL": 0}
    broken = sum(1 for _, _, blob, _ in cases if not blob or not well_formed(blob))
    tags = {"a": "(a) rejected", "b": "(b) matches ", "b-ref": "(b) matches ", "FAIL": "FAIL        "}
    with tempfile.TemporaryDirectory(prefix="opc-malformed-") as tmp:
        args.tmp = tmp
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for (label, _, blob, _), (verdict, message) in zip(
                    cases, pool.map(lambda c: check_copy(args, c), cases)):
                tally[verdict] += 1
                if verdict == "FAIL" and args.save:
                    save_copy(args.save, label, blob)
                print(f"{tags[verdict]} {label}: {message}", flush=True)
    print(f"malformed: {len(cases)} damaged copies ({broken} not well-formed protobuf): "
          f"{tally['a']} rejected cleanly (a), {tally['b'] + tally['b-ref']} compiled and match "
          f"(b) ({tally['b']} against ONNX Runtime, {tally['b-ref']} against ONNX's reference "
          f"evaluator), {tally['FAIL']} failures")
    return 1 if tally["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
