#!/usr/bin/env python3
"""A Concat copied by one launch of opc_concat_blocks, where the inputs
cannot be written in place, against ONNX Runtime, on the CPU runtime under
its race checker (OPC_CHECK=1).

usage: test_concat_blocks.py OPC WORK_DIR

Cases:
  - dense: DenseNet's chain, cat(x, a), cat(x, a, b), each new feature a
    3x3 convolution of the Relu of the join before. x, a graph input,
    cannot be written in place, so each join copies; in float16 and
    bfloat16 the data is channels-last, a join's inputs blocks of every
    pixel's row. Each join is one launch where it took a copy per input.
  - rows: a join along the last axis of two kernels' outputs and the
    graph's input, three blocks of different lengths in each of six rows.
  - constant: a join with a constant (the weights hold it, outside the
    arena): copies, no opc_concat_blocks launch.
The program must launch opc_concat_blocks for each join of dense and for
rows, and not for constant. Negative control: ONNX Runtime's
outputs with the last join's first two inputs swapped must differ from the
program's.
"""
import os
import sys

import numpy as np
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, reference, run_opc, smooth, value_info  # noqa: E402

C, GROWTH, SIDE = 8, 4, 6


def conv(rng, name, c_in, x, y):
    w = rng.normal(0, 1 / np.sqrt(c_in * 9), (GROWTH, c_in, 3, 3)).astype(np.float32)
    return [helper.make_node("Relu", [x], [x + "_r"]),
            helper.make_node("Conv", [x + "_r", name], [y], pads=[1, 1, 1, 1])], \
        [numpy_helper.from_array(w, name)]


def case_model(name, swapped=False):
    rng = np.random.default_rng(sum(name.encode()))
    last = (lambda ins: [ins[1], ins[0], *ins[2:]]) if swapped else (lambda ins: ins)
    if name == "dense":
        x = smooth(rng, 1, C, SIDE, SIDE)
        n1, w1 = conv(rng, "w1", C, "x", "a")
        n2, w2 = conv(rng, "w2", C + GROWTH, "j1", "b")
        nodes = n1 + [helper.make_node("Concat", ["x", "a"], ["j1"], axis=1)] + n2 + \
            [helper.make_node("Concat", last(["x", "a", "b"]), ["j2"], axis=1)]
        n3, w3 = conv(rng, "w3", C + 2 * GROWTH, "j2", "y")
        nodes, inits = nodes + n3, w1 + w2 + w3
    elif name == "rows":
        x = smooth(rng, 2, 3, 5)
        nodes = [helper.make_node("Sigmoid", ["x"], ["s"]),
                 helper.make_node("Slice", ["x", "from", "to", "axis"], ["t"]),
                 helper.make_node("Tanh", ["t"], ["u"]),
                 helper.make_node("Concat", last(["s", "u", "x"]), ["y"], axis=-1)]
        inits = [numpy_helper.from_array(np.array(v, np.int64), k)
                 for k, v in (("from", [1]), ("to", [4]), ("axis", [2]))]
    else:  # constant
        x = smooth(rng, 1, C, SIDE, SIDE)
        k = smooth(rng, 1, 2, SIDE, SIDE)
        nodes = [helper.make_node("Sigmoid", ["x"], ["s"]),
                 helper.make_node("Concat", last(["s", "k", "x"]), ["y"], axis=1)]
        inits = [numpy_helper.from_array(k, "k")]
    feeds = {"x": x}
    m = onnx_case.model(nodes, [value_info("x", x)], [helper.make_tensor_value_info("y", 1, None)],
                        inits, opset=17, name=name)
    return m, feeds


CASES = ["dense", "rows", "constant"]
TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 3e-2}


def one_launch_joins(work):
    """Launches of opc_concat_blocks in the program's run functions."""
    with open(os.path.join(work, "net.c")) as f:
        return f.read().count("cuLaunchKernel(c->kernel.opc_concat_blocks_")


def main():
    opc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    os.environ["OPC_CHECK"] = "1"
    failures = []
    for name in CASES:
        m, feeds = case_model(name)
        want = reference(m, feeds)["y"]
        swapped = reference(case_model(name, swapped=True)[0], feeds)["y"]
        for precision in ("fp32", "fp16", "bf16"):
            flags = [] if precision == "fp32" else ["--precision", precision]
            out = os.path.join(work, f"{name}-{precision}")
            got, why = run_opc(opc, m, feeds, out, flags)
            problem = why
            if got is not None:
                expected = {"dense": 2, "rows": 1, "constant": 0}[name]
                count = one_launch_joins(out)
                problem = compare_close(got["y"], want, TOLERANCE[precision])
                if problem is None and compare_close(got["y"], swapped, TOLERANCE[precision]) is None:
                    problem = "the output with two inputs swapped matches too: the case decides nothing"
                if problem is None and count != expected:
                    problem = f"{count} launches of opc_concat_blocks, expected {expected}"
            print(f"{'FAIL' if problem else 'ok  '} {name}-{precision}" + (f": {problem}" if problem else ""))
            if problem:
                failures.append(f"{name}-{precision}: {problem}")
    return onnx_case.finish(opc, failures, [], work,
                            f"concat blocks: {len(CASES)} cases in 3 precisions match")


if __name__ == "__main__":
    sys.exit(main())
