#!/usr/bin/env python3
"""Writes the real exports that bench_cpu.py times beside the zoo (issue 53).

    VENV/bin/python bench/cpu/exports.py -o DIR [NAME ...]
    python3 bench/cpu/bench_cpu.py --opc build/opc --exports DIR ...

The zoo's CNNs are written by opc's own builder (tools/models/build.py).
Users bring what torch and Paddle write, so the CPU benchmark also times:

  torchvision models, exported by torch's TorchScript exporter
  (torch.onnx.export(..., dynamo=False), opset 17, eval mode: BatchNorm
  folded into the convolutions, as a user's export has it), batch 1:
    tv_mobilenet_v3_large, tv_mobilenet_v2, tv_efficientnet_b0,
    tv_lraspp_mobilenet_v3_large (520x520), tv_resnet50, tv_resnet18,
    tv_googlenet, tv_inception_v3 (299x299), tv_shufflenet_v2_x1_0,
    tv_convnext_tiny (224x224 unless given)
  PP-OCRv4's detector and recogniser as Paddle's converter wrote them, from
  PyPI's rapidocr-onnxruntime wheel (its models folder), their dynamic
  inputs pinned: ppocr_v4_det [1, 3, 640, 640], ppocr_v4_rec [1, 3, 48, 320]

torchvision's weights come from the network (download.pytorch.org), which
this project's machines do not reach, so the torchvision models carry
torch's initialisation from a fixed seed. Latency does not depend on the
values, only on the shapes and operators, which are the same.

Needs torch, torchvision, onnx and rapidocr-onnxruntime: a tool's
dependencies, installed in a separate venv, not the project's:
    python3 -m venv VENV && VENV/bin/pip install torch torchvision onnx \\
        onnxruntime rapidocr-onnxruntime
"""

import argparse
import glob
import os
import sys

SEED = 53  # issue 53

TORCHVISION = {
    "tv_mobilenet_v3_large": ("mobilenet_v3_large", 224),
    "tv_mobilenet_v2": ("mobilenet_v2", 224),
    "tv_efficientnet_b0": ("efficientnet_b0", 224),
    "tv_lraspp_mobilenet_v3_large": ("segmentation.lraspp_mobilenet_v3_large", 520),
    "tv_resnet50": ("resnet50", 224),
    "tv_resnet18": ("resnet18", 224),
    "tv_googlenet": ("googlenet", 224),
    "tv_inception_v3": ("inception_v3", 299),
    "tv_shufflenet_v2_x1_0": ("shufflenet_v2_x1_0", 224),
    "tv_convnext_tiny": ("convnext_tiny", 224),
}

# rapidocr's file name, and the input shape it is pinned to.
PPOCR = {
    "ppocr_v4_det": ("ch_PP-OCRv4_det_infer.onnx", [1, 3, 640, 640]),
    "ppocr_v4_rec": ("ch_PP-OCRv4_rec_infer.onnx", [1, 3, 48, 320]),
}


def torchvision_model(spec):
    import torch
    import torchvision
    torch.manual_seed(SEED)
    module = torchvision.models
    name = spec
    if "." in spec:
        sub, name = spec.split(".")
        module = getattr(module, sub)
    kw = {"weights": None}
    if name == "googlenet":
        kw.update(aux_logits=False, init_weights=True)
    if name == "inception_v3":
        kw.update(aux_logits=False, init_weights=True)
    if name.startswith("lraspp"):
        kw.update(weights_backbone=None)
    return getattr(module, name)(**kw).eval()


def export_torchvision(name, out_dir):
    import torch
    spec, size = TORCHVISION[name]
    model = torchvision_model(spec)
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(SEED))
    path = os.path.join(out_dir, name + ".onnx")
    # LRASPP returns a dict; its "out" is what a user runs.
    wrapped = model
    if isinstance(model(x), dict):
        class Out(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, t):
                return self.m(t)["out"]
        wrapped = Out(model).eval()
    with torch.no_grad():
        torch.onnx.export(wrapped, (x,), path, dynamo=False, opset_version=17,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=True)
    return path


def rapidocr_models_dir():
    import rapidocr_onnxruntime
    base = os.path.dirname(rapidocr_onnxruntime.__file__)
    found = glob.glob(os.path.join(base, "**", "ch_PP-OCRv4_det_infer.onnx"), recursive=True)
    if not found:
        raise SystemExit("rapidocr_onnxruntime at %s carries no PP-OCRv4 models" % base)
    return os.path.dirname(found[0])


def export_ppocr(name, out_dir):
    import onnx
    file, shape = PPOCR[name]
    m = onnx.load(os.path.join(rapidocr_models_dir(), file))
    inp = m.graph.input[0]
    dims = inp.type.tensor_type.shape.dim
    if len(dims) != len(shape):
        raise SystemExit("%s: input %s has rank %d, expected %d" % (file, inp.name, len(dims),
                                                                    len(shape)))
    for d, v in zip(dims, shape):
        d.Clear()
        d.dim_value = v
    path = os.path.join(out_dir, name + ".onnx")
    onnx.save(m, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True, help="directory for NAME.onnx")
    ap.add_argument("names", nargs="*", help="default: all (%s)" %
                    ", ".join(list(TORCHVISION) + list(PPOCR)))
    a = ap.parse_args()
    names = a.names or list(TORCHVISION) + list(PPOCR)
    os.makedirs(a.out, exist_ok=True)
    for name in names:
        if name in TORCHVISION:
            path = export_torchvision(name, a.out)
        elif name in PPOCR:
            path = export_ppocr(name, a.out)
        else:
            ap.error("unknown export %r" % name)
        print("wrote %s (%d bytes)" % (path, os.path.getsize(path)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
