#!/usr/bin/env python3
"""End-to-end tests of the code generator on the CPU runtime.

usage: test_backend.py OPC GROUP [--work DIR]

Each case builds a small ONNX model with onnx.helper, compiles it with
`opc --target cpu`, runs the program on random inputs and compares every
output with ONNX Runtime. Other groups check the program's interface: the
weights file, --prefix, --embed-weights, --no-cuda-graph, errors and exit
statuses, multi-stream schedules under the runtime's race checker, and two
prefixed models linked into one program and run from several threads. The
"copies" group checks how strided copies are printed as well as their values.
"""
import ctypes
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)
FAILURES = []


def fail(name, message):
    FAILURES.append(name)
    print("FAIL %s: %s" % (name, message), flush=True)


def ok(name):
    print("ok   %s" % name, flush=True)


def value_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(name, nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, name, [value_info(n, s) for n, s in inputs],
                              [value_info(n, s) for n, s in outputs], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset <= 18 else 10  # opset 24 came with IR version 10
    onnx.checker.check_model(m)
    return m


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def write_npy(path, array):
    np.save(path, np.ascontiguousarray(array, dtype=np.float32))


class Case:
    def __init__(self, opc, work):
        self.opc = opc
        self.work = work

    def compile(self, name, m, extra=(), target="cpu"):
        d = os.path.join(self.work, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        path = os.path.join(d, "model.onnx")
        onnx.save(m, path)
        exe = os.path.join(d, "net")
        p = run([self.opc, path, "-o", exe, "--target", target] + list(extra))
        return d, exe, p

    def build_user(self, d, source, c_files, extra=()):
        """Writes `source` to d/user.c and links it with the emitted files
        `c_files` (OPC_NO_MAIN) against the CPU runtime, warnings as errors.
        Returns (path of the program, the compiler's CompletedProcess)."""
        src = os.path.join(d, "user.c")
        with open(src, "w") as f:
            f.write(source)
        cflags = run([self.opc, "--cflags", "cpu"]).stdout.split()
        libs = run([self.opc, "--libs", "cpu"]).stdout.split()
        user = os.path.join(d, "user")
        p = run([os.environ.get("CC", "cc"), "-Wall", "-Wextra", "-Werror", "-DOPC_NO_MAIN", "-I", d]
                + cflags + [src] + [os.path.join(d, c) for c in c_files] + ["-o", user]
                + list(extra) + libs)
        return user, p

    def check(self, name, m, extra=(), atol=1e-4, env=None):
        """Compiles, runs and compares every output with ONNX Runtime."""
        d, exe, p = self.compile(name, m, extra)
        if p.returncode != 0:
            return fail(name, "opc failed: " + p.stderr.strip())
        feeds, cmd = {}, [exe]
        for i in m.graph.input:
            shape = [dim.dim_value for dim in i.type.tensor_type.shape.dim]
            x = RNG.standard_normal(shape).astype(np.float32)
            feeds[i.name] = x
            path = os.path.join(d, "in_%s.npy" % i.name)
            write_npy(path, x)
            cmd += ["--input", "%s=%s" % (i.name, path)]
        for k, o in enumerate(m.graph.output):
            cmd += ["--output", "%s=%s" % (o.name, os.path.join(d, "out%d.npy" % k))]
        p = run(cmd, env=env)
        if p.returncode != 0:
            return fail(name, "program exited with %d: %s" % (p.returncode, p.stderr.strip()))
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = sess.run(None, feeds)
        for k, want in enumerate(expected):
            got = np.load(os.path.join(d, "out%d.npy" % k))
            if got.shape != want.shape:
                return fail(name, "output %d has shape %s, expected %s" % (k, got.shape, want.shape))
            err = np.abs(got - want) - atol * (1 + np.abs(want))
            if not np.all(err <= 0):
                return fail(name, "output %d differs by up to %g" % (k, float(np.max(np.abs(got - want)))))
        ok(name)
        os.remove(exe)  # a failing case's program stays to be looked at


# ---------------------------------------------------------------- ops


def conv_models():
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    yield "conv_bias_relu", model("g", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"])],
        [("x", [1, 3, 8, 8])], [("y", [1, 4, 8, 8])], [const("w", w), const("b", b)])
    yield "conv_asymmetric_pads_stride", model("g", [
        helper.make_node("Conv", ["x", "w"], ["y"], pads=[0, 1, 2, 1], strides=[2, 1])],
        [("x", [2, 3, 7, 6])], [("y", [2, 4, 4, 6])], [const("w", w)])
    wg = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
    yield "conv_groups_dilation", model("g", [
        helper.make_node("Conv", ["x", "w"], ["y"], group=3, dilations=[2, 2], pads=[2, 2, 2, 2])],
        [("x", [1, 6, 9, 9])], [("y", [1, 6, 9, 9])], [const("w", wg)])
    w1 = RNG.standard_normal((5, 3, 3)).astype(np.float32)
    yield "conv_1d", model("g", [
        helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 0], strides=[2])],
        [("x", [1, 3, 11])], [("y", [1, 5, 5])], [const("w", w1)])
    w3 = RNG.standard_normal((2, 3, 2, 2, 2)).astype(np.float32)
    yield "conv_3d", model("g", [helper.make_node("Conv", ["x", "w"], ["y"])],
                           [("x", [1, 3, 4, 4, 4])], [("y", [1, 2, 3, 3, 3])], [const("w", w3)])
    z = model("g", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "r"], ["s"]),
        helper.make_node("Sigmoid", ["s"], ["y"])],
        [("x", [1, 3, 5, 5]), ("r", [1, 4, 5, 5])], [("y", [1, 4, 5, 5])],
        [const("w", w), const("b", b)])
    yield "conv_residual_sigmoid", z
    yield "conv_clip", model("g", [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
        [("x", [1, 3, 5, 5])], [("y", [1, 4, 5, 5])],
        [const("w", w), const("lo", np.float32(-0.5)), const("hi", np.float32(0.75))])
    yield "conv_leaky", model("g", [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.2)],
        [("x", [1, 3, 5, 5])], [("y", [1, 4, 3, 3])], [const("w", w)])
    wt = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    yield "conv_transpose", model("g", [
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                         output_padding=[1, 1])],
        [("x", [1, 3, 4, 4])], [("y", [1, 2, 8, 8])], [const("w", wt), const("b", b[:2])])
    yield "conv_transpose_asymmetric", model("g", [
        helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[0, 2, 1, 0])],
        [("x", [1, 3, 4, 4])], [("y", [1, 2, 8, 7])], [const("w", wt)])


def misc_models():
    yield "pool_max_avg", model("g", [
        helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["a"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=0)],
        [("x", [1, 2, 9, 9])], [("y", [1, 2, 6, 6])])
    yield "global_pools", model("g", [
        helper.make_node("GlobalAveragePool", ["x"], ["a"]),
        helper.make_node("GlobalMaxPool", ["x"], ["b"])],
        [("x", [2, 3, 5, 4])], [("a", [2, 3, 1, 1]), ("b", [2, 3, 1, 1])])
    yield "softmax_13", model("g", [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                              [("x", [2, 3, 4])], [("y", [2, 3, 4])])
    yield "logsoftmax_11", model("g", [helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)],
                                 [("x", [2, 3, 4])], [("y", [2, 3, 4])], opset=11)
    yield "lrn", model("g", [helper.make_node("LRN", ["x"], ["y"], size=3, alpha=2e-4, beta=0.75, bias=2.0)],
                       [("x", [1, 5, 3, 3])], [("y", [1, 5, 3, 3])])
    c = 4
    yield "batchnorm", model("g", [
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
        [("x", [2, c, 3, 3])], [("y", [2, c, 3, 3])],
        [const("s", RNG.standard_normal(c).astype(np.float32)), const("b", RNG.standard_normal(c).astype(np.float32)),
         const("m", RNG.standard_normal(c).astype(np.float32)), const("v", RNG.random(c).astype(np.float32) + 0.5)])
    yield "activations", model("g", [
        helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Tanh", ["a"], ["b"]),
        helper.make_node("Elu", ["x"], ["d"], alpha=0.5), helper.make_node("Sigmoid", ["d"], ["y"])],
        [("x", [2, 3, 4])], [("b", [2, 3, 4]), ("y", [2, 3, 4])])
    yield "swish_24", model("g", [
        helper.make_node("Swish", ["x"], ["a"]), helper.make_node("Swish", ["x"], ["y"], alpha=1.7)],
        [("x", [2, 3, 4])], [("a", [2, 3, 4]), ("y", [2, 3, 4])], opset=24)
    yield "arith_broadcast", model("g", [
        helper.make_node("Add", ["x", "bias"], ["a"]), helper.make_node("Sub", ["bias", "a"], ["s"]),
        helper.make_node("Mul", ["s", "x"], ["m"]), helper.make_node("Max", ["m", "x", "r"], ["y"])],
        [("x", [2, 3, 4]), ("r", [3, 1])], [("y", [2, 3, 4])],
        [const("bias", RNG.standard_normal(4).astype(np.float32))])
    yield "reduce", model("g", [
        helper.make_node("ReduceMean", ["x"], ["a"], axes=[1], keepdims=1),
        helper.make_node("ReduceMax", ["x"], ["b"], axes=[0, 2], keepdims=0),
        helper.make_node("ReduceSum", ["x", "ax"], ["d"], keepdims=0)],
        [("x", [2, 3, 4])], [("a", [2, 1, 4]), ("b", [3]), ("d", [2, 4])],
        [const("ax", np.array([1], dtype=np.int64))])
    yield "gemm_broadcast_c", model("g", [
        helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0, transA=1)],
        [("a", [5, 3]), ("b", [5, 4])], [("y", [3, 4])],
        [const("c", RNG.standard_normal((1, 4)).astype(np.float32))])
    yield "gemm_relu", model("g", [
        helper.make_node("Gemm", ["a", "w", "c"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])],
        [("a", [2, 6])], [("y", [2, 5])],
        [const("w", RNG.standard_normal((5, 6)).astype(np.float32)),
         const("c", RNG.standard_normal((2, 5)).astype(np.float32))])
    yield "matmul_batched", model("g", [
        helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("MatMul", ["m", "w"], ["y"])],
        [("a", [2, 3, 4, 5]), ("b", [5, 6])], [("m", [2, 3, 4, 6]), ("y", [2, 3, 4, 2])],
        [const("w", RNG.standard_normal((6, 2)).astype(np.float32))])
    yield "matmul_broadcast_a", model("g", [helper.make_node("MatMul", ["a", "b"], ["y"])],
                                      [("a", [4, 5]), ("b", [3, 5, 2])], [("y", [3, 4, 2])])
    yield "matmul_vector", model("g", [helper.make_node("MatMul", ["a", "b"], ["y"])],
                                 [("a", [5]), ("b", [2, 5, 3])], [("y", [2, 3])])
    yield "data_movement", model("g", [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Concat", ["t", "t"], ["c"], axis=2),
        helper.make_node("Split", ["c"], ["s1", "s2"], axis=1),
        helper.make_node("Slice", ["s1", "st", "en", "ax", "sp"], ["y"]),
        helper.make_node("Flatten", ["s2"], ["f"], axis=2)],
        [("x", [2, 3, 4, 5])], [("y", [2, 1, 10, 3]), ("f", [4, 30])],
        [const("st", np.array([1, 0], dtype=np.int64)), const("en", np.array([4, 100], dtype=np.int64)),
         const("ax", np.array([1, 2], dtype=np.int64)), const("sp", np.array([2, 1], dtype=np.int64))])


def if_models():
    """If on a condition computed from shapes, as exporters write it: the
    importer inlines the taken branch, which reads outer values (x, bias)."""
    def branch(name, nodes, out):
        return helper.make_graph(nodes, name, [], [value_info(out, [2, 3, 4])])
    then_gp = branch("then", [helper.make_node("Mul", ["x", "bias"], ["tm"]),
                              helper.make_node("Tanh", ["tm"], ["t"])], "t")
    else_gp = branch("else", [helper.make_node("Neg", ["x"], ["e"])], "e")
    for dim, taken in ((2, "then"), (5, "else")):
        yield "if_shape_" + taken, model("g", [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
            helper.make_node("Equal", ["d0", "k"], ["c"]),
            helper.make_node("If", ["c"], ["i"], then_branch=then_gp, else_branch=else_gp),
            helper.make_node("Sigmoid", ["i"], ["y"])],
            [("x", [2, 3, 4])], [("y", [2, 3, 4])],
            [const("zero", np.array(0, dtype=np.int64)), const("k", np.array(dim, dtype=np.int64)),
             const("bias", RNG.standard_normal(4).astype(np.float32))], opset=17)


def loop_models():
    """Loop with a trip count known at compile time (an initializer, and one
    computed from a shape), unrolled by the importer: a loop-carried value
    that reads an outer one and the iteration number, a body condition, and
    a scan output stacked along a new axis."""
    body = helper.make_graph([
        helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["v_in", "w"], ["vw"]),
        helper.make_node("Add", ["vw", "fi"], ["v_out"]),
        helper.make_node("Tanh", ["v_out"], ["scan"]),
        helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), value_info("v_in", [2, 3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), value_info("v_out", [2, 3]),
         value_info("scan", [2, 3])])
    w = const("w", (0.5 * RNG.standard_normal((2, 3))).astype(np.float32))
    yield "loop_constant_count", model("g", [
        helper.make_node("Loop", ["m", "", "x"], ["v", "s"], body=body)],
        [("x", [2, 3])], [("v", [2, 3]), ("s", [4, 2, 3])],
        [const("m", np.array(4, dtype=np.int64)), w], opset=17)
    yield "loop_shape_count", model("g", [
        helper.make_node("Shape", ["x"], ["sh"]),
        helper.make_node("Gather", ["sh", "one"], ["m"], axis=0),
        helper.make_node("Loop", ["m", "t", "x"], ["v", "s"], body=body)],
        [("x", [2, 3])], [("v", [2, 3]), ("s", [3, 2, 3])],
        [const("one", np.array(1, dtype=np.int64)), const("t", np.array(True)), w], opset=17)


def scan_models():
    """Scan, unrolled by the importer (frontend/scan.c): a state that reads
    an outer value, two scan inputs on different axes, one of them read in
    reverse, and scan outputs stacked on axis 0, on a negative axis, and in
    reverse; then opset 8's form, a batch axis first, read in reverse."""
    body = helper.make_graph([
        helper.make_node("Mul", ["h_in", "w"], ["hw"]),
        helper.make_node("Add", ["hw", "a_t"], ["ha"]),
        helper.make_node("Add", ["ha", "b_t"], ["hb"]),
        helper.make_node("Tanh", ["hb"], ["h_out"]),
        helper.make_node("Sub", ["h_out", "a_t"], ["d"])], "body",
        [value_info("h_in", [2, 3]), value_info("a_t", [2, 3]), value_info("b_t", [2, 3])],
        [value_info("h_out", [2, 3]), value_info("h_seen", [2, 3]), value_info("d", [2, 3])])
    body.node.append(helper.make_node("Identity", ["h_out"], ["h_seen"]))
    yield "scan_axes_directions", model("g", [
        helper.make_node("Scan", ["h", "a", "b"], ["hn", "s0", "s1"], body=body, num_scan_inputs=2,
                         scan_input_axes=[0, 1], scan_input_directions=[0, 1],
                         scan_output_axes=[0, -1], scan_output_directions=[0, 1])],
        [("h", [2, 3]), ("a", [5, 2, 3]), ("b", [2, 5, 3])],
        [("hn", [2, 3]), ("s0", [5, 2, 3]), ("s1", [2, 3, 5])],
        [const("w", (0.7 * RNG.standard_normal((2, 3))).astype(np.float32))], opset=17)
    body8 = helper.make_graph([
        helper.make_node("Mul", ["x_t", "w"], ["xw"]),
        helper.make_node("Add", ["s_in", "xw"], ["s_out"]),
        helper.make_node("Relu", ["s_out"], ["r"])], "body8",
        [value_info("s_in", [3]), value_info("x_t", [3])],
        [value_info("s_out", [3]), value_info("r", [3])])
    yield "scan_opset8_batch", model("g", [
        helper.make_node("Scan", ["", "s", "x"], ["sn", "rs"], body=body8, num_scan_inputs=1,
                         directions=[1])],
        [("s", [2, 3]), ("x", [2, 4, 3])], [("sn", [2, 3]), ("rs", [2, 4, 3])],
        [const("w", (0.7 * RNG.standard_normal(3)).astype(np.float32))], opset=8)


def preactivation_models():
    """BatchNormalization -> Relu and -> Clip on a value no Conv makes (a
    pre-activation, as in DenseNet): fold-batchnorm folds the mean into the
    bias, and opc's kernel runs the BN and its activation in one launch."""
    params = [const("scale", (1 + 0.5 * RNG.standard_normal(4)).astype(np.float32)),
              const("bias", (0.5 * RNG.standard_normal(4)).astype(np.float32)),
              const("mean", (0.5 * RNG.standard_normal(4)).astype(np.float32)),
              const("var", (0.5 + RNG.random(4)).astype(np.float32))]
    bn = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["b"])
    yield "batchnorm_relu", model("g", [bn, helper.make_node("Relu", ["b"], ["y"])],
                                  [("x", [1, 4, 5, 5])], [("y", [1, 4, 5, 5])], params)
    yield "batchnorm_clip", model("g", [bn, helper.make_node("Clip", ["b", "lo", "hi"], ["y"])],
                                  [("x", [1, 4, 5, 5])], [("y", [1, 4, 5, 5])],
                                  params + [const("lo", np.array(-0.5, np.float32)),
                                            const("hi", np.array(1.0, np.float32))])


def group_ops(case):
    for name, m in list(conv_models()) + list(misc_models()) + list(if_models()) + \
            list(loop_models()) + list(scan_models()) + list(preactivation_models()):
        case.check(name, m)


# -------------------------------------------------------- strided copies


def ints(*values):
    return np.array(values, dtype=np.int64)


def slice_model(shape, out, starts, ends, axes, steps):
    return model("g", [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
                 [("x", shape)], [("y", out)],
                 [const("st", ints(*starts)), const("en", ints(*ends)), const("ax", ints(*axes)),
                  const("sp", ints(*steps))])


def copy_models():
    """(name, model, whether long contiguous rows should stay cudaMemcpy2DAsync)."""
    yield "slice_step2_last_axis", slice_model([2, 3, 8, 8], [2, 3, 8, 4], [1], [8], [3], [2]), False
    yield "slice_short_rows", slice_model([2, 3, 4, 10], [2, 3, 4, 3], [2], [5], [3], [1]), False
    yield "slice_negative_step", slice_model([3, 10], [3, 4], [-1], [-100], [1], [-3]), False
    yield "slice_long_rows", slice_model([2, 4, 40], [2, 2, 40], [1], [3], [1], [1]), True
    yield "concat_last_axis", model("g", [helper.make_node("Concat", ["a", "b"], ["y"], axis=3)],
                                    [("a", [2, 3, 4, 2]), ("b", [2, 3, 4, 3])],
                                    [("y", [2, 3, 4, 5])]), False
    yield "split_last_axis", model("g", [helper.make_node("Split", ["x"], ["p", "q"], axis=2)],
                                   [("x", [2, 4, 6])], [("p", [2, 4, 3]), ("q", [2, 4, 3])]), False
    yield "transpose_last_two", model("g", [helper.make_node("Transpose", ["x"], ["y"],
                                                             perm=[0, 1, 3, 2])],
                                      [("x", [2, 3, 5, 7])], [("y", [2, 3, 7, 5])]), False


MIN_ROW = 16  # backend/ops_copy.c: shorter rows are copied by opc's kernel


def memcpy2d_widths(path):
    """The row width, in elements, of every cudaMemcpy2DAsync in net.c."""
    with open(path) as f:
        text = f.read()
    widths = []
    for args in re.findall(r"cudaMemcpy2DAsync\(([^;]*?)cudaMemcpyDeviceToDevice", text, re.S):
        width = re.match(r"\s*(\d+) \* sizeof\(float\)", args.split(",")[4])
        widths.append(int(width.group(1)) if width else -1)
    return widths


def group_copies(case):
    """Strided copies give the right values (under the race checker), and
    none is a cudaMemcpy2DAsync of short rows: a Slice with a step on the
    last axis was one with rows of one float, which is slow on a GPU."""
    env = dict(os.environ, OPC_CHECK="1")
    for name, m, long_rows in copy_models():
        case.check(name, m, env=env)
        path = os.path.join(case.work, name, "net.c")
        if not os.path.exists(path):
            continue
        widths = memcpy2d_widths(path)
        narrow = [w for w in widths if w < MIN_ROW]
        if narrow:
            fail(name + "_rows", "cudaMemcpy2DAsync with rows of %s element(s)" % narrow)
        elif long_rows and not widths:
            fail(name + "_rows", "long contiguous rows are no longer one cudaMemcpy2DAsync")
        else:
            ok(name + "_rows")


# ------------------------------------------------------- kernel loading


def group_kernel_loading(case):
    """opc's kernels are compiled to a CUBIN for the GPU's own SM, which a
    driver older than NVRTC loads: the CPU runtime's default (NVRTC 13.0, a
    12.8 driver, compute capability 9.0) is that case, where PTX is refused.
    PTX only for a GPU newer than NVRTC knows, with a clear error when the
    driver refuses it, and a clear error for a GPU older than NVRTC knows."""
    m = model("g", [helper.make_node("Softplus", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])])
    newer_gpu = {"OPC_RT_COMPUTE_CAPABILITY": "12.2"}  # NVRTC 13.0 knows up to sm_121
    case.check("kernels_cubin", m)
    case.check("kernels_ptx_fallback", m, env=dict(os.environ, OPC_RT_DRIVER_VERSION="13000",
                                                    **newer_gpu))
    path = os.path.join(case.work, "kernels_cubin", "net.c")
    if os.path.exists(path) and "nvrtcGetCUBIN(" not in open(path).read():
        fail("kernels_cubin_source", "net.c does not fetch a CUBIN")
    refusals = [
        ("kernels_ptx_old_driver", newer_gpu,
         ["cuModuleLoadData (PTX for compute_121", "unsupported toolchain"]),
        ("kernels_gpu_too_old", {"OPC_RT_COMPUTE_CAPABILITY": "7.0"},
         ["NVRTC cannot compile for this GPU (sm_70)"]),
    ]
    for name, env, words in refusals:
        d, exe, p = case.compile(name, m)
        if p.returncode != 0:
            fail(name, "opc failed: " + p.stderr.strip())
            continue
        p = run([exe], env=dict(os.environ, **env))
        if p.returncode == 0 or not all(w in p.stderr for w in words):
            fail(name, "exit %d, expected a failure saying %s: %s" % (p.returncode, words, p.stderr.strip()))
        else:
            ok(name)


# -------------------------------------------------------- the interface


def small_model():
    w = RNG.standard_normal((3, 2, 1, 1)).astype(np.float32)
    return model("small", [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
                 [("x", [1, 2, 3, 3])], [("y", [1, 3, 3, 3])], [const("w", w)]), w


def fnv1a64(data):
    h = 14695981039346656037
    for byte in data:
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def group_weights(case):
    """The weights file matches the layout documented in net.c, checked from the spec
    (the GPU program's: the CPU program stores its filters packed)."""
    m, w = small_model()
    d, exe, p = case.compile("weights_layout", m, target="stand-in")
    if p.returncode != 0:
        return fail("weights_layout", p.stderr)
    data = open(os.path.join(d, "net.weights"), "rb").read()
    body = w.astype("<f4").tobytes()
    padded = body + b"\0" * (-len(body) % 64)
    header = b"OPCW" + struct.pack("<III", 1, 1, 0) + struct.pack("<Q", len(padded))
    header += b"\0" * (64 - len(header))
    expected = header + padded + struct.pack("<Q", fnv1a64(padded))
    if data != expected:
        return fail("weights_layout", "net.weights differs from the documented layout")
    ok("weights_layout")
    # A damaged file is refused with the checksum message and exit status 2.
    damaged = bytearray(data)
    damaged[70] ^= 1
    bad = os.path.join(d, "damaged.weights")
    open(bad, "wb").write(bytes(damaged))
    p = run([exe, "--weights", bad])
    if p.returncode != 2 or "checksum" not in p.stderr:
        return fail("weights_damaged", "exit %d, stderr %r" % (p.returncode, p.stderr))
    ok("weights_damaged")
    p = run([exe, "--weights", os.path.join(d, "missing.weights")])
    if p.returncode != 2 or "net: error:" not in p.stderr:
        return fail("weights_missing", "exit %d, stderr %r" % (p.returncode, p.stderr))
    ok("weights_missing")


def group_options(case):
    m, _ = small_model()
    case.check("no_cuda_graph", m, ["--no-cuda-graph"])
    case.check("embed_weights", m, ["--embed-weights"])
    d, exe, p = case.compile("embed_weights", m, ["--embed-weights"])
    os.remove(os.path.join(d, "net.weights"))
    p2 = run([exe])
    if p.returncode != 0 or p2.returncode != 0:
        fail("embed_weights_standalone", p2.stderr)
    else:
        ok("embed_weights_standalone")
    d, exe, p = case.compile("prefix", m, ["--prefix", "tiny"])
    text = open(os.path.join(d, "net.h")).read() if p.returncode == 0 else ""
    if "int tiny_create(tiny_ctx **ctx" not in text or "net_" in text:
        fail("prefix", "net.h does not use the prefix: " + p.stderr)
    else:
        ok("prefix")
    # Bad arguments exit with 1, a wrong input shape too.
    d, exe, p = case.compile("arguments", m)
    for args in (["--bogus", "1"], ["--input", "nosuch=x.npy"], ["--bench"]):
        p = run([exe] + args)
        if p.returncode != 1:
            return fail("arguments", "%s: exit %d" % (args, p.returncode))
    wrong = os.path.join(d, "wrong.npy")
    write_npy(wrong, np.zeros((1, 2, 3, 4)))
    p = run([exe, "--input", "x=" + wrong])
    if p.returncode != 1 or "shape" not in p.stderr:
        return fail("arguments", "wrong shape: exit %d %r" % (p.returncode, p.stderr))
    trace = os.path.join(d, "trace.json")
    p = run([exe, "--trace", trace])
    try:
        events = json.load(open(trace))["traceEvents"] if p.returncode == 0 else []
    except ValueError:
        events = []
    # The model's nodes, and the copies into ONNX's order the CPU program
    # adds after its channels-last convolution (choose-layout).
    names = {node.name for node in m.graph.node} | {"y_to_nchw"}
    if not events or any(ev["name"] not in names or ev["dur"] < 0 for ev in events) or \
            "conv" not in {ev["name"] for ev in events}:
        return fail("trace", "exit %d, trace %r" % (p.returncode, events))
    ok("trace")
    p = run([exe, "--bench", "3", "--warmup", "1"])
    lines = p.stdout.splitlines()
    if p.returncode != 0 or len(lines) != 2 or not lines[0].startswith("device: ") or \
            not lines[1].startswith("latency_ms mean="):
        return fail("bench", p.stdout + p.stderr)
    # The GEMMs the CPU runtime loads: the GPU program's convolution takes
    # them (im2col and sgemm); the CPU program's is its own kernel.
    d, exe, p = case.compile("blas", m, target="stand-in")
    p = run([exe, "--bench", "1"])
    lines = p.stdout.splitlines()
    if p.returncode != 0 or not lines or not blas_kernels_chosen(exe, lines[0]):
        return False if p.returncode == 0 else fail("blas", p.stdout + p.stderr)
    ok("arguments")


def expected_openblas_core():
    """The OpenBLAS kernels for this CPU's features, from /proc/cpuinfo."""
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return "Sandybridge" if "avx" in flags else None


def onednn_installed():
    """Whether oneDNN's library, which the runtime prefers, can be loaded."""
    try:
        ctypes.CDLL("libdnnl.so.2")
        return True
    except OSError:
        return False


def bench_device(exe, **env_vars):
    """`net --bench 1` with env_vars set: (exit status, its output). An
    OPENBLAS_CORETYPE of the machine's own environment is left out, so
    that opc's choice is what the check sees unless a check sets one."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env.update(env_vars)
    p = subprocess.run([exe, "--bench", "1"], capture_output=True, text=True, env=env, timeout=120)
    return p.returncode, p.stdout + p.stderr


def blas_kernels_chosen(exe, device):
    """The CPU runtime's GEMMs run on oneDNN where it is installed, else on
    OpenBLAS loaded with the kernels of the CPU's features, whatever model
    name the CPU reports; OPC_BLAS chooses, and a user's OPENBLAS_CORETYPE
    wins over opc's choice of OpenBLAS kernels. Its own kernels are the
    build for the widest instruction set, unless OPC_KERNEL_ISA names a
    narrower one."""
    core = expected_openblas_core()
    want_openblas = ("OpenBLAS %s kernels, chosen by opc from the CPU's features" % core if core
                     else "chosen by OpenBLAS: no AVX")
    want_onednn = "sgemm, kernels generated from the CPU's features"
    isa = {"Cooperlake": "avx512", "SkylakeX": "avx512", "Haswell": "avx2"}.get(core, "x86-64")
    if "; %s kernels;" % isa not in device:
        return fail("blas", "expected opc's %s kernels in %r" % (isa, device))
    want = want_onednn if onednn_installed() else want_openblas
    if want not in device:
        return fail("blas", "expected %r in %r" % (want, device))
    rc, out = bench_device(exe, OPC_BLAS="openblas")
    if rc != 0 or want_openblas not in out:
        return fail("blas", "with OPC_BLAS=openblas: %r" % out)
    rc, out = bench_device(exe, OPC_BLAS="openblas", OPENBLAS_CORETYPE="Prescott")
    want = "OpenBLAS Prescott kernels, OPENBLAS_CORETYPE from the environment"
    if rc != 0 or want not in out:
        return fail("blas", "with OPENBLAS_CORETYPE=Prescott: %r" % out)
    rc, out = bench_device(exe, OPC_BLAS="mkl")
    if rc == 0 or "OPC_BLAS=mkl: expected openblas or onednn" not in out:
        return fail("blas", "with OPC_BLAS=mkl: exit %d, %r" % (rc, out))
    if onednn_installed():
        rc, out = bench_device(exe, OPC_BLAS="onednn")
        if rc != 0 or want_onednn not in out:
            return fail("blas", "with OPC_BLAS=onednn: %r" % out)
    env = dict(os.environ, OPC_KERNEL_ISA="x86-64")
    p = subprocess.run([exe, "--bench", "1"], capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != 0 or "; x86-64 kernels;" not in p.stdout:
        return fail("blas", "with OPC_KERNEL_ISA=x86-64: %r" % (p.stdout + p.stderr))
    ok("blas")
    return True


def branchy_model():
    """Four independent convolution branches: something for several streams."""
    nodes, inits = [], []
    for k in range(4):
        w = RNG.standard_normal((4, 4, 3, 3)).astype(np.float32)
        inits.append(const("w%d" % k, w))
        nodes.append(helper.make_node("Conv", ["x", "w%d" % k], ["c%d" % k], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", ["c%d" % k], ["r%d" % k]))
    nodes.append(helper.make_node("Concat", ["r%d" % k for k in range(4)], ["y"], axis=1))
    return model("branchy", nodes, [("x", [1, 4, 6, 6])], [("y", [1, 16, 6, 6])], inits)


def group_streams(case):
    """Multi-stream schedules give the right answer and no race under OPC_CHECK."""
    env = dict(os.environ, OPC_CHECK="1")
    m = branchy_model()
    for sched in ("greedy", "ios", "lios"):
        case.check("streams_" + sched, m, ["--schedule", sched, "--streams", "4"], env=env)
        case.check("streams_%s_no_graph" % sched, m,
                   ["--schedule", sched, "--streams", "4", "--no-cuda-graph"], env=env)


def group_device_api(case):
    """net_run_device on a caller's stream, from a C program linked with OPC_NO_MAIN."""
    m, w = small_model()
    d, exe, p = case.compile("device_api", m)
    if p.returncode != 0:
        return fail("device_api", p.stderr)
    source = r'''
#include <stdio.h>
#include "net.h"
int main(void)
{
  net_ctx *c;
  float x[18], y[27], *dx, *dy, host[27];
  cudaStream_t s;
  for (int i = 0; i < 18; i++)
    x[i] = (float)i;
  if (net_create(&c, NULL) != 0 || net_run(c, (const void *const[]){x}, (void *const[]){y}) != 0) {
    fprintf(stderr, "%s\n", net_error(c));
    return 1;
  }
  cudaMalloc((void **)&dx, sizeof x);
  cudaMalloc((void **)&dy, sizeof y);
  cudaStreamCreate(&s);
  cudaMemcpyAsync(dx, x, sizeof x, cudaMemcpyHostToDevice, s);
  if (net_run_device(c, (const void *const[]){dx}, (void *const[]){dy}, s) != 0)
    return 1;
  cudaMemcpyAsync(host, dy, sizeof host, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  for (int i = 0; i < 27; i++)
    printf("%.6f %.6f\n", y[i], host[i]);
  net_destroy(c);
  return net_num_inputs() == 1 && net_input_rank(0) == 4 && net_input_dims(0)[1] == 2 ? 0 : 1;
}
'''
    user, p = case.build_user(d, source, ["net.c"])
    if p.returncode != 0:
        return fail("device_api", "build: " + p.stderr)
    p = run([user], env=dict(os.environ, OPC_CHECK="1"))
    if p.returncode != 0:
        return fail("device_api", "exit %d: %s" % (p.returncode, p.stderr))
    x = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)
    want = np.einsum("oi,bihw->bohw", w[:, :, 0, 0], x).ravel()
    got = np.array([[float(v) for v in line.split()] for line in p.stdout.split("\n") if line])
    if not (np.allclose(got[:, 0], want, atol=1e-4) and np.allclose(got[:, 1], want, atol=1e-4)):
        return fail("device_api", "wrong values")
    ok("device_api")


def group_examples(case):
    """examples/meson and examples/cmake configure, build and run with this opc."""
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples")
    builds = [("examples_meson", [["meson", "setup", "B", os.path.join(examples, "meson"),
                                   "-Dopc=" + case.opc], ["ninja", "-C", "B"]])]
    if shutil.which("cmake"):
        builds.append(("examples_cmake", [["cmake", "-S", os.path.join(examples, "cmake"), "-B", "B",
                                           "-DOPC=" + case.opc], ["cmake", "--build", "B"]]))
    for name, steps in builds:
        d = os.path.join(case.work, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for step in steps:
            p = run([a.replace("B", os.path.join(d, "build")) if a == "B" else a for a in step], cwd=d)
            if p.returncode != 0:
                fail(name, "%s: %s" % (" ".join(step[:2]), (p.stdout + p.stderr)[-1500:]))
                break
        else:
            p = run([os.path.join(d, "build", "net")])
            if p.returncode != 0 or not p.stdout.startswith("logits: f32[1,10]"):
                fail(name, "the example program: %r %r" % (p.stdout, p.stderr))
            else:
                ok(name)


# Two models in one program, each run from two threads at once: contexts of
# one model must share no mutable state, and prefixed models no symbols.
THREADS_DRIVER = r"""
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "branchy.h"
#include "small.h"

enum { ROUNDS = 25 };
static float bx[2][144], by[2][576], sx[2][18], sy[2][27];

static void *run_branchy(void *arg)
{
  int t = (int)(long)arg;
  branchy_ctx *c;
  float y[576];
  if (branchy_create(&c, NULL) != 0) {
    fprintf(stderr, "branchy %d: %s\n", t, branchy_error(c));
    return (void *)1;
  }
  for (int r = 0; r < ROUNDS; r++) {
    if (branchy_run(c, (const void *const[]){bx[t]}, (void *const[]){y}) != 0) {
      fprintf(stderr, "branchy %d: %s\n", t, branchy_error(c));
      return (void *)1;
    }
    if (r > 0 && memcmp(y, by[t], sizeof y) != 0) {
      fprintf(stderr, "branchy %d: round %d differs from round 0\n", t, r);
      return (void *)1;
    }
    memcpy(by[t], y, sizeof y);
  }
  branchy_destroy(c);
  return NULL;
}

static void *run_small(void *arg)
{
  int t = (int)(long)arg;
  small_ctx *c;
  if (small_create(&c, NULL) != 0) {
    fprintf(stderr, "small %d: %s\n", t, small_error(c));
    return (void *)1;
  }
  for (int r = 0; r < ROUNDS; r++)
    if (small_run(c, (const void *const[]){sx[t]}, (void *const[]){sy[t]}) != 0) {
      fprintf(stderr, "small %d: %s\n", t, small_error(c));
      return (void *)1;
    }
  small_destroy(c);
  return NULL;
}

int main(void)
{
  pthread_t th[4];
  void *status;
  int failed = 0;
  for (int t = 0; t < 2; t++) {
    for (int i = 0; i < 144; i++)
      bx[t][i] = (float)((i * 7 + t * 13) % 17) / 8.0f - 1.0f;
    for (int i = 0; i < 18; i++)
      sx[t][i] = (float)((i * 5 + t * 3) % 11) / 4.0f - 1.0f;
  }
  for (int t = 0; t < 2; t++) {
    pthread_create(&th[t], NULL, run_branchy, (void *)(long)t);
    pthread_create(&th[2 + t], NULL, run_small, (void *)(long)t);
  }
  for (int t = 0; t < 4; t++) {
    pthread_join(th[t], &status);
    failed |= status != NULL;
  }
  if (failed)
    return 1;
  for (int t = 0; t < 2; t++) {
    for (int i = 0; i < 144; i++) printf("bx%d %.9g\n", t, bx[t][i]);
    for (int i = 0; i < 576; i++) printf("by%d %.9g\n", t, by[t][i]);
    for (int i = 0; i < 18; i++) printf("sx%d %.9g\n", t, sx[t][i]);
    for (int i = 0; i < 27; i++) printf("sy%d %.9g\n", t, sy[t][i]);
  }
  return 0;
}
"""


def group_threads(case):
    """Two prefixed models linked into one program, each run from two threads."""
    d = os.path.join(case.work, "threads")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    models = {"branchy": branchy_model(), "small": small_model()[0]}
    for prefix, m in models.items():
        path = os.path.join(d, prefix + ".onnx")
        onnx.save(m, path)
        p = run([case.opc, path, "-o", os.path.join(d, prefix + ".c"), "--prefix", prefix,
                 "--streams", "4"])
        if p.returncode != 0:
            return fail("threads", "opc: " + p.stderr)
    user, p = case.build_user(d, THREADS_DRIVER, ["branchy.c", "small.c"], ["-lpthread"])
    if p.returncode != 0:
        return fail("threads", "build: " + p.stderr)
    p = run([user], cwd=d, env=dict(os.environ, OPC_CHECK="1"))
    if p.returncode != 0:
        return fail("threads", "exit %d: %s" % (p.returncode, p.stderr))
    values = {}
    for line in p.stdout.split("\n"):
        if line:
            key, v = line.split()
            values.setdefault(key, []).append(float(v))
    shapes = {"branchy": ((1, 4, 6, 6), (1, 16, 6, 6)), "small": ((1, 2, 3, 3), (1, 3, 3, 3))}
    for prefix, m in models.items():
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        xs, ys = shapes[prefix]
        for t in range(2):
            x = np.array(values["%sx%d" % (prefix[0], t)], dtype=np.float32).reshape(xs)
            got = np.array(values["%sy%d" % (prefix[0], t)], dtype=np.float32).reshape(ys)
            want = sess.run(None, {"x": x})[0]
            if not np.allclose(got, want, atol=1e-4, rtol=1e-4):
                return fail("threads", "%s thread %d: differs by up to %g"
                            % (prefix, t, float(np.max(np.abs(got - want)))))
    ok("threads")


# ---------------------------------------------------------- typed inputs

# The eight run-time types: numpy's dtype, and their ONNX names.
TYPED = [(np.float32, "float32"), (np.float64, "float64"), (np.float16, "float16"),
         (np.int64, "int64"), (np.int32, "int32"), (np.int8, "int8"), (np.uint8, "uint8"),
         (np.bool_, "bool")]


def typed_model():
    """One input of each type, returned as it is (no kernel touches it); a
    float32 path through Relu; int64 Shape; constants of several types as
    outputs (stored in their own types in net.weights; the IR holds float64
    constants as float32, hence values float32 represents); Gather with
    constant indices."""
    inputs, outputs = [], []
    for dtype, name in TYPED:
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        inputs.append(helper.make_tensor_value_info("in_" + name, elem, [2, 3]))
        outputs.append(helper.make_tensor_value_info("in_" + name, elem, [2, 3]))
    consts = {"k64": np.array([7, -8, 1 << 40], np.int64), "k32": np.array([-5, 6], np.int32),
              "k8": np.array([-128, 127], np.int8), "ku8": np.array([255, 0], np.uint8),
              "kb": np.array([True, False, True]), "kh": np.array([0.5, -2.25, 65504], np.float16),
              "kd": np.array([0.5, -2.0 ** 100], np.float64)}
    nodes = [helper.make_node("Relu", ["in_float32"], ["relu"], name="relu"),
             helper.make_node("Shape", ["in_int64"], ["shape"], name="shape"),
             helper.make_node("Gather", ["in_float32", "gi"], ["gather"], name="gather", axis=1)]
    outputs += [helper.make_tensor_value_info("relu", TensorProto.FLOAT, [2, 3]),
                helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
                helper.make_tensor_value_info("gather", TensorProto.FLOAT, [2, 2])]
    for name, array in consts.items():
        nodes.append(helper.make_node("Identity", [name + "_c"], [name], name=name))
        outputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape)))
    inits = [const(name + "_c", array) for name, array in consts.items()]
    inits.append(const("gi", np.array([2, 0], np.int64)))
    graph = helper.make_graph(nodes, "typed", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m, consts


def typed_values():
    values = {}
    for dtype, name in TYPED:
        if dtype == np.bool_:
            values[name] = np.array([[True, False, True], [False, False, True]])
        elif np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            values[name] = np.array([[info.min, -1 if info.min else 1, 0], [1, 2, info.max]], dtype)
        else:
            values[name] = np.array([[0.5, -1.25, 3], [-4, 1e-3, 6]], dtype)
    return values


def typed_run(case, d, exe, files, outputs):
    cmd = [exe] + [a for n, f in files.items() for a in ("--input", "%s=%s" % (n, f))]
    for n in outputs:
        cmd += ["--output", "%s=%s" % (n, os.path.join(d, "out_%s.npy" % n))]
    return run(cmd)


def group_typed_io(case):
    """Inputs and outputs of every run-time type: net.h states them, the main
    reads and writes them and refuses a wrong type or shape, and a C program
    passes its own buffers through void pointers."""
    m, consts = typed_model()
    d, exe, p = case.compile("typed_io", m)
    if p.returncode != 0:
        return fail("typed_io", "opc failed: " + p.stderr.strip())
    header = open(os.path.join(d, "net.h")).read()
    for line in [" *   0  in_float32: float32 [2, 3]", " *   3  in_int64: int64 [2, 3]",
                 " *   7  in_bool: bool [2, 3]", " *   9  shape: int64 [2]",
                 "int net_run(net_ctx *ctx, const void *const *inputs, void *const *outputs);",
                 "const char *net_input_type(int i);", "int net_output_element_size(int i);"]:
        if line not in header:
            return fail("typed_io_header", "net.h lacks %r" % line)
    ok("typed_io_header")

    values = typed_values()
    files = {}
    for dtype, name in TYPED:
        files["in_" + name] = os.path.join(d, "in_%s.npy" % name)
        np.save(files["in_" + name], values[name])
    names = [o.name for o in m.graph.output]
    p = typed_run(case, d, exe, files, names)
    if p.returncode != 0:
        return fail("typed_io_run", "exit %d: %s" % (p.returncode, p.stderr))
    x = values["float32"]
    want = {"in_" + name: values[name] for _, name in TYPED}
    want.update(relu=np.maximum(x, 0), shape=np.array([2, 3], np.int64), gather=x[:, [2, 0]])
    want.update(consts)
    for name in names:
        got = np.load(os.path.join(d, "out_%s.npy" % name))
        if got.dtype != want[name].dtype or not np.array_equal(got, want[name]):
            return fail("typed_io_run", "output %s: %r (%s), expected %r" % (
                name, got, got.dtype, want[name]))
    ok("typed_io_run")

    # An int64 input from a TensorProto with int64_data (not raw_data).
    pb = os.path.join(d, "ids.pb")
    ids = np.array([[1, -2, 3], [4, 5, -(1 << 40)]], np.int64)
    with open(pb, "wb") as f:
        f.write(helper.make_tensor("in_int64", TensorProto.INT64, [2, 3],
                                   ids.ravel().tolist()).SerializeToString())
    p = typed_run(case, d, exe, dict(files, in_int64=pb), ["in_int64"])
    if p.returncode != 0 or not np.array_equal(np.load(os.path.join(d, "out_in_int64.npy")), ids):
        return fail("typed_io_pb", "exit %d: %s" % (p.returncode, p.stderr))
    ok("typed_io_pb")

    # A wrong type or shape: refused before anything runs, nothing written.
    for label, array, text in [
            ("typed_io_wrong_type", values["int32"],
             "input 'in_int64' (%s): data type int32, expected int64"),
            ("typed_io_wrong_shape", values["int64"].reshape(3, 2),
             "input 'in_int64' (%s): shape [3,2], expected [2,3]")]:
        path = os.path.join(d, label + ".npy")
        np.save(path, array)
        out = os.path.join(d, "out_relu.npy")
        if os.path.exists(out):
            os.unlink(out)
        p = typed_run(case, d, exe, dict(files, in_int64=path), ["relu"])
        if p.returncode != 1 or (text % path) not in p.stderr or os.path.exists(out):
            return fail(label, "exit %d, stderr %r, output written: %s" % (
                p.returncode, p.stderr, os.path.exists(out)))
        ok(label)

    # The weights hold the constants in their own types, 64-byte aligned.
    data = open(os.path.join(d, "net.weights"), "rb").read()
    for name, array in consts.items():
        body = array.astype(array.dtype.newbyteorder("<")).tobytes()
        if not any(data[at:at + len(body)] == body for at in range(64, len(data) - 8, 64)):
            return fail("typed_io_weights", "%s is not stored as %s" % (name, array.dtype))
    ok("typed_io_weights")

    source = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "net.h"
static const char *const types[8] = {"float32", "float64", "float16", "int64",
                                     "int32", "int8", "uint8", "bool"};
static const int sizes[8] = {4, 8, 2, 8, 4, 1, 1, 1};
int main(void)
{
  net_ctx *c;
  int64_t ids[6] = {1, -2, 3, 4, 5, -6}, got[6];
  unsigned char zeros[8][6 * 8] = {{0}}, outs[20][64];
  const void *in[8];
  void *out[20];
  for (int i = 0; i < 8; i++) {
    in[i] = i == 3 ? (const void *)ids : zeros[i];
    if (strcmp(net_input_type(i), types[i]) != 0 || net_input_element_size(i) != sizes[i]) {
      fprintf(stderr, "input %d: %s, %d bytes\n", i, net_input_type(i), net_input_element_size(i));
      return 1;
    }
  }
  if (net_num_outputs() > 20 || net_input_type(8) || net_output_element_size(-1) != -1 ||
      strcmp(net_output_type(9), "int64") != 0)
    return 1;
  for (int i = 0; i < net_num_outputs(); i++)
    out[i] = outs[i];
  out[3] = got;
  if (net_create(&c, NULL) != 0 || net_run(c, in, out) != 0) {
    fprintf(stderr, "%s\n", net_error(c));
    return 1;
  }
  net_destroy(c);
  return memcmp(ids, got, sizeof ids) != 0;
}
"""
    user, p = case.build_user(d, source, ["net.c"])
    if p.returncode != 0:
        return fail("typed_io_api", "build: " + p.stderr)
    p = run([user])
    if p.returncode != 0:
        return fail("typed_io_api", "exit %d: %s" % (p.returncode, p.stderr))
    ok("typed_io_api")


GROUPS = {"examples": group_examples, "ops": group_ops, "weights": group_weights, "options": group_options,
          "streams": group_streams, "device_api": group_device_api,
          "threads": group_threads, "copies": group_copies,
          "kernel_loading": group_kernel_loading, "typed_io": group_typed_io}


def main():
    opc, group = sys.argv[1], sys.argv[2]
    work = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--work" else os.path.join(
        os.path.dirname(os.path.abspath(opc)), "backend-tests", group)
    os.makedirs(work, exist_ok=True)
    GROUPS[group](Case(os.path.abspath(opc), work))
    if FAILURES:
        print("%d failed: %s" % (len(FAILURES), " ".join(FAILURES)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
