#!/usr/bin/env python3
"""Runs `opc --dump-ir` on every model of the ONNX test data and checks it.

Usage:
  sweep.py OPC TESTDATA ALLOWLIST [--jobs N] [--timeout S] [--only SUBSTRING]
  sweep.py OPC --classify TESTDATA   print the op/dtype allowlist entries (the
                                     operator set is `OPC --list-operators`)

For every MODEL/model.onnx under TESTDATA/{node,pytorch-converted,
pytorch-operator,simple}:
  exit 0  the dumped IR's graph outputs must have the dtype and shape of
          test_data_set_0/output_K.pb (K in graph output order);
  exit 2  stderr must start with 'opc: error:', and the model must be on the
          allowlist, unless it uses an operator outside opc's set or a
          non-float32 graph input or output (see classify());
  else    (crash, signal, timeout, usage error) a failure.
Symbolic input dimensions are pinned with --input-shape from the test's
input_K.pb.

Each allowlist entry is checked against the model itself: an 'op' entry
must list exactly the operators outside the set that the model uses, a
'dtype' entry needs a non-float32 graph input or output, or a Cast to
another type. A 'feature' entry names a limitation of a supported operator
in its reason. So the allowlist cannot hide a float32 model of the
supported operator set behind a wrong reason.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

import onnx
from onnx import TensorProto

SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]

# The operators opc compiles, by ONNX name: the first column of the table
# `opc --list-operators` prints (ir/ops.def's rows); set by main().
SUPPORTED_OPS = set()


def supported_operators(opc):
    table = subprocess.run([opc, "--list-operators"], capture_output=True, text=True,
                           check=True).stdout
    names = {line.split("|")[1].strip() for line in table.splitlines()
             if line.startswith("| ") and not line.startswith("| Operator ")}
    if len(names) < 100:
        sys.exit(f"sweep: {opc} --list-operators listed {len(names)} operators")
    return names


# The IR's dtype names (ir/graph.c) for ONNX's TensorProto.DataType.
IR_DTYPES = {
    TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f64", TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16", TensorProto.INT8: "i8", TensorProto.INT16: "i16",
    TensorProto.INT32: "i32", TensorProto.INT64: "i64", TensorProto.UINT8: "u8",
    TensorProto.UINT16: "u16", TensorProto.UINT32: "u32", TensorProto.UINT64: "u64",
    TensorProto.BOOL: "bool",
}


def find_models(root):
    models = []
    for suite in SUITES:
        base = os.path.join(root, suite)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            if os.path.isfile(os.path.join(base, name, "model.onnx")):
                models.append(f"{suite}/{name}")
    return models


# ------------------------------------------------------------ classification

def all_nodes(graph):
    """Nodes of the graph and of every subgraph in its attributes."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in list(attr.graphs) + ([attr.g] if attr.HasField("g") else []):
                yield from all_nodes(sub)


def real_inputs(graph):
    inits = {t.name for t in graph.initializer}
    return [vi for vi in graph.input if vi.name not in inits]


def elem_type(vi):
    t = vi.type
    return t.tensor_type.elem_type if t.HasField("tensor_type") else None


def classify(model):
    """(category, reason) when the model is outside what opc must compile,
    else None. Categories: 'op' (operators outside the set), 'dtype'."""
    graph = model.graph
    outside = []
    for node in all_nodes(graph):
        default = node.domain in ("", "ai.onnx")
        op = node.op_type if default else f"{node.domain}.{node.op_type}"
        if (not default or node.op_type not in SUPPORTED_OPS) and op not in outside:
            outside.append(op)
    if outside:
        return "op", " ".join(outside)
    non_float = []
    for vi in real_inputs(graph) + list(graph.output):
        et = elem_type(vi)
        if et != TensorProto.FLOAT:
            name = TensorProto.DataType.Name(et) if et is not None else "non-tensor"
            non_float.append(f"{vi.name}:{name.lower()}")
    for node in graph.node:
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            if to != TensorProto.FLOAT:
                non_float.append(f"Cast->{TensorProto.DataType.Name(to).lower()}")
    if non_float:
        return "dtype", " ".join(non_float)
    return None


def read_allowlist(path):
    """{model: (category, reason)}; lines are 'MODEL CATEGORY REASON...'."""
    entries = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[1] not in ("op", "dtype", "feature"):
                sys.exit(f"{path}:{lineno}: expected 'MODEL op|dtype|feature REASON'")
            entries[parts[0]] = (parts[1], parts[2])
    return entries


def check_entry(name, entry, actual):
    """Why an allowlist entry does not hold for the model, or None."""
    category, reason = entry
    if category == "feature":
        if actual is not None:
            return f"'feature' entry, but the model is outside the set ({actual[0]}: {actual[1]})"
        return None
    if actual is None or actual[0] != category:
        return f"'{category}' entry, but the model is {actual[0] + ': ' + actual[1] if actual else 'float32 in the supported set'}"
    if category == "op" and set(reason.split()) != set(actual[1].split()):
        return f"'op' entry lists '{reason}', but the model's operators outside the set are '{actual[1]}'"
    return None


# ------------------------------------------------------------ the IR dump

NAME = r'(?:[A-Za-z0-9_.:/\-]+|"(?:[^"\\]|\\.)*")'
DECL = re.compile(r"%(" + NAME + r"): ([a-z0-9]+)\[([-0-9,<=]*)\]")
OUTPUT = re.compile(r"^output %(" + NAME + r")\s*$")


def unquote(name):
    if not name.startswith('"'):
        return name
    body = name[1:-1]
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


def parse_dump(text):
    """(types {name: (dtype, dims)}, [output names]) from a graph_dump."""
    types, outputs = {}, []
    for line in text.splitlines():
        m = OUTPUT.match(line)
        if m:
            outputs.append(unquote(m.group(1)))
            continue
        # Only the definitions before ' = ' (inputs, consts, node outputs).
        head = line.split(" = ", 1)[0]
        for m in DECL.finditer(head):
            # "<=4": a bound, where the data decides the size (NonZero)
            dims = [d if d.startswith("<=") else int(d) for d in m.group(3).split(",") if d]
            types.setdefault(unquote(m.group(1)), (m.group(2), dims))
    return types, outputs


def load_tensor(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


# ------------------------------------------------------------ one model

def pin_arguments(model, test_dir):
    """--input-shape for the inputs whose declared shape is not static."""
    args = []
    for k, vi in enumerate(real_inputs(model.graph)):
        if not vi.type.HasField("tensor_type"):
            continue  # a sequence or optional: its .pb is not a TensorProto
        tt = vi.type.tensor_type
        static = tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)
        data = os.path.join(test_dir, f"input_{k}.pb")
        if static or not os.path.exists(data):
            continue
        dims = list(load_tensor(data).dims)
        # --input-shape takes positive dimensions; an empty or scalar input
        # stays unpinned and opc reports the dynamic dimension.
        if dims and all(d > 0 for d in dims):
            args += ["--input-shape", f"{vi.name}={'x'.join(map(str, dims))}"]
    return args


def check_shapes(model, test_dir, stdout):
    """Failure messages comparing the dumped outputs with output_K.pb."""
    types, outputs = parse_dump(stdout)
    declared = [o.name for o in model.graph.output]
    if outputs != declared:
        return [f"dumped outputs {outputs} differ from the model's {declared}"]
    problems = []
    for k, name in enumerate(outputs):
        path = os.path.join(test_dir, f"output_{k}.pb")
        if not os.path.exists(path):
            continue
        want = load_tensor(path)
        want_dims, want_type = list(want.dims), IR_DTYPES.get(want.data_type, "?")
        if name not in types:
            problems.append(f"output '{name}' has no type in the dump")
            continue
        got_type, got_dims = types[name]
        if got_type == "bf16" and want_type == "u16":
            want_type = "bf16"  # numpy has no bfloat16: the data holds its bits as uint16
        fits = len(got_dims) == len(want_dims) and all(
            w <= int(g[2:]) if isinstance(g, str) else w == g for g, w in zip(got_dims, want_dims))
        if not fits or got_type != want_type:
            problems.append(f"output '{name}': {got_type}{got_dims}, expected {want_type}{want_dims}")
    return problems


def run_model(opc, root, name, timeout):
    """(status, detail): status is 'ok', 'rejected', or 'fail'."""
    path = os.path.join(root, name, "model.onnx")
    test_dir = os.path.join(root, name, "test_data_set_0")
    try:
        model = onnx.load(path)
    except Exception as e:  # the test data itself is broken
        return "fail", f"onnx cannot load the model: {e}"
    cmd = [opc, path, "--dump-ir"] + pin_arguments(model, test_dir)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "fail", f"timed out after {timeout} s"
    first = p.stderr.splitlines()[0] if p.stderr else ""
    if p.returncode == 0:
        problems = check_shapes(model, test_dir, p.stdout)
        return ("fail", "; ".join(problems)) if problems else ("ok", "")
    if p.returncode == 2:
        if not p.stderr.startswith("opc: error:"):
            return "fail", f"exit 2 without 'opc: error:' first: {first!r}"
        return "rejected", first
    return "fail", f"exit status {p.returncode}: {first}"


# ------------------------------------------------------------ main

def sweep(args):
    allow = read_allowlist(args.allowlist)
    models = [m for m in find_models(args.testdata) if args.only in m]
    if not models:
        sys.exit(f"sweep: no models under {args.testdata}")
    failures, rejected, compiled = [], 0, 0

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {m: pool.submit(run_model, args.opc, args.testdata, m, args.timeout)
                   for m in models}
        for name in models:
            status, detail = futures[name].result()
            actual = classify(onnx.load(os.path.join(args.testdata, name, "model.onnx"),
                                        load_external_data=False))
            entry = allow.get(name)
            if entry:
                why = check_entry(name, entry, actual)
                if why:
                    failures.append(f"{name}: allowlist: {why}")
            if status == "ok":
                compiled += 1
                if entry:
                    failures.append(f"{name}: compiles now; remove its stale allowlist entry")
            elif status == "rejected":
                rejected += 1
                if not entry and actual is None:
                    failures.append(f"{name}: rejected, but it is float32 in the supported "
                                    f"set and not allowlisted: {detail}")
            else:
                failures.append(f"{name}: {detail}")

    for line in failures:
        print("FAIL " + line)
    print(f"testdata: {len(models)} models: {compiled} compiled with correct shapes, "
          f"{rejected} rejected cleanly, {len(failures)} failures")
    return 1 if failures else 0


def print_classification(root):
    for name in find_models(root):
        actual = classify(onnx.load(os.path.join(root, name, "model.onnx"),
                                    load_external_data=False))
        if actual:
            print(f"{name:60s} {actual[0]:7s} {actual[1]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--classify", metavar="TESTDATA")
    ap.add_argument("opc", nargs="?")
    ap.add_argument("testdata", nargs="?")
    ap.add_argument("allowlist", nargs="?")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    if not args.opc:
        ap.error("OPC is required")
    SUPPORTED_OPS.update(supported_operators(args.opc))
    if args.classify:
        print_classification(args.classify)
        return 0
    if not args.allowlist:
        ap.error("OPC TESTDATA ALLOWLIST are required")
    return sweep(args)


if __name__ == "__main__":
    sys.exit(main())
