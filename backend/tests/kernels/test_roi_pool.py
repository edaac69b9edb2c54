#!/usr/bin/env python3
"""RoiAlign, MaxPool's Indices, MaxUnpool and Dropout's mask through opc, the
CPU runtime and the emitted program, against ONNX Runtime: the forms the
ONNX node tests miss.

One opset-16 model holds every case as a node of its own, so the sweep is
one program (built at -O0), run again with every input an initializer so
that opc's evaluator computes it at compile time (a second program):
  - RoiAlign on an image-like input (smooth shading and an edge), two
    images, in both modes (avg, max), both coordinate modes (half_pixel,
    output_half_pixel) and sampling_ratio 0 (adaptive) and 2, with
    spatial_scale 0.5; rois inside, partly outside and one past the
    input's corner; the batch indices are computed at run time (a Cast
    from float), so the kernel reads them from memory;
  - MaxPool's Indices with storage_order 0 and 1, with pads and strides,
    with dilations, on a 3-d pool, and on an input rounded to halves so
    that windows hold ties (the first largest wins);
  - MaxUnpool of a MaxPool's values and indices, without output_shape and
    with a larger constant one, and of overlapping windows (indices two
    windows share). With output_shape ONNX Runtime scatters the indices
    into the larger shape, the ONNX reference (and the node test
    test_maxunpool_export_with_output_shape) into the unpooled shape,
    zeros added after each axis; opc follows the reference, so that case
    is compared with onnx.reference;
  - Dropout's mask in inference, and training mode with a constant ratio
    of 0 (the identity, all kept).
Floats are compared against the output's scale (1e-5 of the largest
magnitude: both compute in float32), indices and masks exactly. A NaN in
the reference is an error. Negative controls: the comparison must reject
RoiAlign's output of the other coordinate mode (half a pixel away) and
MaxPool's Indices of the other storage_order.

Errors: rois of the wrong shape, an unknown mode, an empty input plane, a
constant batch index past the batch, MaxUnpool's output_shape at run time
or smaller than its windows, training-mode Dropout of ratio 0.5 and a
storage_order of 2 are refused with exit status 2 and a message naming
the problem.

usage: test_roi_pool.py OPC WORK_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import (check_refusals, compare_close, compare_exact, reference,  # noqa: E402
                       run_opc, value_info)

rng = np.random.default_rng(49)


def model(nodes, inputs, outputs, inits):
    return onnx_case.model(nodes, inputs, outputs, inits, 16, name="roi_pool")


def image(n, c, *spatial):
    """Smooth shading with a sharp edge, different per image and channel."""
    axes = np.meshgrid(*[np.linspace(0, 1, s) for s in spatial], indexing="ij")
    out = np.empty((n, c) + spatial, np.float32)
    for b in range(n):
        for ch in range(c):
            v = 0.5 + 0.3 * np.sin(3 * axes[-1] + b + ch) * np.cos(2 * axes[0] - ch)
            v += 0.4 * (axes[-1] + 0.3 * axes[0] > 0.55 + 0.1 * ch)
            out[b, ch] = v
    return out


def cases():
    """The nodes, their outputs, the float feeds, the initializers, and
    which outputs are compared exactly; plus the controls (output: the
    twin whose values it must not match)."""
    x = image(2, 3, 12, 14)
    feeds = {
        "x": x,
        # Halves only: neighbouring elements tie, so the first largest
        # of a window must be the one chosen.
        "x_ties": np.round(x * 2) / 2,
        "x3": image(1, 2, 5, 6, 7),
        # Boxes in twice the input's scale (spatial_scale 0.5): inside,
        # partly outside, past the bottom-right corner, thin, one large.
        "rois": np.array([[2, 2, 14, 12], [-4, 6, 10, 30], [20, 18, 34, 30],
                          [6, 1, 7.5, 20], [0, 0, 27, 23]], np.float32),
        "batch_f": np.array([1, 0, 1, 0, 1], np.float32),
    }
    nodes = [helper.make_node("Cast", ["batch_f"], ["batch"], to=onnx.TensorProto.INT64)]
    outs, exact, twins = [], set(), {}
    for mode in ("avg", "max"):
        for coords in ("half_pixel", "output_half_pixel"):
            for sampling in (0, 2):
                name = f"roi-{mode}-{coords}-s{sampling}"
                nodes.append(helper.make_node(
                    "RoiAlign", ["x", "rois", "batch"], [name], mode=mode,
                    coordinate_transformation_mode=coords, output_height=3, output_width=4,
                    sampling_ratio=sampling, spatial_scale=0.5))
                outs.append(name)
                if coords == "half_pixel":
                    twins[name] = f"roi-{mode}-output_half_pixel-s{sampling}"

    def pool(name, x, **attrs):
        nodes.append(helper.make_node("MaxPool", [x], [name, name + "-indices"], **attrs))
        outs.extend([name, name + "-indices"])
        exact.add(name + "-indices")

    for order in (0, 1):
        pool(f"pool-pads-order{order}", "x", kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1], storage_order=order)
    twins["pool-pads-order0-indices"] = "pool-pads-order1-indices"
    pool("pool-dilated", "x", kernel_shape=[2, 3], dilations=[2, 2], strides=[1, 2])
    pool("pool-ties", "x_ties", kernel_shape=[3, 3], strides=[1, 1])
    pool("pool-3d", "x3", kernel_shape=[2, 2, 3], strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 1])
    # MaxUnpool of non-overlapping windows, with and without output_shape,
    # and of overlapping ones (3 x 3 windows at stride 1 share taps).
    pool("pool-2x2", "x", kernel_shape=[2, 2], strides=[2, 2])
    nodes.append(helper.make_node("MaxUnpool", ["pool-2x2", "pool-2x2-indices"], ["unpool"],
                                  kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("MaxUnpool", ["pool-2x2", "pool-2x2-indices", "shape"],
                                  ["unpool-shaped"], kernel_shape=[2, 2], strides=[2, 2]))
    pool("pool-overlap", "x", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes.append(helper.make_node("MaxUnpool", ["pool-overlap", "pool-overlap-indices"],
                                  ["unpool-overlap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    outs += ["unpool", "unpool-shaped", "unpool-overlap"]
    nodes.append(helper.make_node("Dropout", ["x"], ["dropped", "mask"]))
    nodes.append(helper.make_node("Dropout", ["x", "zero", "true"], ["trained", "trained-mask"]))
    outs += ["dropped", "mask", "trained", "trained-mask"]
    exact |= {"mask", "trained-mask"}
    inits = [numpy_helper.from_array(np.array([2, 3, 13, 15], np.int64), "shape"),
             numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(True), "true")]
    return nodes, outs, feeds, inits, exact, twins


def unpool_reference(nodes, feeds, inits):
    """The ONNX reference's MaxUnpool with output_shape (see the top)."""
    wanted = {"pool-2x2", "unpool-shaped"}
    sub = [nd for nd in nodes if set(nd.output) & wanted]
    m = model(sub, [value_info("x", feeds["x"])], [onnx.ValueInfoProto(name="unpool-shaped")],
              [i for i in inits if i.name == "shape"])
    return ReferenceEvaluator(m).run(None, {"x": feeds["x"]})[0]


def error_cases():
    """(name, model, text opc's message must hold)."""
    x = value_info("x", np.zeros((2, 3, 8, 8), np.float32))
    out = [onnx.ValueInfoProto(name="y")]

    def roi(rois_shape, batch, **attrs):
        node = helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], **attrs)
        return model([node], [x, value_info("r", np.zeros(rois_shape, np.float32))], out,
                     [numpy_helper.from_array(np.array(batch, np.int64), "b")])

    shape_in = value_info("s", np.zeros(4, np.float32))
    unpool = model([helper.make_node("Cast", ["s"], ["si"], to=onnx.TensorProto.INT64),
                    helper.make_node("MaxUnpool", ["x", "i", "si"], ["y"], kernel_shape=[2, 2])],
                   [x, shape_in], out,
                   [numpy_helper.from_array(np.zeros((2, 3, 8, 8), np.int64), "i")])
    small = model([helper.make_node("MaxUnpool", ["x", "i", "s"], ["y"], kernel_shape=[2, 2])],
                  [x], out, [numpy_helper.from_array(np.zeros((2, 3, 8, 8), np.int64), "i"),
                             numpy_helper.from_array(np.array([2, 3, 4, 9], np.int64), "s")])
    dropout = model([helper.make_node("Dropout", ["x", "r", "t"], ["y"])], [x], out,
                    [numpy_helper.from_array(np.array(0.5, np.float32), "r"),
                     numpy_helper.from_array(np.array(True), "t")])
    order = model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2],
                                    storage_order=2)], [x], out, [])
    return [
        ("rois [2, 3]", roi((2, 3), [0, 1]), "rois must be [R, 4]"),
        ("RoiAlign mode min", roi((2, 4), [0, 1], mode="min"), "unknown mode 'min'"),
        ("RoiAlign of an empty plane", model(
            [helper.make_node("RoiAlign", ["e", "r", "b"], ["y"])],
            [value_info("e", np.zeros((1, 3, 0, 8), np.float32)),
             value_info("r", np.zeros((2, 4), np.float32))], out,
            [numpy_helper.from_array(np.array([0, 0], np.int64), "b")]), "has an empty plane"),
        ("batch index past the batch", roi((2, 4), [0, 2]), "batch_indices[1] is 2"),
        ("MaxUnpool output_shape at run time", unpool, "output_shape input 'si' is not a "
         "compile-time constant"),
        ("MaxUnpool output_shape smaller than the windows", small,
         "output_shape[2] is 4, less than the 9"),
        ("training Dropout of ratio 0.5", dropout, "unless its ratio is a constant 0"),
        ("storage_order 2", order, "attribute 'storage_order' is 2"),
    ]


def main():
    opc, work = sys.argv[1:3]
    nodes, outs, feeds, inits, exact, twins = cases()
    outputs = [onnx.ValueInfoProto(name=o) for o in outs]
    run_time = model(nodes, [value_info(k, v) for k, v in feeds.items()], outputs, inits)
    folded = model(nodes, [], outputs,
                   inits + [numpy_helper.from_array(v, k) for k, v in feeds.items()])
    wants = reference(run_time, feeds)
    wants["unpool-shaped"] = unpool_reference(nodes, feeds, inits)
    failures = 0
    for label, m in (("run time", run_time), ("folded", folded)):
        gots, why = run_opc(opc, m, feeds, os.path.join(work, label.replace(" ", "-")))
        if why:
            print(f"FAIL {label}: {why}")
            failures += 1
            continue
        for name, want in wants.items():
            if name in exact:
                why = compare_exact(gots[name], want)
            else:
                why = compare_close(gots[name], want, 1e-5)
            print(f"{'FAIL' if why else 'ok  '} {label} {name}{': ' + why if why else ''}")
            failures += why is not None
    # Negative controls: half a pixel off, or the other storage order,
    # must not pass.
    for name, twin in twins.items():
        compare = compare_exact if name in exact else lambda g, w: compare_close(g, w, 1e-5)
        if compare(wants[twin], wants[name]) is None:
            print(f"FAIL control {name}: the comparison accepts {twin}'s output")
            failures += 1
        else:
            print(f"ok   control {name}: {twin}'s output is told apart")
    failures += check_refusals(opc, error_cases(), work)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
