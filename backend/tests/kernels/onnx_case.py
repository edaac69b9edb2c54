"""What the kernel tests share: a model from a few nodes, ONNX Runtime's
outputs for it, opc's program's outputs for it, and the two comparisons.

Programs are compiled for the CPU runtime with -Wall -Wextra -Werror added
to the C compiler (CC, which meson's run_test_env sets, with CFLAGS=-O0).
Every function returns outputs by name, in the graph's order.
"""
import os
import shutil
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper


def model(nodes, inputs, outputs, inits=(), opset=13, name="case", ir_version=9):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m


def value_info(name, array):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype),
                                         array.shape)


def reference(m, feeds, optimise=True):
    """ONNX Runtime's outputs by name. optimise=False runs the graph as
    written (a Q/DQ pattern stays float, not fused into an integer node)."""
    so = ort.SessionOptions()
    if not optimise:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in m.graph.output]
    return dict(zip(names, sess.run(names, {i.name: feeds[i.name] for i in m.graph.input})))


def compile_cpu(opc, m, work, flags=()):
    """Saves m in a fresh `work` and compiles it for the CPU runtime:
    (exe, None), or (None, (status, message)) when opc refuses it."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    exe = os.path.join(work, "net")
    env = dict(os.environ, CC=os.environ.get("CC", "cc") + " -Wall -Wextra -Werror")
    p = subprocess.run([opc, path, "-o", exe, "--target", "cpu", *flags], capture_output=True,
                       text=True, env=env)
    if p.returncode != 0:
        return None, (p.returncode, (p.stdout + p.stderr).strip())
    return exe, None


def run_program(exe, m, feeds, work):
    """The program's outputs by name, or a string saying why not."""
    cmd, files = [exe], {}
    for i in m.graph.input:
        f = os.path.join(work, i.name + ".npy")
        np.save(f, feeds[i.name])
        cmd += ["--input", f"{i.name}={f}"]
    for o in m.graph.output:
        files[o.name] = os.path.join(work, o.name + ".out.npy")
        cmd += ["--output", f"{o.name}={files[o.name]}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return f"the program exited with {p.returncode}: {p.stderr.strip()[-300:]}"
    return {k: np.load(f) for k, f in files.items()}


def run_opc(opc, m, feeds, work, flags=()):
    """Compiles and runs m: (outputs by name, None), or (None, (status,
    message)) when opc refuses it, or (None, why) when the program fails."""
    exe, why = compile_cpu(opc, m, work, flags)
    if exe is None:
        return None, why
    got = run_program(exe, m, feeds, work)
    return (None, got) if isinstance(got, str) else (got, None)


def compare_exact(got, want):
    """None when got is want exactly: type, shape and every element; else
    what differs. A NaN in want is an error, never a pass."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "fc" and np.isnan(want).any():
        return "the reference holds NaN"
    same = got == want
    if not same.all():
        i = int(np.argmin(same.reshape(-1)))
        return (f"{int((~same).sum())} of {got.size} differ; first at {i}: got "
                f"{got.reshape(-1)[i]!r}, expected {want.reshape(-1)[i]!r}")
    return None


def compare_close(got, want, rel):
    """None when got has want's type and shape and every error is within
    rel of want's largest magnitude; else what differs. A NaN in want is an
    error, and so is an all-zero want, which would decide nothing."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    w = want.astype(np.float64)
    if np.isnan(w).any():
        return "the reference holds NaN"
    scale = float(np.abs(w).max()) if w.size else 0.0
    if scale == 0.0:
        return "the reference is all zeros: the case decides nothing"
    err = np.abs(got.astype(np.float64) - w)
    if not (err <= rel * scale).all():  # a NaN in got fails here too
        i = int(np.nanargmax(np.where(np.isnan(err), np.inf, err)))
        return (f"error {err.reshape(-1)[i]:.3g} at {i} beyond {rel:g} of {scale:.3g}: got "
                f"{got.reshape(-1)[i]!r}, expected {want.reshape(-1)[i]!r}")
    return None
