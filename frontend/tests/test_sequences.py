#!/usr/bin/env python3
"""Sequences and optionals, lowered at import (frontend/sequence.c), through
opc, the CPU runtime and the emitted program, against ONNX Runtime.

The ONNX node tests of these operators take or return sequences at the
graph's boundary, which opc refuses; real models build and read sequences
inside. So one model holds every case inside, with tensors in and out:
SplitToSequence (pieces of one, a scalar split, a list, keepdims=0),
ConcatFromSequence (with and without new_axis), SequenceInsert, SequenceAt
and SequenceErase at negative positions, SequenceEmpty, SequenceConstruct,
SequenceLength, SequenceMap over one and two sequences with a tensor
beside, Optional (full and empty), OptionalHasElement, OptionalGetElement,
an If and a Loop that carry sequences, and a sequence graph input bound
with --const-input (a SequenceProto file). It is one program, built at
-O0 (cheap), and runs again at opset 12, where Unsqueeze and Squeeze take
their axes as attributes.

Floats must match ONNX Runtime within 1e-6 of the output's largest
magnitude (the cases move data; SequenceMap's body adds and multiplies),
integers and bools exactly; a NaN in the reference is an error. Negative
control: for each case at a negative position, the comparison must reject
the output that counting the position wrongly (from the end without the
spec's shift) would give.

Errors, each with exit status 2 and a message naming node and operator: a
position or a split that is a graph input, a position out of range, a
sequence or optional as a graph input or output, an empty optional's
element, the concatenation of an empty sequence and a sequence read by an
operator that takes tensors, and a bound sequence of the wrong type.

usage: test_sequences.py OPC WORK_DIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

F = TensorProto.FLOAT
node = helper.make_node


def natural(*shape, phase=0.0):
    """Smooth, distinct values: a wrong element shows as a wrong value."""
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * 0.7 + phase) * 3 + np.arange(n) * 0.01).astype(
        np.float32).reshape(shape)


FEEDS = {"x": natural(4, 6), "y": natural(4, 6, phase=1.0), "z": natural(2, 6, phase=2.0),
         "w": natural(1, 6, phase=3.0)}
# A sequence input, bound at compile time (--const-input of a SequenceProto).
BOUND = {"xs": [natural(2, 6, phase=4.0 + k) for k in range(3)]}


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def tensor_out(name, elem=F):
    return helper.make_tensor_value_info(name, elem, None)


def seq_info(name):
    return helper.make_tensor_sequence_value_info(name, F, None)


def cases():
    """The nodes, the outputs and the initializers of every case."""
    n, outs = [], []
    inits = [ints("m2", -2), ints("m1", -1), ints("p0", 0), ints("p1", 1), ints("four", 4),
             ints("one_three", [1, 3]), ints("trips", 3),
             numpy_helper.from_array(np.array(True), "yes")]
    # SplitToSequence into pieces of one along axis 1; the one before last.
    n += [node("SplitToSequence", ["x"], ["ones"], axis=1),
          node("SequenceAt", ["ones", "m2"], ["split_at_neg"]),
          node("SequenceLength", ["ones"], ["split_len"])]
    # A scalar split: pieces of 4, the last of 2.
    n += [node("SplitToSequence", ["x", "four"], ["chunks"], axis=1),
          node("SequenceAt", ["chunks", "p1"], ["chunk_last"])]
    # A list split, z inserted before the last piece, all concatenated.
    n += [node("SplitToSequence", ["x", "one_three"], ["rows"], axis=0),
          node("SequenceInsert", ["rows", "z", "m1"], ["rows_z"]),
          node("ConcatFromSequence", ["rows_z"], ["insert_neg_concat"], axis=0)]
    # keepdims=0, stacked again along a new last axis: x transposed.
    n += [node("SplitToSequence", ["x"], ["flat_rows"], axis=0, keepdims=0),
          node("ConcatFromSequence", ["flat_rows"], ["stack_last"], axis=-1, new_axis=1)]
    # Construct, erase the one before last, take the first.
    n += [node("SequenceConstruct", ["x", "y", "z"], ["xyz"]),
          node("SequenceErase", ["xyz", "m2"], ["xz"]),
          node("SequenceAt", ["xz", "m1"], ["erase_neg"]),
          node("SequenceErase", ["xyz"], ["xy"]),
          node("ConcatFromSequence", ["xy"], ["erase_last"], axis=1)]
    # From empty: insert at the end, then at the front.
    n += [node("SequenceEmpty", [], ["empty"], dtype=F),
          node("SequenceInsert", ["empty", "x"], ["just_x"]),
          node("SequenceInsert", ["just_x", "y", "p0"], ["y_x"]),
          node("ConcatFromSequence", ["y_x"], ["empty_insert"], axis=1)]
    # SequenceMap over the rows of x with w beside, and over rows of x and y.
    body1 = helper.make_graph(
        [node("Add", ["a", "b"], ["s"]), node("Mul", ["s", "a"], ["p"]),
         node("ReduceSum", ["a"], ["r"], keepdims=1)], "body1",
        [helper.make_tensor_value_info("a", F, [1, 6]), helper.make_tensor_value_info("b", F, [1, 6])],
        [helper.make_tensor_value_info("p", F, [1, 6]), helper.make_tensor_value_info("r", F, [1, 1])])
    body2 = helper.make_graph(
        [node("Sub", ["a", "b"], ["d"])], "body2",
        [helper.make_tensor_value_info("a", F, [1, 6]), helper.make_tensor_value_info("b", F, [1, 6])],
        [helper.make_tensor_value_info("d", F, [1, 6])])
    n += [node("SplitToSequence", ["y"], ["y_rows"], axis=0),
          node("SplitToSequence", ["x"], ["rows_of_x"], axis=0),
          node("SequenceMap", ["rows_of_x", "w"], ["mapped", "sums"], body=body1),
          node("ConcatFromSequence", ["mapped"], ["map_mul"], axis=0),
          node("ConcatFromSequence", ["sums"], ["map_sum"], axis=0),
          node("SequenceMap", ["rows_of_x", "y_rows"], ["diffs"], body=body2),
          node("ConcatFromSequence", ["diffs"], ["map_two"], axis=1)]
    # Optionals: full, empty, and the element of a full one.
    n += [node("Optional", ["x"], ["opt_x"]),
          node("OptionalHasElement", ["opt_x"], ["has"]),
          node("Optional", [], ["opt_none"], type=helper.make_tensor_type_proto(F, [4, 6])),
          node("OptionalHasElement", ["opt_none"], ["has_not"]),
          node("Optional", ["y"], ["opt_y"]),
          node("OptionalGetElement", ["opt_y"], ["y_again"]),
          node("Relu", ["y_again"], ["got"])]
    # An If whose branches build sequences; a Loop that grows one.
    then_g = helper.make_graph([node("SequenceConstruct", ["x", "z"], ["t"])], "then", [],
                               [seq_info("t")])
    else_g = helper.make_graph([node("SequenceConstruct", ["z", "x"], ["e"])], "else", [],
                               [seq_info("e")])
    loop_body = helper.make_graph(
        [node("Cast", ["i"], ["fi"], to=F), node("Mul", ["w", "fi"], ["wi"]),
         node("SequenceInsert", ["acc_in", "wi"], ["acc_out"]),
         node("Identity", ["c_in"], ["c_out"])], "loop_body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), seq_info("acc_in")],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), seq_info("acc_out")])
    n += [node("If", ["yes"], ["chosen"], then_branch=then_g, else_branch=else_g),
          node("ConcatFromSequence", ["chosen"], ["if_seq"], axis=0),
          node("Loop", ["trips", "", "empty"], ["grown"], body=loop_body),
          node("ConcatFromSequence", ["grown"], ["loop_seq"], axis=0),
          node("SequenceLength", ["grown"], ["loop_len"])]
    # The bound sequence input: its last tensor, and all concatenated.
    n += [node("SequenceAt", ["xs", "m1"], ["bound_at"]),
          node("ConcatFromSequence", ["xs"], ["bound_concat"], axis=0)]
    outs = ["bound_at", "bound_concat", "split_at_neg", "split_len", "chunk_last", "insert_neg_concat", "stack_last",
            "erase_neg", "erase_last", "empty_insert", "map_mul", "map_sum", "map_two", "has",
            "has_not", "got", "if_seq", "loop_seq", "loop_len"]
    return n, outs, inits


def controls(feeds):
    """{output: what it would be were a negative position counted from the
    end without adding the length (-1 the last, -2 the one before: one
    place off), as a broken rule would}: each must fail the comparison."""
    x, y, z = feeds["x"], feeds["y"], feeds["z"]
    return {
        "split_at_neg": x[:, 5:6],                                     # -2 read as the last
        "insert_neg_concat": np.concatenate([x[0:1], x[1:4], z], 0),  # -1 read as the end
        "erase_neg": y,                                               # erases z, keeps x, y
        "bound_at": BOUND["xs"][1],                                   # -1 one place off
    }


def make_model(opset):
    nodes, outs, inits = cases()
    inputs = [helper.make_tensor_value_info(k, F, v.shape) for k, v in FEEDS.items()]
    inputs += [seq_info(k) for k in BOUND]
    types = {"split_len": TensorProto.INT64, "loop_len": TensorProto.INT64,
             "has": TensorProto.BOOL, "has_not": TensorProto.BOOL}
    outputs = [tensor_out(o, types.get(o, F)) for o in outs]
    graph = helper.make_graph(nodes, "sequences", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


# What opset 12 lacks: SequenceMap (17), optionals (15), Loop carrying a
# sequence (13); the nodes of those cases and what they feed.
NEWER = {"SequenceMap", "Optional", "OptionalHasElement", "OptionalGetElement", "Loop"}


def drop_newer_cases(m):
    gone = set()
    keep = []
    for k in m.graph.node:
        if k.op_type in NEWER or gone & set(k.input):
            gone.update(k.output)
        else:
            keep.append(k)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    outs = [o for o in m.graph.output if o.name not in gone]
    del m.graph.output[:]
    m.graph.output.extend(outs)


def run_ort(m, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in m.graph.output]
    return dict(zip(names, sess.run(None, dict(feeds, **BOUND))))


def run_opc(opc, m, feeds, work):
    """({name: output}, None), or (None, why)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    exe = os.path.join(work, "net")
    env = dict(os.environ, CC=os.environ.get("CC", "cc") + " -Wall -Wextra -Werror")
    cmd = [opc, path, "-o", exe, "--target", "cpu"]
    for name, tensors in BOUND.items():
        pb = os.path.join(work, name + ".pb")
        with open(pb, "wb") as f:
            f.write(numpy_helper.from_list(tensors, name).SerializeToString())
        cmd += ["--const-input", f"{name}={pb}"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return None, f"opc exited with {p.returncode}: {(p.stdout + p.stderr).strip()[-600:]}"
    cmd, paths = [exe], {}
    for o in m.graph.output:
        paths[o.name] = os.path.join(work, f"{o.name}.npy")
        cmd += ["--output", f"{o.name}={paths[o.name]}"]
    for name, value in feeds.items():
        np.save(os.path.join(work, name + ".npy"), value)
        cmd += ["--input", f"{name}={os.path.join(work, name + '.npy')}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"the program exited with {p.returncode}: {p.stderr.strip()[-300:]}"
    return {k: np.load(v) for k, v in paths.items()}, None


def compare(got, want, rel=1e-6):
    """None when got matches want: same dtype and shape; integers and bools
    equal; floats within rel of want's largest magnitude. Else what differs."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if not np.issubdtype(want.dtype, np.floating):
        return None if np.array_equal(got, want) else f"got {got.tolist()}, expected {want.tolist()}"
    if np.isnan(want).any():
        return "the reference holds NaN"
    scale = float(np.abs(want).max())
    if scale == 0.0:
        return "the reference is all zeros: the case decides nothing"
    err = np.abs(got.astype(np.float64) - want)
    if not (err <= rel * scale).all():  # NaN in got fails here too
        i = int(np.nanargmax(np.where(np.isnan(err), np.inf, err)))
        return f"error {err.reshape(-1)[i]:.3g} at {i} beyond {rel:g} of {scale:.3g}"
    return None


# ------------------------------------------------------------ errors

def error_model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "bad", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def error_cases():
    """(name, model, the text opc's message must hold)."""
    x = helper.make_tensor_value_info("x", F, [4, 6])
    split_x = node("SplitToSequence", ["x"], ["s"], axis=0)
    p_in = helper.make_tensor_value_info("p", TensorProto.INT64, [])
    return [
        ("run-time position",
         error_model([split_x, node("SequenceAt", ["s", "p"], ["y"], name="at")], [x, p_in],
                     [tensor_out("y")]),
         "node 'at' (SequenceAt): its position 'p' is computed at run time, and opc compiles "
         "SequenceAt only when it is known at compile time; it depends on graph input 'p'"),
        ("run-time split",
         error_model([node("SplitToSequence", ["x", "k"], ["s"], name="split"),
                      node("SequenceAt", ["s", "p0"], ["y"])],
                     [x, helper.make_tensor_value_info("k", TensorProto.INT64, [])],
                     [tensor_out("y")], [ints("p0", 0)]),
         "node 'split' (SplitToSequence): its split 'k' is computed at run time"),
        ("position out of range",
         error_model([split_x, node("SequenceAt", ["s", "p"], ["y"], name="at")], [x],
                     [tensor_out("y")], [ints("p", -5)]),
         "node 'at' (SequenceAt): position -5 is outside [-4, 3] for a sequence of 4 tensors"),
        ("insert past the end",
         error_model([split_x, node("SequenceInsert", ["s", "x", "p"], ["t"], name="ins"),
                      node("SequenceAt", ["t", "p0"], ["y"])], [x],
                     [tensor_out("y")], [ints("p", 5), ints("p0", 0)]),
         "node 'ins' (SequenceInsert): position 5 is outside [-4, 4]"),
        ("sequence output",
         error_model([split_x], [x], [seq_info("s")]),
         "graph output 's' is a sequence; opc programs return tensors"),
        ("sequence input",
         error_model([node("SequenceAt", ["s", "p0"], ["y"])], [seq_info("s")],
                     [tensor_out("y")], [ints("p0", 0)]),
         "input 's' is not a tensor but a sequence"),
        ("empty optional's element",
         error_model([node("Optional", [], ["o"], type=helper.make_tensor_type_proto(F, [4, 6])),
                      node("OptionalGetElement", ["o"], ["y"], name="get")], [x],
                     [tensor_out("y")]),
         "node 'get' (OptionalGetElement): the optional 'o' is empty"),
        ("empty concatenation",
         error_model([node("SequenceEmpty", [], ["e"]),
                      node("ConcatFromSequence", ["e"], ["y"], axis=0, name="cat")], [x],
                     [tensor_out("y")]),
         "node 'cat' (ConcatFromSequence): concatenates an empty sequence"),
        ("sequence read as a tensor",
         error_model([split_x, node("Relu", ["s"], ["y"], name="relu")], [x],
                     [tensor_out("y")]),
         "node 'relu' (Relu): input 's' is a sequence, and Relu takes tensors"),
    ]


def main():
    opc, work = sys.argv[1], sys.argv[2]
    failures = []
    checked = 0
    for opset in (17, 12):
        m = make_model(opset)
        if opset == 12:
            drop_newer_cases(m)
        want = run_ort(m, FEEDS)
        got, why = run_opc(opc, m, FEEDS, os.path.join(work, f"opset{opset}"))
        if why:
            failures.append(f"opset {opset}: {why}")
            continue
        for name, ref in want.items():
            problem = compare(got[name], ref)
            checked += 1
            if problem:
                failures.append(f"opset {opset} {name}: {problem}")
        for name, wrong in controls(FEEDS).items():
            if compare(wrong, want[name]) is None:
                failures.append(f"opset {opset} {name}: the control (a wrongly counted "
                                f"negative position) passes the comparison")
    # A bound sequence whose tensors are not of the declared type.
    ints_pb = os.path.join(work, "ints.pb")
    with open(ints_pb, "wb") as f:
        f.write(numpy_helper.from_list([np.arange(3)], "s").SerializeToString())
    wrong_type = ("bound sequence of the wrong type",
                  error_model([node("SequenceAt", ["s", "p0"], ["y"])], [seq_info("s")],
                              [tensor_out("y")], [ints("p0", 0)]),
                  "--const-input s=" + ints_pb + ": the file holds i64 data but input 's' is "
                  "declared to hold f32", ["--const-input", "s=" + ints_pb])
    for name, m, text, *args in error_cases() + [wrong_type]:
        path = os.path.join(work, "error.onnx")
        onnx.save(m, path)
        p = subprocess.run([opc, path, "-o", os.path.join(work, "error.c")] + sum(args, []),
                           capture_output=True, text=True)
        checked += 1
        if p.returncode != 2 or text not in p.stderr or "error.onnx" not in p.stderr:
            failures.append(f"error '{name}': exit {p.returncode}, want 2 and {text!r}; got "
                            f"{p.stderr.strip()[-400:]!r}")
    for f in failures:
        print("FAIL " + f)
    print(f"sequences: {checked} checks, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
