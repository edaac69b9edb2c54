#!/usr/bin/env python3
"""Resize between channels-last convolutions: opc_resize_nhwc on the CPU
target, against ONNX Runtime, on the CPU runtime under its race checker
(OPC_CHECK=1).

usage: test_resize_nhwc.py OPC WORK_DIR

Each model is a 3x3 convolution of 72 channels (a blend's run of 64 and a
partial second one), a Resize over H and W, and a 1x1 convolution, so that the
Resize reads and writes channels-last data inside a chain. Cases:
  - nearest: asymmetric, floor, x2 (PP-OCR's detector's upsampling): each
    pixel a copy;
  - linear: half_pixel, to 13 x 21 from 6 x 8 (scales not whole);
  - corners: linear, align_corners, down to 4 x 5;
  - cubic: half_pixel, x1.5, exclude_outside;
  - crop: linear, tf_crop_and_resize with a roi reaching past x, whose
    outside pixels take extrapolation_value;
  - last: linear x2 as the graph's output: an enlarging Resize into ONNX's
    order reads that order, x converted (no opc_resize_nhwc launch).
Each in float32 (the CPU target's channels-last form) and float16. The
float32 programs must launch opc_resize_nhwc once (none for last). Inputs
are smooth images (slow sinusoids, a little noise), weights scaled by
1/sqrt(fan-in). Negative control: ONNX Runtime's output with the other
interpolation (nearest for linear, linear for nearest and cubic) must
differ from opc's.
"""
import os
import sys

import numpy as np
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, reference, run_opc, smooth, value_info  # noqa: E402

C, H, W = 72, 6, 8

# name: (Resize attributes, scales or None, sizes or None, roi or None)
CASES = {
    "nearest": (dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor"), [1, 1, 2, 2], None, None),
    "linear": (dict(mode="linear"), None, [1, C, 13, 21], None),
    "corners": (dict(mode="linear", coordinate_transformation_mode="align_corners"),
                None, [1, C, 4, 5], None),
    "cubic": (dict(mode="cubic", exclude_outside=1), [1, 1, 1.5, 1.5], None, None),
    "crop": (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                  extrapolation_value=-2.5), None, [1, C, 7, 9],
             [0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3]),
    "last": (dict(mode="linear"), [1, 1, 2, 2], None, None),
}
TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2}


def case_model(name, mode=None):
    attrs, scales, sizes, roi = CASES[name]
    attrs = dict(attrs)
    if mode:
        attrs["mode"] = mode
        attrs.pop("exclude_outside", None)  # cubic's alone
    rng = np.random.default_rng(sum(name.encode()))
    x = smooth(rng, 1, 3, H, W)
    w1 = rng.normal(0, 1 / np.sqrt(27), (C, 3, 3, 3)).astype(np.float32)
    w2 = rng.normal(0, 1 / np.sqrt(C), (C, C, 1, 1)).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(np.array(roi or [], np.float32), "roi"),
             numpy_helper.from_array(np.array(scales or [], np.float32), "scales")]
    inputs = ["a", "roi", "scales"]
    if sizes:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
        inputs.append("sizes")
    resized = "y" if name == "last" else "r"
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", inputs, [resized], **attrs)]
    if name != "last":
        nodes.append(helper.make_node("Conv", ["r", "w2"], ["y"]))
    m = onnx_case.model(nodes, [value_info("x", x)], [helper.make_tensor_value_info("y", 1, None)],
                        inits, opset=19, name=name)
    return m, {"x": x}


def nhwc_launches(work):
    with open(os.path.join(work, "net.c")) as f:
        return f.read().count("cuLaunchKernel(c->kernel.opc_resize_nhwc,")


def main():
    opc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    os.environ["OPC_CHECK"] = "1"
    failures = []
    for name in CASES:
        m, feeds = case_model(name)
        want = reference(m, feeds)["y"]
        other = {"nearest": "linear", "linear": "nearest", "cubic": "linear"}[CASES[name][0]["mode"]]
        control = reference(case_model(name, other)[0], feeds)["y"]
        for precision in ("fp32", "fp16"):
            flags = [] if precision == "fp32" else ["--precision", precision]
            out = os.path.join(work, f"{name}-{precision}")
            got, problem = run_opc(opc, m, feeds, out, flags)
            if got is not None:
                problem = compare_close(got["y"], want, TOLERANCE[precision])
                if problem is None and compare_close(got["y"], control,
                                                     TOLERANCE[precision]) is None:
                    problem = f"the output with mode {other} matches too: the case decides nothing"
                expected = 0 if name == "last" or precision != "fp32" else 1
                if problem is None and nhwc_launches(out) != expected:
                    problem = (f"{nhwc_launches(out)} launches of opc_resize_nhwc, "
                               f"expected {expected}")
            print(f"{'FAIL' if problem else 'ok  '} {name}-{precision}" +
                  (f": {problem}" if problem else ""))
            if problem:
                failures.append(f"{name}-{precision}: {problem}")
    return onnx_case.finish(opc, failures, [], work,
                            f"resize channels-last: {len(CASES)} cases in 2 precisions match")


if __name__ == "__main__":
    sys.exit(main())
