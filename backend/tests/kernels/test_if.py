#!/usr/bin/env python3
"""If whose condition is run-time data, as torch.cond exports it: one
OP_IF node owning both branches, run as a CUDA-graph IF node with two
bodies, or with --no-cuda-graph by the host reading the condition
(backend/if.c), so that only the branch taken runs; an If whose branch
needs cuDNN or cuBLAS keeps IfSelect (frontend/onnx.c's select_branches:
both branches run, each output taken from the one the condition picks).

usage: test_if.py OPC WORK_DIR

One program holds every case, compiled with the CUDA graph and with
--no-cuda-graph, under the runtime's checker (OPC_CHECK=1), its net.c also
built against the real CUDA 13 headers with -Werror (onnx_case), against
ONNX Runtime: the int64 outputs exactly, the float ones within 1e-6 of
their largest magnitude (Sigmoid may round differently by an ulp):
- the condition computed from the data (ReduceSum(x) > 0), taken both
  ways by two inputs of opposite sums;
- branches that read the outer graph's values, hold initializers of
  their own, return an outer value as it is, and give an int64 output;
- an If nested in a branch, its condition computed from the data too;
- the condition a graph input of shape [1], true and false;
- a guard, as detectors write one: the then branch Gathers at an index
  only when it is in range (idx < 4); with idx 7 the untaken branch's
  Gather is out of range, which ONNX Runtime refuses to run. opc's kernels
  never fail on data (its Gather clamps, as ONNX leaves such indices
  undefined), so this checks the values; that the untaken body never
  runs is the IF node's (runtime/tests/test_conditional.c);
- a branch with a Conv, which a conditional body cannot call (cuDNN): it
  keeps IfSelect, both ways, and --report says so, naming the node;
- branches that read a NonZero's output, of run-time size: IfSelect too.
--report must name each other top-level If a CUDA-graph IF node.
Negative control: ONNX Runtime's outputs for the same model with the
branches swapped must differ from the program's in every case.
torch_cond.onnx beside this script is a real torch.cond export (torch
2.15's dynamo exporter, opset 18, by tools/models/torch_survey.py's
export_cond): x * 2 where x sums above 0, else x - 1. It must be an IF
node (--report), and its program runs on an x of each sign, exactly
against ONNX Runtime, with the CUDA graph, with --no-cuda-graph and with
--gpus 2 (which makes the branches again as IfSelects, and says so); each
output must differ from the other branch's. Refused
with a clear error: branches whose outputs have different shapes, and a
branch count that does not match the node's outputs.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, compare_exact, reference, run_opc  # noqa: E402

SHAPE = [2, 3]
rng = np.random.default_rng(49)


def tensor_out(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, SHAPE if shape is None else shape)


def branch(p, kind, swap_inner=False):
    """The then (kind "then") or else branch of case p: output 0 float
    [2, 3], output 1 int64 [2, 1]."""
    if kind == "then":
        w = numpy_helper.from_array(np.array([[1.5, -2.0, 0.5]], np.float32), p + "w_then")
        nodes = [helper.make_node("Mul", [p + "x", p + "w_then"], [p + "t1"]),
                 helper.make_node("Relu", [p + "t1"], [p + "t2"]),
                 helper.make_node("ArgMax", [p + "x"], [p + "t_idx"], axis=1)]
        return helper.make_graph(nodes, p + "then", [], [tensor_out(p + "t2"),
                                 tensor_out(p + "t_idx", TensorProto.INT64, [2, 1])], [w])
    nodes = [helper.make_node("Sigmoid", [p + "x"], [p + "e1"]),
             helper.make_node("Mul", [p + "e1", p + "w_outer"], [p + "e2"]),
             helper.make_node("ArgMin", [p + "x"], [p + "e_idx"], axis=1)]
    return helper.make_graph(nodes, p + "else", [], [tensor_out(p + "e2"),
                             tensor_out(p + "e_idx", TensorProto.INT64, [2, 1])])


def nested_then(p, swap):
    """A then branch whose float output is an inner If on max(x) > 1: the
    negated Relu, or x itself."""
    g = branch(p, "then")
    inner_then = helper.make_graph([helper.make_node("Neg", [p + "t2"], [p + "n1"])],
                                   p + "inner_then", [], [tensor_out(p + "n1")])
    inner_else = helper.make_graph([helper.make_node("Identity", [p + "x"], [p + "n2"])],
                                   p + "inner_else", [], [tensor_out(p + "n2")])
    if swap:
        inner_then, inner_else = inner_else, inner_then
    g.node.extend([
        helper.make_node("ReduceMax", [p + "x"], [p + "xmax"], keepdims=0),
        helper.make_node("Greater", [p + "xmax", p + "one"], [p + "c2"]),
        helper.make_node("If", [p + "c2"], [p + "inner"], then_branch=inner_then,
                         else_branch=inner_else, name=p + "inner_if")])
    g.initializer.append(numpy_helper.from_array(np.array(1.0, np.float32), p + "one"))
    g.output[0].CopyFrom(tensor_out(p + "inner"))
    return g


def case_nodes(p, cond_input, nested, swap):
    """Nodes, inputs and outputs of case p; the condition is a graph input
    or ReduceSum(x) > 0."""
    inputs = [helper.make_tensor_value_info(p + "x", TensorProto.FLOAT, SHAPE)]
    nodes = []
    if cond_input:
        inputs.append(helper.make_tensor_value_info(p + "cond", TensorProto.BOOL, [1]))
    else:
        nodes += [helper.make_node("ReduceSum", [p + "x"], [p + "sum"], keepdims=0),
                  helper.make_node("Greater", [p + "sum", p + "zero"], [p + "cond"])]
    then_g = nested_then(p, swap) if nested else branch(p, "then")
    else_g = branch(p, "else")
    if swap:
        then_g, else_g = else_g, then_g
    nodes.append(helper.make_node("If", [p + "cond"], [p + "y", p + "idx"], then_branch=then_g,
                                  else_branch=else_g, name=p + "if"))
    outputs = [tensor_out(p + "y"), tensor_out(p + "idx", TensorProto.INT64, [2, 1])]
    return nodes, inputs, outputs


def guard_nodes(p):
    """y = Gather(data, idx) * 2 where idx < 4, else the data reversed: the
    then branch reads out of range when the condition is false."""
    then_g = helper.make_graph(
        [helper.make_node("Gather", [p + "data", p + "idx"], [p + "picked"], axis=0),
         helper.make_node("Mul", [p + "picked", p + "two"], [p + "g1"])],
        p + "then", [], [tensor_out(p + "g1", shape=[1])])
    else_g = helper.make_graph(
        [helper.make_node("Slice", [p + "data", p + "s_start", p + "s_end"], [p + "g2"])],
        p + "else", [], [tensor_out(p + "g2", shape=[1])])
    nodes = [helper.make_node("Less", [p + "idx", p + "four"], [p + "ok"]),
             helper.make_node("Squeeze", [p + "ok"], [p + "cond"]),
             helper.make_node("If", [p + "cond"], [p + "y"], then_branch=then_g,
                              else_branch=else_g, name=p + "if")]
    inputs = [helper.make_tensor_value_info(p + "data", TensorProto.FLOAT, [4]),
              helper.make_tensor_value_info(p + "idx", TensorProto.INT64, [1])]
    inits = [numpy_helper.from_array(np.array([4], np.int64), p + "four"),
             numpy_helper.from_array(np.array(2.0, np.float32), p + "two"),
             numpy_helper.from_array(np.array([3], np.int64), p + "s_start"),
             numpy_helper.from_array(np.array([4], np.int64), p + "s_end")]
    return nodes, inputs, [tensor_out(p + "y", shape=[1])], inits


def conv_nodes(p):
    """A then branch with a Conv (cuDNN), the else a Relu: IfSelect."""
    shape = [1, 1, 2, 2]
    then_g = helper.make_graph([helper.make_node("Conv", [p + "v", p + "w"], [p + "c1"],
                                                 name=p + "conv")],
                               p + "then", [], [tensor_out(p + "c1", shape=shape)])
    else_g = helper.make_graph([helper.make_node("Relu", [p + "v"], [p + "c2"])], p + "else", [],
                               [tensor_out(p + "c2", shape=shape)])
    nodes = [helper.make_node("If", [p + "cond"], [p + "y"], then_branch=then_g,
                              else_branch=else_g, name=p + "if")]
    inputs = [helper.make_tensor_value_info(p + "v", TensorProto.FLOAT, shape),
              helper.make_tensor_value_info(p + "cond", TensorProto.BOOL, [])]
    inits = [numpy_helper.from_array(np.full((1, 1, 1, 1), -1.5, np.float32), p + "w")]
    return nodes, inputs, [tensor_out(p + "y", shape=shape)], inits


def bounded_read_nodes(p):
    """Branches that read NonZero's output, of run-time size, and reduce
    it to one value: IfSelect, as the IF node copies static values in."""
    i64 = TensorProto.INT64
    then_g = helper.make_graph([helper.make_node("ReduceSum", [p + "nz"], [p + "s1"], keepdims=0)],
                               p + "then", [], [tensor_out(p + "s1", i64, [])])
    else_g = helper.make_graph([helper.make_node("ReduceMax", [p + "nz"], [p + "s2"], keepdims=0)],
                               p + "else", [], [tensor_out(p + "s2", i64, [])])
    nodes = [helper.make_node("NonZero", [p + "v"], [p + "nz"]),
             helper.make_node("If", [p + "cond"], [p + "y"], then_branch=then_g,
                              else_branch=else_g, name=p + "if")]
    inputs = [helper.make_tensor_value_info(p + "v", TensorProto.FLOAT, [6]),
              helper.make_tensor_value_info(p + "cond", TensorProto.BOOL, [])]
    return nodes, inputs, [tensor_out(p + "y", i64, [])], []


# name, its nodes, its feeds
EXTRA = [
    ("guard_in", guard_nodes, {"data": np.array([1, -2, 3, 4.5], np.float32),
                               "idx": np.array([2], np.int64)}),
    ("guard_out", guard_nodes, {"data": np.array([1, -2, 3, 4.5], np.float32),
                                "idx": np.array([7], np.int64)}),
    ("conv_true", conv_nodes, {"v": np.array([[[[1, -2], [3, -4]]]], np.float32),
                               "cond": np.array(True)}),
    ("conv_false", conv_nodes, {"v": np.array([[[[1, -2], [3, -4]]]], np.float32),
                                "cond": np.array(False)}),
    ("bounded_true", bounded_read_nodes, {"v": np.array([0, 1, 0, 2, 3, 0], np.float32),
                                          "cond": np.array(True)}),
    ("bounded_false", bounded_read_nodes, {"v": np.array([0, 1, 0, 2, 3, 0], np.float32),
                                           "cond": np.array(False)}),
]

# Why --report says an If keeps IfSelect, by case name; the others are IF nodes.
WHY_SELECT = {
    "conv_true": "its then branch's node 'conv_true_conv' (Conv) runs with cuDNN or cuBLAS",
    "conv_false": "its then branch's node 'conv_false_conv' (Conv) runs with cuDNN or cuBLAS",
    "bounded_true": "its then branch reads 'bounded_true_nz', whose size is known only at run "
                    "time",
    "bounded_false": "its then branch reads 'bounded_false_nz', whose size is known only at run "
                     "time",
}

# name, the condition a graph input, nested, the feeds (x, and cond)
CASES = [
    ("sum_positive", False, False, {"x": rng.normal(0.5, 1, SHAPE) + 0.5}),
    ("sum_negative", False, False, {"x": rng.normal(-0.5, 1, SHAPE) - 0.5}),
    ("nested_big", False, True, {"x": np.array([[2.0, -1, 0.5], [0.25, 3, -0.5]])}),
    ("nested_small", False, True, {"x": np.array([[0.5, -0.25, 0.75], [0.1, 0.9, 0.2]])}),
    ("input_true", True, False, {"x": rng.normal(0, 1, SHAPE), "cond": np.array([True])}),
    ("input_false", True, False, {"x": rng.normal(0, 1, SHAPE), "cond": np.array([False])}),
]


def if_model(swap=False):
    nodes, inputs, outputs = [], [], []
    inits = []
    for name, cond_input, nested, _ in CASES:
        p = name + "_"
        n, i, o = case_nodes(p, cond_input, nested, swap)
        nodes += n
        inputs += i
        outputs += o
        inits += [numpy_helper.from_array(np.array([[0.5], [-3.0]], np.float32), p + "w_outer"),
                  numpy_helper.from_array(np.array(0.0, np.float32), p + "zero")]
    for name, make, _ in EXTRA:
        n, i, o, w = make(name + "_")
        nodes += n
        inputs += i
        outputs += o
        inits += w
    return onnx_case.model(nodes, inputs, outputs, inits, opset=13, name="if_select")


def feeds():
    f = {}
    for name, *_, values in CASES + EXTRA:
        for k, v in values.items():
            f[name + "_" + k] = v.astype(np.float32) if v.dtype == np.float64 else v
    return f


def mismatched_shapes():
    """Branches giving [2, 3] and [3, 2]."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"])], "then", [],
                               [tensor_out("a")])
    else_g = helper.make_graph([helper.make_node("Transpose", ["x"], ["b"])], "else", [],
                               [tensor_out("b", shape=[3, 2])])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE),
              helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    return onnx_case.model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                         None)])


def missing_output():
    """The else branch has one output, the node two."""
    m = if_model()
    node = m.graph.node[2]  # the first case's If
    one = next(a.g for a in node.attribute if a.name == "else_branch")
    del one.output[1]
    return m


def report_lines(opc, m, work, flags=()):
    """The If lines --report prints for m, or a string saying why none."""
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    p = subprocess.run([opc, path, "-o", os.path.join(work, "report_net.c"), "--report", *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return f"opc --report exited with {p.returncode}: {(p.stdout + p.stderr)[-400:]}"
    return [line for line in p.stdout.splitlines() if line.startswith("If '")]


def check_report(opc, m, work):
    """Each top-level If an IF node but WHY_SELECT's, which say why not."""
    lines = report_lines(opc, m, work)
    if isinstance(lines, str):
        return [lines]
    failures = []
    for name, *_ in CASES + EXTRA:
        want = (f"If '{name}_if': both branches run (IfSelect): {WHY_SELECT[name]}"
                if name in WHY_SELECT else "a CUDA-graph IF node")
        mine = [line for line in lines if line.startswith(f"If '{name}_")
                and "inner" not in line]
        if len(mine) != 1 or want not in mine[0]:
            failures.append(f"--report for {name}: expected one line with '{want}', got {mine}")
    return failures


def check_torch_cond(opc, work):
    """Failures of the real torch.cond export on an x of each sign, with the
    CUDA graph and without; --report must call its If an IF node."""
    m = onnx.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_cond.onnx"))
    lines = report_lines(opc, m, os.path.join(work, "torch_cond"))
    if isinstance(lines, str) or len(lines) != 1 or "a CUDA-graph IF node" not in lines[0]:
        return [f"torch_cond: --report should name its one If an IF node: {lines}"]
    lines = report_lines(opc, m, os.path.join(work, "torch_cond-gpus"), ("--gpus", "2"))
    if isinstance(lines, str) or len(lines) != 1 or "--gpus runs no conditional nodes" not in lines[0]:
        return [f"torch_cond --gpus 2: --report should say both branches run: {lines}"]
    failures = []
    for flags in ((), ("--no-cuda-graph",), ("--gpus", "2")):
        label = "torch_cond " + (" ".join(flags) or "CUDA graph")
        exe, why = onnx_case.compile_cpu(opc, m, os.path.join(work, "torch_cond"), flags)
        if why:
            return [f"{label}: opc refused it: {why}"]
        x = np.array([[0.5, -1.25, 2.0], [1.5, -0.75, 3.0]], np.float32)
        for sign in (1, -1):
            f = {"x": sign * x}
            got = onnx_case.run_program(exe, m, f, os.path.join(work, "torch_cond"))
            if isinstance(got, str):
                return [f"{label}: {got}"]
            name = m.graph.output[0].name
            why = compare_exact(got[name], reference(m, f)[name])
            other = sign * x * 2 if sign < 0 else sign * x - 1  # the branch not taken
            if why:
                failures.append(f"{label}, x of sign {sign}: {why}")
            elif compare_exact(got[name], other.astype(np.float32)) is None:
                failures.append(f"{label}, x of sign {sign}: the other branch matches too")
    return failures


def check_program(opc, m, f, want, work, flags):
    """The program of m with `flags` against ONNX Runtime's outputs."""
    label = " ".join(flags) or "CUDA graph"
    got, why = run_opc(opc, m, f, work, flags)
    if why:
        return [f"{label}: {why}"]
    failures = []
    why = onnx_case.real_cuda_compile(opc, m, work + "-cuda", flags)
    if why:
        failures.append(f"{label}: {why}")
    for o in m.graph.output:
        compare = compare_close if want[o.name].dtype == np.float32 else compare_exact
        why = compare(got[o.name], want[o.name], *(() if compare is compare_exact else (1e-6,)))
        if why:
            failures.append(f"{label}, {o.name}: {why}")
    # Negative control: the branches swapped.
    swapped = reference(if_model(swap=True), f)
    for name, *_ in CASES:
        if compare_close(got[name + "_y"], swapped[name + "_y"], 1e-3) is None:
            failures.append(f"{label}, {name}: the reference with the branches swapped matches too")
    return failures


def main():
    opc, work = sys.argv[1:3]
    os.environ["OPC_CHECK"] = "1"
    failures = check_torch_cond(opc, work)
    m, f = if_model(), feeds()
    want = reference(m, f)
    failures += check_report(opc, m, os.path.join(work, "report"))
    failures += check_program(opc, m, f, want, os.path.join(work, "program"), ())
    failures += check_program(opc, m, f, want, os.path.join(work, "no-graph"),
                              ("--no-cuda-graph",))
    refusals = [
        ("branches of two shapes", mismatched_shapes(), "have one shape"),
        ("a branch with too few outputs", missing_output(), "the else branch has 1 outputs"),
    ]
    return onnx_case.finish(opc, failures, refusals, work,
                            f"if: {len(CASES) + len(EXTRA)} cases match ONNX Runtime, both ways "
                            "of each condition, with the CUDA graph and without; the index guard "
                            "matches; the Conv's Ifs and those reading a NonZero keep "
                            "IfSelect and says why; the swapped branches differ in every case; "
                            "a real torch.cond export is an IF node and matches both ways; "
                            "both bad models are refused")


if __name__ == "__main__":
    sys.exit(main())
