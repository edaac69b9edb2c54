#!/usr/bin/env python3
"""A convolution's bias, residual and activation in one launch of
opc_conv_epilogue (where cuDNN would take a call for each), against ONNX
Runtime, on the CPU runtime under its race checker (OPC_CHECK=1).

usage: test_conv_epilogue.py OPC WORK_DIR

Cases, each a 3x3 convolution with a bias, then:
  - relu6: Clip(0, 6) (MobileNetV2's);
  - residual: + r, a second input of the output's shape (a projection's);
  - residual_hardswish: + r, then HardSwish (the activation cuDNN lacks);
  - swish_pair: x * Sigmoid(x) (EfficientNet's SiLU);
  - two_images: relu6 on two images, the output written into a channel
    Concat in place, so that it is strided between images.
The GPU program (--target stand-in, on the CPU runtime) must launch
opc_conv_epilogue once per case and issue no cudnnAddTensor or
cudnnActivationForward, in float32 (where the CPU runtime folds the
launch into the convolution's own epilogue: kernel_is_conv_epilogue, a
per-channel bias, z at y's offsets; except two_images, whose output is
not packed: there the kernel itself runs) and in float16 and bfloat16
(--precision, channels-last). The CPU program (--target cpu, float32)
must instead apply them in its channels-last convolution itself
(opc_conv_nhwc, compile-time fusion): one launch per case, no epilogue. Inputs are smooth images,
weights scaled by 1/sqrt(fan-in), the bias large enough to move outputs
across Clip's bounds. Negative control: ONNX Runtime's outputs with the
bias left out must differ from the program's.
"""
import os
import sys

import numpy as np
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, reference, value_info  # noqa: E402

C_IN, C, SIDE = 5, 12, 7


def smooth(rng, *shape):
    n, c, h, w = shape
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    img = np.zeros(shape, np.float32)
    for i in range(n):
        for k in range(c):
            fy, fx, ph = rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0), rng.uniform(0, 6.3)
            img[i, k] = 3 * np.sin(2 * np.pi * (fy * yy + fx * xx) + ph)
    return img + rng.normal(0, 0.05, shape).astype(np.float32)


def case_nodes(name, rng, biased):
    """The case's nodes, initializers and extra inputs (name -> array)."""
    w = rng.normal(0, 1 / np.sqrt(C_IN * 9), (C, C_IN, 3, 3)).astype(np.float32)
    b = rng.uniform(-2, 4, C).astype(np.float32) * (1 if biased else 0)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["a"], pads=[1, 1, 1, 1])]
    extra = {}
    six = [numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
    if name in ("relu6", "two_images"):
        nodes.append(helper.make_node("Clip", ["a", "lo", "hi"], ["y" if name == "relu6" else "c"]))
        inits += six
    elif name.startswith("residual"):
        extra["r"] = smooth(rng, 1, C, SIDE, SIDE)
        last = "y" if name == "residual" else "s"
        nodes.append(helper.make_node("Add", ["a", "r"], [last]))
        if name == "residual_hardswish":
            nodes.append(helper.make_node("HardSwish", ["s"], ["y"]))
    elif name == "swish_pair":
        nodes += [helper.make_node("Sigmoid", ["a"], ["g"]),
                  helper.make_node("Mul", ["a", "g"], ["y"])]
    if name == "two_images":
        extra["other"] = smooth(rng, 2, 3, SIDE, SIDE)
        nodes.append(helper.make_node("Concat", ["c", "other"], ["y"], axis=1))
    return nodes, inits, extra


def case_model(name, biased=True):
    rng = np.random.default_rng(sum(name.encode()))
    images = 2 if name == "two_images" else 1
    x = smooth(rng, images, C_IN, SIDE, SIDE)
    nodes, inits, extra = case_nodes(name, rng, biased)
    feeds = {"x": x, **extra}
    inputs = [value_info(k, v) for k, v in feeds.items()]
    m = onnx_case.model(nodes, inputs, [helper.make_tensor_value_info("y", 1, None)], inits,
                        opset=17, name=name)
    return m, feeds


CASES = ["relu6", "residual", "residual_hardswish", "swish_pair", "two_images"]
TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 3e-2}


def launches(work):
    with open(os.path.join(work, "net.c")) as f:
        text = f.read()
    return (text.count("opc_conv_epilogue_"), text.count("cudnnAddTensor(c->"),
            text.count("cudnnActivationForward(c->"),
            text.count("cuLaunchKernel(c->kernel.opc_conv_nhwc,"))


def run_target(opc, m, feeds, work, flags, target):
    """run_opc for the given target: (outputs, None) or (None, why)."""
    exe, why = onnx_case.compile_cpu(opc, m, work, flags, target)
    if exe is None:
        return None, why
    got = onnx_case.run_program(exe, m, feeds, work)
    return (None, got) if isinstance(got, str) else (got, None)


def main():
    opc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    os.environ["OPC_CHECK"] = "1"
    models = [case_model(name) for name in CASES]
    m = onnx_case.merged([mm for mm, _ in models], 17)
    feeds = {"c%d_%s" % (k, name): v for k, (_, f) in enumerate(models) for name, v in f.items()}
    want = reference(m, feeds)
    plain = reference(onnx_case.merged([case_model(n, biased=False)[0] for n in CASES], 17), feeds)
    failures = []
    for precision, target in (("fp32", "stand-in"), ("fp32", "cpu"), ("fp16", "stand-in"),
                              ("bf16", "stand-in")):
        flags = [] if precision == "fp32" else ["--precision", precision]
        out = os.path.join(work, precision + "-" + target)
        got, why = run_target(opc, m, feeds, out, flags, target)
        if got is None:
            failures.append(f"{precision} {target}: {why}")
            continue
        kernels, adds, acts, nhwc = launches(out)
        # Each case's launch is printed twice: in the program and in its table.
        if target == "cpu" and (nhwc != len(CASES) or kernels or adds or acts):
            failures.append(f"{precision} {target}: {nhwc} opc_conv_nhwc launches for "
                            f"{len(CASES)} cases, {kernels} mentions of opc_conv_epilogue, "
                            f"{adds} cudnnAddTensor, {acts} cudnnActivationForward")
        if target != "cpu" and (kernels < len(CASES) or adds or acts):
            failures.append(f"{precision} {target}: {kernels} mentions of opc_conv_epilogue, "
                            f"{adds} cudnnAddTensor, {acts} cudnnActivationForward")
        for k, name in enumerate(CASES):
            y = "c%d_y" % k
            problem = compare_close(got[y], want[y], TOLERANCE[precision])
            if problem is None and compare_close(got[y], plain[y], 10 * TOLERANCE[precision]) is None:
                problem = "the output without the bias matches too: the case decides nothing"
            print(f"{'FAIL' if problem else 'ok  '} {name}-{precision}-{target}" +
                  (f": {problem}" if problem else ""))
            if problem:
                failures.append(f"{name}-{precision}-{target}: {problem}")
    return onnx_case.finish(opc, failures, [], work,
                            f"conv epilogue: {len(CASES)} cases in 3 precisions and both "
                            "programs match")


if __name__ == "__main__":
    sys.exit(main())
