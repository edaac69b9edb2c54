#!/usr/bin/env python3
"""Run-time tensors of every type the backend's table claims (backend/types.c).

usage: test_types.py OPC --work DIR

For each (operator, type) that types.c lists beyond float32, a small model
makes the typed values inside the graph from float inputs (scaled, then
Cast), applies the operator and casts the result back to float32; the
program, built with `opc --target cpu`, is compared with ONNX Runtime.
Cases of one opset share a program (check_batch), their names prefixed;
when a batch's program cannot be built or run, each case is tried alone.
Where ONNX Runtime has no kernel for a type (integer arithmetic on int8 and
uint8), the reference model computes in int32 and casts to the type, which
wraps the same way. Cast is checked on all 64 pairs of the eight types,
and from int16, uint16, uint32 and uint64 to all twelve in one program.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"))
from onnx_case import batches, merged  # noqa: E402

RNG = np.random.default_rng(11)
FAILURES = []

F32, F64, F16 = TP.FLOAT, TP.DOUBLE, TP.FLOAT16
I64, I32, I8, U8, BOOL = TP.INT64, TP.INT32, TP.INT8, TP.UINT8, TP.BOOL
ALL = [F32, F64, F16, I64, I32, I8, U8, BOOL]
MOVED = [F64, F16, I64, I32, I8, U8, BOOL]  # float32 is covered elsewhere
NUMERIC = [F64, I64, I32, I8, U8]
NAMES = {F32: "f32", F64: "f64", F16: "f16", I64: "i64", I32: "i32", I8: "i8", U8: "u8",
         BOOL: "bool"}


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def ints(name, values):
    return const(name, np.array(values, dtype=np.int64))


class Net:
    """A model under construction: float inputs, nodes, constants."""

    def __init__(self):
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.count = 0
        self.via = None  # a type every typed() value is cast to in the end
        self.opset = 13

    def name(self, base):
        self.count += 1
        return "%s%d" % (base, self.count)

    def node(self, op, inputs, noutputs=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(noutputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, **attrs))
        return outs[0] if noutputs == 1 else outs

    def input(self, shape):
        name = "x%d" % len(self.inputs)
        self.inputs.append(helper.make_tensor_value_info(name, F32, shape))
        return name

    def scalar(self, value):
        name = self.name("c")
        self.inits.append(const(name, np.float32(value)))
        return name

    def ints(self, values):
        name = self.name("k")
        self.inits.append(ints(name, values))
        return name

    def typed(self, shape, to, scale=10.0, positive=False):
        """A tensor of type `to` made from a float input: x * scale, made
        non-negative for unsigned types, then cast."""
        s = self.node("Mul", [self.input(shape), self.scalar(scale)])
        if positive or to in (U8, BOOL):
            s = self.node("Abs", [s])
        t = self.node("Cast", [s], to=to)
        return self.node("Cast", [t], to=self.via) if self.via else t

    def coarse(self, shape, to, scale=2.0, special=False):
        """A tensor of type `to` with few distinct values, so that equal
        elements are common: floor(x * scale), made non-negative for
        unsigned types, then cast. special (float types): some elements
        become NaN, +infinity or -infinity, as floor(x) / floor(y)."""
        s = self.node("Floor", [self.node("Mul", [self.input(shape), self.scalar(scale)])])
        if to in (U8, BOOL):
            s = self.node("Abs", [s])
        if special:
            s = self.node("Div", [s, self.node("Floor", [self.input(shape)])])
        return self.node("Cast", [s], to=to)

    def output(self, value, shape, kind=None):
        """Casts `value` back to float32 and makes it an output."""
        y = self.node("Cast", [value], to=F32) if kind != F32 else value
        self.outputs.append(helper.make_tensor_value_info(y, F32, shape))

    def model(self):
        graph = helper.make_graph(self.nodes, "g", self.inputs, self.outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


# ------------------------------------------------------------------ cases


def movement_cases(t):
    """Every data-movement operator of the table on type t."""
    def case(build, via=None):
        n = Net()
        n.via = via
        build(n)
        return n.model()

    def reshape(n):
        n.output(n.node("Reshape", [n.typed([2, 3, 4], t), n.ints([4, 6])]), [4, 6])

    def flatten(n):
        n.output(n.node("Flatten", [n.typed([2, 3, 4], t)], axis=2), [6, 4])

    def squeeze(n):
        u = n.node("Unsqueeze", [n.typed([2, 3, 4], t), n.ints([1])])
        n.output(n.node("Transpose", [u], perm=[0, 2, 1, 3]), [2, 3, 1, 4])
        n.output(n.node("Squeeze", [u, n.ints([1])]), [2, 3, 4])

    def transpose(n):
        n.output(n.node("Transpose", [n.typed([2, 3, 4], t)], perm=[2, 0, 1]), [4, 2, 3])

    def concat(n):
        a, b = n.typed([2, 3, 4], t), n.typed([2, 2, 4], t)
        n.output(n.node("Concat", [a, b], axis=1), [2, 5, 4])

    def split(n):
        p, q = n.node("Split", [n.typed([2, 3, 4], t), n.ints([1, 3])], noutputs=2, axis=2)
        n.output(p, [2, 3, 1])
        n.output(q, [2, 3, 3])

    def slice_(n):
        x = n.typed([2, 3, 5], t)
        n.output(n.node("Slice", [x, n.ints([1, 4]), n.ints([3, 0]), n.ints([1, 2]),
                                  n.ints([1, -2])]), [2, 2, 2])

    def expand(n):
        n.output(n.node("Expand", [n.typed([2, 1, 4], t), n.ints([2, 3, 4])]), [2, 3, 4])

    def tile(n):
        n.output(n.node("Tile", [n.typed([2, 3, 1], t), n.ints([1, 2, 3])]), [2, 6, 3])

    def index(n, shape, to, limit):
        """Run-time indices of type `to` in [-limit, limit): tanh, scaled, cast."""
        s = n.node("Mul", [n.node("Tanh", [n.input(shape)]), n.scalar(limit - 0.01)])
        return n.node("Cast", [s], to=to)

    def gather(to):
        def build(n):
            x = n.typed([2, 5, 3], t)
            n.output(n.node("Gather", [x, index(n, [2, 2], to, 5)], axis=1), [2, 2, 2, 3])
        return build

    def gather_constant(n):
        x = n.typed([4, 3], t)
        n.output(n.node("Gather", [x, n.ints([3, -1, 0])], axis=0), [3, 3])

    def gather_elements(to):
        def build(n):
            x = n.typed([2, 3, 4], t)
            n.output(n.node("GatherElements", [x, index(n, [2, 5, 4], to, 3)], axis=1),
                     [2, 5, 4])
        return build

    def pad(mode):
        def build(n):
            x = n.typed([2, 3, 4], t)
            n.output(n.node("Pad", [x, n.ints([0, 1, 2, 0, 1, 1])], mode=mode), [2, 5, 7])
        return build

    def trilu(upper):
        def build(n):
            n.opset = 14
            n.output(n.node("Trilu", [n.typed([2, 3, 4], t), n.ints([1])], upper=upper), [2, 3, 4])
        return build

    cases = [("reshape", reshape), ("flatten", flatten), ("unsqueeze_squeeze", squeeze),
             ("transpose", transpose), ("concat", concat), ("split", split), ("slice", slice_),
             ("expand", expand), ("tile", tile), ("gather_i64", gather(I64)),
             ("gather_i32", gather(I32)), ("gather_const", gather_constant),
             ("gather_elements_i64", gather_elements(I64)),
             ("gather_elements_i32", gather_elements(I32)),
             ("pad_constant", pad("constant")), ("pad_reflect", pad("reflect")),
             ("pad_edge", pad("edge"))]
    if t in (F64, I64, BOOL):  # ONNX Runtime's Trilu types
        cases += [("trilu_upper", trilu(1)), ("trilu_lower", trilu(0))]
    for name, build in cases:
        # ONNX Runtime moves float16 in float32 and then drops the casts
        # around it, unrounded: the reference moves the rounded values.
        ref = case(build, F32) if t == F16 else None
        yield "%s_%s" % (name, NAMES[t]), case(build), ref


def reduction_cases(t):
    """ReduceSum (not on int8 and uint8: ONNX allows neither), ReduceMax
    and ReduceMin on t; on float64 also ReduceMean
    and the log/root/product family, over one axis and over two."""
    ops = ["ReduceMax", "ReduceMin"] + (["ReduceSum"] if t not in (I8, U8) else [])
    if t == F64:
        ops += ["ReduceMean", "ReduceSumSquare", "ReduceProd", "ReduceLogSumExp", "ReduceL1",
                "ReduceL2", "ReduceLogSum"]
    for op in ops:
        for axes, keep, shape in [([1], 1, [2, 1, 4]), ([0, 2], 0, [3])]:
            n = Net()
            n.opset = 18
            x = n.typed([2, 3, 4], t, positive=op in ("ReduceLogSum", "ReduceProd"))
            n.output(n.node(op, [x, n.ints(axes)], keepdims=keep), shape)
            yield "%s_%s_%s" % (op.lower(), "_".join(map(str, axes)), NAMES[t]), n.model(), None


def arithmetic_model(t, op, compute, **attrs):
    """op on two typed operands, computed in `compute` then cast to t."""
    n = Net()
    a = n.typed([2, 3, 4], t)
    b = n.typed([3, 4], t, positive=True) if op in ("Div", "Mod") else n.typed([3, 4], t)
    if op in ("Div", "Mod"):  # divisors of 1 and more
        b = n.node("Cast", [n.node("Add", [n.node("Cast", [b], to=F32), n.scalar(1.0)])], to=t)
    if compute != t:
        a, b = n.node("Cast", [a], to=compute), n.node("Cast", [b], to=compute)
    arity = 1 if op in ("Abs", "Neg") else 2
    r = n.node(op, [a, b][:arity], **attrs)
    if compute != t:
        r = n.node("Cast", [r], to=t)
    n.output(r, [2, 3, 4])
    return n.model()


def arithmetic_cases(t):
    ops = [("Add", {}), ("Sub", {}), ("Mul", {}), ("Div", {}), ("Max", {}), ("Min", {}),
           ("Abs", {}), ("Mod", {"fmod": 1})]
    if t != F64:
        ops.append(("Mod", {"fmod": 0}))
    if t != U8:
        ops.append(("Neg", {}))
    # ONNX Runtime computes int8 and uint8 arithmetic in few kernels; int32
    # wraps the same way once cast back.
    small = t in (I8, U8)
    for op, attrs in ops:
        name = "%s%s_%s" % (op.lower(), "_fmod" if attrs.get("fmod") else "", NAMES[t])
        ref = arithmetic_model(t, op, I32, **attrs) if small else None
        yield name, arithmetic_model(t, op, t, **attrs), ref


def unary_model(t, op, compute):
    """op on one typed operand, computed in `compute` then cast to t."""
    n = Net()
    n.opset = 14  # Relu on integers
    x = n.typed([2, 3, 4], t)
    if compute != t:
        x = n.node("Cast", [x], to=compute)
    r = n.node(op, [x])
    if compute != t:
        r = n.node("Cast", [r], to=t)
    n.output(r, [2, 3, 4])
    return n.model()


def unary_cases(t):
    """Relu (signed types) and Sign on type t. ONNX Runtime has no int64
    Relu: its reference computes in float64, which holds these values."""
    for op in ("Relu", "Sign"):
        if op == "Relu" and t == U8:
            continue
        ref = unary_model(t, op, F64) if (op, t) == ("Relu", I64) else None
        yield "%s_%s" % (op.lower(), NAMES[t]), unary_model(t, op, t), ref


def cumsum_cases(t):
    for exclusive, reverse in ((0, 0), (1, 1)):
        n = Net()
        r = n.node("CumSum", [n.typed([2, 3, 4], t), n.ints([1])], exclusive=exclusive,
                   reverse=reverse)
        n.output(r, [2, 3, 4])
        yield "cumsum_%d%d_%s" % (exclusive, reverse, NAMES[t]), n.model(), None


def cast_cases():
    """float32 -> a -> b -> float32 for every pair; unsigned ones from
    non-negative values (a negative float to uint8 is undefined)."""
    for a in ALL:
        for b in ALL:
            n = Net()
            positive = U8 in (a, b)
            x = n.typed([3, 5], a, positive=positive)
            n.output(n.node("Cast", [x], to=b), [3, 5], kind=b)
            yield "cast_%s_%s" % (NAMES[a], NAMES[b]), n.model(), None
    # float16's rounding: large values, subnormals, halves.
    for scale in (1000.0, 1e-6, 7e4):
        n = Net()
        n.output(n.typed([4, 16], F16, scale=scale), [4, 16])
        yield "cast_f16_round_%g" % scale, n.model(), None


# The integer types that reach programs mostly at their interface; only
# data movement, Cast, Max, Min, Mod, Clip, BitShift and Pow's exponent take
# them (the conformance tests check those operators on them).
RARE_INTS = [TP.INT16, TP.UINT16, TP.UINT32, TP.UINT64]
NAMES.update({TP.INT16: "i16", TP.UINT16: "u16", TP.UINT32: "u32", TP.UINT64: "u64"})


def rare_int_cases():
    """One program for the four: each made from float32 (non-negative for
    the unsigned ones, as a negative float to them is undefined), cast to
    every run-time type, and moved (Transpose, Concat, Slice), every
    result cast back to float32. int16's negative values wrap into the
    unsigned types the same way in opc and ONNX Runtime (C's conversion)."""
    n = Net()
    for t in RARE_INTS:
        x = n.typed([3, 4], t, positive=t != TP.INT16)
        for b in ALL + RARE_INTS:
            n.output(n.node("Cast", [x], to=b), [3, 4], kind=b)
        n.output(n.node("Transpose", [x], perm=[1, 0]), [4, 3])
        n.output(n.node("Concat", [x, x], axis=1), [3, 8])
        n.output(n.node("Slice", [x, n.ints([1]), n.ints([3]), n.ints([1])]), [3, 2])
    yield "rare_ints", n.model(), None


def run_index(n, shape, to, limit):
    """Run-time indices of type `to` in (-limit, limit), negative ones too:
    tanh of a float input, scaled, cast (which truncates)."""
    s = n.node("Mul", [n.node("Tanh", [n.input(shape)]), n.scalar(limit - 0.01)])
    return n.node("Cast", [s], to=to)


def index_cases(t):
    """GatherND, ScatterND, ScatterElements, ArgMax, ArgMin and TopK on type
    t, with run-time indices: cast from floats, or made by ArgMax and TopK.
    ONNX Runtime lacks some of these kernels for int8 and uint8: there the
    reference computes in int32 between casts, which gives the same values
    (casts wrap, and ordering is kept)."""
    def case(build):
        def model(compute):
            n = Net()
            n.opset = 18

            def data(shape, positive=False):
                x = n.typed(shape, t, positive=positive)
                return n.node("Cast", [x], to=compute) if compute != t else x

            def result(y, shape):
                if compute != t:
                    y = n.node("Cast", [y], to=t)
                n.output(y, shape)

            build(n, data, result)
            return n.model()
        small = t in (I8, U8)
        return model(t), model(I32) if small else None

    def gather_nd(batch):
        def build(n, data, result):
            x = data([2, 3, 4])
            if batch:
                idx = run_index(n, [2, 3, 1], I64, 3)
                result(n.node("GatherND", [x, idx], batch_dims=1), [2, 3, 4])
            else:
                idx = run_index(n, [2, 2, 2], I64, 2)
                result(n.node("GatherND", [x, idx]), [2, 2, 4])
        return build

    def scatter_nd(reduction, tuple_len):
        def build(n, data, result):
            x = data([4, 3])
            if tuple_len == 1:
                idx, upd = run_index(n, [3, 1], I64, 4), data([3, 3])
            else:
                idx, upd = run_index(n, [5, 2], I64, 3), data([5])
            result(n.node("ScatterND", [x, idx, upd], reduction=reduction), [4, 3])
        return build

    def scatter_elements(reduction, axis, to):
        def build(n, data, result):
            x = data([3, 4])
            idx = run_index(n, [2, 4] if axis == 0 else [3, 2], to, 3)
            upd = data([2, 4] if axis == 0 else [3, 2])
            result(n.node("ScatterElements", [x, idx, upd], axis=axis, reduction=reduction),
                   [3, 4])
        return build

    def arg(op, keepdims, last):
        def build(n, data, result):
            y = n.node(op, [data([3, 4, 5])], axis=1, keepdims=keepdims,
                       select_last_index=last)
            n.output(y, [3, 1, 5] if keepdims else [3, 5])
        return build

    def topk(largest, axis):
        def build(n, data, result):
            shape = [3, 6] if axis == 1 else [6, 3]
            values, indices = n.node("TopK", [data(shape), n.ints([4])], noutputs=2, axis=axis,
                                     largest=largest)
            out = [3, 4] if axis == 1 else [4, 3]
            result(values, out)
            n.output(indices, out)
        return build

    def from_argmax(n, data, result):
        """ArgMax of a float input picks what GatherElements gathers and
        where ScatterElements scatters."""
        idx = n.node("ArgMax", [n.input([3, 5])], axis=1, keepdims=1)
        x = data([3, 5])
        result(n.node("GatherElements", [x, idx], axis=1), [3, 1])
        result(n.node("ScatterElements", [x, idx, data([3, 1])], axis=1), [3, 5])

    def from_topk(n, data, result):
        """TopK's indices of a float input, gathered from typed data."""
        _, idx = n.node("TopK", [n.input([4, 6]), n.ints([3])], noutputs=2, axis=-1)
        result(n.node("GatherElements", [data([4, 6]), idx], axis=1), [4, 3])

    def into_concat(n, data, result):
        """Outputs that a Concat along an inner axis takes in place: the
        kernels then write strided views of its output."""
        x = data([2, 3, 4])
        g = [n.node("GatherND", [x, run_index(n, [2, 2, 2], I64, 2)]) for _ in range(2)]
        result(n.node("Concat", g, axis=2), [2, 2, 8])
        upd = data([2, 4])
        s = [n.node("ScatterND", [data([3, 4]), run_index(n, [2, 1], I64, 3), upd]),
             n.node("ScatterElements", [data([3, 4]), run_index(n, [2, 4], I64, 3), upd])]
        result(n.node("Concat", s, axis=1), [3, 8])
        if t in (F16, BOOL):
            return
        m = [n.node(op, [data([3, 4, 5])], axis=1) for op in ("ArgMax", "ArgMin")]
        n.output(n.node("Concat", m, axis=2), [3, 1, 10])
        v = [n.node("TopK", [data([3, 6]), n.ints([2])], noutputs=2)[0] for _ in range(2)]
        result(n.node("Concat", v, axis=1), [3, 4])

    cases = [("gather_nd", gather_nd(False)), ("gather_nd_batch", gather_nd(True)),
             ("into_concat", into_concat)]
    reductions = ["none"] + (["add", "mul", "max", "min"] if t in (F32, F64, I64, I32, I8, U8)
                             else [])
    for r in reductions:
        cases.append(("scatter_nd_%s" % r, scatter_nd(r, 1)))
        cases.append(("scatter_elements_%s" % r, scatter_elements(r, 0, I64)))
    cases += [("scatter_nd_elements", scatter_nd("add" if reductions[1:] else "none", 2)),
              ("scatter_elements_axis1_i32", scatter_elements("none", 1, I32)),
              ("from_argmax", from_argmax), ("from_topk", from_topk)]
    if t in (F32, F64, I64, I32, I8, U8):
        for op in ("ArgMax", "ArgMin"):
            for keepdims, last in ((1, 0), (0, 1)):
                cases.append(("%s_%d%d" % (op.lower(), keepdims, last), arg(op, keepdims, last)))
        cases += [("topk_largest", topk(1, 1)), ("topk_smallest_axis0", topk(0, 0))]
    for name, build in cases:
        m, ref = case(build)
        yield "%s_%s" % (name, NAMES[t]), m, ref


LOGIC_TYPES = [F32, F64, I64, I32, I8, U8]  # what comparisons take, and Equal bool too
BITS_TYPES = [I64, I32, I8, U8]


def logic_cases():
    """Comparisons on every numeric type (NaN and infinities included on
    floats) and Equal on bool, And/Or/Xor/Not, Where on every type with
    three-way broadcasting, IsNaN/IsInf, BitShift, the bitwise operators
    and CastLike. Results are bools, compared exactly."""
    def model(build, opset=13):
        n = Net()
        n.opset = opset
        build(n)
        return n.model()

    def compare(op, t):
        def build(n):
            a = n.coarse([2, 3, 4], t, special=t in (F32, F64))
            b = n.coarse([3, 1], t, special=t in (F32, F64))
            n.output(n.node(op, [a, b]), [2, 3, 4])
        return build

    for op in ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"):
        for t in LOGIC_TYPES + ([BOOL] if op == "Equal" else []):
            yield "%s_%s" % (op.lower(), NAMES[t]), model(compare(op, t), 16), None

    def logic(op):
        def build(n):
            a = n.coarse([2, 3, 4], BOOL, scale=1.0)
            if op == "Not":
                n.output(n.node(op, [a]), [2, 3, 4])
                return
            n.output(n.node(op, [a, n.coarse([4], BOOL, scale=1.0)]), [2, 3, 4])
        return build

    for op in ("Not", "And", "Or", "Xor"):
        yield "logic_%s" % op.lower(), model(logic(op)), None

    def where(t, compute):
        def build(n):
            cond = n.coarse([3, 1], BOOL, scale=1.0)
            a, b = n.typed([2, 3, 4], t), n.typed([4], t)
            if compute != t:
                a, b = n.node("Cast", [a], to=compute), n.node("Cast", [b], to=compute)
            r = n.node("Where", [cond, a, b])
            n.output(n.node("Cast", [r], to=t) if compute != t else r, [2, 3, 4])
        return build

    for t in ALL:
        # ONNX Runtime's Where has no bool kernel: it selects uint8s. On
        # float16 it drops the casts around it (see movement_cases): the
        # reference selects the rounded values in float32.
        ref = model(where(t, U8)) if t == BOOL else model(where(t, F32)) if t == F16 else None
        yield "where_%s" % NAMES[t], model(where(t, t)), ref

    def is_class(op, t, **attrs):
        def build(n):
            x = n.coarse([4, 6], F32, scale=1.0, special=True)
            n.output(n.node(op, [n.node("Cast", [x], to=t)], **attrs), [4, 6])
        return build

    for t in (F32, F64, F16):
        yield "isnan_%s" % NAMES[t], model(is_class("IsNaN", t), 20), None
        for pos, neg in ((1, 1), (1, 0), (0, 1)):
            yield "isinf_%d%d_%s" % (pos, neg, NAMES[t]), model(
                is_class("IsInf", t, detect_positive=pos, detect_negative=neg), 20), None

    def bit_shift(direction):
        def build(n):
            a = n.typed([2, 3, 4], U8, scale=60.0)
            amount = n.typed([4], U8, scale=4.0)  # 0 to about 10 bits
            n.output(n.node("BitShift", [a, amount], direction=direction), [2, 3, 4])
        return build

    for direction in ("LEFT", "RIGHT"):
        yield "bitshift_%s_u8" % direction.lower(), model(bit_shift(direction), 11), None

    def bitwise(op, t):
        def build(n):
            a = n.typed([2, 3, 4], t, scale=60.0)
            if op == "BitwiseNot":
                n.output(n.node(op, [a]), [2, 3, 4])
                return
            n.output(n.node(op, [a, n.typed([3, 1], t, scale=60.0)]), [2, 3, 4])
        return build

    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"):
        for t in BITS_TYPES:
            yield "%s_%s" % (op.lower(), NAMES[t]), model(bitwise(op, t), 18), None

    def cast_like(a, b):
        def build(n):
            x = n.typed([3, 5], a, positive=U8 in (a, b))
            # The target is computed only for its type: opc need not run it.
            like = n.node("Neg", [n.typed([2], b if b not in (U8, BOOL) else F32)])
            if b in (U8, BOOL):
                like = n.node("Cast", [like], to=b)
            n.output(n.node("CastLike", [x, like]), [3, 5], kind=b)
        return build

    for a in ALL:
        for b in ALL:
            if a == F32 or b == F32 or a == b:
                yield "castlike_%s_%s" % (NAMES[a], NAMES[b]), model(cast_like(a, b), 15), None


def half_mod_cases():
    """Mod on float16, fmod 1 (the spec's only form for floats before opset
    28): the remainder of the two values, exact in float16 too."""
    yield "mod_fmod_f16", arithmetic_model(F16, "Mod", F16, fmod=1), None


def all_cases():
    yield from cast_cases()
    yield from half_mod_cases()
    yield from rare_int_cases()
    for t in MOVED:
        yield from movement_cases(t)
    for t in NUMERIC:
        yield from arithmetic_cases(t)
    for t in NUMERIC:
        yield from unary_cases(t)
    for t in (F64, I64, I32):
        yield from cumsum_cases(t)
    for t in (F64, I64, I32, I8, U8):
        yield from reduction_cases(t)
    for t in [F32] + MOVED:
        yield from index_cases(t)
    yield from logic_cases()


# ------------------------------------------------------------------ check

# Cases of one opset go into one program, up to this many graph inputs (the
# emitted main takes 64) and outputs: 546 programs took 122 s to build and
# run one by one, mostly opc's and the C compiler's fixed cost.
BATCH_LIMIT = 48


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def check_batch(opc, work, label, opset, cases):
    """Compiles the cases as one program and checks every output against ONNX
    Runtime; returns the names of the cases that failed, or None when the
    program could not be built or run (the caller then checks each alone)."""
    d = os.path.join(work, label)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    m = merged([c[1] for c in cases], opset)
    ref = merged([c[2] or c[1] for c in cases], opset)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    exe = os.path.join(d, "net")
    p = run([opc, path, "-o", exe, "--target", "cpu"])
    if p.returncode != 0:
        return None, "opc failed: " + p.stderr.strip()
    feeds, cmd = {}, [exe]
    for i in m.graph.input:
        shape = [dim.dim_value for dim in i.type.tensor_type.shape.dim]
        x = RNG.standard_normal(shape).astype(np.float32)
        feeds[i.name] = x
        x_path = os.path.join(d, "%s.npy" % i.name)
        np.save(x_path, x)
        cmd += ["--input", "%s=%s" % (i.name, x_path)]
    for k, o in enumerate(m.graph.output):
        cmd += ["--output", "%s=%s" % (o.name, os.path.join(d, "out%d.npy" % k))]
    p = run(cmd)
    if p.returncode != 0:
        return None, "program exited with %d: %s" % (p.returncode, p.stderr.strip())
    # Unoptimised: ONNX Runtime would otherwise drop a float32 -> float16 ->
    # float32 round trip around an operator it runs in float32.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(ref.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    wants = sess.run(None, feeds)
    owner = [name for name, case_m, _ in cases for _ in case_m.graph.output]
    failed = []
    for k, (name, want) in enumerate(zip(owner, wants)):
        got = np.load(os.path.join(d, "out%d.npy" % k))
        if got.shape != want.shape or not np.array_equal(got, want, equal_nan=True):
            bad = np.argwhere(got != want)[:3] if got.shape == want.shape else "shape"
            print("FAIL %s: output %s differs (at %s): got %s, want %s" % (
                name, m.graph.output[k].name, bad, got.ravel()[:6], want.ravel()[:6]), flush=True)
            if name not in failed:
                failed.append(name)
    # A failing batch keeps its files to be looked at; a passing one's
    # program would fill the disk.
    if not failed:
        shutil.rmtree(d)
    return failed, None


def check_cases(opc, work, cases):
    for k, (opset, batch) in enumerate(batches(cases, lambda case: case[1], BATCH_LIMIT)):
        failed, why = check_batch(opc, work, "batch%d" % k, opset, batch)
        if failed is None and len(batch) > 1:
            # Which case stops the program: each alone says.
            for name, m, ref in batch:
                alone, why = check_batch(opc, work, name, opset, [(name, m, ref)])
                if alone is None:
                    print("FAIL %s: %s" % (name, why), flush=True)
                    FAILURES.append(name)
                else:
                    FAILURES.extend(alone)
            continue
        if failed is None:
            print("FAIL %s: %s" % (batch[0][0], why), flush=True)
            failed = [batch[0][0]]
        FAILURES.extend(failed)
        for name, _, _ in batch:
            if name not in failed:
                print("ok   %s" % name, flush=True)


def main():
    if len(sys.argv) != 4 or sys.argv[2] != "--work":
        sys.exit(__doc__)
    opc, work = os.path.abspath(sys.argv[1]), sys.argv[3]
    os.makedirs(work, exist_ok=True)
    only = os.environ.get("OPC_TYPES_ONLY")  # a substring of case names, to run fewer
    check_cases(opc, work, [c for c in all_cases() if not only or only in c[0]])
    if FAILURES:
        print("%d failed: %s" % (len(FAILURES), " ".join(FAILURES)))
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
