"""
End-to-end check of the rewriting passes: small ONNX models, each built to
trigger one rewrite (BN folding, bias/pad/activation/residual fusion,
in-place concat, split/slice/reshape views), are compiled by opc for the
CPU target and run; every output must match ONNX Runtime on the same input.
`opc --stats` must also show that the rewrite fired, so that the numbers
really come from the rewritten graph.

usage: fusion_e2e.py OPC WORKDIR
Exit 77 (skipped) when opc or onnxruntime is missing.
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print("skipped:", e)
    sys.exit(77)

rng = np.random.default_rng(42)


def const(name, shape, lo=-1.0, hi=1.0):
    return numpy_helper.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def value(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def bn(prefix, x, y, c):
    inits = [const(prefix + ".scale", [c]), const(prefix + ".bias", [c]),
             const(prefix + ".mean", [c]), const(prefix + ".var", [c], 0.2, 2.0)]
    node = helper.make_node("BatchNormalization", [x] + [t.name for t in inits], [y],
                            name=prefix, epsilon=1e-3)
    return node, inits


def model(name, nodes, inits, inputs, outputs):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def conv_bn_relu():
    b1, i1 = bn("bn", "y", "z", 8)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1], group=2),
             b1, helper.make_node("Relu", ["z"], ["out"], name="relu")]
    inits = [const("w", [8, 2, 3, 3]), const("b", [8])] + i1
    return model("conv_bn_relu", nodes, inits, [value("x", [1, 4, 7, 7])], [value("out", [1, 8, 7, 7])]), \
        {"BatchNormalization": 0, "Relu": 0}


def bias_clip():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
             helper.make_node("Add", ["k", "y"], ["s"], name="add"),
             helper.make_node("Clip", ["s", "lo", "hi"], ["out"], name="clip")]
    inits = [const("w", [4, 3, 1, 1]), const("k", [1, 4, 1, 1]),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(0.5, np.float32), "hi")]
    return model("bias_clip", nodes, inits, [value("x", [1, 3, 5, 5])], [value("out", [1, 4, 5, 5])]), \
        {"Add": 0, "Clip": 0}


def pad_into(consumer):
    pads = [0, 0, 1, 2, 0, 0, 2, 1]
    padv = -np.inf if consumer == "MaxPool" else 0.0
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Pad", ["r", "pads", "pv"], ["p"], name="pad", mode="constant")]
    inits = [ints("pads", pads), numpy_helper.from_array(np.array(padv, np.float32), "pv")]
    if consumer == "Conv":
        nodes.append(helper.make_node("Conv", ["p", "w"], ["out"], name="c", pads=[1, 1, 1, 1]))
        inits.append(const("w", [3, 2, 3, 3]))
        oc, oh, ow = 3, 9, 9
    else:
        attrs = {"kernel_shape": [3, 3], "pads": [1, 0, 0, 1], "strides": [2, 2]}
        if consumer == "AveragePool":
            attrs["count_include_pad"] = 1
        nodes.append(helper.make_node(consumer, ["p"], ["out"], name="c", **attrs))
        oc, oh, ow = 2, 4, 4  # (6 + 3 padded + 1 own pad - 3) / 2 + 1
    return model("pad_" + consumer, nodes, inits, [value("x", [1, 2, 6, 6])], [value("out", [1, oc, oh, ow])]), \
        {"Pad": 0}


def residual():
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"], name="r1"),
             helper.make_node("Conv", ["ar", "w2", "b2"], ["c"], name="c2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["out"], name="r2")]
    inits = [const("w1", [4, 4, 3, 3]), const("b1", [4]), const("w2", [4, 4, 3, 3]), const("b2", [4])]
    return model("residual", nodes, inits, [value("x", [1, 4, 5, 5])], [value("out", [1, 4, 5, 5])]), \
        {"Add": 0, "Relu": 0}


def concat(batch):
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
             helper.make_node("Conv", ["x", "w2"], ["b"], name="c2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["x"], ["e"], name="r0"),
             helper.make_node("Concat", ["a", "b"], ["ab"], name="inner", axis=1),
             helper.make_node("Concat", ["e", "ab"], ["cat"], name="outer", axis=1),
             helper.make_node("Relu", ["cat"], ["out"], name="relu")]
    inits = [const("w1", [2, 3, 1, 1]), const("w2", [5, 3, 3, 3])]
    # At batch 2 the slices interleave and a Relu kernel fills one of the outer
    # Concat's, so that Concat copies (concat_in_place.c): one view fewer.
    views = 2 if batch == 1 else 1
    return model("concat_b%d" % batch, nodes, inits, [value("x", [batch, 3, 4, 4])],
                 [value("out", [batch, 10, 4, 4])]), {"views": views}


def split_slice():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
             helper.make_node("Split", ["y", "sizes"], ["s1", "s2"], name="split", axis=1),
             helper.make_node("Slice", ["y", "st", "en", "ax"], ["sl"], name="slice"),
             helper.make_node("Relu", ["s1"], ["o1"], name="r1"),
             helper.make_node("Sigmoid", ["s2"], ["o2"], name="r2"),
             helper.make_node("Reshape", ["sl", "shape"], ["rs"], name="reshape"),
             helper.make_node("Tanh", ["rs"], ["o3"], name="r3")]
    inits = [const("w", [6, 3, 1, 1]), ints("sizes", [2, 4]), ints("st", [1]), ints("en", [4]),
             ints("ax", [1]), ints("shape", [1, 48])]
    return model("split_slice", nodes, inits, [value("x", [1, 3, 4, 4])],
                 [value("o1", [1, 2, 4, 4]), value("o2", [1, 4, 4, 4]), value("o3", [1, 48])]), \
        {"views": 3}


def gemm_bn():
    b1, i1 = bn("bn", "g", "z", 5)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
             helper.make_node("Flatten", ["y"], ["f"], name="flat", axis=1),
             helper.make_node("Gemm", ["f", "bm", "c"], ["g"], name="gemm", transB=1, alpha=0.5, beta=2.0),
             b1, helper.make_node("Sigmoid", ["z"], ["out"], name="sig")]
    inits = [const("w", [2, 3, 1, 1]), const("bm", [5, 18]), const("c", [5])] + i1
    return model("gemm_bn", nodes, inits, [value("x", [2, 3, 3, 3])], [value("out", [2, 5])]), \
        {"BatchNormalization": 0, "Sigmoid": 0}


def conv_transpose_bn():
    b1, i1 = bn("bn", "y", "out", 6)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="ct", group=2, strides=[2, 2]), b1]
    inits = [const("w", [4, 3, 2, 2])] + i1
    return model("convT_bn", nodes, inits, [value("x", [1, 4, 3, 3])], [value("out", [1, 6, 6, 6])]), \
        {"BatchNormalization": 0}


def gated():
    """x * gate(x) on a value no Conv produces (an Add): SiLU, a scaled Swish,
    HardSwish and Mish each become one node of their own."""
    nodes = [helper.make_node("Add", ["x", "k"], ["a"], name="add"),
             helper.make_node("Sigmoid", ["a"], ["s"], name="sig"),
             helper.make_node("Mul", ["a", "s"], ["silu"], name="mul"),
             helper.make_node("Mul", ["silu", "alpha"], ["sa"], name="scale"),
             helper.make_node("Sigmoid", ["sa"], ["t"], name="sig2"),
             helper.make_node("Mul", ["t", "silu"], ["swish"], name="mul2"),
             helper.make_node("HardSigmoid", ["swish"], ["h"], name="hsig", alpha=1 / 6, beta=0.5),
             helper.make_node("Mul", ["swish", "h"], ["hswish"], name="mul3"),
             helper.make_node("Softplus", ["hswish"], ["p"], name="softplus"),
             helper.make_node("Tanh", ["p"], ["th"], name="tanh"),
             helper.make_node("Mul", ["hswish", "th"], ["out"], name="mul4")]
    inits = [const("k", [1, 3, 1, 1], -2, 2),
             numpy_helper.from_array(np.array(1.702, np.float32), "alpha")]
    return model("gated", nodes, inits, [value("x", [1, 3, 6, 6])], [value("out", [1, 3, 6, 6])]), \
        {"Sigmoid": 0, "HardSigmoid": 0, "Softplus": 0, "Tanh": 0, "Mul": 0}


def conv_mish():
    """Mish of a Conv's output, as exporters before opset 18 write it: the
    Conv's activation, run by opc_mish (on the CPU, in its epilogue)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Softplus", ["y"], ["p"], name="softplus"),
             helper.make_node("Tanh", ["p"], ["t"], name="tanh"),
             helper.make_node("Mul", ["t", "y"], ["out"], name="mul")]
    inits = [const("w", [6, 3, 3, 3], -2, 2), const("b", [6])]
    return model("conv_mish", nodes, inits, [value("x", [1, 3, 5, 5])], [value("out", [1, 6, 5, 5])]), \
        {"Softplus": 0, "Tanh": 0, "Mul": 0, "Mish": 0}


def stats(opc, path):
    r = subprocess.run([opc, path, "--stats"], capture_output=True, text=True)
    table = {}
    for line in r.stdout.splitlines():
        parts = line.rsplit(None, 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            table[parts[0]] = int(parts[2])
    return table


def run_case(opc, work, m, expect):
    name = m.graph.name
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    feeds, args = {}, []
    for i, inp in enumerate(m.graph.input):
        dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        a = rng.uniform(-1, 1, dims).astype(np.float32)
        feeds[inp.name] = a
        p = os.path.join(work, "%s.in%d.npy" % (name, i))
        np.save(p, a)
        args += ["--input", "%s=%s" % (inp.name, p)]
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)

    ok = True
    after = stats(opc, path)
    for key, count in expect.items():
        got = after.get(key, 0)
        fired = got >= count if key == "views" else got == count
        if not fired:
            print("%s: expected %s after the passes = %d, got %d" % (name, key, count, got))
            ok = False

    exe = os.path.join(work, name)
    r = subprocess.run([opc, path, "--target", "cpu", "--verify-each", "-o", exe],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("%s: opc failed: %s" % (name, r.stderr.strip()))
        return False
    outs = []
    for k, o in enumerate(m.graph.output):
        p = os.path.join(work, "%s.out%d.npy" % (name, k))
        outs.append(p)
        args += ["--output", "%s=%s" % (o.name, p)]
    r = subprocess.run([exe] + args, capture_output=True, text=True)
    if r.returncode != 0:
        print("%s: program failed: %s" % (name, r.stderr.strip()))
        return False
    for k, p in enumerate(outs):
        got = np.load(p)
        err = float(np.max(np.abs(got - want[k])))
        scale = float(np.max(np.abs(want[k]))) + 1e-6
        status = "ok" if err <= 1e-4 * scale + 1e-6 else "MISMATCH"
        print("%s output %d: max abs error %.3g (%s)" % (name, k, err, status))
        ok &= status == "ok"
    if ok:  # a failing case's program stays to be looked at
        os.remove(exe)
    return ok


def main():
    opc, work = sys.argv[1], sys.argv[2]
    if not os.access(opc, os.X_OK):
        print("skipped: no opc at", opc)
        return 77
    os.makedirs(work, exist_ok=True)
    cases = [conv_bn_relu(), bias_clip(), pad_into("Conv"), pad_into("AveragePool"),
             pad_into("MaxPool"), residual(), concat(1), concat(2), split_slice(), gemm_bn(),
             conv_transpose_bn(), gated(), conv_mish()]
    failed = [m.graph.name for m, expect in cases if not run_case(opc, work, m, expect)]
    # An unknown --dump-after name is an error, not an empty dump.
    path = os.path.join(work, cases[0][0].graph.name + ".onnx")
    r = subprocess.run([opc, path, "--dump-after", "no-such-pass"], capture_output=True, text=True)
    if r.returncode == 0 or "no-such-pass" not in r.stderr or "# after" in r.stdout:
        print("--dump-after no-such-pass: exit %d, stderr %r" % (r.returncode, r.stderr))
        failed.append("dump-after")
    if failed:
        print("failed:", " ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
