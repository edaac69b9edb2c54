#!/usr/bin/env python3
"""Deterministic ONNX model-zoo builder for opc tests and benchmarks.

  build.py NAME -o FILE.onnx [--batch N] [--seed S]
  build.py --list
  build.py --stats NAME [--batch N] [--seed S]
  build.py --check [NAME ...]     # build, run onnxruntime, check outputs

Weights are random (seeded), then calibrated on photographs (calibrate.py,
photos.py): every BatchNormalization gets the statistics of its input on
them, and every biased convolution no BatchNormalization follows is centred
and scaled, so that outputs depend on their input as a trained network's
do. For a given (NAME, batch, seed) the output is identical on one machine;
the statistics are rounded to 4 digits so that other CPUs rarely change a
byte. Needs numpy, onnx and onnxruntime, and the photographs (scikit-image,
or a copy of photos.py's cache in OPC_PHOTOS).
"""

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import calibrate as calibration  # noqa: E402
import photos  # noqa: E402
import zoo_cnn  # noqa: E402
import zoo_mobile  # noqa: E402
import zoo_nas  # noqa: E402
import zoo_seq  # noqa: E402
import zoo_torch  # noqa: E402
import zoo_transformer  # noqa: E402

MODELS = collections.OrderedDict([
    ("inception_v3", zoo_cnn.inception_v3),
    ("squeezenet1_0", zoo_cnn.squeezenet1_0),
    ("squeezenet1_1", zoo_cnn.squeezenet1_1),
    ("nasnet_a", zoo_nas.nasnet_a),
    ("randwire", zoo_nas.randwire),
    ("resnet50", zoo_cnn.resnet50),
    ("googlenet", zoo_cnn.googlenet),
    ("mobilenet_v2", zoo_cnn.mobilenet_v2),
    ("densenet121", zoo_cnn.densenet121),
    ("efficientnet_b0", zoo_cnn.efficientnet_b0),
    ("mobilenet_v3", zoo_mobile.mobilenet_v3),
    ("shufflenet_v2", zoo_mobile.shufflenet_v2),
    ("deeplabv3", zoo_mobile.deeplabv3),
    ("torch_export_cnn", zoo_torch.torch_export_cnn),
    ("swin", zoo_transformer.swin),
    ("bert_tiny", zoo_transformer.bert_tiny),
    ("crnn", zoo_seq.crnn),
    ("gru_kws", zoo_seq.gru_kws),
    ("decoder23", zoo_seq.decoder23),
])


def build_net(name, batch=1, seed=0):
    if name not in MODELS:
        raise SystemExit("unknown model %r (try --list)" % name)
    return MODELS[name](batch=batch, seed=seed)


def image_inputs(model):
    """[(name, shape)] of the graph inputs that take photographs: those the
    model's metadata marks "opc.input_kind.NAME" = "image" (netbuilder marks
    every float32 input of an image's shape)."""
    props = {p.key: p.value for p in model.metadata_props}
    return [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim])
            for i in model.graph.input if props.get("opc.input_kind." + i.name) == "image"]


def build_model(name, batch=1, seed=0, calibrate=True):
    """The model, its layers calibrated on photographs (calibrate.py) unless
    calibrate is False."""
    model = build_net(name, batch, seed).to_model(check=True)
    # The text models' LayerNormalizations keep their own scale.
    if not calibrate or not image_inputs(model) or not calibration.calibration_layers(model):
        return model
    # The same network at the calibration photographs' batch: the same
    # weights, under the same names.
    wide = build_net(name, photos.CALIBRATION, seed).to_model(check=False)
    feeds = {}
    images = dict(image_inputs(wide))
    for i in wide.graph.input:
        if i.name not in images:
            raise SystemExit("build.py: %s: input %r is not an image; calibrate.py knows "
                             "only image inputs" % (name, i.name))
        feeds[i.name] = photos.image_batch(list(range(photos.CALIBRATION)), images[i.name])
    return calibration.apply(model, calibration.statistics(wide, feeds))


def serialize(model):
    return model.SerializeToString(deterministic=True)


# ------------------------------------------------------------------ stats
def _attr(node, key, default=None):
    for a in node.attribute:
        if a.name == key:
            return onnx.helper.get_attribute_value(a)
    return default


def model_stats(model):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consts = {}
    for n in g.node:
        if n.op_type == "Constant":
            consts[n.output[0]] = _attr(n, "value")
    consumers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            consumers[i].append(n)
    shapes = {}
    inferred = onnx.shape_inference.infer_shapes(model)
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(g.input):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]

    def wshape(name):
        t = inits.get(name) or consts.get(name)
        return list(t.dims) if t is not None else None

    ops = collections.Counter(n.op_type for n in g.node)
    conv_units = ops["Conv"] + ops["Gemm"] + ops["MatMul"]
    depthwise = 0
    sep_units = 0
    macs = 0
    for n in g.node:
        if n.op_type == "Conv":
            w = wshape(n.input[1])
            out = shapes.get(n.output[0])
            if w and out:
                macs += int(np.prod(out)) * int(np.prod(w[1:]))
            grp = _attr(n, "group", 1)
            if grp > 1 and w and w[1] == 1:
                depthwise += 1
                cons = consumers[n.output[0]]
                if (len(cons) == 1 and cons[0].op_type == "Conv"
                        and list(_attr(cons[0], "kernel_shape")) == [1, 1]
                        and _attr(cons[0], "group", 1) == 1):
                    sep_units += 1
        elif n.op_type in ("Gemm", "MatMul"):
            w = wshape(n.input[1])
            out = shapes.get(n.output[0])
            if w and out:
                macs += int(np.prod(out)) * (w[1] if (n.op_type == "Gemm" and _attr(n, "transB", 0)) else w[0])
    params = sum(int(np.prod(t.dims)) for t in g.initializer)
    params += sum(int(np.prod(t.dims)) for t in consts.values())
    fused_units = conv_units - sep_units
    pools = ops["MaxPool"] + ops["AveragePool"] + ops["GlobalAveragePool"]
    merges = ops["Concat"] + ops["Add"] + ops["Sum"]
    return collections.OrderedDict([
        ("nodes", len(g.node)),
        ("ops", ops),
        ("conv_units", conv_units),
        ("depthwise_convs", depthwise),
        ("sepconv_units", sep_units),
        ("fused_units", fused_units),
        ("ios_style_ops", fused_units + pools + merges + ops["LRN"]),
        ("params", params),
        ("macs", macs),
    ])


def print_stats(name, model, extra=None):
    st = model_stats(model)
    print("model:           %s" % name)
    print("inputs:          %s" % ", ".join(
        "%s%s" % (i.name, [d.dim_value for d in i.type.tensor_type.shape.dim])
        for i in model.graph.input))
    print("outputs:         %s" % ", ".join(
        "%s%s" % (o.name, [d.dim_value for d in o.type.tensor_type.shape.dim])
        for o in model.graph.output))
    print("nodes:           %d" % st["nodes"])
    print("params:          %.2f M" % (st["params"] / 1e6))
    print("MACs:            %.3f G" % (st["macs"] / 1e9))
    print("op counts:")
    for op, c in sorted(st["ops"].items()):
        print("  %-20s %d" % (op, c))
    print("schedule units (Conv+Gemm+MatMul, BN/Relu/Clip fused): %d" % st["conv_units"])
    print("depthwise convs: %d" % st["depthwise_convs"])
    print("sep-conv units (Relu->depthwise->pointwise): %d" % st["sepconv_units"])
    print("fused units (sep-conv pair = 1): %d" % st["fused_units"])
    print("IOS-style ops (fused units + pools + Concat/Add/Sum + LRN): %d" % st["ios_style_ops"])
    if extra:
        for k, v in extra.items():
            print("%s: %s" % (k, v))


# ------------------------------------------------------------------ check
def _reference():
    """tests/zoo/reference.py, whose draw_inputs() is the zoo's one input
    convention (photographs for image inputs; integer ids and masks as the
    model's metadata_props say)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "..", "..", "tests", "zoo", "reference.py")
    spec = importlib.util.spec_from_file_location("zoo_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_numerics(name, model, seed=0):
    import onnxruntime as ort
    so = ort.SessionOptions()
    sess = ort.InferenceSession(serialize(model), so, providers=["CPUExecutionProvider"])
    props = dict(sess.get_modelmeta().custom_metadata_map)
    feeds = _reference().draw_inputs(sess, props, seed, 0)
    outs = sess.run(None, feeds)
    ok = True
    for o, v in zip(sess.get_outputs(), outs):
        finite = bool(np.all(np.isfinite(v)))
        std = float(np.std(v))
        good = finite and 1e-3 < std < 1e3
        ok &= good
        print("%-18s %-10s shape=%s finite=%s mean=%.4g std=%.4g absmax=%.4g %s"
              % (name, o.name, list(v.shape), finite, float(np.mean(v)), std,
                 float(np.max(np.abs(v))), "ok" if good else "BAD"))
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", nargs="*", help="model name")
    ap.add_argument("-o", "--output", help="output .onnx file")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true", help="list model names")
    ap.add_argument("--stats", action="store_true", help="print node/unit counts")
    ap.add_argument("--check", action="store_true",
                    help="build and run with onnxruntime; check outputs are finite and sane")
    a = ap.parse_args(argv)

    if a.list:
        for n in MODELS:
            print(n)
        return 0
    if a.batch < 1:
        ap.error("--batch must be >= 1")
    if a.check:
        names = a.name or list(MODELS)
        ok = True
        for n in names:
            t0 = time.time()
            m = build_model(n, a.batch, a.seed)
            t1 = time.time()
            ok &= check_numerics(n, m, a.seed)
            print("%-18s build %.2fs, run %.2fs" % (n, t1 - t0, time.time() - t1))
        return 0 if ok else 1
    if len(a.name) != 1:
        ap.error("exactly one model name expected")
    name = a.name[0]
    if a.stats:
        net = build_net(name, a.batch, a.seed)
        model = net.to_model(check=True)
        extra = collections.OrderedDict()
        if name == "nasnet_a":
            cells = [n.name.split("/")[0] for n in model.graph.node]
            cells = sorted(set(c for c in cells if "cell" in c))
            extra["cells"] = "%d (%s)" % (len(cells), ", ".join(cells))
        if name == "randwire":
            edges = getattr(net, "randwire_edges", [])
            extra["random-graph stages"] = "; ".join(
                "stage %d: %d nodes, %d edges, %d input / %d output nodes"
                % (i + 1, n, len(es), n - len(set(v for _, v in es)),
                   n - len(set(u for u, _ in es)))
                for i, (n, es) in enumerate(edges))
        print_stats(name, model, extra)
        return 0
    if not a.output:
        ap.error("-o FILE.onnx is required")
    model = build_model(name, a.batch, a.seed)
    data = serialize(model)
    d = os.path.dirname(os.path.abspath(a.output))
    os.makedirs(d, exist_ok=True)
    tmp = a.output + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
