#!/usr/bin/env python3
"""A Gemm's bias and ReLU, and a MatMul's bias Add, as cuBLASLt's epilogue:
one cublasLtMatmul where cuBLAS took the bias spread over Y first (a copy
or cudnnAddTensor) and an activation after, or an Add kernel after the
product. Against ONNX Runtime, on the CPU runtime under its race checker
(OPC_CHECK=1), in float32, float16 and bfloat16.

usage: test_gemm_epilogue.py OPC WORK_DIR

Cases, each a Gemm of a constant weight:
  - bias: + b of shape [N] (the classifier of ResNet-50);
  - bias_relu_tb: transB, alpha 0.5, b of shape [1, N], then Relu;
  - bias_ta: transA, b of shape [N];
  - relu: no C, then Relu (the RELU epilogue alone);
  - full_c_relu: C of Y's shape, beta 0.5, then Relu: C spread over Y
    first as for cuBLAS, then the RELU epilogue with beta 0.5.
  - bias_tanh: + b of shape [N], then Tanh: the bias in the epilogue,
    cudnnActivationForward after (BERT's pooler);
  - bias_beta: b of shape [N] with beta 2: not an epilogue's bias (which
    is added once): C is spread over Y, one cuBLAS call (a control that
    the fusion is not taken where it does not hold).
and MatMuls followed by an Add (fuse-bias gives the MatMul the bias):
  - matmul_bias: x [2, 5, K] by a constant [K, N], Add(b, y) with b [N]
    (BERT's linear layers: one taller product);
  - matmul_batched: x [3, M, K] by an input [3, K, N], + b of [1, 1, N]
    (a strided batch sharing the bias);
  - matmul_rows: + a constant [M, 1], one value per row: not a bias of
    the epilogue's, the Add stays (a control).
The program must call cublasLtMatmul once for each case but the two
controls, and issue one cudnnActivationForward (the Tanh), one
cudnnAddTensor (bias_beta's) and two plain cuBLAS GEMMs (the controls').
Compiled for two GPUs (--gpus 2), where cuBLASLt is not taken, the same
cases run as cuBLAS GEMMs with the biases through cudnnAddTensor (seven:
the five Gemms', the two fused MatMuls') and no cublasLtMatmul. Negative
control: ONNX Runtime's outputs with the biases and C left out must differ
from the program's. A model's own MatMul of three inputs is refused.
"""
import os
import re
import sys

import numpy as np
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_close, reference, run_opc, value_info  # noqa: E402

M, K, N = 6, 40, 24
CASES = ["bias", "bias_relu_tb", "bias_ta", "relu", "full_c_relu", "bias_tanh", "bias_beta",
         "matmul_bias", "matmul_batched", "matmul_rows"]
FUSED = 8
TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 3e-2, "fp32-2gpus": 1e-5}


def matmul_model(name, rng, scale):
    """A MatMul and an Add of a constant."""
    if name == "matmul_bias":
        x = rng.normal(0, 1, (2, 5, K)).astype(np.float32)
        feeds, w = {"x": x}, rng.normal(0, 1 / np.sqrt(K), (K, N)).astype(np.float32)
        inits, b = [numpy_helper.from_array(w, "w")], rng.uniform(-1, 1, N)
    else:
        feeds = {"x": rng.normal(0, 1, (3, M, K)).astype(np.float32),
                 "w": rng.normal(0, 1 / np.sqrt(K), (3, K, N)).astype(np.float32)}
        inits = []
        b = rng.uniform(1, 3, (1, 1, N) if name == "matmul_batched" else (M, 1))
    inits.append(numpy_helper.from_array(b.astype(np.float32) * scale, "b"))
    add_in = ["b", "p"] if name == "matmul_bias" else ["p", "b"]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", add_in, ["y"])]
    return nodes, inits, feeds


def case_model(name, biased=True):
    rng = np.random.default_rng(sum(name.encode()))
    if name.startswith("matmul"):
        nodes, inits, feeds = matmul_model(name, rng, 1 if biased else 0)
        inputs = [value_info(k, v) for k, v in feeds.items()]
        m = onnx_case.model(nodes, inputs, [helper.make_tensor_value_info("y", 1, None)], inits,
                            opset=17, name=name)
        return m, feeds
    ta, tb = name == "bias_ta", name == "bias_relu_tb"
    x = rng.normal(0, 1, (K, M) if ta else (M, K)).astype(np.float32)
    w = rng.normal(0, 1 / np.sqrt(K), (N, K) if tb else (K, N)).astype(np.float32)
    scale = 1 if biased else 0
    inits = [numpy_helper.from_array(w, "w")]
    feeds = {"x": x}
    attrs = {"transA": int(ta), "transB": int(tb)}
    gemm_in = ["x", "w"]
    if name == "full_c_relu":
        feeds["c"] = rng.normal(0, 1, (M, N)).astype(np.float32) * scale
        gemm_in.append("c")
        attrs["beta"] = 0.5
    elif name != "relu":
        shape = (1, N) if tb else (N,)
        b = rng.uniform(-1, 1, shape).astype(np.float32) * scale
        inits.append(numpy_helper.from_array(b, "b"))
        gemm_in.append("b")
    if tb:
        attrs["alpha"] = 0.5
    if name == "bias_beta":
        attrs["beta"] = 2.0
    act = "Relu" if "relu" in name else "Tanh" if "tanh" in name else None
    nodes = [helper.make_node("Gemm", gemm_in, ["g" if act else "y"], **attrs)]
    if act:
        nodes.append(helper.make_node(act, ["g"], ["y"]))
    inputs = [value_info(k, v) for k, v in feeds.items()]
    m = onnx_case.model(nodes, inputs, [helper.make_tensor_value_info("y", 1, None)], inits,
                        opset=17, name=name)
    return m, feeds


def calls(work):
    """The calls in the nodes' run functions; cublasSgemm and cublasGemmEx
    count their strided-batched forms too."""
    with open(os.path.join(work, "net.c")) as f:
        text = f.read()
    return {name: len(re.findall(name + r"(StridedBatched)?(Ex)?\(c->", text)) for name in
            ("cublasLtMatmul", "cudnnAddTensor", "cudnnActivationForward", "cublasSgemm",
             "cublasGemm")}


def main():
    opc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    os.environ["OPC_CHECK"] = "1"
    models = [case_model(name) for name in CASES]
    m = onnx_case.merged([mm for mm, _ in models], 17)
    feeds = {"c%d_%s" % (k, name): v for k, (_, f) in enumerate(models) for name, v in f.items()}
    want = reference(m, feeds)
    plain_feeds = {"c%d_%s" % (k, name): v for k, n in enumerate(CASES)
                   for name, v in case_model(n, biased=False)[1].items()}
    plain = reference(onnx_case.merged([case_model(n, biased=False)[0] for n in CASES], 17),
                      plain_feeds)
    failures = []
    for precision in ("fp32", "fp16", "bf16", "fp32-2gpus"):
        flags = {"fp32": [], "fp32-2gpus": ["--gpus", "2"]}.get(precision,
                                                               ["--precision", precision])
        out = os.path.join(work, precision)
        got, why = run_opc(opc, m, feeds, out, flags)
        if got is None:
            failures.append(f"{precision}: {why}")
            continue
        n = calls(out)
        plain_gemm = "cublasSgemm" if precision.startswith("fp32") else "cublasGemm"
        if precision == "fp32-2gpus":
            if n["cublasLtMatmul"] or n["cudnnAddTensor"] != 7:
                failures.append(f"{precision}: calls {n}, expected no cublasLtMatmul and seven "
                                "cudnnAddTensor")
        elif (n["cublasLtMatmul"] != FUSED or n["cudnnAddTensor"] != 1 or
                n["cudnnActivationForward"] != 1 or n[plain_gemm] != 2):
            failures.append(f"{precision}: calls {n}, expected {FUSED} cublasLtMatmul, one "
                            f"cudnnAddTensor, one cudnnActivationForward and two {plain_gemm}")
        for k, name in enumerate(CASES):
            y = "c%d_y" % k
            problem = compare_close(got[y], want[y], TOLERANCE[precision])
            same = compare_close(got[y], plain[y], 10 * TOLERANCE[precision]) is None
            if problem is None and same and name != "relu":
                problem = "the output without the bias matches too: the case decides nothing"
            print(f"{'FAIL' if problem else 'ok  '} {name}-{precision}" +
                  (f": {problem}" if problem else ""))
            if problem:
                failures.append(f"{name}-{precision}: {problem}")
    # A model's own MatMul with a third input is not opc's fused bias.
    three = onnx_case.model([helper.make_node("MatMul", ["x", "w", "b"], ["y"])],
                            [value_info("x", np.zeros((2, 3), np.float32))],
                            [helper.make_tensor_value_info("y", 1, None)],
                            [numpy_helper.from_array(np.ones((3, 4), np.float32), "w"),
                             numpy_helper.from_array(np.ones(4, np.float32), "b")], opset=17)
    refusals = [("a MatMul of three inputs", three, "has 3 inputs, expects 2 to 2")]
    return onnx_case.finish(opc, failures, refusals, work,
                            f"Gemm epilogues: {len(CASES)} cases in 3 precisions and on 2 GPUs "
                            "match")


if __name__ == "__main__":
    sys.exit(main())
