#!/usr/bin/env python3
"""End to end through opc's kernel emitters on ONNX's own node tests whose
parameters (pads, starts, indices, repeats, shapes, axes, roi, scales,
sizes) arrive as graph inputs: opc needs them at compile time, so this test
turns them into initializers, taking their values from test_data_set_0,
then compiles with `opc --target cpu`, runs every data set whose parameters
have those same values and compares with the expected outputs.

When the CUDA toolkit is there (OPC_CUDA, default /usr/local/cuda), the
kernel source each net.c carries is also compiled with NVRTC, which needs
no GPU (net_source_check.c).

The tests of one opset share a program (onnx_case.merged: each test's names
prefixed), run once per data set round and compared test by test; where a
shared program cannot be built or run, each of its tests is tried alone,
and so is every test expected to be rejected.

usage: test_onnx_nodes.py OPC NODE_TEST_DIR WORK_DIR [-k SUBSTRING]
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_case import batches, merged  # noqa: E402

# Tests of operators printed by opc's kernels (or by the core's copies),
# chosen by name prefix.
PREFIXES = ["test_resize_", "test_upsample_", "test_slice", "test_constant_pad", "test_edge_pad",
            "test_reflect_pad", "test_gather_0", "test_gather_1", "test_gather_2d",
            "test_gather_negative", "test_tile", "test_expand_", "test_reduce_sum_",
            "test_clip", "test_split_", "test_depthtospace", "test_spacetodepth"]

# Float inputs that are parameters rather than data: (op, input index).
FLOAT_PARAMETERS = {("Resize", 1), ("Resize", 2), ("Upsample", 1), ("Pad", 2)}

# Tests opc declines on purpose, with the reason (none today: the int32 and
# int8 data and the empty slice once listed here all pass).
EXPECTED_REJECTIONS = {}

TOLERANCE = 1e-4
CUDA = os.environ.get("OPC_CUDA", "/usr/local/cuda")
HERE = os.path.dirname(os.path.abspath(__file__))


def nvrtc_check(work):
    """None when net.c's kernel source compiles with NVRTC (or there is
    none, or no toolkit), else the problem."""
    net_c = os.path.join(work, "net.c")
    with open(net_c) as f:
        if "net_kernel_source" not in f.read():
            return None
    if not os.path.exists(os.path.join(CUDA, "include", "nvrtc.h")):
        return None
    exe = os.path.join(work, "net_source_check")
    lib = os.path.join(CUDA, "lib64")
    cmd = [os.environ.get("CC", "cc"), f'-DNET_C="{net_c}"', "-I", os.path.join(CUDA, "include"),
           os.path.join(HERE, "net_source_check.c"), "-o", exe, "-L", lib,
           "-L", os.path.join(lib, "stubs"), f"-Wl,-rpath,{lib}",
           "-lnvrtc", "-lcudnn", "-lcublasLt", "-lcublas", "-lcudart", "-lcuda", "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return "net_source_check does not build: " + p.stderr[-300:]
    # The driver library exists only as a link-time stub here; the check never
    # calls it, so the stub, under the name the loader asks for, will do.
    stub = os.path.join(work, "libcuda.so.1")
    if not os.path.exists(stub):
        os.symlink(os.path.join(lib, "stubs", "libcuda.so"), stub)
    env = dict(os.environ, LD_LIBRARY_PATH=work + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    p = subprocess.run([exe, "compute_80"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return "NVRTC rejects net.c's kernel source: " + p.stderr[-500:]
    return None


def load_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def parameter_inputs(model):
    """Names of the graph inputs to bake: non-float ones and float parameters."""
    init = {t.name for t in model.graph.initializer}
    names = set()
    for i in model.graph.input:
        if i.name in init:
            continue
        if i.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            names.add(i.name)
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            if (node.op_type, k) in FLOAT_PARAMETERS and name:
                names.add(name)
    return names


def compare(got, want):
    if got.size != want.size:
        return f"shape {got.shape}, expected {want.shape}"
    got = got.reshape(want.shape).astype(np.float64)
    want = want.astype(np.float64)
    if (np.isnan(got) != np.isnan(want)).any():
        return "NaN at different positions"
    ok = ~np.isnan(want) & (got != want)
    bad = np.abs(got[ok] - want[ok]) > TOLERANCE + TOLERANCE * np.abs(want[ok])
    if bad.any():
        i = int(np.argmax(bad))
        return f"got {got[ok][i]!r}, expected {want[ok][i]!r}"
    return None


class Case:
    """One node test with its parameters baked: the model, the names of
    the inputs it keeps, and the data sets whose parameters are the baked
    ones (directories)."""

    def __init__(self, test_dir):
        self.name = os.path.basename(test_dir)
        model = onnx.load(os.path.join(test_dir, "model.onnx"))
        init = {t.name for t in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in init]
        bake = parameter_inputs(model)
        sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
        values = {}
        for k, iname in enumerate(inputs):
            if iname in bake:
                values[iname] = load_tensor(os.path.join(test_dir, sets[0], f"input_{k}.pb"))
        kept = [i for i in model.graph.input if i.name not in bake]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        for iname, v in values.items():
            model.graph.initializer.append(numpy_helper.from_array(v, iname))
        self.model = model
        self.baked = sorted(bake)
        # (input name, index of its input_K.pb) for the inputs left to run time
        self.feeds = [(iname, k) for k, iname in enumerate(inputs) if iname not in bake]
        self.outputs = [o.name for o in model.graph.output]
        self.sets = []
        for ds in sets:
            ds_dir = os.path.join(test_dir, ds)
            if all(np.array_equal(load_tensor(os.path.join(ds_dir, f"input_{k}.pb")), values[iname])
                   for k, iname in enumerate(inputs) if iname in values):
                self.sets.append(ds_dir)

    def arguments(self, round_, work, prefix=""):
        """The program's --input/--output arguments for data set round_
        (the last matching one where this case has fewer), and the files
        its outputs go to."""
        ds_dir = self.sets[min(round_, len(self.sets) - 1)]
        cmd = []
        for iname, k in self.feeds:
            cmd += ["--input", f"{prefix}{iname}={os.path.join(ds_dir, f'input_{k}.pb')}"]
        outs = []
        for k, oname in enumerate(self.outputs):
            outs.append(os.path.join(work, f"{prefix}r{round_}_{k}.npy"))
            cmd += ["--output", f"{prefix}{oname}={outs[-1]}"]
        return cmd, outs

    def verdict(self, round_, outs):
        """None when the outputs of data set round_ are right, else why not."""
        ds_dir = self.sets[round_]
        for k, out in enumerate(outs):
            problem = compare(np.load(out), load_tensor(os.path.join(ds_dir, f"output_{k}.pb")))
            if problem:
                return f"{os.path.basename(ds_dir)} output {k}: {problem}"
        return None


def compile_model(opc, model, work):
    """Saves model in a fresh work and compiles it: (exe, None) or (None, why)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    path = os.path.join(work, "model.onnx")
    onnx.save(model, path)
    exe = os.path.join(work, "net")
    p = subprocess.run([opc, path, "-o", exe, "--target", "cpu"], capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stdout + p.stderr).strip().splitlines()[-1]
    return exe, None


def check(opc, case, work):
    """One case in a program of its own: (status, message)."""
    exe, why = compile_model(opc, case.model, work)
    if why:
        return "REJECTED", why
    problem = nvrtc_check(work)
    if problem:
        return "FAIL", problem
    for r in range(len(case.sets)):
        args, outs = case.arguments(r, work)
        p = subprocess.run([exe] + args, capture_output=True, text=True)
        if p.returncode != 0:
            return "FAIL", f"{os.path.basename(case.sets[r])}: exit {p.returncode}: {p.stderr.strip()[-300:]}"
        problem = case.verdict(r, outs)
        if problem:
            return "FAIL", problem
    shutil.rmtree(work, ignore_errors=True)
    return "PASS", f"{len(case.sets)} data sets, baked {case.baked}"


def check_batch(opc, cases, opset, work):
    """The cases in one program: a (status, message) per case, or None
    where the program cannot be built, checked or run (each case is then
    tried alone)."""
    ir_version = max(c.model.ir_version for c in cases)
    exe, why = compile_model(opc, merged([c.model for c in cases], opset, ir_version), work)
    if why or nvrtc_check(work):
        return None
    results = [None] * len(cases)
    for r in range(max(len(c.sets) for c in cases)):
        cmd, outs = [exe], []
        for k, c in enumerate(cases):
            args, files = c.arguments(r, work, f"c{k}_")
            cmd += args
            outs.append(files)
        if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
            return None
        for k, c in enumerate(cases):
            if r < len(c.sets) and results[k] is None:
                results[k] = c.verdict(r, outs[k])
    shutil.rmtree(work, ignore_errors=True)
    return [("FAIL", why) if why else ("PASS", f"{len(c.sets)} data sets, baked {c.baked} "
                                                "(in a shared program)")
            for c, why in zip(cases, results)]


def main():
    opc, data, work = sys.argv[1:4]
    only = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "-k" else None
    tests = sorted(d for d in os.listdir(data)
                   if any(d.startswith(p) for p in PREFIXES) and not d.endswith("_expanded")
                   and not d.startswith("test_reduce_sum_square"))
    if only:
        tests = [t for t in tests if only in t]
    cases = [Case(os.path.join(data, t)) for t in tests]
    results = {}
    shared = [c for c in cases if c.name not in EXPECTED_REJECTIONS]
    for k, (opset, run) in enumerate(batches(shared, lambda c: c.model)):
        verdicts = check_batch(opc, run, opset, os.path.join(work, f"batch-{k}")) if len(run) > 1 else None
        if verdicts:
            results.update(zip((c.name for c in run), verdicts))
    for c in cases:
        if c.name not in results:
            results[c.name] = check(opc, c, os.path.join(work, c.name))
    counts = {"PASS": 0, "FAIL": 0, "REJECTED": 0}
    failed = 0
    for t in tests:
        status, msg = results[t]
        if status == "REJECTED" and t not in EXPECTED_REJECTIONS:
            status = "FAIL"
            msg = "unexpected rejection: " + msg
        counts[status] += 1
        failed += status == "FAIL"
        print(f"{status:8} {t}: {msg}")
    print(f"onnx nodes: {counts['PASS']} passed, {counts['FAIL']} failed, "
          f"{counts['REJECTED']} rejected as expected")
    return 1 if failed or counts["PASS"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
