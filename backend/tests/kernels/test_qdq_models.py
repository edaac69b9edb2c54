#!/usr/bin/env python3
"""A QDQ model runs in int8: a small CNN quantized by ONNX Runtime's
quantize_static in the QDQ format, per channel, compiled by opc (CPU
runtime) and compared with ONNX Runtime on the same model.

Each model is compiled twice (onnx_case.compile_targets): the CPU program
(--target cpu), whose group-1 convolutions are opc_int8_conv_packed
launches, and the GPU program on the CPU runtime's stand-in for CUDA
(--target stand-in), which runs them through cuBLASLt's int8 GEMM; the two
must give the same bits on every input (run_targets), and every check
below holds for both. The CPU program must pack conv1 (the stem, whose x
has 3 channels in ONNX's order), conv2 and the MLP's two 1x1
convolutions; a model whose programs are the same C runs once.

The CNN: Conv 3->8 + Relu, Conv 8->8, the residual Add of the two, MaxPool,
Flatten, MatMul to 10. Weights are scaled by 1/sqrt(fan-in); calibration
and test inputs are smooth images (a few low-frequency sinusoids per
channel and a little noise), not white noise; the test checks that the
outputs vary. quantize_static removes the Relu (the Conv's output range
starts at 0) and writes DQ(int32 bias) with scale x_scale * w_scale.

fuse-qdq must make the Convs QLinearConv and the MatMul QLinearMatMul:
`opc --stats` must show no Conv or MatMul left, the residual Add become
QuantizedAdd, and `--report` must list neither the MaxPool nor the
Flatten as left float between Q/DQ: they run on the bytes
(T_SELECTS_VALUES, T_MOVES_VALUES), the CPU program's MaxPool as one
opc_max_pool_u8 launch.

ONNX Runtime runs twice: with its default optimisations (it fuses the
same patterns into QLinearConv, QLinearMatMul and QLinearAdd) and with
none (float operators between Q and DQ). Compared, exactly: the quantized
tensors (each Conv's, the Add's, the Flatten's, the MatMul's) and the
float output (DequantizeLinear is (q - zero point) * scale in both).
Rounding is half to even in both; where the fused sum times its multiplier
and the float convolution divided by y's scale fell on different sides of
a half, they would differ by one quantum: none does here.

A third model, an MLP of two Gemms (the first with transB, the second
without, so that its B is transposed at compile time) and a Relu between,
quantized like the CNN, must become two QLinearConvs (a Gemm is a 1x1
convolution of x seen as [N, K, 1, 1]) and match ONNX Runtime exactly.

A second model is written by hand the way TensorRT-style QDQ exports are:
symmetric int8 activations (zero point 0), Q only on the Relu's output,
so Q(Relu(Conv(DQ(x), DQ(w), DQ(b)))). The Relu clamps inside y's range
(Q(0) = 0 > -128): fuse-qdq keeps it on the QLinearConv (.act=relu), which
saturates to [0, 127]. ONNX Runtime runs this one in float between Q and
DQ, optimised or not (no fusion of its own takes a Relu at zero point 0),
so the float convolution's rounding can put a value on the other side of
a half quantum: the int8 output may differ by one quantum, and the count of
such elements is printed (and must stay under 2%).

reduce_range (7-bit weights) keeps this CPU's ONNX Runtime exact: without
VNNI it sums uint8 x int8 products in int16-saturated pairs (see
test_integer.py).

A SqueezeNet fire module (check_fire_module) must run its Concat on the
bytes, one input requantized, and a ShuffleNetV2 unit (check_shuffle_unit)
its Split, Concat, Reshapes and Transpose; both must match ONNX Runtime
exactly.

Negative controls: the same `--stats` check on an -O0 compile (no fusion)
must find the float Conv; and the first QLinearConv recomputed in numpy
without its bias must be rejected, while with it it must match.

usage: test_qdq_models.py OPC WORK_DIR
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_case import (compare_exact, compile_targets, packed_launches, reference,  # noqa: E402
                       run_targets, stand_in_dir)
from test_integer import conv_sums, wrap32  # noqa: E402

rng = np.random.default_rng(5151)

# The quantized tensors compared, and the float output.
CHECKED = ["x_QuantizeLinear_Output", "r1_QuantizeLinear_Output", "c2_QuantizeLinear_Output",
           "s_QuantizeLinear_Output", "f_QuantizeLinear_Output", "y_QuantizeLinear_Output"]
ON_BYTES = ["pool", "flatten"]  # not float between Q/DQ


def weight(shape, fan_in):
    return (rng.normal(0, 1, shape) / np.sqrt(fan_in)).astype(np.float32)


def cnn():
    arrays = {"w1": weight((8, 3, 3, 3), 27), "b1": rng.normal(0, 0.1, 8).astype(np.float32),
              "w2": weight((8, 8, 3, 3), 72), "b2": rng.normal(0, 0.1, 8).astype(np.float32),
              "w3": weight((128, 10), 128)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Add", ["r1", "c2"], ["s"], name="residual"),
             helper.make_node("MaxPool", ["s"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                              name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "w3"], ["y"], name="matmul")]
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                              inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def images(n):
    """Smooth [1, 3, 8, 8] images: a sinusoid of random frequency and phase
    per channel, and a little noise."""
    yy, xx = np.mgrid[0:8, 0:8] / 8.0
    out = []
    for _ in range(n):
        channels = [np.sin(2 * np.pi * (rng.uniform(0.3, 1.5) * xx + rng.uniform(0.3, 1.5) * yy)
                           + rng.uniform(0, 2 * np.pi)) for _ in range(3)]
        img = np.stack(channels) + rng.normal(0, 0.1, (3, 8, 8))
        out.append(img[None].astype(np.float32))
    return out


class Calibration(CalibrationDataReader):
    def __init__(self):
        self.batches = iter([{"x": x} for x in images(16)])

    def get_next(self):
        return next(self.batches, None)


def quantized(work):
    os.makedirs(work, exist_ok=True)
    src, dst = os.path.join(work, "cnn.onnx"), os.path.join(work, "cnn_qdq.onnx")
    onnx.save(cnn(), src)
    quantize_static(src, dst, Calibration(), quant_format=QuantFormat.QDQ, per_channel=True,
                    reduce_range=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    m = onnx.load(dst)
    for name in CHECKED:
        m.graph.output.append(onnx.ValueInfoProto(name=name))
    return m


def opc_stats(opc, path, flags=()):
    """opc's --stats and --report text (its `after` counts by kind) for the
    CPU target."""
    p = subprocess.run([opc, path, "--target", "cpu", "--stats", "--report", *flags],
                       capture_output=True, text=True)
    after = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            after[parts[0]] = int(parts[2])
    return p.returncode, after, p.stdout + p.stderr


def fusion_failures(after, report):
    """What says the QDQ patterns were not all fused, or the float ones not
    reported; empty when all is well."""
    why = [f"{after[k]} float {k} left" for k in ("Conv", "MatMul", "Add") if after.get(k, 0)]
    why += [f"{k} missing" for k in ("QLinearConv", "QLinearMatMul", "QuantizedAdd")
            if not after.get(k, 0)]
    why += [f"--report lists '{n}' as float" for n in ON_BYTES if f"node '{n}'" in report]
    return why


def initializer(m, name):
    return next(numpy_helper.to_array(t) for t in m.graph.initializer if t.name == name)


def conv1_in_numpy(m, xq, with_bias):
    """The first QLinearConv, requantised as ONNX Runtime does."""
    zx = initializer(m, "x_zero_point")
    w, zw = initializer(m, "w1_quantized"), initializer(m, "w1_zero_point")
    bias = initializer(m, "b1_quantized") if with_bias else np.zeros(8, np.int32)
    mult = (np.float32(initializer(m, "x_scale")) * initializer(m, "w1_scale")).astype(np.float32)
    mult = (mult / np.float32(initializer(m, "r1_scale"))).astype(np.float32).reshape(1, -1, 1, 1)
    sums = wrap32(conv_sums(xq, w, zx, zw, pads=[1, 1, 1, 1]) + bias.reshape(1, -1, 1, 1))
    q = np.rint((sums.astype(np.float32) * mult).astype(np.float32))
    return np.clip(q + int(initializer(m, "r1_zero_point")), 0, 255).astype(np.uint8)


def relu_model():
    """Q(Relu(Conv(DQ(x), DQ(w), DQ(b)))) and its DQ, symmetric int8, 7-bit
    per-channel weights; the scales from calibration images."""
    w = weight((8, 3, 3, 3), 27)
    b = rng.normal(0, 0.1, 8).astype(np.float32)
    calib = np.concatenate(images(8))
    sx = np.float32(np.abs(calib).max() / 127)
    sw = (np.abs(w).reshape(8, -1).max(1) / 63).astype(np.float32)
    wq = np.rint(w / sw.reshape(-1, 1, 1, 1)).astype(np.int8)
    sb = (sx * sw).astype(np.float32)
    bq = np.rint(b / sb).astype(np.int32)
    ref = reference(model_of([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
                             {"w": w, "b": b}, [8, 3, 8, 8], [8, 8, 8, 8]), {"x": calib}, False)
    sy = np.float32(np.maximum(ref["y"], 0).max() / 127)
    consts = {"sx": sx, "zx": np.int8(0), "wq": wq, "sw": sw, "zw": np.zeros(8, np.int8), "bq": bq,
              "sb": sb, "sy": sy, "zy": np.int8(0)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "sb"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    m = model_of(nodes, consts, [1, 3, 8, 8], [1, 8, 8, 8])
    m.graph.output.append(onnx.ValueInfoProto(name="yq"))
    return m


def model_of(nodes, consts, x_shape, y_shape):
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in consts.items()]
    graph = helper.make_graph(nodes, "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                            x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def gemm_mlp(work):
    """Gemm(transB) -> Relu -> Gemm over smooth rows, quantized in QDQ."""
    consts = {"w1": weight((32, 16), 16), "b1": rng.normal(0, 0.1, 32).astype(np.float32),
              "w2": weight((32, 8), 32), "b2": rng.normal(0, 0.1, 8).astype(np.float32)}
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h0"], transB=1, name="gemm1"),
             helper.make_node("Relu", ["h0"], ["h"], name="relu"),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["y"], name="gemm2")]
    src, dst = os.path.join(work, "mlp.onnx"), os.path.join(work, "mlp_qdq.onnx")
    onnx.save(model_of(nodes, consts, [2, 16], [2, 8]), src)

    class Rows(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": rows()} for _ in range(8)])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(src, dst, Rows(), quant_format=QuantFormat.QDQ, per_channel=True,
                    reduce_range=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    m = onnx.load(dst)
    for name in ("h_QuantizeLinear_Output", "y_QuantizeLinear_Output"):
        m.graph.output.append(onnx.ValueInfoProto(name=name))
    return m


def rows():
    """Two smooth rows of 16: sinusoids of random frequency and phase."""
    t = np.linspace(0, 1, 16)
    return np.stack([np.sin(2 * np.pi * rng.uniform(0.5, 2) * t + rng.uniform(0, 2 * np.pi))
                     for _ in range(2)]).astype(np.float32)


def check_gemm_mlp(opc, work, verdict):
    m = gemm_mlp(work)
    path = os.path.join(work, "mlp_qdq_outputs.onnx")
    onnx.save(m, path)
    rc, after, text = opc_stats(opc, path)
    verdict(rc == 0 and not after.get("Gemm", 0) and after.get("QLinearConv") == 2,
            f"gemm mlp: both Gemms become QLinearConv (Gemm left: {after.get('Gemm', 0)})")
    exes, why = compile_targets(opc, m, os.path.join(work, "mlp"))
    if exes is None:
        verdict(False, f"gemm mlp compile: {why}")
        return
    count = packed_launches(os.path.join(work, "mlp"))
    verdict(count == 2, f"gemm mlp: the CPU program packs both 1x1 convolutions ({count})")
    for k in range(3):
        feeds = {"x": rows()}
        got = run_targets(exes, m, feeds, os.path.join(work, "mlp"))
        if isinstance(got, str):
            verdict(False, f"gemm mlp input {k}: {got}")
            continue
        for optimise in (True, False):
            want = reference(m, feeds, optimise)
            if k == 0 and optimise:
                verdict(np.ptp(want["y"]) > 0, "gemm mlp: the reference output varies")
            for name, w in want.items():
                why = compare_exact(got[name], w)
                how = "optimised" if optimise else "as written"
                verdict(why is None, f"gemm mlp input {k} {name} {w.dtype}{list(w.shape)} exact, "
                        f"ORT {how}{': ' + why if why else ''}")


def check_relu_model(opc, work, verdict):
    m = relu_model()
    path = os.path.join(work, "relu_qdq.onnx")
    onnx.save(m, path)
    rc, after, text = opc_stats(opc, path)
    left = [k for k in ("Conv", "Relu") if after.get(k, 0)]
    verdict(rc == 0 and not left and after.get("QLinearConv") == 1,
            f"relu model fused into one QLinearConv{': left ' + ', '.join(left) if left else ''}")
    exes, why = compile_targets(opc, m, os.path.join(work, "relu"))
    if exes is None:
        verdict(False, f"relu model compile: {why}")
        return
    off, total = 0, 0
    for k, x in enumerate(images(4)):
        got = run_targets(exes, m, {"x": x}, os.path.join(work, "relu"))
        if isinstance(got, str):
            verdict(False, f"relu model input {k}: {got}")
            continue
        for optimise in (True, False):
            want = reference(m, {"x": x}, optimise)
            d = got["yq"].astype(np.int64) - want["yq"]
            same_type = got["yq"].dtype == want["yq"].dtype and d.shape == want["yq"].shape
            verdict(same_type and np.abs(d).max() <= 1 and got["yq"].min() >= 0,
                    f"relu model input {k} yq int8 within one quantum, none below 0, ORT "
                    f"{'optimised' if optimise else 'as written'}: {int((d != 0).sum())} of "
                    f"{d.size} differ")
            off, total = off + int((d != 0).sum()), total + d.size
    verdict(off <= 0.02 * total, f"relu model: {off} of {total} int8 values one quantum off")


def check_channels_last(opc, work, verdict):
    """The CNN with y its only output: no graph output pins its inner
    tensors to ONNX's order, so choose-layout stores them channels-last
    (conv2's pixels gathered whole, the residual Add's DQ/Add/Q and the
    MaxPool, which the runtime pools a pixel at a time, channels-last);
    y must match ONNX Runtime exactly still."""
    m = onnx.load(os.path.join(work, "cnn_qdq.onnx"))
    d = os.path.join(work, "channels_last")
    exes, why = compile_targets(opc, m, d)
    if exes is None:
        verdict(False, f"channels-last compile: {why}")
        return
    with open(os.path.join(d, "net.c")) as f:
        text = f.read()
    with open(os.path.join(stand_in_dir(d), "net.c")) as f:
        gathers = "cuLaunchKernel(c->kernel.opc_int8_im2row_nhwc_" in f.read()
    pool = re.search(r"\.xstride = \{\{\d+, 1, \d+, \d+, 0\}\},\n.*\n(.*\n){8,12}.*opc_max_pool_u8",
                     text)
    verdict(gathers and packed_launches(d) == 2 and pool,
            "channels-last: conv2 gathers whole pixels (GPU program) or is one packed "
            "convolution, as the stem is (CPU program), the MaxPool of bytes reads channel stride 1")
    counts = {}
    for features in ("generic", "vnni"):
        source = os.path.join(d, f"net_{features}.c")
        p = subprocess.run([opc, os.path.join(d, "model.onnx"), "-o", source, "--target", "cpu",
                            "--cpu-features", features], capture_output=True, text=True)
        with open(source) as f:
            counts[features] = p.returncode == 0 and f.read().count(
                "cuLaunchKernel(c->kernel.opc_int8_conv_packed_")
    verdict(counts == {"generic": 0, "vnni": 2},
            f"--cpu-features generic keeps conv1 and conv2 on the GEMM, vnni packs them: {counts}")
    for k, x in enumerate(images(4)):
        got = run_targets(exes, m, {"x": x}, d)
        why = got if isinstance(got, str) else compare_exact(got["y"], reference(m, {"x": x})["y"])
        verdict(why is None, f"channels-last input {k} y exact, ORT optimised"
                + (": " + why if why else ""))


# Scales and zero points of Q(DQ(a) + DQ(b)) (sa, za, sb, zb, sy): int8
# ResNet-50's layer4/block0 Add, where ONNX Runtime's fused QLinearAdd
# rounds 17 elements otherwise (bench/results/int8-differences-2026-12-06.md),
# and four found by search where, over all pairs of bytes, both an FMA
# contraction of a product with the sum and the pre-scaled rounding move
# at least one element: such moves are rare (1 or 2 of 65,536 here).
PAIR_ADDS = [(0.013031501, 83, 0.04818953, 106, 0.029227758),
             (0.053825304, 46, 0.045335084, 124, 0.030395936),
             (0.059955962, 215, 0.057449833, 78, 0.043374844),
             (0.05644017, 63, 0.054606944, 172, 0.045747064),
             (0.025121395, 22, 0.008213235, 11, 0.04200053)]


def pair_add_model(clip):
    """Q(act(DQ(a) + DQ(b))) for each of PAIR_ADDS, output yK, over every
    pair of uint8 values (a along rows, b along columns), y's zero point 0;
    `clip`: the first alone, with a Clip inside y's range that the
    saturation must narrow to."""
    nodes, consts = [], {"lo": np.float32(0.5), "hi": np.float32(3.0), "zy": np.uint8(0)}
    for k, (sa, za, sb, zb, sy) in enumerate(PAIR_ADDS[:1] if clip else PAIR_ADDS):
        consts.update({f"sa{k}": np.float32(sa), f"za{k}": np.uint8(za), f"sb{k}": np.float32(sb),
                       f"zb{k}": np.uint8(zb), f"sy{k}": np.float32(sy)})
        nodes += [helper.make_node("DequantizeLinear", ["a", f"sa{k}", f"za{k}"], [f"fa{k}"]),
                  helper.make_node("DequantizeLinear", ["b", f"sb{k}", f"zb{k}"], [f"fb{k}"]),
                  helper.make_node("Add", [f"fa{k}", f"fb{k}"], [f"s{k}"], name=f"add{k}")]
        if clip:
            nodes.append(helper.make_node("Clip", [f"s{k}", "lo", "hi"], [f"c{k}"]))
        nodes.append(helper.make_node("QuantizeLinear", [f"{'c' if clip else 's'}{k}", f"sy{k}", "zy"],
                                      [f"y{k}"]))
    outputs = [helper.make_tensor_value_info(f"y{k}", TensorProto.UINT8, [256, 256])
               for k in range(1 if clip else len(PAIR_ADDS))]
    g = helper.make_graph(nodes, "pair_add",
                          [helper.make_tensor_value_info(n, TensorProto.UINT8, [256, 256])
                           for n in ("a", "b")], outputs,
                          [numpy_helper.from_array(np.array(v), n) for n, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def other_roundings(feeds, k):
    """Add k of PAIR_ADDS rounded two other ways, the negative controls:
    an FMA of a's product with b's value, and scales divided out first."""
    sa, za, sb, zb, sy = (np.float32(v) if isinstance(v, float) else np.int32(v) for v in PAIR_ADDS[k])
    xa = feeds["a"].astype(np.int32) - za
    xb = feeds["b"].astype(np.int32) - zb
    fb = xb.astype(np.float32) * sb
    fma = (xa.astype(np.float64) * np.float64(sa) + fb.astype(np.float64)).astype(np.float32) / sy
    pre = xa.astype(np.float32) * np.float32(sa / sy) + xb.astype(np.float32) * np.float32(sb / sy)
    return {"an FMA": fma, "scales divided out first": pre}


def check_quantized_add(opc, work, verdict):
    """QuantizedAdd computes ONNX's float path exactly, on all 65,536 pairs
    of bytes: the same bits as ONNX Runtime running the graph as written,
    with and without a Clip to narrow; an FMA and the pre-scaled rounding
    are told apart."""
    values = np.arange(256, dtype=np.uint8)
    feeds = {"a": np.repeat(values[:, None], 256, axis=1), "b": np.repeat(values[None, :], 256, axis=0)}
    for clip in (False, True):
        m = pair_add_model(clip)
        what = "QuantizedAdd" + (" with a Clip" if clip else "")
        count = len(m.graph.output)
        path = os.path.join(work, f"pair_add_{int(clip)}.onnx")
        onnx.save(m, path)
        rc, after, text = opc_stats(opc, path)
        verdict(rc == 0 and after.get("QuantizedAdd") == count and not after.get("Add"),
                f"{what}: the Adds fused" + ("" if rc == 0 else f": {text[-300:]}"))
        exes, why = compile_targets(opc, m, os.path.join(work, f"pair_add_{int(clip)}"))
        if exes is None:
            verdict(False, f"{what}: compile: {why}")
            continue
        got = run_targets(exes, m, feeds, os.path.join(work, f"pair_add_{int(clip)}"))
        if isinstance(got, str):
            verdict(False, f"{what}: {got}")
            continue
        want = reference(m, feeds, False)
        for k in range(count):
            why = compare_exact(got[f"y{k}"], want[f"y{k}"])
            verdict(why is None, f"{what} {k}: all 65,536 pairs exact, ORT as written"
                    + (": " + why if why else ""))
            if clip:
                continue
            for name, v in other_roundings(feeds, k).items():
                if k == 0 and name == "an FMA":
                    continue  # ResNet-50's set: no pair falls where an FMA rounds otherwise
                moved = int((np.clip(np.rint(v), 0, 255).astype(np.uint8) != got[f"y{k}"]).sum())
                verdict(moved > 0, f"control {k}: rounded with {name}, {moved} of 65,536 differ")


def fire_module(work):
    """SqueezeNet's fire module after a stem, quantized like the CNN: the
    stem conv 3->8 + Relu, squeeze 1x1 8->4 + Relu, expand 1x1 4->8 and
    3x3 4->8 (each + Relu), their Concat along the channels, a 1x1 conv
    16->8, GlobalAveragePool, Flatten."""
    consts = {"w0": weight((8, 3, 3, 3), 27), "b0": rng.normal(0, 0.1, 8).astype(np.float32),
              "ws": weight((4, 8, 1, 1), 8), "bs": rng.normal(0, 0.1, 4).astype(np.float32),
              "we1": weight((8, 4, 1, 1), 4), "be1": rng.normal(0, 0.1, 8).astype(np.float32),
              "we3": weight((8, 4, 3, 3), 36), "be3": rng.normal(0, 0.1, 8).astype(np.float32),
              "wo": weight((8, 16, 1, 1), 16), "bo": rng.normal(0, 0.1, 8).astype(np.float32)}

    def conv_relu(x, w, b, y, pads):
        return [helper.make_node("Conv", [x, w, b], [y + "_c"], pads=pads, name=y + "_conv"),
                helper.make_node("Relu", [y + "_c"], [y], name=y + "_relu")]
    nodes = (conv_relu("x", "w0", "b0", "stem", [1, 1, 1, 1])
             + conv_relu("stem", "ws", "bs", "squeeze", [0, 0, 0, 0])
             + conv_relu("squeeze", "we1", "be1", "e1", [0, 0, 0, 0])
             + conv_relu("squeeze", "we3", "be3", "e3", [1, 1, 1, 1])
             + [helper.make_node("Concat", ["e1", "e3"], ["cat"], axis=1, name="cat"),
                helper.make_node("Conv", ["cat", "wo", "bo"], ["o"], name="out_conv"),
                helper.make_node("GlobalAveragePool", ["o"], ["g"], name="gap"),
                helper.make_node("Flatten", ["g"], ["y"], name="flatten")])
    return quantized_image_model(work, "fire", nodes, consts)


def quantized_image_model(work, name, nodes, consts):
    """The model of nodes from [1, 3, 8, 8] images to y [1, 8], quantized
    like the CNN, saved as NAME_qdq.onnx in work."""
    src, dst = os.path.join(work, name + ".onnx"), os.path.join(work, name + "_qdq.onnx")
    onnx.save(model_of(nodes, consts, [1, 3, 8, 8], [1, 8]), src)
    quantize_static(src, dst, Calibration(), quant_format=QuantFormat.QDQ, per_channel=True,
                    reduce_range=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    return onnx.load(dst)


def without_requantizing(m, k):
    """m with the DequantizeLinear before the Concat's input k given the
    Concat's output quantization: ONNX Runtime then concatenates input k's
    bytes as they are, the negative control for requantizing."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    by_output = {n.output[0]: n for n in m.graph.node}
    cat = next(n for n in m.graph.node if n.op_type == "Concat")
    quant = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == cat.output[0])
    dq = by_output[cat.input[k]]
    dq.input[1], dq.input[2] = quant.input[1], quant.input[2]
    return m


def check_fire_module(opc, work, verdict):
    """fuse-qdq runs the fire module's Concat on the bytes
    (T_MOVES_VALUES): --report does not list it as float, the input whose
    scale differs from the output's is requantized (Q(DQ(x)), as ONNX
    Runtime's QLinearConcat does) and the other read as it is, and the CPU
    program joins the bytes channels-last in one opc_concat_blocks_b1
    launch. y must match ONNX Runtime exactly, optimised (QLinearConcat)
    and as written. Controls: ONNX Runtime with the Concat's inputs swapped,
    and without requantizing, must both differ from opc's y."""
    m = fire_module(work)
    d = os.path.join(work, "fire")
    path = os.path.join(work, "fire_qdq.onnx")
    rc, after, text = opc_stats(opc, path)
    verdict(rc == 0 and "node 'cat'" not in text and not after.get("Conv"),
            "fire module: the Concat runs on the bytes (not reported float), no float Conv left"
            + ("" if rc == 0 else f": {text[-300:]}"))
    exes, why = compile_targets(opc, m, d)
    if exes is None:
        verdict(False, f"fire module compile: {why}")
        return
    with open(os.path.join(d, "net.c")) as f:
        text = f.read()
    requantized = len(re.findall(r"/\* cat_requantize_\d \(QuantizedLookup\) \*/", text))
    verdict(requantized == 1 and "cuLaunchKernel(c->kernel.opc_concat_blocks_b1" in text,
            f"fire module: one Concat input requantized ({requantized}), the bytes joined by "
            "opc_concat_blocks_b1")
    cat = next(n for n in m.graph.node if n.op_type == "Concat")
    swapped = onnx.ModelProto.FromString(m.SerializeToString())
    swapped_cat = next(n for n in swapped.graph.node if n.op_type == "Concat")
    swapped_cat.input[0], swapped_cat.input[1] = cat.input[1], cat.input[0]
    controls = [("with the Concat's inputs swapped", [swapped]),
                ("without requantizing the input of another scale",
                 [without_requantizing(m, j) for j in (0, 1)])]
    compare_with_ort(exes, m, d, "fire module", controls, verdict)


def silu_block(work):
    """EfficientNet's activation between quantized convolutions: the stem
    conv 3->8, SiLU (x Sigmoid(x), as torch exports it), a 1x1 conv 8->8,
    SiLU, GlobalAveragePool, Flatten, quantized like the CNN (the Sigmoid
    gets a Q and a DQ of its own)."""
    consts = {"w0": weight((8, 3, 3, 3), 27), "b0": rng.normal(0, 0.1, 8).astype(np.float32),
              "w1": weight((8, 8, 1, 1), 8), "b1": rng.normal(0, 0.1, 8).astype(np.float32)}

    def conv_silu(x, w, b, y, pads):
        return [helper.make_node("Conv", [x, w, b], [y + "_c"], pads=pads, name=y + "_conv"),
                helper.make_node("Sigmoid", [y + "_c"], [y + "_s"], name=y + "_sigmoid"),
                helper.make_node("Mul", [y + "_c", y + "_s"], [y], name=y + "_mul")]
    nodes = (conv_silu("x", "w0", "b0", "stem", [1, 1, 1, 1])
             + conv_silu("stem", "w1", "b1", "c1", [0, 0, 0, 0])
             + [helper.make_node("GlobalAveragePool", ["c1"], ["g"], name="gap"),
                helper.make_node("Flatten", ["g"], ["y"], name="flatten")])
    return quantized_image_model(work, "silu", nodes, consts)


def check_silu_block(opc, work, verdict):
    """fuse-qdq makes each SiLU, Q(DQ(c) DQ(Q(Sigmoid(DQ(c))))), one
    QuantizedLookup of c's bytes, its table Q(SiLU(DQ(b))) evaluated at
    compile time for each byte b, the Sigmoid's table first: no Sigmoid
    or Mul is left. y must match ONNX Runtime exactly, optimised and as
    written. Control: ONNX Runtime with each Sigmoid a HardSigmoid must
    differ from opc's y."""
    m = silu_block(work)
    d = os.path.join(work, "silu")
    rc, after, text = opc_stats(opc, os.path.join(work, "silu_qdq.onnx"))
    verdict(rc == 0 and not after.get("Sigmoid") and not after.get("Mul")
            and after.get("QuantizedLookup") == 2,
            f"SiLU: two QuantizedLookups, no float Sigmoid or Mul left: {after}")
    exes, why = compile_targets(opc, m, d)
    if exes is None:
        verdict(False, f"SiLU compile: {why}")
        return
    hard = mutated(m, "Sigmoid", lambda n: setattr(n, "op_type", "HardSigmoid"))
    compare_with_ort(exes, m, d, "SiLU", [("with HardSigmoid for Sigmoid", [hard])], verdict)


def mutated(m, op_type, edit):
    """A copy of m (a control's model) with edit(node) done to each node
    of op_type."""
    copy = onnx.ModelProto.FromString(m.SerializeToString())
    for n in copy.graph.node:
        if n.op_type == op_type:
            edit(n)
    return copy


def compare_with_ort(exes, m, d, what, controls, verdict):
    """The programs' y on three images, exactly ONNX Runtime's (optimised
    and as written); on the first, ONNX Runtime running the models of each
    control, (how, [models]), must give another y for one of them at
    least."""
    for k, x in enumerate(images(3)):
        got = run_targets(exes, m, {"x": x}, d)
        if isinstance(got, str):
            verdict(False, f"{what} input {k}: {got}")
            continue
        for optimise in (True, False):
            want = reference(m, {"x": x}, optimise)
            why = compare_exact(got["y"], want["y"])
            verdict(why is None, f"{what} input {k} y exact, ORT "
                    f"{'optimised' if optimise else 'as written'}{': ' + why if why else ''}")
        if k == 0:
            verdict(np.ptp(want["y"]) > 0, f"{what}: the reference output varies")
            for how, models in controls:
                verdict(any(compare_exact(got["y"], reference(c, {"x": x}, False)["y"]) is not None
                            for c in models), f"control: ORT {how} differs")


def shuffle_unit(work):
    """A ShuffleNetV2 unit after a stem, quantized like the CNN: the stem
    conv 3->8 + Relu, a Split into two halves, the second through 1x1 +
    Relu, a depthwise 3x3 and 1x1 + Relu, the Concat of the first half and
    that branch, the channel shuffle (Reshape to 2 groups, Transpose,
    Reshape back), a 1x1 conv, GlobalAveragePool, Flatten."""
    consts = {"w0": weight((8, 3, 3, 3), 27), "b0": rng.normal(0, 0.1, 8).astype(np.float32),
              "w1": weight((4, 4, 1, 1), 4), "b1": rng.normal(0, 0.1, 4).astype(np.float32),
              "wd": weight((4, 1, 3, 3), 9), "bd": rng.normal(0, 0.1, 4).astype(np.float32),
              "w2": weight((4, 4, 1, 1), 4), "b2": rng.normal(0, 0.1, 4).astype(np.float32),
              "wo": weight((8, 8, 1, 1), 8), "bo": rng.normal(0, 0.1, 8).astype(np.float32),
              "groups": np.array([1, 2, 4, 8, 8], np.int64),
              "flat": np.array([1, 8, 8, 8], np.int64)}
    node = helper.make_node
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], name="stem"),
             node("Relu", ["c0"], ["r0"], name="stem_relu"),
             node("Split", ["r0"], ["half0", "half1"], axis=1, name="split"),
             node("Conv", ["half1", "w1", "b1"], ["c1"], name="pw1"),
             node("Relu", ["c1"], ["r1"], name="pw1_relu"),
             node("Conv", ["r1", "wd", "bd"], ["cd"], pads=[1, 1, 1, 1], group=4, name="dw"),
             node("Conv", ["cd", "w2", "b2"], ["c2"], name="pw2"),
             node("Relu", ["c2"], ["r2"], name="pw2_relu"),
             node("Concat", ["half0", "r2"], ["cat"], axis=1, name="cat"),
             node("Reshape", ["cat", "groups"], ["grouped"], name="reshape1"),
             node("Transpose", ["grouped"], ["shuffled"], perm=[0, 2, 1, 3, 4], name="transpose"),
             node("Reshape", ["shuffled", "flat"], ["mixed"], name="reshape2"),
             node("Conv", ["mixed", "wo", "bo"], ["o"], name="out_conv"),
             node("GlobalAveragePool", ["o"], ["g"], name="gap"),
             node("Flatten", ["g"], ["y"], name="flatten")]
    return quantized_image_model(work, "shuffle", nodes, consts)


def check_shuffle_unit(opc, work, verdict):
    """fuse-qdq runs the unit's Split, Concat, Reshapes and Transpose on
    the bytes (T_MOVES_VALUES): --report lists none of them as float; y
    must match ONNX Runtime exactly, optimised and as written. Control:
    ONNX Runtime with the shuffle's Transpose made the identity must
    differ from opc's y."""
    m = shuffle_unit(work)
    rc, after, text = opc_stats(opc, os.path.join(work, "shuffle_qdq.onnx"))
    floats = [n for n in ("split", "cat", "reshape1", "transpose", "reshape2")
              if f"node '{n}'" in text]
    verdict(rc == 0 and not floats and not after.get("Conv"),
            f"shuffle unit: the Split, Concat, Reshapes and Transpose run on the bytes (float: "
            f"{floats})" + ("" if rc == 0 else f": {text[-300:]}"))
    d = os.path.join(work, "shuffle")
    exes, why = compile_targets(opc, m, d)
    if exes is None:
        verdict(False, f"shuffle unit compile: {why}")
        return
    unshuffled = mutated(m, "Transpose", lambda n: n.attribute[0].ints.__setitem__(
        slice(None), [0, 1, 2, 3, 4]))
    compare_with_ort(exes, m, d, "shuffle unit",
                     [("without the shuffle's Transpose", [unshuffled])], verdict)


def main():
    opc, work = sys.argv[1:3]
    failures = 0

    def verdict(ok, what):
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}")

    m = quantized(work)
    path = os.path.join(work, "cnn_qdq_outputs.onnx")
    onnx.save(m, path)
    rc, after, text = opc_stats(opc, path)
    why = fusion_failures(after, text) if rc == 0 else [f"opc exited with {rc}: {text[-300:]}"]
    verdict(not why, "fused: no float Conv, MatMul, Add, MaxPool or Flatten left"
            + (": " + "; ".join(why) if why else ""))
    rc, after0, text0 = opc_stats(opc, path, ["-O0"])
    verdict(rc == 0 and fusion_failures(after0, text0),
            "control: the same check rejects an -O0 compile (no fusion)")

    exes, why = compile_targets(opc, m, os.path.join(work, "program"))
    if exes is None:
        verdict(False, f"compile: {why}")
        return 1
    count = packed_launches(os.path.join(work, "program"))
    verdict(count == 2, f"the CPU program packs the stem conv1 and conv2 ({count})")
    for k, x in enumerate(images(4)):
        feeds = {"x": x}
        got = run_targets(exes, m, feeds, os.path.join(work, "program"))
        if isinstance(got, str):
            verdict(False, f"input {k}: {got}")
            continue
        for optimise in (True, False):
            want = reference(m, feeds, optimise)
            if optimise and k == 0:
                verdict(np.ptp(want["y"]) > 0, "the reference output varies")
            for name, w in want.items():
                why = compare_exact(got[name], w)
                verdict(why is None, f"input {k} {name} {w.dtype}{list(w.shape)} exact, ORT "
                        f"{'optimised' if optimise else 'as written'}{': ' + why if why else ''}")
        if k == 0:
            xq, r1 = want["x_QuantizeLinear_Output"], want["r1_QuantizeLinear_Output"]
            verdict(compare_exact(conv1_in_numpy(m, xq, True), r1) is None,
                    "control: conv1 as QLinearConv in numpy matches")
            verdict(compare_exact(conv1_in_numpy(m, xq, False), r1) is not None,
                    "control: conv1 in numpy without its bias is rejected")
    check_channels_last(opc, work, verdict)
    check_relu_model(opc, work, verdict)
    check_gemm_mlp(opc, work, verdict)
    check_quantized_add(opc, work, verdict)
    check_fire_module(opc, work, verdict)
    check_shuffle_unit(opc, work, verdict)
    check_silu_block(opc, work, verdict)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
