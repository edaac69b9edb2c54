#!/usr/bin/env python3
"""Writes small ONNX models for the importer's unit test, and expected.txt
describing what the importer must make of them.

Usage: make_models.py OUTDIR

expected.txt has one check per line (OPTS is '-' or options joined by ';':
batch=N, shape=NAME:DIMS, const=NAME:FILE):
  ok     MODEL OPTS                         import succeeds
  const  MODEL OPTS TENSOR SPEC             a constant tensor's dtype, shape, data
  input  MODEL OPTS TENSOR RANK DIMS...     a graph input's shape
  node   MODEL OPTS NODE OP NIN IN... NOUT OUT...   ('_' for an absent input)
  attr   MODEL OPTS NODE ATTR KIND VALUE... (KIND float|int|string|floats|ints|
                                            strings|tensor|tensors|graph)
  error  MODEL OPTS TEXT...                 import fails; stderr holds TEXT
where SPEC is: DTYPE RANK DIMS... COUNT VALUES...
The expected values are written from the numpy arrays the models are built
from, never from what opc reads back.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
lines = []

IR_NAMES = {
    np.float32: "f32", np.float64: "f64", np.float16: "f16",
    np.int8: "i8", np.int16: "i16", np.int32: "i32", np.int64: "i64",
    np.uint8: "u8", np.uint16: "u16", np.uint32: "u32", np.uint64: "u64",
    np.bool_: "bool",
}


def fmt_value(v, floating):
    if floating:
        # The IR keeps every floating dtype as float32.
        return repr(float(np.float32(v)))
    return str(int(v))


def spec(arr, dtype_name=None):
    arr = np.asarray(arr)
    name = dtype_name or IR_NAMES[arr.dtype.type]
    floating = name in ("f32", "f64", "f16", "bf16")
    flat = arr.reshape(-1)
    values = [fmt_value(v, floating) for v in flat]
    return " ".join([name, str(arr.ndim)] + [str(d) for d in arr.shape] +
                    [str(flat.size)] + values)


def save(model, name):
    model.ir_version = 8
    onnx.save(model, os.path.join(OUT, name))


def model(nodes, inputs, outputs, inits=(), opset=13, name="test"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def f32_input(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def expect(*words):
    lines.append(" ".join(str(w) for w in words))


# ------------------------------------------------------------ storage forms

def initializer_forms():
    inits = []

    def add(tensor, expected_spec):
        inits.append(tensor)
        expect("const", "forms.onnx", "-", tensor.name, expected_spec)

    w_raw = np.array([[1.5, -2.0, 3.25], [0.1, 1e-30, -7.0]], np.float32)
    add(numpy_helper.from_array(w_raw, "w_raw"), spec(w_raw))  # raw_data

    w_float = np.array([0.5, -1.25, 3.0e8], np.float32)
    add(helper.make_tensor("w_float", TensorProto.FLOAT, [3], w_float.tolist()), spec(w_float))

    w_int32 = np.array([[1, -2], [2147483647, -2147483648]], np.int32)
    add(helper.make_tensor("w_int32", TensorProto.INT32, [2, 2], w_int32.reshape(-1).tolist()),
        spec(w_int32))

    w_int8 = np.array([-128, -1, 0, 127], np.int8)
    add(helper.make_tensor("w_int8", TensorProto.INT8, [4], w_int8.tolist()), spec(w_int8))

    w_uint16 = np.array([0, 65535, 300], np.uint16)
    add(helper.make_tensor("w_uint16", TensorProto.UINT16, [3], w_uint16.tolist()),
        spec(w_uint16))

    w_bool = np.array([True, False, True], np.bool_)
    add(helper.make_tensor("w_bool", TensorProto.BOOL, [3], w_bool.tolist()), spec(w_bool))

    w_int64 = np.array([-(2**62), 5, 2**40], np.int64)
    add(helper.make_tensor("w_int64", TensorProto.INT64, [3], w_int64.tolist()), spec(w_int64))

    w_double = np.array([0.1, -1e10, 2.5], np.float64)
    add(helper.make_tensor("w_double", TensorProto.DOUBLE, [3], w_double.tolist()),
        spec(w_double))

    w_uint64 = np.array([0, 12345678901, 7], np.uint64)
    add(helper.make_tensor("w_uint64", TensorProto.UINT64, [3], w_uint64.tolist()),
        spec(w_uint64))

    w_uint32 = np.array([4294967295, 1], np.uint32)
    add(helper.make_tensor("w_uint32", TensorProto.UINT32, [2], w_uint32.tolist()),
        spec(w_uint32))

    # float16 in int32_data (bit patterns), with a subnormal and an infinity.
    w_f16 = np.array([1.0, -0.333, 65504.0, 6e-8, np.inf], np.float16)
    t = TensorProto(name="w_f16", data_type=TensorProto.FLOAT16, dims=[5])
    t.int32_data.extend(w_f16.view(np.uint16).astype(np.int32).tolist())
    add(t, spec(w_f16))

    w_f16raw = np.array([[2.5, -0.0009765625]], np.float16)
    add(numpy_helper.from_array(w_f16raw, "w_f16raw"), spec(w_f16raw))

    # bfloat16: the top half of a float32.
    bf = np.array([1.0, -3.5, 0.15625], np.float32)
    t = TensorProto(name="w_bf16", data_type=TensorProto.BFLOAT16, dims=[3])
    t.raw_data = (bf.view(np.uint32) >> 16).astype("<u2").tobytes()
    add(t, spec(bf, "bf16"))

    for arr, name in [(np.array([-3, 300], np.int16), "w_int16raw"),
                      (np.array([[200, 1]], np.uint8), "w_uint8raw"),
                      (np.array([-5, 2**31 - 1], np.int32), "w_int32raw"),
                      (np.array([2**50, -1], np.int64), "w_int64raw"),
                      (np.array([1e-3, -2.0], np.float64), "w_doubleraw")]:
        add(numpy_helper.from_array(arr, name), spec(arr))

    w_scalar = np.array(4.5, np.float32)
    add(numpy_helper.from_array(w_scalar, "w_scalar"), spec(w_scalar))
    w_empty = np.zeros([2, 0], np.float32)
    add(numpy_helper.from_array(w_empty, "w_empty"), spec(w_empty))

    # External data: two tensors in one side file, the second at an offset.
    ext_a = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5
    ext_b = np.array([7, -8, 9], np.int64)
    blob = ext_a.tobytes() + b"\0" * 8 + ext_b.tobytes()
    with open(os.path.join(OUT, "forms.bin"), "wb") as f:
        f.write(blob)
    for name, arr, offset in [("w_ext_a", ext_a, 0), ("w_ext_b", ext_b, ext_a.nbytes + 8)]:
        t = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(arr.dtype),
                        dims=arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in [("location", "forms.bin"), ("offset", str(offset)),
                     ("length", str(arr.nbytes))]:
            entry = t.external_data.add()
            entry.key, entry.value = k, v
        add(t, spec(arr))

    nodes = [helper.make_node("Add", ["x", "w_raw"], ["y"], name="add")]
    save(model(nodes, [f32_input("x", [2, 3])], [f32_input("y", [2, 3])], inits), "forms.onnx")
    expect("ok", "forms.onnx", "-")
    expect("input", "forms.onnx", "-", "x", 2, 2, 3)
    expect("node", "forms.onnx", "-", "add", "Add", 2, "x", "w_raw", 1, "y")


# --------------------------------------------------------------- attributes

def attributes():
    t1 = np.array([[1.0, 2.0]], np.float32)
    t2 = np.array([3, 4, 5], np.int64)
    node = helper.make_node("Identity", ["x"], ["y"], name="id",
                            f=0.25, i=-7, s="hello", t=numpy_helper.from_array(t1),
                            fs=[0.5, 1.5, -2.0], is_=[1, -2, 3], ss=["a", "bc"],
                            ts=[numpy_helper.from_array(t1), numpy_helper.from_array(t2)])
    # make_node turns the keyword is_ into "is_"; rename it to a plain name.
    for a in node.attribute:
        if a.name == "is_":
            a.name = "is"
    save(model([node], [f32_input("x", [3])], [f32_input("y", [3])]), "attrs.onnx")
    expect("ok", "attrs.onnx", "-")
    expect("attr", "attrs.onnx", "-", "id", "f", "float", repr(0.25))
    expect("attr", "attrs.onnx", "-", "id", "i", "int", -7)
    expect("attr", "attrs.onnx", "-", "id", "s", "string", "hello")
    expect("attr", "attrs.onnx", "-", "id", "fs", "floats", 3, 0.5, 1.5, -2.0)
    expect("attr", "attrs.onnx", "-", "id", "is", "ints", 3, 1, -2, 3)
    expect("attr", "attrs.onnx", "-", "id", "ss", "strings", 2, "a", "bc")
    expect("attr", "attrs.onnx", "-", "id", "t", "tensor", spec(t1))
    expect("attr", "attrs.onnx", "-", "id", "ts", "tensors", 2, spec(t1), spec(t2))

    # A supported operator that carries a subgraph is refused by name.
    sub = helper.make_graph([], "body", [], [])
    node = helper.make_node("Identity", ["x"], ["y"], name="withgraph", body=sub)
    save(model([node], [f32_input("x", [3])], [f32_input("y", [3])]), "subgraph.onnx")
    expect("error", "subgraph.onnx", "-",
           "node 'withgraph' (Identity): attribute 'body' is a subgraph")


# ---------------------------------------------------------------- constants

def constants():
    value = np.array([[1.0, -1.0, 2.0]], np.float32)
    nodes = [
        helper.make_node("Constant", [], ["c_value"], value=numpy_helper.from_array(value)),
        helper.make_node("Constant", [], ["c_float"], value_float=2.5),
        helper.make_node("Constant", [], ["c_floats"], value_floats=[1.0, 0.5]),
        helper.make_node("Constant", [], ["c_int"], value_int=-3),
        helper.make_node("Constant", [], ["c_ints"], value_ints=[4, 5, 6]),
        helper.make_node("Add", ["x", "c_value"], ["y"]),  # unnamed: gets Add_5
        # An absent optional input in the middle stays absent.
        helper.make_node("Clip", ["y", "", "c_float"], ["z"], name="clip"),
    ]
    save(model(nodes, [f32_input("x", [2, 3])], [f32_input("z", [2, 3])]), "constants.onnx")
    expect("ok", "constants.onnx", "-")
    expect("const", "constants.onnx", "-", "c_value", spec(value))
    expect("const", "constants.onnx", "-", "c_float", spec(np.array(2.5, np.float32)))
    expect("const", "constants.onnx", "-", "c_floats", spec(np.array([1.0, 0.5], np.float32)))
    expect("const", "constants.onnx", "-", "c_int", spec(np.array(-3, np.int64)))
    expect("const", "constants.onnx", "-", "c_ints", spec(np.array([4, 5, 6], np.int64)))
    expect("node", "constants.onnx", "-", "Add_5", "Add", 2, "x", "c_value", 1, "y")
    expect("node", "constants.onnx", "-", "clip", "Clip", 3, "y", "_", "c_float", 1, "z")


# ----------------------------------------------------------------- shapes

def shapes():
    inputs = [f32_input("x", ["N", 3, 4]), f32_input("z", [None, 2])]
    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["z"], ["w"])]
    outputs = [f32_input("y", ["N", 3, 4]), f32_input("w", [None, 2])]
    save(model(nodes, inputs, outputs), "symbolic.onnx")
    expect("error", "symbolic.onnx", "-",
           "input 'x' has a dynamic dimension 0 ('N'); pin it with --input-shape x=... or --batch N")
    expect("error", "symbolic.onnx", "-", "input 'z' has a dynamic dimension 0;")
    expect("ok", "symbolic.onnx", "batch=2")
    expect("input", "symbolic.onnx", "batch=2", "x", 3, 2, 3, 4)
    expect("input", "symbolic.onnx", "batch=2", "z", 2, 2, 2)
    expect("input", "symbolic.onnx", "batch=2;shape=x:5x3x4", "x", 3, 5, 3, 4)
    expect("input", "symbolic.onnx", "batch=2;shape=x:5x3x4", "z", 2, 2, 2)
    expect("input", "symbolic.onnx", "shape=x:1x3x4;shape=z:7x2", "z", 2, 7, 2)
    expect("error", "symbolic.onnx", "batch=1;shape=q:1x2",
           "--input-shape names 'q', which is not an input of the model")

    inputs = [f32_input("x", ["N", "C"])]
    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    save(model(nodes, inputs, [f32_input("y", ["N", "C"])]), "symbolic2.onnx")
    expect("error", "symbolic2.onnx", "batch=4", "input 'x' has a dynamic dimension 1 ('C')")

    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)]
    save(model(nodes, inputs, [f32_input("y", [2])]), "noshape.onnx")
    expect("error", "noshape.onnx", "-", "input 'x' has no declared shape")
    expect("input", "noshape.onnx", "shape=x:2x5", "x", 2, 2, 5)


# ----------------------------------------------------------------- errors

def errors():
    x = [f32_input("x", [2])]
    y = [f32_input("y", [2])]

    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    t.raw_data = np.zeros(5, np.float32).tobytes()
    save(model([helper.make_node("Add", ["x", "w"], ["y"])], x, y, [t]), "bad_raw_length.onnx")
    expect("error", "bad_raw_length.onnx", "-",
           "initializer 'w': raw_data holds 20 bytes but shape [2,3] needs 24")

    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    t.float_data.extend([1.0, 2.0, 3.0])
    save(model([helper.make_node("Add", ["x", "w"], ["y"])], x, y, [t]), "bad_typed_length.onnx")
    expect("error", "bad_typed_length.onnx", "-",
           "initializer 'w': float_data holds 3 values but shape [4] needs 4")

    def external(name, location, offset, length, dims):
        t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        for k, v in [("location", location), ("offset", offset), ("length", length)]:
            if v is not None:
                e = t.external_data.add()
                e.key, e.value = k, str(v)
        save(model([helper.make_node("Add", ["x", "w"], ["y"])], x, y, [t]), name)

    external("missing_external.onnx", "nowhere.bin", 0, 8, [2])
    expect("error", "missing_external.onnx", "-",
           "initializer 'w': cannot open external data file")
    with open(os.path.join(OUT, "short.bin"), "wb") as f:
        f.write(b"\0" * 10)
    external("short_external.onnx", "short.bin", 4, None, [2])
    expect("error", "short_external.onnx", "-",
           "initializer 'w': external data file")
    expect("error", "short_external.onnx", "-", "is too short: needs 8 bytes at offset 4, has 6")
    external("escaping_external.onnx", "../short.bin", 0, None, [2])
    expect("error", "escaping_external.onnx", "-", "leaves the model's directory")
    external("wrong_length_external.onnx", "short.bin", 0, 4, [2])
    expect("error", "wrong_length_external.onnx", "-",
           "external data length is 4 bytes but the shape needs 8")

    nodes = [helper.make_node("Foo", ["x"], ["a"], name="a"),
             helper.make_node("Relu", ["a"], ["b"], name="r"),
             helper.make_node("Bar", ["b"], ["c"], name="c"),
             helper.make_node("Foo", ["c"], ["d"], name="b"),
             helper.make_node("Baz", ["d"], ["y"], name="d", domain="com.example")]
    m = model(nodes, x, y)
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    save(m, "unsupported.onnx")
    expect("error", "unsupported.onnx", "-",
           "opc: error: unsupported.onnx: unsupported operators: Foo (node 'a', 'b'), "
           "Bar (node 'c'), com.example.Baz (node 'd')")

    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]
    save(model(nodes, x, y), "undefined.onnx")
    expect("error", "undefined.onnx", "-",
           "node 'add' (Add): input 'ghost' is not defined")

    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r1"),
             helper.make_node("Relu", ["x"], ["y"], name="r2")]
    save(model(nodes, x, y), "duplicate.onnx")
    expect("error", "duplicate.onnx", "-", "tensor 'y' is defined twice")

    w = numpy_helper.from_array(np.ones(2, np.float32), "x")
    save(model([helper.make_node("Relu", ["x"], ["y"])], [], y, [w, w]), "duplicate_init.onnx")
    expect("error", "duplicate_init.onnx", "-", "tensor 'x' is defined twice")

    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2"),
             helper.make_node("Relu", ["a"], ["y"], name="n3")]
    save(model(nodes, x, y), "cycle.onnx")
    expect("error", "cycle.onnx", "-", "cycle")

    # Run-time inputs may have the storage types of net.c, not string.
    xi = [helper.make_tensor_value_info("x", TensorProto.STRING, [2])]
    save(model([helper.make_node("Identity", ["x"], ["y"])], xi, y), "str_input.onnx")
    expect("error", "str_input.onnx", "-",
           "input 'x' has data type string; opc compiles models whose inputs are float32, "
           "float64, float16, bfloat16, int64, int32, int16, int8, uint64, uint32, uint16, uint8 "
           "or bool")
    xi = [helper.make_tensor_value_info("x", TensorProto.INT64, [2])]
    yi = [helper.make_tensor_value_info("y", TensorProto.INT64, [2])]
    save(model([helper.make_node("Identity", ["x"], ["y"])], xi, yi), "int_input.onnx")
    expect("ok", "int_input.onnx", "-")
    # bfloat16 at the interface: the caller's 16 bits
    xi = [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2])]
    yi = [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2])]
    save(model([helper.make_node("Identity", ["x"], ["y"])], xi, yi), "bf16_io.onnx")
    expect("ok", "bf16_io.onnx", "-")

    # The optimisers of ai.onnx.preview.training, lowered by the importer.
    def optimiser(op, inputs, outputs, **attrs):
        vi = [helper.make_tensor_value_info("R", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("T", TensorProto.INT64, [])]
        vi += [f32_input(n, [2]) for n in inputs[2:]]
        node = helper.make_node(op, inputs, outputs, name="opt",
                                domain="ai.onnx.preview.training", **attrs)
        m = model([node], vi, [f32_input(n, [2]) for n in outputs])
        m.opset_import.append(helper.make_opsetid("ai.onnx.preview.training", 1))
        return m
    save(optimiser("Adam", ["R", "T", "X", "G", "V", "H"], ["X2", "V2", "H2"]), "adam.onnx")
    expect("ok", "adam.onnx", "-")
    save(optimiser("Momentum", ["R", "T", "X", "G", "V"], ["X2", "V2"], alpha=0.9, beta=0.1,
                   norm_coefficient=0.0, mode="heavy"), "momentum_mode.onnx")
    expect("error", "momentum_mode.onnx", "-",
           "node 'opt' (Momentum): mode must be \"standard\" or \"nesterov\", not heavy")
    save(optimiser("Momentum", ["R", "T", "X", "G", "V"], ["X2", "V2"], alpha=0.9, beta=0.1,
                   mode="standard"), "momentum_attrs.onnx")
    expect("error", "momentum_attrs.onnx", "-",
           "node 'opt' (Momentum): needs its attributes alpha, beta, mode and norm_coefficient")
    save(optimiser("Adagrad", ["R", "T", "X", "G", "H", "K"], ["X2", "H2"]), "adagrad_arity.onnx")
    expect("error", "adagrad_arity.onnx", "-",
           "node 'opt' (Adagrad): takes R, T and n each of X, G and H; returns n each of X and H")

    t = helper.make_tensor("w", TensorProto.STRING, [1], [b"text"])
    save(model([helper.make_node("Add", ["x", "w"], ["y"])], x, y, [t]), "string_init.onnx")
    expect("error", "string_init.onnx", "-", "initializer 'w': unsupported data type string")

    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    save(model(nodes, x, [f32_input("nothing", [2])]), "missing_output.onnx")
    expect("error", "missing_output.onnx", "-",
           "graph output 'nothing' is not produced by any node")

    # A graph output's declared type is the type callers read; ONNX Runtime
    # refuses a model whose output computes another (here a flipped bit).
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    y_i8 = [helper.make_tensor_value_info("y", TensorProto.INT8, [2])]
    save(model(nodes, x, y_i8), "output_type.onnx")
    expect("error", "output_type.onnx", "-",
           "node 'r' (Relu): graph output 'y' is declared int8, but Relu makes float32")
    y_none = [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, [2])]
    save(model(nodes, x, y_none), "output_type_undefined.onnx")
    expect("error", "output_type_undefined.onnx", "-",
           "graph output 'y' is declared UNDEFINED (0), but Relu makes float32")

    # So is its declared shape, where it is static (a flipped bit made a
    # dimension 3); after --batch, which may change it, only a warning.
    y_3 = [f32_input("y", [3])]
    save(model(nodes, x, y_3), "output_shape.onnx")
    expect("error", "output_shape.onnx", "-",
           "node 'r' (Relu): graph output 'y' is declared f32[3] but inferred f32[2]")
    expect("ok", "output_shape.onnx", "batch=1")

    # An attribute's declared type names the field that holds its value:
    # a flipped bit made Conv's dilations (INTS) a STRING, which opc read as
    # absent. ONNX's checker and ONNX Runtime refuse both of these.
    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=0.5)
    node.attribute[0].type = onnx.AttributeProto.STRING
    save(model([node], x, y), "attr_type_mismatch.onnx")
    expect("error", "attr_type_mismatch.onnx", "-",
           "node 'lr' (LeakyRelu): attribute 'alpha' is declared STRING but holds a value of "
           "type FLOAT")
    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=0.5)
    node.attribute[0].ClearField("type")
    node.attribute[0].ints.append(2)
    save(model([node], x, y), "attr_two_fields.onnx")
    expect("error", "attr_two_fields.onnx", "-",
           "attribute 'alpha' holds values of two types, FLOAT and INTS")

    nodes = [helper.make_node("Constant", [], ["y"], name="k", value_string="s")]
    save(model(nodes, [], y), "string_constant.onnx")
    expect("error", "string_constant.onnx", "-",
           "node 'k' (Constant): attribute 'value_string'")

    # An If whose branch names as its output the If's own output, which
    # nothing in the branch computes.
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "b", [], y)
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch,
                              else_branch=branch)]
    save(model(nodes, x, y, [cond]), "if.onnx")
    expect("error", "if.onnx", "-", "node 'if' (If): branch output 'y' is not produced by the branch")

    with open(os.path.join(OUT, "garbage.onnx"), "wb") as f:
        f.write(b"\xff\xff\xff\xff garbage that is not protobuf")
    expect("error", "garbage.onnx", "-", "not a valid ONNX model")
    open(os.path.join(OUT, "empty.onnx"), "wb").close()
    expect("error", "empty.onnx", "-", "empty file")
    expect("error", "does_not_exist.onnx", "-", "does_not_exist.onnx: cannot open")


# ------------------------------------------------------------- --const-input

def write_npy(name, arr, version=None):
    with open(os.path.join(OUT, name), "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


def write_raw(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def npy_bytes(header, data=b""):
    """A version 1.0 .npy file with a hand-written header."""
    text = header.encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data


# --------------------------------------------------------------------- If

def branch(name, nodes, out, shape=(2,)):
    return helper.make_graph(nodes, name, [], [f32_input(out, list(shape))])


def if_node(cond, out, then_gp, else_gp, name="if1"):
    return helper.make_node("If", [cond], [out], name=name, then_branch=then_gp,
                            else_branch=else_gp)


def relu_or_neg(prefix):
    return (branch("then", [helper.make_node("Relu", ["x"], [prefix + "t"], name=prefix + "relu")],
                   prefix + "t"),
            branch("else", [helper.make_node("Neg", ["x"], [prefix + "e"], name=prefix + "neg")],
                   prefix + "e"))


def if_models():
    """If with a condition known at compile time: the taken branch is
    imported in its place (its nodes, and an Identity to the If's output),
    its own values named after the If ("if1/t"); the other is never read,
    so an operator opc lacks may sit in it."""
    x = [f32_input("x", [2])]
    y = [f32_input("y", [2])]
    size = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
            helper.make_node("Gather", ["s", "zero"], ["d0"], name="gather", axis=0)]
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    for dim, taken in ((2, "relu"), (3, "neg")):
        then_gp, else_gp = relu_or_neg("")
        k = numpy_helper.from_array(np.array(dim, np.int64), "k")
        nodes = size + [helper.make_node("Equal", ["d0", "k"], ["c"], name="eq"),
                        if_node("c", "y", then_gp, else_gp)]
        name = f"if_shape_{taken}.onnx"
        save(model(nodes, x, y, [zero, k], opset=17), name)
        kind, out = ("Relu", "if1/t") if taken == "relu" else ("Neg", "if1/e")
        expect("node", name, "-", taken, kind, 1, "x", 1, out)
        expect("node", name, "-", "if1/output_0", "Identity", 1, out, 1, "y")

    # nested: the taken branch holds an If of its own, decided by a constant
    inner_then, inner_else = relu_or_neg("in_")
    inner = helper.make_node("If", ["b"], ["o"], name="inner", then_branch=inner_then,
                             else_branch=inner_else)
    outer_then = helper.make_graph(
        [helper.make_node("Constant", [], ["b"], name="b",
                          value=numpy_helper.from_array(np.array(False), "b")), inner],
        "then", [], [f32_input("o", [2])])
    outer_else = branch("else", [helper.make_node("Foo", ["x"], ["f"], name="foo")], "f")
    yes = numpy_helper.from_array(np.array(True), "yes")
    save(model([if_node("yes", "y", outer_then, outer_else, name="outer")], x, y, [yes], opset=17),
         "if_nested.onnx")
    expect("node", "if_nested.onnx", "-", "in_neg", "Neg", 1, "x", 1, "inner/in_e")
    expect("node", "if_nested.onnx", "-", "inner/output_0", "Identity", 1, "inner/in_e", 1,
           "outer/o")
    expect("node", "if_nested.onnx", "-", "outer/output_0", "Identity", 1, "outer/o", 1, "y")

    # two Ifs whose branches use the same names: each has its own
    then_gp, else_gp = relu_or_neg("")
    ys = [f32_input("y1", [2]), f32_input("y2", [2])]
    save(model([if_node("yes", "y1", then_gp, else_gp, name="a"),
                if_node("yes", "y2", then_gp, else_gp, name="b")], x, ys, [yes], opset=17),
         "if_twice.onnx")
    expect("node", "if_twice.onnx", "-", "a/output_0", "Identity", 1, "a/t", 1, "y1")
    expect("node", "if_twice.onnx", "-", "b/output_0", "Identity", 1, "b/t", 1, "y2")

    # a condition from a graph input: one If node owning both branches
    # (a CUDA-graph IF node), reading the outer x once for each; bound
    # with --const-input, only the chosen branch
    then_gp, else_gp = relu_or_neg("")
    cond = [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    save(model([helper.make_node("Not", ["cond"], ["c"], name="not"),
                if_node("c", "y", then_gp, else_gp)], x + cond, y, opset=17), "if_input.onnx")
    expect("node", "if_input.onnx", "-", "if1", "If", 3, "c", "x", "x", 2, "y",
           "if1/body_memory")
    # a branch with a MatMul, which only cuBLAS runs and a conditional
    # body cannot call: both branches, each output an IfSelect of theirs
    # by the condition made one value
    w = numpy_helper.from_array(np.eye(2, dtype=np.float32), "w")
    then_gp = branch("then", [helper.make_node("MatMul", ["x", "w"], ["t"], name="mm")], "t")
    save(model([helper.make_node("Not", ["cond"], ["c"], name="not"),
                if_node("c", "y", then_gp, else_gp)], x + cond, y, [w], opset=17),
         "if_matmul.onnx")
    expect("node", "if_matmul.onnx", "-", "mm", "MatMul", 2, "x", "w", 1, "if1/then/t")
    expect("node", "if_matmul.onnx", "-", "neg", "Neg", 1, "x", 1, "if1/else/e")
    expect("node", "if_matmul.onnx", "-", "if1/condition", "Reshape", 2, "c",
           "if1/condition_shape", 1, "if1/condition")
    expect("node", "if_matmul.onnx", "-", "if1/output_0", "IfSelect", 3, "if1/condition",
           "if1/then/t", "if1/else/e", 1, "y")
    # an IfSelect is opc's own: a model naming one is refused
    save(model([helper.make_node("IfSelect", ["cond", "x", "x"], ["y"], name="sel")], x + cond,
               y, opset=17), "if_select.onnx")
    expect("error", "if_select.onnx", "-", "IfSelect")
    write_npy("false.npy", np.array(False))
    expect("node", "if_input.onnx", "const=cond:false.npy", "relu", "Relu", 1, "x", 1, "if1/t")

    # what the taken branch holds is checked as the graph's own nodes are
    then_gp = branch("then", [helper.make_node("Foo", ["x"], ["t"], name="foo")], "t")
    _, else_gp = relu_or_neg("")
    save(model([if_node("yes", "y", then_gp, else_gp)], x, y, [yes], opset=17), "if_foo.onnx")
    expect("error", "if_foo.onnx", "-", "unsupported operators: Foo (node 'foo')")
    two = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="relu"),
                             helper.make_node("Neg", ["x"], ["u"], name="neg")],
                            "then", [], [f32_input("t", [2]), f32_input("u", [2])])
    save(model([if_node("yes", "y", two, else_gp)], x, y, [yes], opset=17), "if_outputs.onnx")
    expect("error", "if_outputs.onnx", "-", "node 'if1' (If): the then branch has 2 outputs, "
           "the node 1")
    save(model([helper.make_node("If", ["yes"], ["y"], name="if1", then_branch=two)], x, y, [yes],
               opset=17), "if_no_else.onnx")
    expect("error", "if_no_else.onnx", "-", "node 'if1' (If): expects one input, the condition, "
           "and the attributes then_branch and else_branch")


def loop_models():
    """Loop, unrolled when its trip count and conditions are known at
    compile time (backend/tests/e2e runs such loops against ONNX Runtime);
    else one Loop node owning its body (frontend/loop.c; run against ONNX
    Runtime by backend/tests/kernels/test_loop.py), but refused, with what
    to do, when it has scan outputs."""
    x = [f32_input("x", [2])]

    def body(cond_node):
        return helper.make_graph(
            [helper.make_node("Relu", ["v_in"], ["v_out"], name="relu"), cond_node], "body",
            [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), f32_input("v_in", [2])],
            [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), f32_input("v_out", [2])])
    keep = helper.make_node("Identity", ["c_in"], ["c_out"], name="keep")
    m3 = numpy_helper.from_array(np.array(3, np.int64), "m")
    save(model([helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop", body=body(keep))],
               x, [f32_input("y", [2])], [m3], opset=17), "loop_three.onnx")
    expect("node", "loop_three.onnx", "-", "loop/output_0", "Identity", 1, "loop/2/v_out", 1, "y")

    count = [helper.make_tensor_value_info("n", TensorProto.INT64, [])]
    save(model([helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body(keep))],
               x + count, [f32_input("y", [2])], opset=17), "loop_input_count.onnx")
    expect("node", "loop_input_count.onnx", "-", "loop", "Loop", 3, "n", "_", "x", 2, "y",
           "loop/body_memory")
    scan_body = helper.make_graph(
        [helper.make_node("Relu", ["v_in"], ["v_out"], name="relu"), keep,
         helper.make_node("Neg", ["v_out"], ["v_row"], name="neg")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), f32_input("v_in", [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), f32_input("v_out", [2]),
         f32_input("v_row", [2])])
    save(model([helper.make_node("Loop", ["n", "", "x"], ["y", "rows"], name="loop", body=scan_body)],
               x + count, [f32_input("y", [2])], opset=17), "loop_scan_count.onnx")
    expect("error", "loop_scan_count.onnx", "-", "node 'loop' (Loop): its trip count 'n' is "
           "computed at run time")
    expect("error", "loop_scan_count.onnx", "-", "depends on graph input 'n' (bind it with")

    data_cond = helper.make_graph(
        [helper.make_node("Relu", ["v_in"], ["v_out"], name="relu"),
         helper.make_node("ReduceSum", ["v_out"], ["s"], name="sum", keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c_out"], name="gt")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), f32_input("v_in", [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), f32_input("v_out", [2])])
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    save(model([helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop", body=data_cond)],
               x, [f32_input("y", [2])], [m3, zero], opset=17), "loop_data_cond.onnx")
    expect("node", "loop_data_cond.onnx", "-", "loop", "Loop", 3, "m", "_", "x", 2, "y",
           "loop/body_memory")

    many = numpy_helper.from_array(np.array(5000, np.int64), "m")
    save(model([helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop", body=body(keep))],
               x, [f32_input("y", [2])], [many], opset=17), "loop_many.onnx")
    expect("node", "loop_many.onnx", "-", "loop", "Loop", 3, "m", "_", "x", 2, "y",
           "loop/body_memory")

    save(model([helper.make_node("Loop", ["m", ""], ["y"], name="loop", body=body(keep))],
               x, [f32_input("y", [2])], [m3], opset=17), "loop_arity.onnx")
    expect("error", "loop_arity.onnx", "-", "node 'loop' (Loop): expects the inputs M, cond")


def const_inputs():
    shape = np.array([4, 3, 2], np.int64)
    inputs = [f32_input("data", [2, 3, 4]),
              helper.make_tensor_value_info("shape", TensorProto.INT64, [3])]
    nodes = [helper.make_node("Reshape", ["data", "shape"], ["y"], name="reshape")]
    w = numpy_helper.from_array(np.ones(1, np.float32), "w")
    save(model(nodes, inputs + [f32_input("w", [1])], [f32_input("y", [4, 3, 2])], [w]),
         "reshape.onnx")

    write_npy("shape.npy", shape)
    write_npy("shape_v2.npy", shape, version=(2, 0))
    write_npy("shape_be.npy", shape.astype(">i8"))
    with open(os.path.join(OUT, "shape.pb"), "wb") as f:
        f.write(numpy_helper.from_array(shape, "shape").SerializeToString())
    for f in ["shape.npy", "shape_v2.npy", "shape_be.npy", "shape.pb"]:
        opts = "const=shape:" + f
        expect("const", "reshape.onnx", opts, "shape", spec(shape))
        expect("input", "reshape.onnx", opts, "data", 3, 2, 3, 4)
        expect("node", "reshape.onnx", opts, "reshape", "Reshape", 2, "data", "shape", 1, "y")
    # Without the binding, and no declared shape of y to pin it (ir/pin.c),
    # shape stays a run-time input, which Reshape refuses.
    save(model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
         "reshape_open.onnx")
    expect("error", "reshape_open.onnx", "-", "input 'shape' is not a compile-time constant")
    # A float32 data input may be bound too.
    x = np.array([[1.5, -2.0, 0.25, 8.0]] * 6, np.float32).reshape(2, 3, 4)
    write_npy("data.npy", x)
    expect("const", "reshape.onnx", "const=data:data.npy;const=shape:shape.npy", "data", spec(x))

    # Every .npy type the importer reads, into inputs declared with it.
    arrays = {"f64": np.array([0.1, -2.5e10], np.float64),
              "boolean": np.array([[True], [False], [True]], np.bool_),
              "i32": np.array([-7, 2**31 - 1], np.int32),
              "u8": np.array([0, 255, 9], np.uint8), "i8": np.array([-128, 5], np.int8),
              "u16": np.array([65535], np.uint16), "i16": np.array([-300], np.int16),
              "f16": np.array([1.5, -0.0009765625], np.float16),
              "u32": np.array([4294967295], np.uint32),
              "u64": np.array([2**40], np.uint64),
              "scalar": np.array(3.25, np.float32)}
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in arrays.items()]
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    save(model(nodes, inputs + [f32_input("x", [2])], [f32_input("y", [2])]), "types.onnx")
    opts = ";".join("const=%s:%s.npy" % (n, n) for n in arrays)
    for n, a in arrays.items():
        write_npy(n + ".npy", a)
        expect("const", "types.onnx", opts, n, spec(a))
    expect("input", "types.onnx", opts, "x", 1, 2)

    # A symbolic dimension accepts any size; --input-shape must agree.
    inputs = [f32_input("data", [2, 3, 4]),
              helper.make_tensor_value_info("shape", TensorProto.INT64, ["K"])]
    nodes = [helper.make_node("Reshape", ["data", "shape"], ["y"], name="reshape")]
    save(model(nodes, inputs, [f32_input("y", [4, 3, 2])]), "reshape_sym.onnx")
    expect("const", "reshape_sym.onnx", "const=shape:shape.npy", "shape", spec(shape))
    expect("const", "reshape_sym.onnx", "shape=shape:3;const=shape:shape.npy", "shape",
           spec(shape))
    expect("error", "reshape_sym.onnx", "shape=shape:4;const=shape:shape.npy",
           "--const-input shape=shape.npy: the file holds i64[3] but --input-shape gives i64[4]")

    # Mismatches with the model, and names that are not inputs.
    write_npy("shape_i32.npy", shape.astype(np.int32))
    expect("error", "reshape.onnx", "const=shape:shape_i32.npy",
           "--const-input shape=shape_i32.npy: the file holds i32 data but input 'shape' is "
           "declared i64")
    write_npy("shape4.npy", np.array([4, 3, 2, 1], np.int64))
    expect("error", "reshape.onnx", "const=shape:shape4.npy",
           "--const-input shape=shape4.npy: the file holds i64[4] but input 'shape' is "
           "declared i64[3]")
    expect("error", "reshape_sym.onnx", "const=shape:data.npy",
           "the file holds f32 data but input 'shape' is declared i64")
    expect("error", "reshape.onnx", "const=shape:shape.npy;const=nope:shape.npy",
           "--const-input: 'nope' is not an input of the model")
    expect("error", "reshape.onnx", "const=y:shape.npy",
           "--const-input: 'y' is not an input of the model")
    expect("error", "reshape.onnx", "const=w:data.npy",
           "--const-input: 'w' is an initializer, already a constant")
    expect("error", "reshape.onnx", "const=shape:shape.npy;const=shape:shape.pb",
           "--const-input: 'shape' is bound twice")

    # Files that are missing, empty or corrupt.
    expect("error", "reshape.onnx", "const=shape:absent.npy",
           "--const-input shape=absent.npy: cannot open 'absent.npy'")
    write_raw("empty.npy", b"")
    expect("error", "reshape.onnx", "const=shape:empty.npy", "'empty.npy' is empty")
    whole = open(os.path.join(OUT, "shape.npy"), "rb").read()
    write_raw("cut_data.npy", whole[:-5])
    expect("error", "reshape.onnx", "const=shape:cut_data.npy",
           "--const-input shape=cut_data.npy: the data holds 19 bytes but shape [3] needs 24")
    write_raw("cut_header.npy", whole[:30])
    expect("error", "reshape.onnx", "const=shape:cut_header.npy",
           "'cut_header.npy' is a truncated .npy file (header cut short)")
    write_raw("tiny.npy", whole[:7])
    expect("error", "reshape.onnx", "const=shape:tiny.npy", "is a truncated .npy file")
    write_raw("version9.npy", b"\x93NUMPY\x09\x00" + whole[8:])
    expect("error", "reshape.onnx", "const=shape:version9.npy", "one of an unknown version")
    write_raw("nomagic.npy", b"PK\x03\x04 a zip, perhaps an .npz")
    expect("error", "reshape.onnx", "const=shape:nomagic.npy",
           "'nomagic.npy' is not a .npy file (it lacks the NumPy magic bytes)")
    data = shape.tobytes()
    for name, header, text in [
            ("fortran.npy", "{'descr': '<i8', 'fortran_order': True, 'shape': (3,), }",
             "is in Fortran order"),
            ("complex.npy", "{'descr': '<c16', 'fortran_order': False, 'shape': (3,), }",
             "holds NumPy type '<c16'"),
            ("struct.npy", "{'descr': [('a', '<i8')], 'fortran_order': False, 'shape': (3,), }",
             "malformed .npy header: descr is not a simple type"),
            ("noshape.npy", "{'descr': '<i8', 'fortran_order': False, }",
             "the header lacks descr, fortran_order or shape"),
            ("badshape.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (3 4), }",
             "malformed shape tuple"),
            ("negshape.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (-3,), }",
             "shape holds something other than a number"),
            ("notdict.npy", "['descr', '<i8']", "the header is not a dict"),
            ("order.npy", "{'descr': '<i8', 'fortran_order': maybe, 'shape': (3,), }",
             "fortran_order is neither True nor False")]:
        write_raw(name, npy_bytes(header, data))
        expect("error", "reshape.onnx", "const=shape:" + name, text)
    # Hand-written headers the importer must accept: Python 2 longs, double quotes.
    write_raw("long.npy", npy_bytes('{"descr": "<i8", "fortran_order": False, "shape": (3L,)}',
                                    data))
    expect("const", "reshape.onnx", "const=shape:long.npy", "shape", spec(shape))
    write_raw("garbage.pb", b"\xff\xff\xff\xff not a protobuf")
    expect("error", "reshape.onnx", "const=shape:garbage.pb",
           "'garbage.pb' is neither a .npy file nor a valid ONNX TensorProto")
    write_raw("untyped.pb", TensorProto(name="shape", dims=[3]).SerializeToString())
    expect("error", "reshape.onnx", "const=shape:untyped.pb",
           "'untyped.pb' is not an ONNX TensorProto (it has no data type)")
    short = TensorProto(name="shape", data_type=TensorProto.INT64, dims=[3])
    short.int64_data.extend([1, 2])
    write_raw("short.pb", short.SerializeToString())
    expect("error", "reshape.onnx", "const=shape:short.pb",
           "--const-input shape=short.pb: int64_data holds 2 values but shape [3] needs 3")


os.makedirs(OUT, exist_ok=True)
initializer_forms()
attributes()
constants()
shapes()
errors()
if_models()
loop_models()
const_inputs()
with open(os.path.join(OUT, "expected.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"make_models: {len(lines)} checks in {OUT}/expected.txt")
