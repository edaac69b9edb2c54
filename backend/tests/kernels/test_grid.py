#!/usr/bin/env python3
"""GridSample, AffineGrid, Einsum and Det through opc, the CPU runtime and the emitted
program, against ONNX Runtime: the forms the ONNX node tests miss.

One opset-20 model holds every case as a node of its own, so the whole
sweep is one program (cheap: built at -O0 once):
  - a spatial transformer: AffineGrid turns a rotation-and-zoom theta into
    a grid (both align_corners), and GridSample reads a natural, image-like
    input (smooth shading plus edges) through it in every mode (linear,
    nearest, cubic), every padding (zeros, border, reflection) and both
    align_corners; the zoom takes part of the grid outside the input, so
    the paddings differ;
  - the same 18 samplings at a random grid over [-1.6, 1.6], far outside
    too, and a 5-d input (linear, nearest) with AffineGrid's 3-d form.
The model runs again with every input an initializer, so that opc's
evaluator computes it at compile time.

Floats are compared against the output's scale: the largest error must
stay below 1e-5 of the largest magnitude ONNX Runtime gives (it samples in
float, opc in double). A NaN in the reference is an error. Negative
control: the comparison must reject ONNX Runtime's own output of the
opposite align_corners, half a pixel away, for every linear case.

Einsum: equations from real models (attention's two products, batched
MatMul, "...ij->...ji"), implicit outputs, a broadcast ellipsis,
diagonals, sums to a scalar, three operands and float64, in the same
program; a product with its second operand transposed is the control.

Det: batches of random, well-conditioned (up to 32 x 32), pivoting and
singular matrices (bounded at 1e-4 of the output's scale: ONNX Runtime
eliminates in float32); the control is the same batch with two rows
swapped, the determinants negated.

Errors: a grid of the wrong shape or batch, unknown modes, a 5-d cubic
sampling, a size AffineGrid cannot know at compile time, malformed
Einsum equations and Det of non-square or too large matrices are refused with exit status 2 and a message naming the
problem.

usage: test_grid.py OPC WORK_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import check_refusals, compare_close, reference, run_opc, value_info  # noqa: E402

rng = np.random.default_rng(50)
MODES = ("linear", "nearest", "cubic")
PADDINGS = ("zeros", "border", "reflection")


def model(nodes, inputs, outputs, inits, opset=20):
    return onnx_case.model(nodes, inputs, outputs, inits, opset, name="grid")


def image(n, c, *spatial):
    """Smooth shading with a few sharp edges, different per batch and
    channel: what a photograph's crop looks like to a sampler."""
    axes = np.meshgrid(*[np.linspace(0, 1, s) for s in spatial], indexing="ij")
    out = np.empty((n, c) + spatial, np.float32)
    for b in range(n):
        for ch in range(c):
            v = 0.5 + 0.3 * np.sin(3 * axes[-1] + b + ch) * np.cos(2 * axes[0] - ch)
            v += 0.4 * (axes[-1] + 0.3 * axes[0] > 0.55 + 0.1 * ch)  # an edge
            out[b, ch] = v
    return out


def rotation(n, angle, zoom):
    """theta of a rotation by angle and a zoom: |zoom| > 1 reaches outside."""
    theta = np.zeros((n, 2, 3), np.float32)
    for b in range(n):
        a = angle + 0.4 * b
        theta[b] = [[zoom * np.cos(a), -zoom * np.sin(a), 0.1 * b],
                    [zoom * np.sin(a), zoom * np.cos(a), -0.05]]
    return theta


def grid_cases():
    """GridSample's and AffineGrid's nodes, outputs, inputs and controls
    (output: its twin of the opposite align_corners), and the
    initializers they read."""
    x = image(2, 3, 9, 11)
    theta = rotation(2, 0.5, 1.3)
    grid = rng.uniform(-1.6, 1.6, (2, 5, 7, 2)).astype(np.float32)
    x5 = image(1, 2, 4, 5, 6)
    theta5 = np.zeros((1, 3, 4), np.float32)
    theta5[0, :, :3] = np.array([[0.9, 0.3, 0.1], [-0.3, 0.9, 0.2], [0.1, -0.2, 1.2]])
    theta5[0, :, 3] = [0.1, -0.2, 0.05]
    feeds = {"x": x, "theta": theta, "grid": grid, "x5": x5, "theta5": theta5}
    size = numpy_helper.from_array(np.array([2, 3, 6, 8], np.int64), "size")
    size5 = numpy_helper.from_array(np.array([1, 2, 3, 4, 5], np.int64), "size5")
    nodes, outs, twins = [], [], {}
    for align in (0, 1):
        nodes.append(helper.make_node("AffineGrid", ["theta", "size"], [f"affine{align}"],
                                      align_corners=align))
        outs.append(f"affine{align}")
    nodes.append(helper.make_node("AffineGrid", ["theta5", "size5"], ["affine5"]))
    outs.append("affine5")
    for source in ("affine", "random"):
        for mode in MODES:
            for pad in PADDINGS:
                for align in (0, 1):
                    g = f"affine{align}" if source == "affine" else "grid"
                    name = f"{source}-{mode}-{pad}-align{align}"
                    nodes.append(helper.make_node("GridSample", ["x", g], [name], mode=mode,
                                                  padding_mode=pad, align_corners=align))
                    outs.append(name)
                    if mode == "linear" and source == "random":
                        twins[name] = f"{source}-{mode}-{pad}-align{1 - align}"
    for mode in ("linear", "nearest"):
        for pad in PADDINGS:
            name = f"5d-{mode}-{pad}"
            nodes.append(helper.make_node("GridSample", ["x5", "affine5"], [name], mode=mode,
                                          padding_mode=pad))
            outs.append(name)
    return nodes, outs, feeds, twins, [size, size5]


def sweeps():
    """(name, run-time model, folded model, feeds, controls): the grid
    cases in one model, Einsum's and Det's in another (a program takes at
    most 64 outputs)."""
    out = []
    for name, parts in (("grid", [grid_cases()]), ("linalg", [einsums(), dets()])):
        nodes, outs, feeds, twins, inits = [], [], {}, {}, []
        for part in parts:
            nodes += part[0]
            outs += part[1]
            feeds.update(part[2])
            twins.update(part[3])
            inits += part[4] if len(part) > 4 else []
        inputs = [value_info(k, v) for k, v in feeds.items()]
        outputs = [onnx.ValueInfoProto(name=o) for o in outs]
        run_time = model(nodes, inputs, outputs, inits)
        folded = model(nodes, [], outputs,
                       inits + [numpy_helper.from_array(v, k) for k, v in feeds.items()])
        out.append((name, run_time, folded, feeds, twins))
    return out


# Einsum equations as exported models hold them, and the forms the node
# tests miss: attention's products (a batched MatMul each), implicit
# outputs, a broadcast ellipsis (the Mul and ReduceSum form), diagonals, a
# sum to a scalar, three operands, and float64 (no MatMul there).
EINSUMS = [
    ("attention-scores", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)], np.float32),
    ("attention-values", "bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)], np.float32),
    ("batched-matmul", "bij,bjk->bik", [(3, 4, 4), (3, 4, 4)], np.float32),
    ("batched-matmul-bt", "bij,bkj->bik", [(3, 4, 4), (3, 4, 4)], np.float32),
    ("transpose-last-two", "...ij->...ji", [(2, 3, 4, 5)], np.float32),
    ("implicit-matmul", "ij,jk", [(4, 6), (6, 3)], np.float32),
    ("outer", "i,j->ij", [(5,), (4,)], np.float32),
    ("broadcast-ellipsis", "...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)], np.float32),
    ("diagonal", "ii->i", [(5, 5)], np.float32),
    ("batch-diagonal", "bii->bi", [(3, 4, 4)], np.float32),
    ("matrix-trace", "ii", [(6, 6)], np.float32),
    ("sum-all", "ij->", [(4, 7)], np.float32),
    ("three-operands", "abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)], np.float32),
    ("contract-and-sum", "bij,bjk->b", [(2, 3, 4), (2, 4, 5)], np.float32),
    ("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)], np.float32),
    ("attention-scores-f64", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)], np.float64),
    ("batch-diagonal-f64", "...ii->...i", [(2, 3, 4, 4)], np.float64),
]


def einsums():
    """The Einsum nodes, their outputs and inputs, and a control pair: a
    product with the second operand transposed must be told apart."""
    nodes, outs, feeds = [], [], {}
    for name, equation, shapes, dtype in EINSUMS:
        names = []
        for k, shape in enumerate(shapes):
            names.append(f"{name}-in{k}")
            feeds[names[-1]] = rng.normal(0, 1, shape).astype(dtype)
        nodes.append(helper.make_node("Einsum", names, [name], equation=equation))
        outs.append(name)
    # The two batched products read the same operands.
    feeds["batched-matmul-bt-in0"] = feeds["batched-matmul-in0"]
    feeds["batched-matmul-bt-in1"] = feeds["batched-matmul-in1"]
    return nodes, outs, feeds, {"batched-matmul": "batched-matmul-bt"}


def dets():
    """Det nodes on batches of matrices of every size opc takes (1 to 32):
    random ones, well-conditioned ones (the identity plus noise, so that
    float32 LU stays within 1e-4), ones that need row swaps (zero
    diagonals), singular ones; and the control: the batch with two rows
    of each matrix swapped, whose determinants are negated."""
    nodes, outs, feeds = [], [], {}

    def det(name, x):
        feeds[name + "-in"] = x.astype(np.float32)
        nodes.append(helper.make_node("Det", [name + "-in"], [name]))
        outs.append(name)

    det("det-single", rng.normal(0, 1, (3, 3)))
    batch = rng.normal(0, 1, (2, 3, 4, 4))
    det("det-batch", batch)
    det("det-batch-swapped", batch[..., [1, 0, 2, 3], :])
    for m in (1, 2, 5, 8, 32):
        det(f"det-conditioned-{m}", np.eye(m) + rng.normal(0, 0.3 / np.sqrt(m), (4, m, m)))
    swaps = np.zeros((3, 4, 4))
    for k, perm in enumerate(([1, 0, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1])):  # odd, odd, even
        swaps[k, np.arange(4), perm] = rng.uniform(1, 2, 4)  # a scaled permutation
    det("det-pivoting", swaps)
    singular = rng.normal(0, 1, (2, 5, 5))
    singular[:, 4] = singular[:, 0] * 2  # a row twice another: det 0
    singular[1, :, 2] = 0  # and a zero column
    det("det-mostly-singular", np.concatenate([singular, rng.normal(0, 1, (1, 5, 5))]))
    return nodes, outs, feeds, {"det-batch": "det-batch-swapped"}


def error_cases():
    """(name, model, text opc's message must hold)."""
    x = value_info("x", np.zeros((2, 3, 4, 5), np.float32))

    def sample(grid_shape, **attrs):
        g = value_info("g", np.zeros(grid_shape, np.float32))
        node = helper.make_node("GridSample", ["x", "g"], ["y"], **attrs)
        return model([node], [x, g], [onnx.ValueInfoProto(name="y")], [])

    x5 = value_info("x", np.zeros((1, 2, 3, 4, 5), np.float32))
    g5 = value_info("g", np.zeros((1, 3, 4, 5, 3), np.float32))
    cubic5 = model([helper.make_node("GridSample", ["x", "g"], ["y"], mode="cubic")], [x5, g5],
                   [onnx.ValueInfoProto(name="y")], [])
    theta = value_info("t", np.zeros((2, 2, 3), np.float32))
    size_in = value_info("s", np.zeros(4, np.int64))
    run_time_size = model([helper.make_node("AffineGrid", ["t", "s"], ["y"])], [theta, size_in],
                          [onnx.ValueInfoProto(name="y")], [])
    wide = model([helper.make_node("AffineGrid", ["t", "s"], ["y"])],
                 [value_info("t", np.zeros((2, 2, 4), np.float32))],
                 [onnx.ValueInfoProto(name="y")],
                 [numpy_helper.from_array(np.array([2, 3, 4, 5], np.int64), "s")])
    def einsum(equation, *shapes):
        names = [f"e{k}" for k in range(len(shapes))]
        inputs = [value_info(n, np.zeros(sh, np.float32)) for n, sh in zip(names, shapes)]
        return model([helper.make_node("Einsum", names, ["y"], equation=equation)], inputs,
                     [onnx.ValueInfoProto(name="y")], [])

    def det_of(shape):
        return model([helper.make_node("Det", ["e0"], ["y"])],
                     [value_info("e0", np.zeros(shape, np.float32))], [onnx.ValueInfoProto(name="y")], [])

    return [
        ("Einsum character", einsum("ij;jk->ik", (2, 3), (3, 4)), "unexpected character ';'"),
        ("Einsum terms", einsum("ij,jk,kl->il", (2, 3), (3, 4)), "more terms than the 2 inputs"),
        ("Einsum rank", einsum("ijk,jk->i", (2, 3), (3, 4)), "names 3 axes of an operand of rank 2"),
        ("Einsum output label", einsum("ij,jk->iz", (2, 3), (3, 4)), "output label 'z' is in no input"),
        ("Einsum sizes", einsum("ij,jk->ik", (2, 3), (4, 5)), "label 'j' has sizes 3 and 4"),
        ("Einsum diagonal sizes", einsum("ii->i", (2, 3)), "label 'i' has sizes 2 and 3 in one input"),
        ("Einsum two ellipses", einsum("...i...->i", (2, 3)), "once per term"),
        ("Det of non-square matrices", det_of((2, 3, 4)), "must hold square matrices"),
        ("Det past 32 x 32", det_of((33, 33)), "opc takes at most 32 x 32"),
        ("grid of another batch", sample((3, 6, 7, 2)), "grid must have shape [N=2"),
        ("grid of 3 components on a 4-d input", sample((2, 6, 7, 3)), "grid must have shape"),
        ("unknown mode", sample((2, 6, 7, 2), mode="area"), "unknown mode 'area'"),
        ("unknown padding", sample((2, 6, 7, 2), padding_mode="wrap"), "unknown padding_mode"),
        ("cubic on a 5-d input", cubic5, "cubic mode takes a 4-d input only"),
        ("AffineGrid size at run time", run_time_size, "must be known at compile time"),
        ("AffineGrid theta [N, 2, 4]", wide, "theta must have shape"),
    ]


def main():
    opc, work = sys.argv[1:3]
    failures = 0
    for part, run_time, folded, feeds, twins in sweeps():
        failures += check(opc, work, part, run_time, folded, feeds, twins)
    failures += check_refusals(opc, error_cases(), work)
    print(f"{failures} failures")
    return 1 if failures else 0


def check(opc, work, part, run_time, folded, feeds, twins):
    """Runs one sweep at run time and folded; returns its failures."""
    failures = 0
    wants = reference(run_time, feeds)
    for label, m in ((f"{part} run time", run_time), (f"{part} folded", folded)):
        gots, why = run_opc(opc, m, feeds, os.path.join(work, label.replace(" ", "-")))
        if why:
            print(f"FAIL {label}: {why}")
            failures += 1
            continue
        for name, want in wants.items():
            # ONNX Runtime's float32 LU is as close as the matrices'
            # conditioning allows; opc eliminates in double.
            why = compare_close(gots[name], want, 1e-4 if name.startswith("det") else 1e-5)
            print(f"{'FAIL' if why else 'ok  '} {label} {name}{': ' + why if why else ''}")
            failures += why is not None
        # Negative controls: the opposite align_corners, half a pixel off,
        # and a product with its second operand transposed must not pass.
        for name, twin in twins.items():
            if compare_close(wants[twin], wants[name], 1e-5) is None:
                print(f"FAIL {label} {name}: the comparison accepts {twin}'s output")
                failures += 1
    return failures


if __name__ == "__main__":
    sys.exit(main())
