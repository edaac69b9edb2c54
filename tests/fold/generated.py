"""Cases the ONNX node test data lacks (it predates LpPool's tests, Pad's
wrap mode, Resize-18's axes and policies, integer MatMul and Gemm...),
built here as one-node models with data, and expected outputs from the
`onnx` package's reference implementation (onnx.reference).

cases() yields (name, model, inputs, outputs): inputs and outputs are lists
of numpy arrays, in the model's input and output order. controls() yields
cases of the same form whose outputs are deliberately wrong: each must fail.

LSTM, GRU and RNN take their expected outputs from ONNX Runtime instead
(onnx.reference implements neither their activations nor clip).
"""
import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator
import onnxruntime

RNG = np.random.default_rng(19)


def rand(*shape, dtype=np.float32, lo=-3, hi=3):
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(lo, hi, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return RNG.integers(0, 2, size=shape).astype(bool)
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def model(op, inputs, attrs=None, opset=18, outputs=1, cast=None):
    """A one-node model of `op` over the named arrays in `inputs` (a None
    array: the input is left out). cast: a dtype the output is cast to
    after, for types opc's programs do not return (uint32, uint64)."""
    names = [name if a is not None else "" for name, a in inputs]
    vis = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for name, a in inputs if a is not None]
    outs = ["y%d" % k for k in range(outputs)]
    nodes = [helper.make_node(op, names, ["r0"] + outs[1:] if cast else outs, **(attrs or {}))]
    if cast:
        nodes.append(helper.make_node("Cast", ["r0"], ["y0"],
                                      to=helper.np_dtype_to_tensor_dtype(np.dtype(cast))))
    # Outputs without a declared type: opc refuses one declared UNDEFINED,
    # as ONNX Runtime does.
    graph = helper.make_graph(nodes, op.lower(), vis,
                              [helper.make_empty_tensor_value_info(o) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def case(name, op, inputs, attrs=None, opset=18, outputs=1, expected=None, cast=None):
    """expected: the outputs, where onnx.reference has no implementation
    or a wrong one."""
    m = model(op, inputs, attrs, opset, outputs, cast)
    feeds = {n: a for n, a in inputs if a is not None}
    if expected is None:
        expected = ReferenceEvaluator(m).run(None, feeds)
    return name, m, [a for _, a in inputs if a is not None], expected


def cases():
    x = rand(1, 2, 5, 6)
    # Pools: LpPool, GlobalLpPool, ceil_mode, dilations, integer MaxPool.
    yield case("lppool_2d_p2", "LpPool", [("x", x)], dict(kernel_shape=[2, 3], p=2))
    yield case("lppool_2d_p3_pads_strides", "LpPool", [("x", x)],
               dict(kernel_shape=[3, 2], p=3, pads=[1, 0, 1, 1], strides=[2, 2]))
    yield case("lppool_1d", "LpPool", [("x", rand(2, 3, 7))], dict(kernel_shape=[3], p=1))
    # The spec's definition; onnx.reference has no GlobalLpPool.
    def global_lp(a, p):
        axes = tuple(range(2, a.ndim))
        return [np.power(np.sum(np.abs(a.astype(np.float64)) ** p, axis=axes, keepdims=True),
                         1.0 / p).astype(a.dtype)]
    x3 = rand(1, 3, 4, 2, 3)
    yield case("globallppool_p2", "GlobalLpPool", [("x", x)], dict(p=2), expected=global_lp(x, 2))
    yield case("globallppool_p3", "GlobalLpPool", [("x", x3)], dict(p=3), expected=global_lp(x3, 3))
    yield case("maxpool_ceil_dilations", "MaxPool", [("x", x)],
               dict(kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 1], ceil_mode=1))
    # The reference pads integers with NaN, which fails: the expected
    # values are those of the same data as floats.
    def int_pool(a, attrs):
        m = model("MaxPool", [("x", a.astype(np.float32))], attrs)
        return [ReferenceEvaluator(m).run(None, {"x": a.astype(np.float32)})[0].astype(a.dtype)]
    xi8 = rand(1, 2, 5, 5, dtype=np.int8, lo=-128, hi=127)
    at = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    yield case("maxpool_int8", "MaxPool", [("x", xi8)], at, expected=int_pool(xi8, at))
    xu8 = rand(1, 1, 6, 7, dtype=np.uint8, lo=0, hi=255)
    at = dict(kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    yield case("maxpool_uint8_same_upper", "MaxPool", [("x", xu8)], at, expected=int_pool(xu8, at))
    yield case("averagepool_ceil", "AveragePool", [("x", x)],
               dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
    yield case("averagepool_ceil_count_include_pad", "AveragePool", [("x", rand(1, 1, 6, 7))],
               dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
                    count_include_pad=1), opset=19)
    yield case("averagepool_3d_pads", "AveragePool", [("x", rand(1, 1, 4, 5, 3))],
               dict(kernel_shape=[2, 2, 2], pads=[1, 0, 1, 0, 1, 1], count_include_pad=1))
    yield case("averagepool_dilations", "AveragePool", [("x", x)],
               dict(kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1]), opset=19)
    # Convolutions: groups, dilations, 1-D and 3-D, auto_pad.
    yield case("conv_group_dilations", "Conv",
               [("x", rand(2, 4, 7, 6)), ("w", rand(6, 2, 3, 2)), ("b", rand(6))],
               dict(group=2, dilations=[2, 1], pads=[1, 2, 0, 1], strides=[1, 2]))
    yield case("conv_1d_same_lower", "Conv", [("x", rand(1, 3, 9)), ("w", rand(2, 3, 4))],
               dict(auto_pad="SAME_LOWER", strides=[2]))
    yield case("conv_3d", "Conv", [("x", rand(1, 2, 4, 5, 3)), ("w", rand(3, 2, 2, 3, 2))],
               dict(pads=[0, 1, 1, 1, 0, 0]))
    yield case("conv_depthwise", "Conv", [("x", rand(1, 3, 5, 5)), ("w", rand(3, 1, 3, 3))],
               dict(group=3, pads=[1, 1, 1, 1]))
    yield case("conv_float64", "Conv", [("x", rand(1, 2, 4, 4, dtype=np.float64)),
                                        ("w", rand(2, 2, 2, 2, dtype=np.float64))])
    # The reference fails on grouped ConvTranspose: the expected output is
    # that of each group alone, concatenated.
    def grouped_transpose(x, w, b, attrs, group):
        cg, parts = x.shape[1] // group, []
        mg = w.shape[1]
        for k in range(group):
            feeds = {"x": x[:, k * cg:(k + 1) * cg], "w": w[k * cg:(k + 1) * cg],
                     "b": b[k * mg:(k + 1) * mg]}
            m = model("ConvTranspose", list(feeds.items()), attrs)
            parts.append(ReferenceEvaluator(m).run(None, feeds)[0])
        return [np.concatenate(parts, axis=1)]
    xt, wt, bt = rand(1, 4, 3, 4), rand(4, 3, 3, 2), rand(6)
    at = dict(strides=[2, 3], output_padding=[1, 2], pads=[1, 0, 0, 1])
    yield case("convtranspose_group_output_padding", "ConvTranspose",
               [("x", xt), ("w", wt), ("b", bt)], dict(at, group=2),
               expected=grouped_transpose(xt, wt, bt, at, 2))
    yield case("convtranspose_dilations_1d", "ConvTranspose",
               [("x", rand(2, 2, 5)), ("w", rand(2, 3, 3))], dict(dilations=[2], strides=[2]))
    # Normalisation.
    # The reference's L1 norm sums x, not |x|: the expected values are the
    # spec's (and ONNX Runtime's).
    l1 = np.abs(x).sum(axis=1, keepdims=True)
    yield case("lpnorm_p1_axis1", "LpNormalization", [("x", x)], dict(axis=1, p=1),
               expected=[x / l1])
    yield case("lpnorm_p2_last", "LpNormalization", [("x", rand(3, 4, 5))], dict(axis=-1, p=2))
    yield case("mvn_axes_last", "MeanVarianceNormalization", [("x", rand(2, 3, 4))],
               dict(axes=[2]))
    yield case("instancenorm_1d", "InstanceNormalization",
               [("x", rand(2, 3, 6)), ("s", rand(3)), ("b", rand(3))], dict(epsilon=1e-3))
    yield case("layernorm_axis1_no_bias", "LayerNormalization",
               [("x", rand(2, 3, 4)), ("s", rand(3, 4))], dict(axis=1), outputs=3)
    # The reference's loop runs over the batch, not the channels: the
    # expected values follow the spec's formula.
    xl = rand(2, 6, 3, 3)
    sq = np.stack([(xl[:, max(0, c - 1):min(6, c + 3)] ** 2).sum(axis=1) for c in range(6)], axis=1)
    yield case("lrn_size4", "LRN", [("x", xl)], dict(size=4, alpha=0.01, beta=0.5, bias=2.0),
               expected=[(xl / (2.0 + 0.01 / 4 * sq) ** 0.5).astype(np.float32)])
    yield case("batchnorm_float64", "BatchNormalization",
               [("x", rand(2, 3, 4, dtype=np.float64)), ("s", rand(3, dtype=np.float64)),
                ("b", rand(3, dtype=np.float64)), ("m", rand(3, dtype=np.float64)),
                ("v", rand(3, dtype=np.float64, lo=0.5, hi=2))])
    # Gemm and MatMul on integers (exact) and floats.
    for t in (np.int32, np.int64, np.uint32, np.uint64):
        lo = 0 if np.dtype(t).kind == "u" else -50
        cast = np.int64 if np.dtype(t).kind == "u" else None
        yield case("matmul_batch_%s" % np.dtype(t).name, "MatMul",
                   [("a", rand(2, 1, 3, 4, dtype=t, lo=lo, hi=50)),
                    ("b", rand(3, 4, 5, dtype=t, lo=lo, hi=50))], cast=cast)
        yield case("gemm_trans_%s" % np.dtype(t).name, "Gemm",
                   [("a", rand(4, 3, dtype=t, lo=lo, hi=50)), ("b", rand(5, 4, dtype=t, lo=lo, hi=50)),
                    ("c", rand(5, dtype=t, lo=lo, hi=50))], dict(transA=1, transB=1), cast=cast)
    # uint32 products that wrap.
    wa = np.array([[3000000000, 7]], np.uint32)
    wb = np.array([[2], [4000000000]], np.uint32)
    yield case("matmul_uint32_wraps", "MatMul", [("a", wa), ("b", wb)], cast=np.int64)
    big = np.array([[2**62, 3], [5, 2**61]], dtype=np.int64)
    yield case("matmul_int64_wraps", "MatMul", [("a", big), ("b", big)])
    yield case("gemm_int32_alpha_beta", "Gemm",
               [("a", rand(3, 4, dtype=np.int32, lo=-9, hi=9)), ("b", rand(4, 2, dtype=np.int32, lo=-9, hi=9)),
                ("c", rand(2, dtype=np.int32, lo=-9, hi=9))], dict(alpha=2.0, beta=-3.0))
    yield case("matmul_1d_2d", "MatMul", [("a", rand(4)), ("b", rand(4, 3))])
    yield case("matmul_2d_1d", "MatMul", [("a", rand(2, 3, 4)), ("b", rand(4))])
    yield case("gemm_alpha_beta_c_column", "Gemm",
               [("a", rand(3, 4)), ("b", rand(4, 2)), ("c", rand(3, 1))],
               dict(alpha=0.5, beta=-2.0))
    # Pad: every mode, negative pads, axes, integer and bool data.
    pads = np.array([1, 2, 3, 1], dtype=np.int64)
    for mode in ("constant", "reflect", "edge", "wrap"):
        yield case("pad_%s_axes" % mode, "Pad",
                   [("x", rand(2, 3, 4)), ("pads", pads), ("v", np.array(1.5, np.float32)),
                    ("axes", np.array([1, 2], np.int64))], dict(mode=mode), opset=19)
    yield case("pad_wrap_large", "Pad", [("x", rand(2, 3)), ("pads", np.array([3, 4, 2, 5], np.int64))],
               dict(mode="wrap"), opset=19)
    yield case("pad_reflect_large", "Pad", [("x", rand(3, 3)), ("pads", np.array([0, 5, 0, 4], np.int64))],
               dict(mode="reflect"), opset=19)
    yield case("pad_int32_value", "Pad", [("x", rand(3, 4, dtype=np.int32)),
                                          ("pads", np.array([1, 0, 0, 2], np.int64)),
                                          ("v", np.array(-7, np.int32))])
    yield case("pad_uint8_edge", "Pad", [("x", rand(2, 5, dtype=np.uint8, lo=0, hi=255)),
                                         ("pads", np.array([2, 1, 1, 2], np.int64))], dict(mode="edge"))
    yield case("pad_bool", "Pad", [("x", rand(3, 2, dtype=bool)),
                                   ("pads", np.array([0, 1, 1, 0], np.int64))])
    # A negative pad crops (numpy's pad, the reference's, refuses them).
    xn = rand(4, 5)
    yield case("pad_negative_constant", "Pad", [("x", xn), ("pads", np.array([-1, 2, 1, -2], np.int64))],
               expected=[np.pad(xn[1:, :3], ((0, 1), (2, 0)))])
    # DepthToSpace and SpaceToDepth on other types.
    yield case("depthtospace_crd_int64", "DepthToSpace", [("x", rand(1, 8, 2, 3, dtype=np.int64))],
               dict(blocksize=2, mode="CRD"))
    yield case("depthtospace_dcr_bool", "DepthToSpace", [("x", rand(2, 9, 2, 2, dtype=bool))],
               dict(blocksize=3))
    yield case("spacetodepth_uint8", "SpaceToDepth", [("x", rand(1, 2, 4, 6, dtype=np.uint8, lo=0, hi=255))],
               dict(blocksize=2))
    yield case("spacetodepth_float64", "SpaceToDepth", [("x", rand(2, 3, 6, 3, dtype=np.float64))],
               dict(blocksize=3))
    # Resize-19: axes, aspect-ratio policies, half_pixel_symmetric, integers.
    none = np.zeros(0, np.float32)
    xr = rand(1, 2, 4, 5)
    yield case("resize_axes_scales_linear", "Resize",
               [("x", xr), ("roi", None), ("scales", np.array([1.5, 0.6], np.float32))],
               dict(mode="linear", axes=[3, 2]), opset=19)
    for policy in ("not_larger", "not_smaller"):
        yield case("resize_sizes_cubic_%s" % policy, "Resize",
                   [("x", xr), ("roi", None), ("scales", None), ("sizes", np.array([7, 6], np.int64))],
                   dict(mode="cubic", axes=[2, 3], keep_aspect_ratio_policy=policy), opset=19)
    yield case("resize_half_pixel_symmetric", "Resize",
               [("x", xr), ("roi", None), ("scales", np.array([1, 1, 1.7, 0.8], np.float32))],
               dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), opset=19)
    yield case("resize_nearest_uint8", "Resize",
               [("x", rand(1, 1, 3, 4, dtype=np.uint8, lo=0, hi=255)), ("roi", None),
                ("scales", np.array([1, 1, 2.5, 1.5], np.float32))],
               dict(mode="nearest", nearest_mode="round_prefer_ceil"), opset=19)
    yield case("resize_crop_extrapolate", "Resize",
               [("x", xr), ("roi", np.array([0, 0, -0.2, 0.3, 1, 1, 1.1, 0.9], np.float32)),
                ("scales", np.array([1, 1, 1.5, 1.2], np.float32))],
               dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                    extrapolation_value=-9.0), opset=19)
    for mode in ("linear", "cubic"):
        yield case("resize_%s_antialias" % mode, "Resize",
                   [("x", rand(1, 2, 9, 8)), ("roi", None),
                    ("scales", np.array([1, 1, 0.4, 0.7], np.float32))],
                   dict(mode=mode, antialias=1), opset=19)
        yield case("resize_%s_antialias_sizes_up_down" % mode, "Resize",
                   [("x", rand(1, 1, 5, 8)), ("roi", None), ("scales", None),
                    ("sizes", np.array([8, 3], np.int64))],
                   dict(mode=mode, antialias=1, axes=[2, 3],
                        coordinate_transformation_mode="pytorch_half_pixel"), opset=19)
    yield case("resize_linear_exclude_outside", "Resize",
               [("x", xr), ("roi", None), ("scales", np.array([1, 1, 1.5, 0.6], np.float32))],
               dict(mode="linear", exclude_outside=1), opset=19)
    # Upsample-9 is Resize-10, whose coordinates are asymmetric (the
    # reference implements neither in linear mode).
    xu, su = rand(1, 1, 2, 3), np.array([1, 1, 2, 1.5], np.float32)
    resize = model("Resize", [("x", xu), ("roi", None), ("scales", su)],
                   dict(mode="linear", coordinate_transformation_mode="asymmetric"), opset=19)
    yield case("upsample_linear", "Upsample", [("x", xu), ("scales", su)], dict(mode="linear"),
               opset=9, expected=ReferenceEvaluator(resize).run(None, {"x": xu, "scales": su}))
    # Resize-10: (X, scales), asymmetric coordinates, nearest rounds down.
    r19 = model("Resize", [("x", xu), ("roi", None), ("scales", su)],
                dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor"), opset=19)
    yield case("resize10_nearest", "Resize", [("x", xu), ("scales", su)], dict(mode="nearest"),
               opset=10, expected=ReferenceEvaluator(r19).run(None, {"x": xu, "scales": su}))
    # Pad-2: pads and value are attributes.
    yield case("pad2_attributes", "Pad", [("x", rand(2, 3))],
               dict(pads=[1, 0, 2, 1], value=4.5), opset=2)
    # Losses with int32 labels, ignore_index, weights and no reduction.
    scores = rand(3, 4, 2)
    labels = np.array([[0, 3], [2, -1], [1, 1]], np.int32)
    yield case("nllloss_int32_ignore_weight_mean", "NegativeLogLikelihoodLoss",
               [("x", scores), ("t", labels), ("w", rand(4, lo=0.1, hi=2))],
               dict(ignore_index=-1))
    yield case("sce_int32_none_log_prob", "SoftmaxCrossEntropyLoss",
               [("x", scores), ("t", labels)], dict(ignore_index=-1, reduction="none"), outputs=2)
    yield from recurrent_cases()


def controls():
    yield from recurrent_controls()


# ------------------------------------------------------------ recurrent

def ort_run(m, feeds):
    sess = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def to_batch_major(inputs):
    """The inputs of a layout=0 recurrent node as layout=1 wants them:
    X [seq, batch, in] -> [batch, seq, in], states [dirs, batch, h] ->
    [batch, dirs, h]; W, R, B, sequence_lens and P keep their shapes."""
    moved = []
    for name, a in inputs:
        if a is not None and name in ("x", "h0", "c0"):
            a = np.ascontiguousarray(np.swapaxes(a, 0, 1))
        moved.append((name, a))
    return moved


def recurrent_expected(op, inputs, attrs, outputs, opset):
    """ONNX Runtime's outputs for the sequence-major inputs. For layout=1,
    which ONNX Runtime refuses, those of the node in layout 0 transposed
    into batch-major order: Y [seq, dirs, batch, h] -> [batch, seq, dirs,
    h], Y_h and Y_c [dirs, batch, h] -> [batch, dirs, h]."""
    attrs = dict(attrs)
    batch_major = attrs.pop("layout", 0)
    m = model(op, inputs, attrs, opset, outputs)
    outs = ort_run(m, {n: a for n, a in inputs if a is not None})
    if not batch_major:
        return outs
    return [np.ascontiguousarray(np.transpose(outs[0], (2, 0, 1, 3)))] + \
           [np.ascontiguousarray(np.swapaxes(o, 0, 1)) for o in outs[1:]]


def recurrent_inputs(op, seq, batch, size, hidden, dirs, bias=True, h0=True, c0=False,
                     lens=None, peep=False):
    """Named inputs in the operator's order, None where left out: data of
    unit size, weights scaled by 1/sqrt(hidden) so that the gates neither
    saturate nor vanish and every input moves the outputs."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    s = 1.0 / np.sqrt(hidden)
    ins = [("x", rand(seq, batch, size, lo=-1, hi=1)),
           ("w", rand(dirs, gates * hidden, size, lo=-s, hi=s)),
           ("r", rand(dirs, gates * hidden, hidden, lo=-s, hi=s)),
           ("b", rand(dirs, 2 * gates * hidden, lo=-s, hi=s) if bias else None),
           ("lens", np.array(lens, np.int32) if lens is not None else None),
           ("h0", rand(dirs, batch, hidden, lo=-1, hi=1) if h0 else None)]
    if op == "LSTM":
        ins += [("c0", rand(dirs, batch, hidden, lo=-1, hi=1) if c0 else None),
                ("p", rand(dirs, 3 * hidden, lo=-s, hi=s) if peep else None)]
    while ins[-1][1] is None:  # trailing optional inputs are simply absent
        ins.pop()
    return ins


# Each case: (name, op, input arguments, attributes, outputs, opset, and
# what its controls take away: inputs or attributes by name, "direction"
# for a reverse node run forwards, "layout" for the outputs left in
# sequence-major order).
RECURRENT = [
    ("lstm_forward_peepholes", "LSTM", dict(c0=True, peep=True), {}, 3, 14, ["p", "c0"]),
    ("lstm_reverse_seq_lens", "LSTM", dict(c0=True, lens=[5, 2, 3]),
     dict(direction="reverse"), 3, 14, ["lens", "direction"]),
    ("lstm_bidirectional_activations_clip", "LSTM", dict(c0=True, peep=True, lens=[4, 5, 1]),
     dict(direction="bidirectional", clip=0.6,
          activations=["HardSigmoid", "Softsign", "Elu", "Sigmoid", "ScaledTanh", "Softplus"],
          activation_alpha=[0.3, 0.8, 1.2], activation_beta=[0.4, 0.9]), 3, 14,
     ["clip", "activations"]),
    ("lstm_input_forget", "LSTM", dict(c0=True), dict(input_forget=1), 3, 7, ["input_forget"]),
    ("lstm_layout1_bidirectional", "LSTM", dict(c0=True, peep=True, lens=[3, 5, 2]),
     dict(direction="bidirectional", layout=1), 3, 22, ["layout"]),
    ("gru_forward_bias_initial", "GRU", {}, {}, 2, 14, ["b", "h0"]),
    ("gru_linear_before_reset_reverse", "GRU", dict(lens=[2, 5, 4]),
     dict(direction="reverse", linear_before_reset=1), 2, 14, ["linear_before_reset", "direction"]),
    ("gru_bidirectional_activations", "GRU", dict(lens=[5, 1, 3]),
     dict(direction="bidirectional",
          activations=["Sigmoid", "LeakyRelu", "HardSigmoid", "ThresholdedRelu"],
          activation_alpha=[0.05, 0.25, 0.1], activation_beta=[0.45]), 2, 14, ["activations"]),
    ("gru_layout1_clip", "GRU", dict(lens=[4, 0, 5]), dict(layout=1, clip=0.5), 2, 22,
     ["clip", "layout"]),
    ("rnn_affine_no_bias", "RNN", dict(bias=False, h0=False),
     dict(activations=["Affine"], activation_alpha=[0.7], activation_beta=[0.1]), 2, 14,
     ["activations"]),
    ("rnn_bidirectional_relu_tanh", "RNN", dict(lens=[5, 3, 1]),
     dict(direction="bidirectional", activations=["Relu", "Tanh"]), 2, 14, ["lens"]),
    ("rnn_layout1_reverse_clip", "RNN", dict(lens=[2, 5, 3]),
     dict(layout=1, direction="reverse", clip=0.4), 2, 22, ["layout", "clip"]),
]


def recurrent_case(spec):
    """The case and its inputs in sequence-major order, named."""
    name, op, args, attrs, outputs, opset, _ = spec
    attrs = dict(attrs, hidden_size=6)  # ONNX Runtime wants it stated
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    inputs = recurrent_inputs(op, 5, 3, 4, 6, dirs, **args)
    expected = recurrent_expected(op, inputs, attrs, outputs, opset)
    given = to_batch_major(inputs) if attrs.get("layout") else inputs
    m = model(op, given, attrs, opset, outputs)
    return (name, m, [a for _, a in given if a is not None], expected), inputs


def recurrent_cases():
    for spec in RECURRENT:
        yield recurrent_case(spec)[0]


def without(inputs, attrs, dropped):
    """The inputs and attributes with `dropped` taken away."""
    attrs = dict(attrs)
    if dropped in dict(inputs):
        inputs = [(n, None if n == dropped else a) for n, a in inputs]
    elif dropped == "direction":
        attrs["direction"] = "forward"
    elif dropped == "activations":
        for k in ("activations", "activation_alpha", "activation_beta"):
            attrs.pop(k, None)
    else:
        attrs.pop(dropped)
    while inputs[-1][1] is None:
        inputs = inputs[:-1]
    return inputs, attrs


def recurrent_controls():
    """Each recurrent case with the expected outputs of the same node less
    one attribute or input (or, for layout, the right values in the other
    layout's order): the program must disagree with them, which shows that
    the data move the outputs enough for that attribute to be tested."""
    for spec in RECURRENT:
        name, op, _, attrs, outputs, opset, controls = spec
        attrs = dict(attrs, hidden_size=6)
        (_, m, data, expected), inputs = recurrent_case(spec)
        for dropped in controls:
            if dropped == "layout":
                plain = dict(attrs)
                plain.pop("layout")
                wrong = [w.reshape(e.shape) for w, e in
                         zip(recurrent_expected(op, inputs, plain, outputs, opset), expected)]
            else:
                wrong = recurrent_expected(op, *without(inputs, attrs, dropped), outputs, opset)
            yield "control_%s_%s" % (name, dropped), m, data, wrong
