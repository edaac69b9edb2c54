#!/usr/bin/env python3
"""NonZero, NonMaxSuppression, Compress and TopK with a run-time K, whose
output size the data decides, through opc,
the CPU runtime, the emitted program's main and the Python package, against
ONNX Runtime.

The program plans NonZero's output for every element being nonzero and
reports each run's dims (net_output_shape); main writes the .npy in those
dims and opc.compile's Program returns arrays of them. So the shapes are
compared exactly, as are the int64 coordinates. ONNX Runtime 1.32 has no
NonZero for float64 and int8: those two are held to NumPy's nonzero, which
the ONNX specification defines NonZero by.

The inputs are image-like fields (sines over a grid) thresholded so that a
structured part of them is zero, on every run-time type and on ranks 0 to
4, plus the edge cases: all zero (a 0-column output), all nonzero, -0.0
(zero) and NaN (nonzero) in the float types.

Negative controls: the comparison must reject NonZero computed with NaN
taken as zero, and with -0.0 taken as nonzero (its bits are not all zero),
on the same inputs: inputs that could not tell those kernels apart would
prove nothing.

NonMaxSuppression runs on detector-like data: anchors on a grid with
jittered sizes (so neighbours overlap by varied amounts), scores from
smooth fields per class, two batches and three classes, in both box
formats (corners given in either diagonal), with and without a score
threshold, and with max_output_boxes_per_class both limiting and not. Some
scores repeat exactly, so the order of ties is tested too. The selected
rows are compared exactly. Each case runs again with its limits as graph
inputs (run-time data, as ONNX's node tests feed them), read by the
kernels. Negative controls: ONNX Runtime's answer with a different IoU
threshold, and with the other box format, must differ from opc's, so the
data decides the outcome.

Compress selects slices of image-like data of every element size (float32,
float16, int64, uint8) along each axis and over the flattened input, with
run-time conditions (their sizes the data's), a condition shorter than the
axis, one that selects nothing, and a constant one (whose size opc knows).
The copies are compared exactly; a negative control compares with the
condition's complement.

TopK with K a graph input takes K values from 0 to the axis's length, on
each axis of an image-like tensor with exact repeats (ties), largest and
smallest; values and indices are compared exactly. Negative control: the
answer for K + 1 differs.

Errors: a NonZero output read by a Transpose is refused (exit 2) with a
message naming the node and the tensor (test_bounded_flow.py tests the
readers that may take one).

usage: test_bounded.py OPC WORK_DIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_exact as compare, reference  # noqa: E402


def field(shape, threshold, dtype):
    """A smooth field over the grid, zero where it is below the threshold."""
    grids = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    v = np.sin(sum((k + 1) * 0.7 * g for k, g in enumerate(grids)) + 0.3)
    return np.where(v > threshold, np.round(v * 50), 0).astype(dtype)


# The types ONNX Runtime has no NonZero kernel for.
NUMPY_ONLY = ("f64", "i8")


def cases():
    f = field((6, 7), 0.2, np.float32)
    f[0, 1], f[2, 3], f[4, 5] = -0.0, np.nan, -0.0
    d = field((5, 4), -0.3, np.float64)
    d[1, 1], d[2, 2] = np.nan, -0.0
    h = field((3, 4, 5), 0.0, np.float16)
    h[0, 0, 0], h[1, 2, 3] = np.nan, -0.0
    return {
        "f32": f,
        "f64": d,
        "f16": h,
        "i64": field((9,), 0.1, np.int64),
        "i32": field((2, 3, 4, 5), 0.5, np.int32),
        "i8": field((4, 6), -0.5, np.int8),
        "u8": field((8, 3), 0.4, np.uint8),
        "bool": field((5, 5), 0.0, np.float32) != 0,
        "scalar": np.array(2.5, np.float32),
        "zeros": np.zeros((3, 4), np.float32),
        "ones": np.ones((2, 3), np.int32),
    }


def model(feeds):
    nodes, inputs, outputs = [], [], []
    for name, x in feeds.items():
        nodes.append(helper.make_node("NonZero", [name], [name + "_at"], name=name + "_nonzero"))
        inputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape))
        outputs.append(onnx.ValueInfoProto(name=name + "_at"))
    return onnx_case.model(nodes, inputs, outputs, opset=13, name="bounded", ir_version=8)


def run_main(opc, path, feeds, work, outputs=None):
    """Compiles for the CPU runtime at -O0 and runs main; the outputs by
    name (each input NAME's NonZero output NAME_at by default)."""
    outputs = outputs or [name + "_at" for name in feeds]
    exe = os.path.join(work, "net")
    env = dict(os.environ, CC=os.environ.get("CC", "cc") + " -Wall -Wextra -Werror")
    p = subprocess.run([opc, path, "-o", exe, "--target", "cpu", "-O0"], capture_output=True,
                       text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"FAIL: opc refused the model: {p.stderr.strip()}")
    cmd = [exe]
    for name, x in feeds.items():
        np.save(os.path.join(work, name + ".npy"), x)
        cmd += ["--input", f"{name}={os.path.join(work, name + '.npy')}"]
    for name in outputs:
        cmd += ["--output", f"{name}={os.path.join(work, name + '.npy')}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: the program exited with {p.returncode}: {p.stderr.strip()[-300:]}")
    return {name: np.load(os.path.join(work, name + ".npy")) for name in outputs}


def run_python(opc, path, feeds, work):
    os.environ["OPC_COMPILER"] = opc
    import opc as package
    with package.compile(path, target="cpu", output_dir=os.path.join(work, "py")) as program:
        outs = program.run(feeds)
    return {name: outs[name + "_at"] for name in feeds}


def wrong_non_zero(x, nan_is_zero):
    """NonZero as a kernel with one of two plausible bugs would compute it."""
    if nan_is_zero:
        hit = np.nan_to_num(x.astype(np.float64), nan=0.0) != 0
    else:  # tests the bits, so -0.0 counts
        hit = np.signbit(x) | (x != 0) if x.dtype.kind == "f" else x != 0
    return np.array(np.nonzero(hit), dtype=np.int64).reshape(max(x.ndim, 1), -1)


def check_refused(opc, work):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4])
    nodes = [helper.make_node("NonZero", ["x"], ["at"], name="nz"),
             helper.make_node("Transpose", ["at"], ["y"], name="flip")]
    graph = helper.make_graph(nodes, "refused", [x], [onnx.ValueInfoProto(name="y")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(work, "refused.onnx")
    onnx.save(m, path)
    p = subprocess.run([opc, path, "-o", os.path.join(work, "refused.c")], capture_output=True,
                       text=True)
    want = "node 'flip' (Transpose): input 'at' has a size known only at run time"
    if p.returncode != 2 or want not in p.stderr:
        return f"NonZero -> Transpose: exit {p.returncode}, {p.stderr.strip()!r}; expected 2 and {want!r}"
    return None


def detections(batches=2, classes=3, side=6):
    """Boxes on a side x side grid with jittered sizes, as corners [y1, x1,
    y2, x2] and as centres [x, y, w, h], and per-class score fields."""
    g = np.arange(side, dtype=np.float64)
    cy, cx = np.meshgrid(g, g, indexing="ij")
    boxes, centres = [], []
    for b in range(batches):
        h = 2.2 + 1.0 * np.sin(cx * 1.3 + cy * 0.7 + b)
        w = 2.2 + 1.0 * np.cos(cx * 0.6 - cy * 1.1 + b)
        y, x = cy + 0.2 * np.sin(cx + b), cx + 0.2 * np.cos(cy - b)
        corners = np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], -1).reshape(-1, 4)
        corners[1::3] = corners[1::3][:, [2, 3, 0, 1]]  # the other diagonal
        boxes.append(corners)
        centres.append(np.stack([x, y, w, h], -1).reshape(-1, 4))
    scores = np.stack([np.stack([0.5 + 0.5 * np.sin(0.9 * cx * (c + 1) - 0.5 * cy + b + c)
                                 for c in range(classes)]).reshape(classes, -1)
                       for b in range(batches)])
    scores = np.round(scores * 20) / 20  # exact repeats: ties
    return (np.array(boxes, np.float32), np.array(centres, np.float32),
            scores.astype(np.float32))


NMS_CASES = [  # name, centre format, max per class, IoU threshold, score threshold or None
    ("corners", 0, 100, 0.3, None),
    ("corners_limited", 0, 11, 0.2, 0.25),  # the limit binds in some classes only
    ("centres", 1, 100, 0.3, 0.4),
    ("centres_limited", 1, 15, 0.2, None),
]


def nms_model(centre, max_per_class, iou, score):
    """NonMaxSuppression with its limits as constants, as detectors export it."""
    boxes = helper.make_tensor_value_info("boxes", onnx.TensorProto.FLOAT, None)
    scores = helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, None)
    inits = [helper.make_tensor("max", onnx.TensorProto.INT64, [1], [max_per_class]),
             helper.make_tensor("iou", onnx.TensorProto.FLOAT, [1], [iou])]
    names = ["boxes", "scores", "max", "iou"]
    if score is not None:
        inits.append(helper.make_tensor("score", onnx.TensorProto.FLOAT, [1], [score]))
        names.append("score")
    node = helper.make_node("NonMaxSuppression", names, ["selected"], center_point_box=centre)
    graph = helper.make_graph([node], "nms", [boxes, scores], [onnx.ValueInfoProto(name="selected")],
                              inits)
    return graph


def limits_as_inputs(m):
    """A copy of an NMS model whose limits are graph inputs (as ONNX's node
    tests feed them), and the feeds that give them their values."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    feeds = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    for name, value in feeds.items():
        elem = onnx.TensorProto.INT64 if value.dtype == np.int64 else onnx.TensorProto.FLOAT
        out.graph.input.append(helper.make_tensor_value_info(name, elem, value.shape))
    del out.graph.initializer[:]
    return out, feeds


def check_nms(opc, work, failures):
    corners, centres, scores = detections()
    for name, centre, max_per_class, iou, score in NMS_CASES:
        feeds = {"boxes": centres if centre else corners, "scores": scores}
        graph = nms_model(centre, max_per_class, iou, score)
        graph.input[0].type.tensor_type.shape.Clear()
        for g in (graph,):
            for i, x in zip(g.input, (feeds["boxes"], feeds["scores"])):
                i.CopyFrom(helper.make_tensor_value_info(i.name, onnx.TensorProto.FLOAT, x.shape))
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        m.ir_version = 8
        case = os.path.join(work, name)
        os.makedirs(case)
        path = os.path.join(case, "model.onnx")
        onnx.save(m, path)
        got = run_main(opc, path, {"boxes": feeds["boxes"], "scores": feeds["scores"]}, case,
                       outputs=["selected"])["selected"]
        want = reference(m, feeds)["selected"]
        why = compare(got, want)
        if why:
            failures.append(f"NonMaxSuppression {name}: {why}")
        # The same limits as run-time data: read by the kernels, same rows.
        runtime, limits = limits_as_inputs(m)
        os.makedirs(os.path.join(case, "limits"))
        onnx.save(runtime, os.path.join(case, "limits", "model.onnx"))
        got_rt = run_main(opc, os.path.join(case, "limits", "model.onnx"), {**feeds, **limits},
                          os.path.join(case, "limits"), outputs=["selected"])["selected"]
        why = compare(got_rt, reference(runtime, {**feeds, **limits})["selected"])
        if why:
            failures.append(f"NonMaxSuppression {name}, limits at run time: {why}")
        if len(want) < 4 or len(want) == scores.shape[0] * scores.shape[1] * min(max_per_class, 36):
            failures.append(f"NonMaxSuppression {name}: {len(want)} rows kept: the case "
                            "suppresses too little or too much to test anything")
        # Negative controls: the outcome must hinge on the threshold and the format.
        other = onnx.ModelProto()
        other.CopyFrom(m)
        other.graph.initializer[1].float_data[0] = iou + 0.15
        if compare(got, reference(other, feeds)["selected"]) is None:
            failures.append(f"NonMaxSuppression {name}: another IoU threshold gives the same rows")
        other.CopyFrom(m)
        other.graph.node[0].attribute[0].i = 1 - centre
        if compare(got, reference(other, feeds)["selected"]) is None:
            failures.append(f"NonMaxSuppression {name}: the other box format gives the same rows")
    return len(NMS_CASES)


def check_compress(opc, work, failures):
    """Compress on several axes and types in one program, against ORT."""
    x = field((4, 5, 6), -2.0, np.float32) + 0.25
    feeds = {"x": x, "h": x.astype(np.float16), "q": (x * 7).astype(np.int64),
             "b": np.abs(x * 3).astype(np.uint8),
             "c0": np.array([1, 0, 1, 1], bool), "c1": np.array([0, 1, 1], bool),
             "c2": x[0, 0] > 0, "cf": (x.reshape(-1)[:50] > 10), "cz": np.zeros(6, bool)}
    T = onnx.TensorProto
    cases = [("x", "c0", 0), ("x", "c1", 1), ("x", "c2", 2), ("x", "cf", None), ("x", "cz", 2),
             ("h", "c1", -2), ("q", "c0", 0), ("b", "cf", None), ("x", "ck", 1)]
    nodes, outputs = [], []
    for k, (data, cond, axis) in enumerate(cases):
        attrs = {} if axis is None else {"axis": axis}
        nodes.append(helper.make_node("Compress", [data, cond], [f"y{k}"], **attrs))
        outputs.append(onnx.ValueInfoProto(name=f"y{k}"))
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for n, v in feeds.items()]
    known = helper.make_tensor("ck", T.BOOL, [5], [0, 1, 0, 0, 1])
    graph = helper.make_graph(nodes, "compress", inputs, outputs, [known])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    case = os.path.join(work, "compress")
    os.makedirs(case)
    path = os.path.join(case, "model.onnx")
    onnx.save(m, path)
    got = run_main(opc, path, feeds, case, outputs=[f"y{k}" for k in range(len(cases))])
    want = reference(m, feeds)
    for k, (data, cond, axis) in enumerate(cases):
        why = compare(got[f"y{k}"], want[f"y{k}"])
        if why:
            failures.append(f"Compress {data} by {cond} on axis {axis}: {why}")
    # Negative control: the complement's selection is another answer.
    flipped = dict(feeds, c0=~feeds["c0"])
    if compare(got["y0"], reference(m, flipped)["y0"]) is None:
        failures.append("Compress: the complement of the condition gives the same slices")
    return len(cases)


def check_topk(opc, work, failures):
    """TopK with a run-time K, one program per K vector, against ORT."""
    x = np.round(field((3, 7, 5), -2.0, np.float32) / 8)  # repeats: ties
    cases = [(1, 1, 3), (0, 0, 2), (2, 1, 5), (-2, 0, 0), (1, 0, 7)]  # axis, largest, K
    T = onnx.TensorProto
    nodes, inputs, outputs, feeds = [], [helper.make_tensor_value_info("x", T.FLOAT, x.shape)], [], {"x": x}
    for k, (axis, largest, K) in enumerate(cases):
        nodes.append(helper.make_node("TopK", ["x", f"k{k}"], [f"v{k}", f"i{k}"], axis=axis,
                                      largest=largest))
        inputs.append(helper.make_tensor_value_info(f"k{k}", T.INT64, [1]))
        outputs += [onnx.ValueInfoProto(name=f"v{k}"), onnx.ValueInfoProto(name=f"i{k}")]
        feeds[f"k{k}"] = np.array([K], np.int64)
    graph = helper.make_graph(nodes, "topk", inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    case = os.path.join(work, "topk")
    os.makedirs(case)
    path = os.path.join(case, "model.onnx")
    onnx.save(m, path)
    names = [o.name for o in outputs]
    got = run_main(opc, path, feeds, case, outputs=names)
    want = reference(m, feeds)
    for name in names:
        why = compare(got[name], want[name])
        if why:
            failures.append(f"TopK {name} (axis, largest, K = {cases[int(name[1:])]}): {why}")
    more = dict(feeds, k0=feeds["k0"] + 1)
    if compare(got["v0"], reference(m, more)["v0"]) is None:
        failures.append("TopK: K + 1 gives the same values")
    return len(cases)


def main():
    opc, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    feeds = cases()
    m = model(feeds)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    by_ort = {n: x for n, x in feeds.items() if n not in NUMPY_ONLY}
    by_ort_outputs = reference(model(by_ort), by_ort)
    want = {n: by_ort_outputs[n + "_at"] for n in by_ort}
    for n in NUMPY_ONLY:
        want[n] = np.array(np.nonzero(feeds[n]), dtype=np.int64)
    failures = []
    for how, got in (("main", run_main(opc, path, feeds, work)),
                     ("python", run_python(opc, path, feeds, work))):
        for name in feeds:
            why = compare(got[name + "_at" if how == "main" else name], want[name])
            if why:
                failures.append(f"{how} {name}: {why}")
    # Negative controls: each plausible wrong kernel must be told apart.
    for nan_is_zero in (True, False):
        if all(compare(wrong_non_zero(feeds[n], nan_is_zero), want[n]) is None
               for n in ("f32", "f16")):
            failures.append(f"negative control (nan_is_zero={nan_is_zero}) passed")
    why = check_refused(opc, work)
    if why:
        failures.append(why)
    nms_cases = check_nms(opc, work, failures)
    compress_cases = check_compress(opc, work, failures)
    topk_cases = check_topk(opc, work, failures)
    counts = ", ".join(f"{n} {want[n].shape[1]}" for n in feeds)
    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        sys.exit(1)
    print(f"bounded: NonZero on {len(feeds)} inputs (nonzeros: {counts}) matches ONNX Runtime "
          "through main and Python; both negative controls fail; a reader is refused; "
          f"NonMaxSuppression matches in {nms_cases} cases, with constant and with run-time "
          "limits, and differs from the references "
          f"with another threshold or box format; Compress matches in {compress_cases} cases; "
          f"TopK with a run-time K in {topk_cases}")


if __name__ == "__main__":
    main()
