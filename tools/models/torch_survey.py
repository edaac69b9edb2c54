#!/usr/bin/env python3
"""Survey for issue 49: what opc says about real torch exports of detectors
and of control flow.

    /work/torchenv/bin/python tools/models/torch_survey.py export DIR
    python3 tools/models/torch_survey.py report DIR OPC

`export` writes, with torch (TorchScript exporter, opset 17, 320x320 input,
weights=None, weights_backbone=None, eval): torchvision's
ssdlite320_mobilenet_v3_large, retinanet_resnet50_fpn and
fasterrcnn_mobilenet_v3_large_320_fpn; a tiny torch.cond model (dynamo
exporter: the TorchScript exporter has no torch.cond); and a
torch.jit.script'd loop whose trip count is read from the input. The
detectors are large (10 to 150 MB): never commit them.

`static MODEL OPC WORKDIR` cuts a detector before its first tensor of
run-time size, compiles that part with opc (--verify-each), runs it under
the race checker on a random image and compares it with ONNX Runtime.

`copies DIR` writes, beside the exports in DIR, the copies that keep
detections, so that a comparison with ONNX Runtime decides something
(with random weights the exports keep none, or score every box alike):
  retinanet_low.onnx     RetinaNet with its score threshold (every
                         scalar constant 0.05) set to 0: 300 detections;
  ssdlite_rescaled.onnx  SSDlite whose last head convolutions are scaled
                         so that their outputs spread O(1) on photograph 0
                         (the random backbone's activations decay to
                         1e-14..1e-27 level by level: every score 1/91);
  fasterrcnn_rescaled.onnx  Faster R-CNN whose fc6 is scaled so that its
                         outputs spread O(1) over the proposals, its score
                         threshold lowered from 0.05 to 0.012.
It needs onnx, onnxruntime and the photographs (photos.py).

`report` prints, per model, a Markdown section: node count, op histogram,
the ops opc lacks or can only fold at compile time, the first error opc
prints, the control-flow and data-dependent nodes, and whether each If's
condition depends on the input's values (a static input shape makes every
Shape a constant) or only on shapes. It needs onnx alone.
"""

import os
import subprocess
import sys
from collections import Counter

SURVEYED = ["If", "Loop", "NonZero", "TopK", "NonMaxSuppression", "RoiAlign"]
DETECTORS = ["ssdlite320_mobilenet_v3_large", "retinanet_resnet50_fpn",
             "fasterrcnn_mobilenet_v3_large_320_fpn"]


# ===================================================================
# export (torch)
# ===================================================================

def export_all(out):
    import torch
    import torchvision
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(49)
    x = torch.rand(1, 3, 320, 320)
    for name in DETECTORS:
        model = getattr(torchvision.models.detection, name)(
            weights=None, weights_backbone=None).eval()
        path = os.path.join(out, name + ".onnx")
        with torch.no_grad():
            torch.onnx.export(model, ([x[0]],), path, opset_version=17, dynamo=False,
                              input_names=["image"])
        print("wrote", path, os.path.getsize(path))
    export_cond(out)
    export_scripted_loop(out)


def export_cond(out):
    import torch

    class Cond(torch.nn.Module):
        def forward(self, x):
            # a branch chosen by the input's values
            return torch.cond(x.sum() > 0, lambda t: t * 2.0, lambda t: t - 1.0, (x,))

    path = os.path.join(out, "torch_cond.onnx")
    torch.onnx.export(Cond(), (torch.randn(2, 3),), path, dynamo=True, opset_version=18,
                      input_names=["x"], external_data=False)
    print("wrote", path)


def export_scripted_loop(out):
    import torch

    class Loop(torch.nn.Module):
        def forward(self, x, n):
            # the trip count is a value of the input n
            y = x
            for _ in range(int(n.item())):
                y = y * 0.5 + 1.0
            return y

    path = os.path.join(out, "scripted_loop.onnx")
    scripted = torch.jit.script(Loop())
    torch.onnx.export(scripted, (torch.randn(2, 3), torch.tensor(3)), path, opset_version=17,
                      dynamo=False, input_names=["x", "n"])
    print("wrote", path)


# ===================================================================
# report (onnx)
# ===================================================================

# inputs whose values decide an output's shape (beyond the data inputs' shapes)
SHAPE_INPUTS = {"Reshape": [1], "Expand": [1], "Tile": [1], "Slice": [1, 2, 3, 4],
                "ConstantOfShape": [0], "Range": [0, 1, 2], "TopK": [1],
                "Resize": [2, 3], "Upsample": [1], "Pad": [1], "Squeeze": [1],
                "Unsqueeze": [1], "OneHot": [1], "ReduceSum": [1], "Split": [1]}
# outputs whose shape follows the values of their data input
VALUE_SHAPED = {"NonZero", "NonMaxSuppression", "Compress", "Unique"}


def walk(graph, depth=0):
    """Every node of graph and of its subgraphs, with its depth."""
    import onnx
    for n in graph.node:
        yield n, depth
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from walk(a.g, depth + 1)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from walk(g, depth + 1)


def dependence(graph, through_sizes=True):
    """(value_dep, shape_dep): the names whose values, and whose shapes,
    depend on the graph inputs' values. The inputs' shapes are static, so a
    Shape of a tensor of static shape is a constant; without
    through_sizes, a Shape never depends on the input (what depends then
    depends on the input's values themselves, not on a run-time size).
    Control-flow nodes' outputs are taken as depending on both."""
    inits = {t.name for t in graph.initializer}
    value_dep = {i.name for i in graph.input if i.name not in inits}
    shape_dep = set()
    for n in graph.node:
        ins = [x for x in n.input if x]
        if n.op_type == "Shape" or n.op_type == "Size":
            v = through_sizes and any(x in shape_dep for x in ins)
            s = False
        elif n.op_type in ("If", "Loop", "Scan"):
            v = s = True
        else:
            v = any(x in value_dep for x in ins)
            s = any(x in shape_dep for x in ins)
            s = s or any(len(n.input) > k and n.input[k] in value_dep
                         for k in SHAPE_INPUTS.get(n.op_type, []))
            s = s or (n.op_type in VALUE_SHAPED and v)
        for o in n.output:
            if v:
                value_dep.add(o)
            if s:
                shape_dep.add(o)
    return value_dep, shape_dep


def first_error(opc, path, work):
    r = subprocess.run([opc, path, "-o", os.path.join(work, "net.c")], capture_output=True,
                       text=True, timeout=900)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    return r.returncode, (lines[0] if lines else "")


def opc_operators(opc):
    """op -> where it runs, from opc --list-operators."""
    r = subprocess.run([opc, "--list-operators"], capture_output=True, text=True)
    where = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] and cells[0] not in ("Operator", "---"):
            where[cells[0]] = cells[1]
    return where


def report(model_dir, opc):
    import onnx
    where = opc_operators(opc)
    names = [f[:-5] for f in sorted(os.listdir(model_dir)) if f.endswith(".onnx")]
    for name in names:
        path = os.path.join(model_dir, name + ".onnx")
        m = onnx.load(path)
        nodes = list(walk(m.graph))
        hist = Counter(n.op_type for n, _ in nodes)
        top = len(m.graph.node)
        print("## %s\n" % name)
        print("- opset %d, %d nodes (%d in the main graph, %d in subgraphs), %.1f MB"
              % (m.opset_import[0].version, len(nodes), top, len(nodes) - top,
                 os.path.getsize(path) / 1e6))
        print("- ops: " + ", ".join("%s %d" % kv for kv in sorted(hist.items())))
        lacks = {op: c for op, c in hist.items() if op not in where}
        folds = {op: c for op, c in hist.items() if where.get(op) == "compile time"}
        print("- ops opc lacks: " + (", ".join("%s %d" % kv for kv in sorted(lacks.items()))
                                     or "none"))
        print("- ops opc runs only at compile time (every input known): " +
              (", ".join("%s %d" % kv for kv in sorted(folds.items())) or "none"))
        print("- control flow and data-dependent nodes: " +
              ", ".join("%s %d" % (op, hist.get(op, 0)) for op in SURVEYED))
        value_dep, shape_dep = dependence(m.graph)
        direct, _ = dependence(m.graph, through_sizes=False)
        for n, depth in nodes:
            if n.op_type == "If":
                where_ = "main graph" if depth == 0 else "subgraph depth %d" % depth
                if depth > 0:
                    dep = "inside a subgraph (not traced)"
                elif n.input[0] in direct:
                    dep = "data-dependent: computed from the input's values"
                elif n.input[0] in value_dep:
                    dep = "data-dependent: computed from the run-time size of a tensor " \
                        "(a NonZero's or NonMaxSuppression's output, or one cut by it)"
                else:
                    dep = "shapes only (known at compile time here)"
                print("  - If `%s` (%s): condition `%s` %s" % (n.name, where_, n.input[0], dep))
        sized = Counter(n.op_type for n in m.graph.node
                        if any(x in shape_dep for x in n.input if x))
        print("- main-graph nodes reading a tensor of run-time size (%d): " % sum(sized.values())
              + (", ".join("%s %d" % kv for kv in sorted(sized.items())) or "none"))
        rc, err = first_error(opc, path, model_dir)
        print("- opc: exit %d%s\n" % (rc, (": `%s`" % err) if err else " (compiles)"))


def static_part(path, out, limit=64):
    """Cuts the model at its first run-time sizes: the nodes that read no
    tensor of run-time size and are not control flow, NonZero or
    NonMaxSuppression, with every input-dependent tensor they pass to the
    rest as an output. Returns the output names, or None where that makes
    more than `limit` outputs (SSDLite's 90 per-class branches: a compiled
    program's command line takes fewer)."""
    import onnx
    m = onnx.load(path)
    g = m.graph
    value_dep, shape_dep = dependence(g)
    producer = {o: n for n in g.node for o in n.output}
    static = set()
    for n in g.node:
        if n.op_type in ("If", "Loop", "NonZero", "NonMaxSuppression") or \
                any(x in shape_dep for x in n.input if x):
            continue
        if all(not x or x not in producer or id(producer[x]) in static for x in n.input):
            static.add(id(n))

    def frontier(cut):
        outs = []
        for n in g.node:
            if id(n) in cut:
                continue
            for x in n.input:
                if x in producer and id(producer[x]) in cut and x in value_dep and x not in outs:
                    outs.append(x)
        return outs
    outs = frontier(static)
    if len(outs) > limit:
        return None
    inputs = [i.name for i in g.input if i.name not in {t.name for t in g.initializer}]
    onnx.utils.extract_model(path, out, inputs, outs)
    return outs


def check_static_part(path, opc, work):
    """static_part of the model, compiled by opc for the CPU runtime, run
    under the race checker on a uniform random image, against ONNX Runtime."""
    import numpy as np
    import onnxruntime as ort
    cut = os.path.join(work, "static.onnx")
    outs = static_part(path, cut)
    if outs is None:
        return "the static part has too many outputs to run"
    exe = os.path.join(work, "static")
    r = subprocess.run([opc, cut, "-o", exe, "--target", "cpu", "--verify-each"],
                       capture_output=True, text=True, timeout=900)
    if r.returncode:
        return "opc exit %d: %s" % (r.returncode, r.stderr.strip().splitlines()[0])
    x = np.random.default_rng(0).random((3, 320, 320), dtype=np.float32)
    np.save(os.path.join(work, "image.npy"), x)
    refs = ort.InferenceSession(cut, providers=["CPUExecutionProvider"]).run(None, {"image": x})
    cmd = [exe, "--input", "image=" + os.path.join(work, "image.npy")]
    for k, o in enumerate(outs):
        cmd += ["--output", "%s=%s" % (o, os.path.join(work, "out%d.npy" % k))]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OPC_CHECK="1"))
    if r.returncode:
        return "program exit %d: %s" % (r.returncode, r.stderr.strip()[:300])
    worst = 0.0
    for k, ref in enumerate(refs):
        got = np.load(os.path.join(work, "out%d.npy" % k))
        if got.shape != ref.shape:
            return "output %s: shape %r, ONNX Runtime %r" % (outs[k], got.shape, ref.shape)
        if ref.dtype.kind != "f":
            if not (got == ref).all():
                return "output %s: integers differ" % outs[k]
            continue
        worst = max(worst, float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)))
    return "%d nodes, %d outputs, worst relative L2 %.2g" % (
        len(onnx_nodes(cut)), len(outs), worst)


# ===================================================================
# copies that keep detections
# ===================================================================

def photograph(k=0, side=320):
    """Photograph k as torchvision's detectors take it: [3, side, side] in [0, 1]."""
    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import photos
    raw = photos.image(k, side, side) * photos.STD[:, None, None] + photos.MEAN[:, None, None]
    return np.clip(raw, 0, 1).astype(np.float32)


def probe(path, names, image):
    """ONNX Runtime's values of the named tensors of the model at path."""
    import onnx
    import onnxruntime as ort
    m = onnx.load(path)
    del m.graph.output[:]
    for n in names:
        m.graph.output.append(onnx.ValueInfoProto(name=n))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(names, {"image": image})


def scale_weight(m, name, factor):
    import numpy as np
    from onnx import numpy_helper
    w = next(i for i in m.graph.initializer if i.name == name)
    w.CopyFrom(numpy_helper.from_array(
        (numpy_helper.to_array(w).astype(np.float64) * factor).astype(np.float32), name))


def set_scalars(m, pick, value):
    """Every scalar float Constant that pick(value, name) chooses becomes value."""
    import numpy as np
    from onnx import numpy_helper
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].t.dims == []:
            v = numpy_helper.to_array(n.attribute[0].t)
            if v.dtype == np.float32 and pick(float(v), n.output[0]):
                n.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array(value, np.float32)))


def make_copies(out):
    import numpy as np
    import onnx
    image = photograph()
    m = onnx.load(os.path.join(out, "retinanet_resnet50_fpn.onnx"))
    set_scalars(m, lambda v, name: abs(v - 0.05) < 1e-9, 0.0)
    onnx.save(m, os.path.join(out, "retinanet_low.onnx"))

    src = os.path.join(out, "ssdlite320_mobilenet_v3_large.onnx")
    m = onnx.load(src)
    heads = [n for n in m.graph.node
             if n.op_type == "Conv" and "head" in n.name and n.name.endswith(".1/Conv")]
    for n, y in zip(heads, probe(src, [n.output[0] for n in heads], image)):
        target = 3.0 if "classification" in n.name else 0.5
        scale_weight(m, n.input[1], target / float(np.abs(y - y.mean()).max()))
    onnx.save(m, os.path.join(out, "ssdlite_rescaled.onnx"))

    src = os.path.join(out, "fasterrcnn_mobilenet_v3_large_320_fpn.onnx")
    m = onnx.load(src)
    x, = probe(src, ["/roi_heads/box_head/Flatten_output_0"], image)
    w = next(i for i in m.graph.initializer if i.name == "roi_heads.box_head.fc6.weight")
    from onnx import numpy_helper
    wx = x.astype(np.float64) @ numpy_helper.to_array(w).astype(np.float64).T
    scale_weight(m, w.name, 3.0 / float(np.abs(wx - wx.mean(0)).max()))
    set_scalars(m, lambda v, name: name == "/roi_heads/Constant_80_output_0", 0.012)
    onnx.save(m, os.path.join(out, "fasterrcnn_rescaled.onnx"))


def onnx_nodes(path):
    import onnx
    return onnx.load(path).graph.node


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export_all(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "copies":
        make_copies(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "static":
        print(check_static_part(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
