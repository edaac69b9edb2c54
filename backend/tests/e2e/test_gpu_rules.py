#!/usr/bin/env python3
"""The emitted GPU program keeps the rules a real GPU enforces (issue 11).

usage: test_gpu_rules.py OPC [--work DIR]

The CPU runtime refuses what CUDA, cuDNN and cuBLAS refuse (lazy library
initialisation inside a capture, unsupported fused convolutions, reads of a
pageable copy's destination before it is synchronised, freeing memory that
queued work still uses); these cases drive the emitted program into each of
those corners and check that it still answers like ONNX Runtime. Every
case compiles the GPU program (--target stand-in): the CPU program runs
its float convolutions on its own kernels, not on cuDNN's calls.

- fused_forms: a fused convolution falls back to IMPLICIT_PRECOMP_GEMM, then
  to separate calls, when cuDNN refuses the fused call (OPC_RT_REFUSE_FUSED),
  and --verbose and the profile say which form each node took;
- tf32: the heuristics' tensor-op results are taken, with their math type;
- packed_descriptors: size-1 dims of cuDNN descriptors have packed strides;
- pinned_run: the GPU program's net_run and weights' upload copy through
  pinned memory (OPC_RT_PAGEABLE=error; the CPU program's net_run copies
  the caller's buffers straight);
- destroy_waits: net_destroy right after net_run_device on the caller's
  stream frees nothing that work still uses (OPC_CHECK=1);
- first_error: a node that fails inside the capture is the error reported,
  not the capture's end (OPC_RT_FAIL).
"""
import json
import os
import re
import sys

import numpy as np
import onnxruntime as ort
from onnx import helper

import test_backend as tb
from test_backend import Case, const, fail, model, ok, run, write_npy

RNG = np.random.default_rng(11)


def conv_relu_model():
    """A 3x3 conv + bias + relu, and a 1x1 conv + residual + relu after it."""
    w1 = RNG.standard_normal((8, 4, 3, 3)).astype(np.float32)
    b1 = RNG.standard_normal(8).astype(np.float32)
    w2 = RNG.standard_normal((8, 8, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv3x3"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv1x1"),
             helper.make_node("Add", ["c2", "r1"], ["s"], name="residual"),
             helper.make_node("Relu", ["s"], ["y"], name="relu2")]
    return model("conv_relu", nodes, [("x", [1, 4, 10, 10])], [("y", [1, 8, 10, 10])],
                 [const("w1", w1), const("b1", b1), const("w2", w2)])


def run_and_compare(name, m, exe, d, args=(), env=None, atol=1e-4):
    """Runs exe on a random input; returns its CompletedProcess when the
    outputs match ONNX Runtime, else None (the failure is reported)."""
    feeds, cmd = {}, [exe] + list(args)
    for i in m.graph.input:
        shape = [dim.dim_value for dim in i.type.tensor_type.shape.dim]
        feeds[i.name] = RNG.standard_normal(shape).astype(np.float32)
        path = os.path.join(d, "in_%s.npy" % i.name)
        write_npy(path, feeds[i.name])
        cmd += ["--input", "%s=%s" % (i.name, path)]
    for k, o in enumerate(m.graph.output):
        cmd += ["--output", "%s=%s" % (o.name, os.path.join(d, "out%d.npy" % k))]
    p = run(cmd, env=env)
    if p.returncode != 0:
        fail(name, "program exited with %d: %s" % (p.returncode, p.stderr.strip()))
        return None
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for k, want in enumerate(sess.run(None, feeds)):
        got = np.load(os.path.join(d, "out%d.npy" % k))
        if got.shape != want.shape or not np.all(np.abs(got - want) <= atol * (1 + np.abs(want))):
            fail(name, "output %d differs from ONNX Runtime" % k)
            return None
    return p


def forms_of(stderr):
    """The form --verbose printed for each node that has one."""
    forms = {}
    for line in stderr.splitlines():
        m = re.match(r"net: node '([^']*)' \(\w+\): stream \d+, (.*)$", line)
        if m:
            forms[m.group(1)] = m.group(2)
    return forms


FUSED, PRECOMP, SEPARATE = ("fused, its own algorithm", "fused, IMPLICIT_PRECOMP_GEMM",
                            "separate convolution, bias and activation")


def case_fused_forms(case):
    m = conv_relu_model()
    for precision in ("fp32", "tf32"):
        name = "fused_forms_" + precision
        d, exe, p = case.compile(name, m, ["--precision", precision], target="stand-in")
        if p.returncode != 0:
            return fail(name, "opc failed: " + p.stderr.strip())
        seen = {}
        for refuse in ("", "other", "all"):
            env = dict(os.environ, OPC_CHECK="1", OPC_RT_REFUSE_FUSED=refuse)
            p = run_and_compare("%s_%s" % (name, refuse or "none"), m, exe, d, ["--verbose"], env)
            if p is None:
                return
            forms = forms_of(p.stderr)
            if sorted(forms) != ["conv1x1", "conv3x3"]:
                return fail(name, "--verbose named forms for %s" % sorted(forms))
            seen[refuse] = set(forms.values())
        if seen[""] != {FUSED}:
            return fail(name, "unrefused forms: %s" % seen[""])
        if not seen["other"] <= {FUSED, PRECOMP}:
            return fail(name, "forms with only IMPLICIT_PRECOMP_GEMM fused: %s" % seen["other"])
        if seen["all"] != {SEPARATE}:
            return fail(name, "forms with no fused call: %s" % seen["all"])
        # The profile records the forms too.
        prof = os.path.join(d, "prof.json")
        env = dict(os.environ, OPC_RT_REFUSE_FUSED="all")
        p = run([exe, "--profile", prof, "--repeats", "2"], env=env)
        if p.returncode != 0:
            return fail(name, "profile: " + p.stderr.strip())
        with open(prof) as f:
            units = {u["name"]: u.get("form") for u in json.load(f)["units"]}
        if units.get("conv3x3") != SEPARATE or units.get("conv1x1") != SEPARATE:
            return fail(name, "profile forms: %s" % units)
        ok(name)
    # Where the chosen algorithm is not IMPLICIT_PRECOMP_GEMM, refusing the
    # others must take the second form: the tf32 heuristics list another first.
    d, exe, _ = case.compile("fused_forms_precomp", m, ["--precision", "tf32"], target="stand-in")
    p = run_and_compare("fused_forms_precomp", m, exe, d, ["--verbose"],
                        dict(os.environ, OPC_RT_REFUSE_FUSED="other"))
    if p is not None:
        if PRECOMP not in forms_of(p.stderr).values():
            return fail("fused_forms_precomp", "no node took IMPLICIT_PRECOMP_GEMM: %s" % p.stderr)
        ok("fused_forms_precomp")


def case_packed_descriptors(case):
    """Concat in place makes each branch's output a channel view of the Concat
    at batch 1: dim 0 has size 1 and, unpacked, the Concat's batch stride."""
    m = tb.branchy_model()
    d, exe, p = case.compile("packed_descriptors", m, ["--streams", "4"], target="stand-in")
    if p.returncode != 0:
        return fail("packed_descriptors", "opc failed: " + p.stderr.strip())
    with open(os.path.join(d, "net.c")) as f:
        text = f.read()
    calls = re.findall(r"make_tensor\(c, &c->(\w+), CUDNN_DATA_\w+, (\d+), \(const int\[\]\)\{([^}]*)\},\s*"
                       r"\(const int\[\]\)\{([^}]*)\}\)", text)
    # A convolution's x and y are in its conv_shape (make_conv).
    for rank, x, xs, y, ys in re.findall(r"\.rank = (\d+),\s*\.x = \{([^}]*)\}, \.x_strides = \{([^}]*)\},"
                                         r"\s*\.y = \{([^}]*)\}, \.y_strides = \{([^}]*)\}", text):
        calls += [("conv_shape.x", rank, x, xs), ("conv_shape.y", rank, y, ys)]
    if len(calls) < 4:
        return fail("packed_descriptors", "found only %d descriptors" % len(calls))
    for field, rank, dims, strides in calls:
        dims = [int(v) for v in dims.split(",")]
        strides = [int(v) for v in strides.split(",")]
        for i in range(int(rank)):
            packed = strides[i + 1] * dims[i + 1] if i + 1 < int(rank) else 1
            if dims[i] == 1 and strides[i] != packed:
                return fail("packed_descriptors", "%s: dim %d has size 1 and stride %d, packed is %d"
                            % (field, i, strides[i], packed))
    if run_and_compare("packed_descriptors", m, exe, d, env=dict(os.environ, OPC_CHECK="1")):
        ok("packed_descriptors")


def case_pinned_run(case):
    m = conv_relu_model()
    for mode in ([], ["--no-cuda-graph"], ["--embed-weights"]):
        name = "pinned_run" + (mode[0].replace("-", "_")[1:] if mode else "")
        d, exe, p = case.compile(name, m, mode, target="stand-in")
        if p.returncode != 0:
            return fail(name, "opc failed: " + p.stderr.strip())
        if run_and_compare(name, m, exe, d, env=dict(os.environ, OPC_RT_PAGEABLE="error")):
            ok(name)


def build_user_program(case, name, m, source):
    """Compiles `source` against the model's net.c (OPC_NO_MAIN); returns the path or None."""
    d, exe, p = case.compile(name, m, target="stand-in")
    if p.returncode != 0:
        fail(name, "opc failed: " + p.stderr.strip())
        return None
    user, p = case.build_user(d, source, ["net.c"])
    if p.returncode != 0:
        fail(name, "build: " + p.stderr)
        return None
    return user


DESTROY_WHILE_QUEUED = r'''
#include <stdio.h>
#include "net.h"
int main(void)
{
  net_ctx *c;
  float x[400] = {0}, *dx, *dy;
  cudaStream_t s;
  if (net_create(&c, NULL) != 0) {
    fprintf(stderr, "%s\n", net_error(c));
    return 1;
  }
  cudaMalloc((void **)&dx, sizeof x);
  cudaMalloc((void **)&dy, 800 * sizeof(float));
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMemcpyAsync(dx, x, sizeof x, cudaMemcpyHostToDevice, s);
  cudaStreamSynchronize(s);
  if (net_run_device(c, (const void *const[]){dx}, (void *const[]){dy}, s) != 0) {
    fprintf(stderr, "%s\n", net_error(c));
    return 1;
  }
  net_destroy(c); /* the caller's stream may still be running the model */
  cudaStreamSynchronize(s);
  cudaFree(dx);
  cudaFree(dy);
  cudaStreamDestroy(s);
  return 0;
}
'''


def case_destroy_waits(case):
    m = conv_relu_model()
    user = build_user_program(case, "destroy_waits", m, DESTROY_WHILE_QUEUED)
    if not user:
        return
    p = run([user], env=dict(os.environ, OPC_CHECK="1"))
    if p.returncode != 0 or "opc-check" in p.stderr:
        return fail("destroy_waits", "exit %d: %s" % (p.returncode, p.stderr.strip()))
    ok("destroy_waits")


def case_first_error(case):
    """Three parallel convolutions on three streams: cudnnConvolutionForward
    runs three times eagerly, then three times in the capture. The last
    captured one fails while the other streams hold captured work: its
    failure must be the message, naming the node, not the capture's end."""
    nodes, inits = [], []
    for k in range(3):
        inits.append(const("w%d" % k, RNG.standard_normal((3, 2, 1, 1)).astype(np.float32)))
        nodes.append(helper.make_node("Conv", ["x", "w%d" % k], ["c%d" % k], name="conv%d" % k))
    nodes.append(helper.make_node("Concat", ["c0", "c1", "c2"], ["y"], axis=1, name="cat"))
    m = model("three", nodes, [("x", [1, 2, 3, 3])], [("y", [1, 9, 3, 3])], inits)
    d, exe, p = case.compile("first_error", m, ["--streams", "3"], target="stand-in")
    if p.returncode != 0:
        return fail("first_error", "opc failed: " + p.stderr.strip())
    p = run([exe], env=dict(os.environ, OPC_RT_FAIL="cudnnConvolutionForward:6"))
    message = p.stderr.strip()
    if p.returncode != 2 or not re.search(r"node 'conv\d' \(Conv\): cudnnConvolutionForward", message) \
            or "EndCapture" in message:
        return fail("first_error", "exit %d: %s" % (p.returncode, message))
    ok("first_error")


CASES = [case_fused_forms, case_packed_descriptors, case_pinned_run, case_destroy_waits,
         case_first_error]


def main():
    opc = os.path.abspath(sys.argv[1])
    work = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--work" else os.path.join(
        os.path.dirname(opc), "backend-tests", "gpu-rules")
    os.makedirs(work, exist_ok=True)
    case = Case(opc, work)
    for c in CASES:
        c(case)
    if tb.FAILURES:
        print("%d failed: %s" % (len(tb.FAILURES), " ".join(tb.FAILURES)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
