#!/usr/bin/env python3
"""NonZero at run time, whose output size the data decides, through opc,
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

Errors: a NonZero output read by another node is refused (exit 2) with a
message naming the node and the tensor: no kernel reads a run-time size
yet.

usage: test_bounded.py OPC WORK_DIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
import onnxruntime as ort  # noqa: E402


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
    graph = helper.make_graph(nodes, "bounded", inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def compare(got, want):
    """None when got is want exactly: dtype, shape and every element."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if not (got == want).all():
        return f"{int((got != want).sum())} of {got.size} coordinates differ"
    return None


def run_main(opc, path, feeds, work):
    exe = os.path.join(work, "net")
    env = dict(os.environ, CC=os.environ.get("CC", "cc") + " -Wall -Wextra -Werror")
    p = subprocess.run([opc, path, "-o", exe, "--target", "cpu", "-O0"], capture_output=True,
                       text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"FAIL: opc refused the model: {p.stderr.strip()}")
    cmd = [exe]
    for name, x in feeds.items():
        np.save(os.path.join(work, name + ".npy"), x)
        cmd += ["--input", f"{name}={os.path.join(work, name + '.npy')}",
                "--output", f"{name}_at={os.path.join(work, name + '_at.npy')}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: the program exited with {p.returncode}: {p.stderr.strip()[-300:]}")
    return {name: np.load(os.path.join(work, name + "_at.npy")) for name in feeds}


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


def main():
    opc, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    feeds = cases()
    m = model(feeds)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    by_ort = {n: x for n, x in feeds.items() if n not in NUMPY_ONLY}
    ort_path = os.path.join(work, "ort.onnx")
    onnx.save(model(by_ort), ort_path)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = dict(zip(by_ort, ort.InferenceSession(ort_path, so, providers=["CPUExecutionProvider"])
                    .run(None, by_ort)))
    for n in NUMPY_ONLY:
        want[n] = np.array(np.nonzero(feeds[n]), dtype=np.int64)
    failures = []
    for how, got in (("main", run_main(opc, path, feeds, work)),
                     ("python", run_python(opc, path, feeds, work))):
        for name in feeds:
            why = compare(got[name], want[name])
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
    counts = ", ".join(f"{n} {want[n].shape[1]}" for n in feeds)
    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        sys.exit(1)
    print(f"bounded: NonZero on {len(feeds)} inputs (nonzeros: {counts}) matches ONNX Runtime "
          "through main and Python; both negative controls fail; a reader is refused")


if __name__ == "__main__":
    main()
