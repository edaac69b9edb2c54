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
from onnx import helper, numpy_helper


def smooth(rng, *shape):
    """An input that moves the output: sums of a few slow waves along the
    last two axes, with a little noise."""
    grid = np.meshgrid(*[np.linspace(0, 1, d) for d in shape[-2:]], indexing="ij")
    img = np.zeros(shape, np.float32)
    for index in np.ndindex(*shape[:-2]):
        f = rng.uniform(0.5, 2.0, 2)
        img[index] = 2 * np.sin(2 * np.pi * (f[0] * grid[0] + f[1] * grid[1]) + rng.uniform(0, 6.3))
    return img + rng.normal(0, 0.05, shape).astype(np.float32)


def model(nodes, inputs, outputs, inits=(), opset=13, name="case", ir_version=9):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m


def value_info(name, array):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype),
                                         array.shape)


def const(name, value, dtype=np.float32):
    """An initializer of the value as that dtype."""
    return numpy_helper.from_array(np.array(value, dtype), name)


def out(name):
    """A graph output whose type and shape opc infers."""
    v = onnx.ValueInfoProto()
    v.name = name
    return v


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


def compile_cpu(opc, m, work, flags=(), target="cpu"):
    """Saves m in a fresh `work` and compiles it for the CPU runtime, as the
    CPU program (target "cpu") or the GPU program on the stand-in for CUDA
    ("stand-in"): (exe, None), or (None, (status, message)) when opc
    refuses it."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    exe = os.path.join(work, "net")
    env = dict(os.environ, CC=os.environ.get("CC", "cc") + " -Wall -Wextra -Werror")
    p = subprocess.run([opc, path, "-o", exe, "--target", target, *flags], capture_output=True,
                       text=True, env=env)
    if p.returncode != 0:
        return None, (p.returncode, (p.stdout + p.stderr).strip())
    return exe, None


# ------------------------------------- the CPU program and the GPU program

def stand_in_dir(work):
    return work.rstrip("/") + "-stand-in"


def compile_targets(opc, m, work, flags=()):
    """m compiled as both programs the CPU runtime runs: the CPU program
    (--target cpu) in `work`, and the GPU program on the stand-in for CUDA
    (--target stand-in) in stand_in_dir(work). ({"cpu": exe, "stand-in":
    exe}, None), or (None, (status, message)) when opc refuses either. Where
    the two targets emit the same C (no node has a CPU kernel of its own),
    the stand-in's executable is the CPU program's: the same source is not
    built twice. The CPU program is written for a CPU with AVX-512 VNNI
    whatever this machine has, so that its int8 convolutions are packed
    on any machine (where the instructions are missing, the kernel's plain
    body runs them)."""
    exe, why = compile_cpu(opc, m, work, (*flags, "--cpu-features", "vnni"))
    if exe is None:
        return None, why
    other = stand_in_dir(work)
    shutil.rmtree(other, ignore_errors=True)
    os.makedirs(other)
    model_path, source = os.path.join(work, "model.onnx"), os.path.join(other, "net.c")
    p = subprocess.run([opc, model_path, "-o", source, "--target", "stand-in", *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.returncode, "--target stand-in: " + (p.stdout + p.stderr).strip())
    weights = [os.path.abspath(os.path.join(d, "net.weights")) for d in (work, other)]
    with open(os.path.join(work, "net.c")) as f, open(source) as g:
        same = f.read().replace(*weights) == g.read()  # but for the weights' path
    if same:
        return {"cpu": exe, "stand-in": exe}, None
    gpu, why = compile_cpu(opc, m, other, flags, target="stand-in")
    if gpu is None:
        return None, (why[0], "--target stand-in: " + why[1])
    return {"cpu": exe, "stand-in": gpu}, None


def packed_launches(work):
    """The CPU program's (in `work`) launches of its packed int8 convolution."""
    with open(os.path.join(work, "net.c")) as f:
        return f.read().count("cuLaunchKernel(c->kernel.opc_int8_conv_packed_")


def run_targets(exes, m, feeds, work):
    """Both programs' run (compile_targets): the CPU program's outputs by
    name once the GPU program's are the same bits, or a string saying why
    not (either fails, or they differ)."""
    got = run_program(exes["cpu"], m, feeds, work)
    if isinstance(got, str) or exes["stand-in"] == exes["cpu"]:
        return got
    gpu = run_program(exes["stand-in"], m, feeds, stand_in_dir(work))
    if isinstance(gpu, str):
        return "--target stand-in: " + gpu
    for name, value in got.items():
        why = compare_exact(value, gpu[name])
        if why:
            return f"the CPU program's {name} is not the GPU program's (stand-in): {why}"
    return got


def run_opc_targets(opc, m, feeds, work, flags=()):
    """run_opc for both programs: (the CPU program's outputs, None) when the
    GPU program's on the stand-in are the same bits; else (None, why)."""
    exes, why = compile_targets(opc, m, work, flags)
    if exes is None:
        return None, why
    got = run_targets(exes, m, feeds, work)
    return (None, got) if isinstance(got, str) else (got, None)


CUDA = os.environ.get("OPC_CUDA", "/usr/local/cuda")


def real_cuda_compile(opc, m, work, flags=()):
    """None when the GPU program's net.c (opc's flags) compiles against the
    real CUDA headers with -Werror (or no toolkit is installed), else why
    not."""
    if not os.path.exists(os.path.join(CUDA, "include", "cuda_runtime.h")):
        print(f"note: no CUDA toolkit at {CUDA}: the real-header build is not checked")
        return None
    os.makedirs(work, exist_ok=True)
    path, net_c = os.path.join(work, "model.onnx"), os.path.join(work, "net.c")
    onnx.save(m, path)
    p = subprocess.run([opc, path, "-o", net_c, *flags], capture_output=True, text=True)
    if p.returncode != 0:
        return "opc refused the GPU program: " + (p.stdout + p.stderr)[-600:]
    cc = os.environ.get("CC", "cc").split()[0]
    p = subprocess.run([cc, "-c", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(CUDA, "include"),
                        net_c, "-o", os.path.join(work, "net.o")], capture_output=True, text=True)
    return None if p.returncode == 0 else "the real CUDA build fails: " + p.stderr[-600:]


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


# ------------------------------------------------- several cases, one program

def run_phases(exe, m, feeds_of, work, rel, label=""):
    """The program's runs on feeds_of(0) and feeds_of(1) against ONNX
    Runtime: (failures, runs), runs a list of (feeds, want, got). Every
    float output must be within rel of its scale, the others exactly; a run
    that fails ends the list."""
    failures, runs = [], []
    for phase in (0, 1):
        f = feeds_of(phase)
        want = reference(m, f)
        got = run_program(exe, m, f, work)
        if isinstance(got, str):
            return failures + [got], runs
        for o in m.graph.output:
            w = want[o.name]
            why = (compare_close(got[o.name], w, rel) if w.dtype.kind == "f"
                   else compare_exact(got[o.name], w))
            if why:
                failures.append(f"{label}phase {phase}, {o.name}: {why}")
        runs.append((f, want, got))
    return failures, runs


def prefixed(m, prefix):
    """A copy of m's graph with every value, node and initializer name
    prefixed, so that the graphs of several cases can share one model (an
    empty name, an absent optional input, stays empty)."""
    g = onnx.GraphProto()
    g.CopyFrom(m.graph)

    def rename(name):
        return prefix + name if name else name

    for v in list(g.input) + list(g.output) + list(g.value_info):
        v.name = rename(v.name)
    for t in g.initializer:
        t.name = rename(t.name)
    for n in g.node:
        n.name = rename(n.name)
        n.input[:] = [rename(x) for x in n.input]
        n.output[:] = [rename(x) for x in n.output]
    return g


def merged(models, opset, ir_version=8):
    """One model of every model's graph, model k's names prefixed "c<k>_"."""
    graphs = [prefixed(m, "c%d_" % k) for k, m in enumerate(models)]
    return model([n for g in graphs for n in g.node], [v for g in graphs for v in g.input],
                 [v for g in graphs for v in g.output], [t for g in graphs for t in g.initializer],
                 opset, name="cases", ir_version=ir_version)


def batches(items, model_of, limit=48):
    """Runs of items whose models have one opset and, together, at most
    `limit` graph inputs and outputs (one program stays small): yields
    (opset, run)."""
    by_opset = {}
    for item in items:
        by_opset.setdefault(model_of(item).opset_import[0].version, []).append(item)
    for opset, group in sorted(by_opset.items()):
        run, inputs, outputs = [], 0, 0
        for item in group:
            m = model_of(item)
            i, o = len(m.graph.input), len(m.graph.output)
            if run and (inputs + i > limit or outputs + o > limit):
                yield opset, run
                run, inputs, outputs = [], 0, 0
            run.append(item)
            inputs, outputs = inputs + i, outputs + o
        if run:
            yield opset, run


def check_refusals(opc, cases, work):
    """Each (name, model, text) of cases must be refused by opc with status 2
    and a message holding text. Prints a line for each; returns the count
    that were not."""
    failures = 0
    for name, m, text in cases:
        exe, why = compile_cpu(opc, m, os.path.join(work, "error-" + name.replace(" ", "-")))
        if exe is not None:
            why = "opc compiled it"
        ok = isinstance(why, tuple) and why[0] == 2 and text in why[1]
        print(f"{'ok  ' if ok else 'FAIL'} refuses {name}: {why}")
        failures += not ok
    return failures


def finish(opc, failures, refusals, work, summary):
    """A test's end: prints its failures, then checks its refusals (as
    check_refusals); the exit status, 1 when anything failed, else 0 after
    printing summary."""
    for f in failures:
        print("FAIL " + f)
    refused = check_refusals(opc, refusals, work)
    if failures or refused:
        return 1
    print(summary)
    return 0
