#!/usr/bin/env python3
"""Checks opc's command line: exit statuses, messages, and that a failure
leaves no output behind.

Usage: test_cli.py OPC GROUP
  usage    options and their errors (exit 0 or 1; no model is compiled)
  models   unreadable, corrupt and unsupported models (exit 2), --dump-ir,
           --const-input and its errors
  compile  -o with .c, executable and shared-library outputs; a failed build
           leaves nothing; a program with an input bound by --const-input
  limits   models over a limit of ir/ir.h (tensor size, names, node count,
           --max-memory): exit 2, a message naming node, operator, limit
           and value, and no output
  cache    the programs' main, compiled once into opc's cache (OPC_CACHE_DIR)
           and linked with each model; opc --emit-main
  names    model files of any name (dots, spaces, leading digits, non-ASCII
           letters, '='): executables, libraries, Triton models and serving
           programs, the names made from the file names, and their collisions
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPC, GROUP = os.path.abspath(sys.argv[1]), sys.argv[2]
USAGE = "usage: opc MODEL.onnx [MODEL.onnx ...] -o OUT [options]"
failures = 0
checks = 0


def run(*args, env=None):
    return subprocess.run([OPC, *args], capture_output=True, text=True, errors="replace",
                          timeout=120, env=env)


def check(name, ok, p=None):
    global failures, checks
    checks += 1
    if not ok:
        failures += 1
        print(f"FAIL {name}")
        if p is not None:
            print(f"  exit {p.returncode}\n  stdout: {p.stdout[:800]!r}\n  stderr: {p.stderr[:800]!r}")


def expect_usage_error(name, *args):
    p = run(*args)
    lines = p.stderr.splitlines()
    # One line saying what is wrong, then the usage line.
    check(name, p.returncode == 1 and len(lines) == 2 and lines[0].startswith("opc: error: ")
          and lines[1] == USAGE and p.stdout == "", p)


def expect_model_error(name, *args, text=None):
    p = run(*args)
    check(name, p.returncode == 2 and p.stderr.startswith("opc: error: ")
          and (text is None or text in p.stderr) and p.stdout == "", p)
    return p


# ------------------------------------------------------------ models

def save(model, path):
    model.ir_version = 8
    onnx.save(model, path)


def conv_model(path, batch=1):
    """Conv + Relu: small, and every stage of opc has something to do."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "cli", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 8, 8])], [w, b])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def api_named_model(path):
    """Nodes and tensors named like CUDA's API and net.c's helpers, whose
    names the CPU's code of a --devices gpu,cpu program prefixes."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "cudnn_w")
    nodes = [helper.make_node("Conv", ["x", "cudnn_w"], ["cuda_y"], name="report", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["cuda_y"], ["make_tensor"], name="cuLaunch"),
             helper.make_node("Sigmoid", ["make_tensor"], ["y"], name="load_kernels")]
    graph = helper.make_graph(
        nodes, "api", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], [w])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def symbolic_model(path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "sym", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def unsupported_model(path):
    nodes = [helper.make_node("NotAnOp", ["x"], ["y"], name="mystery")]
    graph = helper.make_graph(
        nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def reshape_model(path):
    """Reshape whose target shape is a graph input: it must be bound."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "reshape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)


def write_pb(path, arr, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(arr, name).SerializeToString())


def listing(d):
    return sorted(os.listdir(d))


# ------------------------------------------------------------ groups

def usage_group(tmp):
    os.chdir(tmp)  # so that a stray output would show up in the listing below
    expect_usage_error("no arguments")
    expect_usage_error("unknown flag", "--frobnicate", "m.onnx", "-o", "x")
    expect_usage_error("missing -o value", "m.onnx", "-o")
    expect_usage_error("no output", "m.onnx")
    expect_usage_error("no model", "-o", "x.c")
    expect_usage_error("--instances of no model", "a.onnx", "b.onnx", "--instances", "c=2", "-o", "x.c")
    expect_usage_error("--emit of no known kind", "m.onnx", "-o", "r", "--emit", "kserve")
    expect_usage_error("--emit triton without -o", "m.onnx", "--emit", "triton", "--report")
    expect_usage_error("--model-name for two models", "a.onnx", "b.onnx", "-o", "r", "--emit",
                       "triton", "--model-name", "m")
    expect_usage_error("--model-name without --emit triton", "m.onnx", "-o", "x.c",
                       "--model-name", "m")
    expect_usage_error("--model-name not a name", "m.onnx", "-o", "r", "--emit", "triton",
                       "--model-name", "a/b")
    expect_usage_error("--instances NAME=K with --emit triton", "m.onnx", "-o", "r", "--emit",
                       "triton", "--instances", "m=2")
    expect_usage_error("--prefix with --emit triton", "m.onnx", "-o", "r", "--emit", "triton",
                       "--prefix", "mine")
    expect_usage_error("--max-batch without --emit triton", "m.onnx", "-o", "x.c",
                       "--max-batch", "4")
    expect_usage_error("--max-batch on the Python backend", "m.onnx", "-o", "r", "--emit",
                       "triton", "--max-batch", "4", "--triton-backend", "python")
    expect_usage_error("--triton-backend of no known kind", "m.onnx", "-o", "r", "--emit",
                       "triton", "--triton-backend", "onnxruntime")
    for bad in ["0", "x", "2,2", "1,,4", "5000"]:
        expect_usage_error(f"--max-batch {bad}", "m.onnx", "-o", "r", "--emit", "triton",
                           "--max-batch", bad)
    expect_usage_error("--gpus 2 serving", "a.onnx", "b.onnx", "-o", "x.c", "--gpus", "2")
    expect_usage_error("--gpus 2 with a one-GPU scheduler", "m.onnx", "--report", "--gpus", "2",
                       "--schedule", "ios")
    expect_usage_error("--devices gpu,cpu with --gpus 2", "m.onnx", "--report", "--devices",
                       "gpu,cpu", "--gpus", "2")
    expect_usage_error("--devices gpu,cpu with IOS", "m.onnx", "--report", "--devices", "gpu,cpu",
                       "--schedule", "ios")
    expect_usage_error("--devices gpu,cpu serving", "a.onnx", "b.onnx", "-o", "x.c", "--devices",
                       "gpu,cpu")
    expect_usage_error("--partition without --devices gpu,cpu", "m.onnx", "--report",
                       "--partition", "ilp")
    expect_usage_error("--cpu-cost-db without --devices gpu,cpu", "m.onnx", "--report",
                       "--cpu-cost-db", "p.json")
    expect_usage_error("--arrivals with --emit triton", "m.onnx", "-o", "r", "--emit", "triton",
                       "--arrivals", "m=10")
    for bad in [["--batch", "0"], ["--batch", "x"], ["--streams", "0"], ["--prune", "3"],
                ["--prune", "a,b"], ["--schedule", "fastest"], ["--lios-priority", "best"],
                ["--precision", "fp8"], ["--target", "tpu"], ["--prefix", "9net"],
                ["--prefix", "my-net"], ["--input-shape", "x"], ["--input-shape", "x=1xq"],
                ["--input-shape", "=1x2"], ["-O3"], ["--cflags", "gpu"],
                ["--dump-after", "no_such_pass"], ["--const-input", "shape"],
                ["--const-input", "=s.npy"], ["--const-input", "shape="],
                ["--max-memory", "0"], ["--max-memory", "16GB"], ["--max-memory", "-1"],
                ["--max-memory", "G"], ["--max-memory", "99999999999T"], ["--gpus", "0"],
                ["--gpus", "17"], ["--placement", "random"], ["--hios-window", "0"],
                ["--link-gbps", "0"], ["--link-gbps", "fast"], ["--devices", "tpu"],
                ["--devices", "gpu,gpu"], ["--devices", "gpu,cpu", "--partition", "random"],
                ["--cpu-features", "avx9"]]:
        expect_usage_error("bad value " + " ".join(bad), "m.onnx", "-o", "x.c", *bad)

    p = run("--help")
    check("--help exits 0", p.returncode == 0 and USAGE in p.stdout and p.stderr == "", p)
    for option in ["-o", "--help", "--version", "--dump-ir", "--input-shape", "--batch", "-O0",
                   "-O1", "--dump-after", "--stats", "--verify-each", "--schedule", "--streams",
                   "--prune", "--lios-priority", "--device", "--cost-db", "--no-merge",
                   "--report", "--emit-schedule", "--emit-dot", "--prefix", "--embed-weights",
                   "--no-cuda-graph", "--precision", "--target", "--cpu-features", "--cflags",
                   "--libs",
                   "--const-input", "--list-operators", "--max-memory", "--emit",
                   "--model-name", "--instances", "--gpus", "--placement", "--hios-window",
                   "--link-gbps", "--devices", "--partition", "--cpu-cost-db", "--cpu-device"]:
        check(f"--help documents {option}", option in p.stdout)
    p = run("--version")
    check("--version", p.returncode == 0 and p.stdout == "opc 0.1.0\n", p)
    for target in ["cpu", "cuda", "stand-in"]:
        for what in ["--cflags", "--libs"]:
            p = run(what, target)
            check(f"{what} {target}", p.returncode == 0 and p.stdout.strip() != "", p)
    for what in ["--cflags", "--libs"]:
        check(f"{what} stand-in is {what} cpu: both link opc's CPU runtime",
              run(what, "stand-in").stdout == run(what, "cpu").stdout)
    p = run("m.onnx", "-o", "x.c", "--target", "bogus")
    check("--target bogus: exit 1, naming the three targets", p.returncode == 1 and
          "--target: unknown target 'bogus' (cuda, cpu or stand-in)" in p.stderr, p)
    p = run("--libs", "cuda")
    check("--libs cuda names cudnn", "-lcudnn" in p.stdout, p)
    cuda_homes(run)
    p = run("--list-operators")
    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                        "operators.md")
    with open(docs, encoding="utf-8") as f:
        documented = f.read()
    check("--list-operators lists Conv", p.returncode == 0 and "| Conv | run time | f32 f16 bf16 |" in p.stdout, p)
    check("docs/operators.md is what --list-operators prints (regenerate it: see its header)",
          p.stdout != "" and documented.endswith(p.stdout), p)
    check("usage errors create nothing", listing(tmp) == [])
    os.chdir("/")


def cuda_homes(run):
    """OPC_CUDA_HOME: a toolkit or PyPI's wheels, told apart by their layout
    (empty headers stand for them); neither, an error naming the place."""
    with tempfile.TemporaryDirectory() as homes:
        toolkit, wheels = os.path.join(homes, "cuda"), os.path.join(homes, "site", "nvidia")
        for header in [os.path.join(toolkit, "include"), os.path.join(wheels, "cu13", "include")]:
            os.makedirs(header)
            open(os.path.join(header, "cuda_runtime.h"), "w").close()
        home = dict(os.environ, OPC_CUDA_HOME=toolkit)
        p, q = run("--cflags", "cuda", env=home), run("--libs", "cuda", env=home)
        check("OPC_CUDA_HOME moves the CUDA toolkit, with an rpath to its libraries",
              f"-I{toolkit}/include " in p.stdout and f"-L{toolkit}/lib64 " in q.stdout and
              f"-L{toolkit}/lib64/stubs " in q.stdout and
              f"-Wl,-rpath,{toolkit}/lib64 " in q.stdout and " -lcuda " in q.stdout, (p, q))
        home = dict(os.environ, OPC_CUDA_HOME=wheels)
        p, q = run("--cflags", "cuda", env=home), run("--libs", "cuda", env=home)
        stubs = [w[2:] for w in q.stdout.split() if w.startswith("-L") and w.endswith("/stubs")]
        check("OPC_CUDA_HOME at a site-packages' nvidia folder: the wheels' headers",
              p.returncode == 0 and
              f"-I{wheels}/cu13/include -I{wheels}/cudnn/include " in p.stdout, p)
        check("... their versioned libraries, an rpath to them, and opc's libcuda stand-in",
              q.returncode == 0 and
              f"-L{wheels}/cu13/lib -L{wheels}/cudnn/lib " in q.stdout and
              f"-Wl,-rpath,{wheels}/cu13/lib -Wl,-rpath,{wheels}/cudnn/lib " in q.stdout and
              all(f" -l:{lib} " in q.stdout for lib in
                  ["libcudnn.so.9", "libcublasLt.so.13", "libcublas.so.13", "libcudart.so.13",
                   "libnvrtc.so.13"]) and
              " -lcuda " in q.stdout and len(stubs) == 1 and
              os.path.exists(os.path.join(stubs[0], "libcuda.so")), q)
        nowhere = os.path.join(homes, "site")
        for flag in ["--cflags", "--libs"]:
            p = run(flag, "cuda", env=dict(os.environ, OPC_CUDA_HOME=nowhere))
            check(f"{flag} cuda with no CUDA at OPC_CUDA_HOME: exit 2 naming the place and "
                  "both layouts",
                  p.returncode == 2 and p.stdout == "" and
                  f"looked in {nowhere} ($OPC_CUDA_HOME)" in p.stderr and
                  "include/cuda_runtime.h" in p.stderr and
                  "cu13/include/cuda_runtime.h" in p.stderr and p.stderr.count("\n") == 1, p)


def models_group(tmp):
    good = os.path.join(tmp, "good.onnx")
    conv_model(good)
    data = open(good, "rb").read()
    out = os.path.join(tmp, "out")
    os.mkdir(out)

    expect_model_error("missing file", os.path.join(tmp, "absent.onnx"), "-o",
                       os.path.join(out, "net.c"), text="cannot open")
    empty = os.path.join(tmp, "empty.onnx")
    open(empty, "wb").close()
    expect_model_error("empty file", empty, "--dump-ir", text="empty")
    expect_model_error("directory", tmp, "--dump-ir")

    variants = {"zeros": bytes(len(data)), "garbage": b"\xff" * 64}
    for cut in [1, 7, len(data) // 3, len(data) // 2, len(data) - 1]:
        variants[f"truncated at {cut}"] = data[:cut]
    for label, blob in variants.items():
        path = os.path.join(tmp, "corrupt.onnx")
        open(path, "wb").write(blob)
        expect_model_error(label, path, "-o", os.path.join(out, "net.c"))

    # A flipped bit in weight data leaves a valid model, so a flipped model
    # may compile; it must never crash, and errors must be reported cleanly.
    rng = random.Random(1234)
    statuses = []
    for i in range(20):
        blob = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(len(blob))
            blob[pos] ^= 1 << rng.randrange(8)
        path = os.path.join(tmp, "flipped.onnx")
        open(path, "wb").write(blob)
        p = run(path, "--dump-ir")
        statuses.append(p.returncode)
        check(f"bit flip {i}", p.returncode == 0 or
              (p.returncode == 2 and p.stderr.startswith("opc: error: ")), p)
    check("some bit flips are rejected", 2 in statuses)

    bad = os.path.join(tmp, "unsupported.onnx")
    unsupported_model(bad)
    expect_model_error("unsupported operator", bad, "-o", os.path.join(out, "net.c"),
                       text="unsupported operators: NotAnOp (node 'mystery')")
    expect_model_error("unsupported operator, executable", bad, "-o", os.path.join(out, "net"))
    # Run-time inputs have one of thirteen types, string not among them (it
    # lives only in constants); the message names the file and input.
    text_model = os.path.join(tmp, "string.onnx")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="id")], "string",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), text_model)
    expect_model_error("string input", text_model, "-o", os.path.join(out, "net.c"),
                       text=f"opc: error: {text_model}: input 'x' has data type string; opc "
                       "compiles models whose inputs are float32, float64, float16, bfloat16, "
                       "int64, int32, int16, int8, uint64, uint32, uint16, uint8 or bool")
    check("failures leave no output", listing(out) == [], None)
    if listing(out):
        print("  left:", listing(out))

    p = run(good, "--dump-ir")
    lines = p.stdout.splitlines()
    check("--dump-ir", p.returncode == 0 and p.stderr == "" and
          "input %x: f32[1,3,8,8]" in lines and "output %y" in lines, p)
    check("--dump-ir shows the conv output type",
          any(line.startswith("%y: f32[1,4,8,8] = Relu(") for line in lines), p)

    sym = os.path.join(tmp, "symbolic.onnx")
    symbolic_model(sym)
    expect_model_error("symbolic without pin", sym, "--dump-ir",
                       text="input 'x' has a dynamic dimension 0 ('N'); pin it with "
                            "--input-shape x=... or --batch N")
    p = run(sym, "--dump-ir", "--batch", "3")
    check("--batch pins", p.returncode == 0 and "input %x: f32[3,5]" in p.stdout, p)
    p = run(sym, "--dump-ir", "--input-shape", "x=7,5")
    check("--input-shape pins", p.returncode == 0 and "input %x: f32[7,5]" in p.stdout, p)
    expect_model_error("--input-shape of a non-input", sym, "--dump-ir", "--batch", "1",
                       "--input-shape", "nope=1x2", text="'nope'")
    const_input_errors(tmp)


def const_input_errors(tmp):
    model = os.path.join(tmp, "reshape.onnx")
    reshape_model(model)
    npy = os.path.join(tmp, "shape.npy")
    np.save(npy, np.array([4, 6], np.int64))
    expect_model_error("shape input left unbound", model, "--dump-ir",
                       text="input 'shape' is not a compile-time constant")
    p = run(model, "--dump-ir", "--const-input", "shape=" + npy)
    lines = p.stdout.splitlines()
    check("--const-input makes a constant", p.returncode == 0 and p.stderr == "" and
          "const %shape: i64[2] = [4,6]" in lines and "input %x: f32[2,3,4]" in lines and
          not any(line.startswith("input %shape") for line in lines) and
          any(line.startswith("%r: f32[4,6] = Reshape(") for line in lines), p)
    p = run(model, "--dump-ir", "--const-input=shape=" + npy)
    check("--const-input=NAME=FILE", p.returncode == 0 and "const %shape" in p.stdout, p)

    absent = os.path.join(tmp, "absent.npy")
    expect_model_error("--const-input missing file", model, "--dump-ir",
                       "--const-input", "shape=" + absent,
                       text="--const-input shape=%s: cannot open '%s'" % (absent, absent))
    corrupt = os.path.join(tmp, "corrupt.npy")
    with open(npy, "rb") as f:
        whole = f.read()
    with open(corrupt, "wb") as f:
        f.write(whole[:-3])
    expect_model_error("--const-input truncated .npy", model, "--dump-ir",
                       "--const-input", "shape=" + corrupt,
                       text="the data holds 13 bytes but shape [2] needs 16")
    garbage = os.path.join(tmp, "garbage.pb")
    with open(garbage, "wb") as f:
        f.write(b"\xff" * 32)
    expect_model_error("--const-input corrupt .pb", model, "-o", os.path.join(tmp, "never.c"),
                       "--const-input", "shape=" + garbage,
                       text="is neither a .npy file nor a valid ONNX TensorProto")
    check("a failed --const-input writes nothing", not os.path.exists(os.path.join(tmp, "never.c")))
    expect_model_error("--const-input unknown input", model, "--dump-ir",
                       "--const-input", "shape=" + npy, "--const-input", "nope=" + npy,
                       text="--const-input: 'nope' is not an input of the model")
    wrong = os.path.join(tmp, "wrong.npy")
    np.save(wrong, np.array([4, 6], np.int32))
    expect_model_error("--const-input wrong type", model, "--dump-ir",
                       "--const-input", "shape=" + wrong,
                       text="the file holds i32 data but input 'shape' is declared i64")
    np.save(wrong, np.array([4, 3, 2], np.int64))
    expect_model_error("--const-input wrong shape", model, "--dump-ir",
                       "--const-input", "shape=" + wrong,
                       text="the file holds i64[3] but input 'shape' is declared i64[2]")


def compile_group(tmp):
    model = os.path.join(tmp, "conv.onnx")
    conv_model(model)
    src = os.path.join(tmp, "src")
    os.mkdir(src)
    p = run(model, "-o", os.path.join(src, "net.c"))
    check("-o net.c", p.returncode == 0, p)
    check("-o net.c writes net.c, net.h, net.weights",
          listing(src) == ["net.c", "net.h", "net.weights"], p)

    reports = os.path.join(tmp, "reports")
    os.mkdir(reports)
    p = run(model, "--report", "-o", os.path.join(reports, "cpu.c"), "--target", "cpu")
    check("--report names its device, and for --target cpu says its times are the GPU's",
          p.returncode == 0 and "device: h100 (--device h100)" in p.stdout and
          "--target cpu: these are GPU predictions" in p.stdout, p)
    p = run(model, "--report", "-o", os.path.join(reports, "gpu.c"))
    check("... and for the GPU target names the device alone",
          p.returncode == 0 and "device: h100" in p.stdout and "GPU predictions" not in p.stdout, p)
    report_floor(reports)

    exe_dir = os.path.join(tmp, "exe")
    os.mkdir(exe_dir)
    p = run(model, "-o", os.path.join(exe_dir, "net"), "--target", "cpu")
    check("-o net builds", p.returncode == 0 and os.access(os.path.join(exe_dir, "net"), os.X_OK), p)
    check("-o net keeps its sources",
          listing(exe_dir) == ["net", "net.c", "net.h", "net.weights"], p)

    # The GPU program on the CPU runtime. Under --layout nchw the CPU
    # program keeps ONNX's order and cuDNN's forms: both are the same C,
    # and the same numbers. By default its convolution is its own
    # (opc_conv_nhwc, channels-last, the filter packed at compile time).
    stand_in = os.path.join(tmp, "stand-in")
    os.mkdir(stand_in)
    p = run(model, "-o", os.path.join(stand_in, "net"), "--target", "stand-in")
    check("--target stand-in builds", p.returncode == 0 and
          listing(stand_in) == ["net", "net.c", "net.h", "net.weights"], p)
    nchw_dir = os.path.join(tmp, "cpu-nchw")
    os.mkdir(nchw_dir)
    p = run(model, "-o", os.path.join(nchw_dir, "net"), "--target", "cpu", "--layout", "nchw")
    check("--target cpu --layout nchw builds", p.returncode == 0, p)
    sources, flags, runs = [], [], []
    for d in (nchw_dir, stand_in):
        path = os.path.join(d, "net.c")
        text = open(path).read().replace(d, "DIR") if os.path.exists(path) else ""
        # schedule_info's last field: the CPU program's, which --profile names
        flag = re.search(r"\} schedule_info = \{.*, ([01])\};", text)
        flags.append(flag.group(1) if flag else None)
        # net_run, and the pinned staging buffer only the GPU program's copies through
        run_fn = re.search(r"^int net_run\(.*?^\}\n", text, re.M | re.S)
        runs.append(run_fn.group(0) if run_fn else "")
        text = text.replace(runs[-1], "") if run_fn else text
        text = re.sub(r"^.*staging.*\n(\s*goto fail;\n\s*\}\n)?", "", text, flags=re.M)
        sources.append(text.replace(flag.group(0), "") if flag else None)
    check("... the GPU program, here the CPU program's C under --layout nchw (but for its "
          "weights' path, the target its profile names and net_run)",
          sources[0] is not None and sources[0] == sources[1] and flags == ["1", "0"])
    check("... whose net_run copies through pinned staging memory, and the CPU program's "
          "straight from the caller's buffers",
          "c->staging" in runs[1] and "inputs[0]," in runs[0] and "staging" not in runs[0],
          runs[0] + runs[1])
    cpu_c = open(os.path.join(exe_dir, "net.c")).read() if os.path.exists(
        os.path.join(exe_dir, "net.c")) else ""
    check("... and by default the CPU program's convolution is its own channels-last kernel",
          "kernel.opc_conv_nhwc," in cpu_c and "cudnnConvolutionForward" not in cpu_c)
    outputs = []
    for d, name in ((exe_dir, "cpu"), (nchw_dir, "cpu-nchw"), (stand_in, "stand-in")):
        y_npy, exe = os.path.join(stand_in, f"y-{name}.npy"), os.path.join(d, "net")
        r = os.path.exists(exe) and run_program([exe, "--seed", "3", "--output", "y=" + y_npy])
        outputs.append(np.load(y_npy) if r and r.returncode == 0 else None)
    check("... and computes the CPU program's numbers (the same bits under --layout nchw)",
          all(o is not None for o in outputs) and np.array_equal(outputs[1], outputs[2]))
    check("... within 1e-5 of them in its own form (its sums use fused multiply-adds)",
          all(o is not None for o in outputs) and outputs[0].shape == outputs[2].shape and
          float(np.abs(outputs[0] - outputs[2]).max()) <= 1e-5 * float(np.abs(outputs[2]).max())
          and not np.array_equal(outputs[2], np.zeros_like(outputs[2])))

    # No CUDA toolkit where OPC_CUDA_HOME says: exit 2, saying so, nothing left.
    nocuda = os.path.join(tmp, "nocuda")
    os.mkdir(nocuda)
    p = run(model, "-o", os.path.join(nocuda, "net"),
            env=dict(os.environ, OPC_CUDA_HOME=os.path.join(tmp, "no-toolkit")))
    check("a CUDA build without a toolkit exits 2 naming where it looked",
          p.returncode == 2 and "no CUDA toolkit or CUDA wheels found" in p.stderr and
          "no-toolkit ($OPC_CUDA_HOME)" in p.stderr and p.stderr.count("opc: error") == 1 and
          listing(nocuda) == [], p)

    # A compiler that fails: nothing may be left behind.
    failed = os.path.join(tmp, "failed")
    os.mkdir(failed)
    env = dict(os.environ, CC="false")
    p = run(model, "-o", os.path.join(failed, "net"), "--target", "cpu", env=env)
    check("failed build exits 2", p.returncode == 2 and p.stderr.startswith("opc: error: "), p)
    check("failed build leaves nothing", listing(failed) == [], p)

    const_input_program(tmp)
    pinned_shape_program(tmp)
    empty_batch_program(tmp)
    many_outputs_program(tmp)

    p = run(model, "-o", os.path.join(src, "pre.c"), "--prefix", "mynet")
    header = os.path.join(src, "pre.h")
    check("--prefix renames the API", p.returncode == 0 and os.path.exists(header) and
          "mynet_create" in open(header).read(), p)

    multi_gpu_report(tmp, model)
    hope_program(tmp, model)
    serving_program(tmp, model)
    shared_library(tmp, model, os.path.join(exe_dir, "net"))
    triton_repository(tmp, model)


def report_floor(d):
    """--report's floor, worked out by hand from the H100 device file: two
    chained Relus of 1,024 float32 elements (and a Neg beside them, off the
    critical path) each read and write 8 KiB and do 1,024 operations, so
    each costs max(operations / peak, bytes / bandwidth) plus a launch."""
    path = os.path.join(d, "relus.onnx")
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="a"),
             helper.make_node("Relu", ["a"], ["b"], name="b"),
             helper.make_node("Neg", ["x"], ["c"], name="c")]
    value = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1024])  # noqa: E731
    save(helper.make_model(helper.make_graph(nodes, "floor", [value("x")], [value("b"), value("c")]),
                           opset_imports=[helper.make_opsetid("", 13)]), path)
    devices = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "passes", "devices")
    with open(os.path.join(devices, "h100.json")) as f:
        h100 = json.load(f)
    one = max(1024 / (h100["peak_fp32_tflops"] * 1e6), 8192 / (h100["mem_bandwidth_gbs"] * 1e3))
    floor = 2 * (one + h100["kernel_launch_us"])
    p = run(path, "--report", "-o", os.path.join(d, "relus.c"))
    check("--report's floor is the longest chain's, each kernel at peak or bandwidth plus a launch",
          p.returncode == 0 and f"floor: {floor:.2f} us, the longest chain of 2 kernels" in p.stdout,
          (f"{floor:.2f}", p))


def multi_gpu_report(tmp, model):
    """--gpus N: the placement in --report and --emit-schedule, transfers included."""
    js = os.path.join(tmp, "gpus.json")
    p = run(model, "--gpus", "2", "--report", "--emit-schedule", js, "--link-gbps", "25")
    check("--gpus 2 --report", p.returncode == 0 and "schedule: hios" in p.stdout and
          "transfers:" in p.stdout and "25.0 GB/s" in p.stdout and "placed on 2 GPUs" in p.stdout, p)
    if p.returncode == 0:
        import json
        with open(js) as f:
            s = json.load(f)
        units = [u for st in s["stages"] for g in st["groups"] for u in g["units"]]
        check("--gpus 2: every unit has a GPU", s["devices"] >= 1 and
              all(0 <= u["device"] < 2 for u in units) and "transfers" in s, p)
    exe = os.path.join(tmp, "gpus2")
    p = run(model, "--gpus", "2", "-o", exe, "--target", "cpu")
    check("--gpus 2 builds for the CPU runtime", p.returncode == 0, p)
    if p.returncode == 0:
        r = subprocess.run([exe], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, OPC_DEVICE_COUNT="1"))
        check("a 2-GPU program on a 1-GPU machine says so",
              r.returncode != 0 and "runs on 2 GPUs; the machine has 1" in r.stderr and
              "OPC_GPU_MAP" in r.stderr, r)
        r = subprocess.run([exe], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, OPC_DEVICE_COUNT="1", OPC_GPU_MAP="0,0",
                                    OPC_CHECK="1"))
        check("OPC_GPU_MAP=0,0 runs a 2-GPU program on one", r.returncode == 0, r)
        for bad, says in [("0", "expected 2 CUDA device numbers"), ("0,1", "device 1; the machine has 1"),
                          ("0,x", "expected 2")]:
            r = subprocess.run([exe], capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, OPC_DEVICE_COUNT="1", OPC_GPU_MAP=bad))
            check(f"OPC_GPU_MAP={bad} is refused", r.returncode != 0 and says in r.stderr, r)
        r = subprocess.run([exe], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, OPC_DEVICE_COUNT="2", OPC_CHECK="1"))
        check("a 2-GPU program runs on 2 emulated GPUs", r.returncode == 0, r)
        for f in [exe, exe + ".c", exe + ".h", exe + ".weights"]:
            if os.path.exists(f):
                os.remove(f)


def hope_program(tmp, model):
    """--devices gpu,cpu: the partition in --report and --emit-schedule; a program whose
    operator runs on the CPU, beside the emulated GPU, under the checker."""
    import json
    js = os.path.join(tmp, "hope.json")
    p = run(model, "--devices", "gpu,cpu", "--partition", "cpu", "--report", "--emit-schedule", js)
    check("--devices gpu,cpu --report", p.returncode == 0 and "host link" in p.stdout and
          "HOPE's cpu partition" in p.stdout and "gpu0 -> cpu" in p.stdout, p)
    if p.returncode == 0:
        with open(js) as f:
            s = json.load(f)
        units = [u for st in s["stages"] for g in st["groups"] for u in g["units"]]
        check("--partition cpu: the operator on the CPU, copies to and from it",
              s["hope"]["partition"] == "cpu" and any(u["device"] == 1 and u["op"] != "Identity"
                                                      for u in units) and
              len(s["transfers"]) >= 2, p)
    p = run(model, "--devices", "gpu,cpu", "--report", "--emit-schedule", js)
    ok = p.returncode == 0 and "HOPE's ilp partition" in p.stdout
    if ok:
        with open(js) as f:
            s = json.load(f)
        ok = all(u["device"] == 0 for st in s["stages"] for g in st["groups"] for u in g["units"])
    check("--devices gpu,cpu: the ILP keeps a lone convolution on the H100", ok, p)
    expect_model_error("--cpu-device with a GPU's file", model, "--report", "--devices", "gpu,cpu",
                       "--cpu-device", "h100", text="a GPU's file")
    exe = os.path.join(tmp, "hope")
    p = run(model, "--devices", "gpu,cpu", "--partition", "cpu", "-o", exe, "--target", "cpu")
    check("--devices gpu,cpu builds for the CPU runtime", p.returncode == 0, p)
    if p.returncode == 0:
        src = open(exe + ".c").read()
        check("the CPU's operator calls the prefixed runtime in a host function",
              "cpu_cudnnConvolution" in src and "cudaLaunchHostFunc" in src, p)
        r = subprocess.run([exe], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, OPC_CHECK="1"))
        check("a GPU-and-CPU program runs under the checker", r.returncode == 0, r)
        for f in [exe, exe + ".c", exe + ".h", exe + ".weights"]:
            if os.path.exists(f):
                os.remove(f)
    named = os.path.join(tmp, "api_named.onnx")
    api_named_model(named)
    for partition in ["cpu", "alternate"]:
        p = run(named, "--devices", "gpu,cpu", "--partition", partition, "-o", exe, "--target", "cpu")
        check(f"names like CUDA's on the CPU ({partition}) build", p.returncode == 0, p)
        if p.returncode == 0:
            r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
            check(f"names like CUDA's on the CPU ({partition}) run", r.returncode == 0, r)


# Loads libraries by ctypes in a child process, so that a crash in one is a
# failed check: each argument is LIB=INPUT.npy=OUTPUT.npy. All are loaded
# before any runs, and dlopen's default RTLD_LOCAL keeps their same-named
# net_* symbols apart.
LOAD_AND_RUN = r"""
import ctypes, sys
import numpy as np
libs = []
for arg in sys.argv[1:]:
    path, x, y = arg.split("=")
    libs.append((ctypes.CDLL(path), np.load(x), y))
for lib, x, y in libs:
    lib.net_output_dims.restype = ctypes.POINTER(ctypes.c_longlong)
    dims = [lib.net_output_dims(0)[i] for i in range(lib.net_output_rank(0))]
    out = np.empty(dims, np.float32)
    ctx = ctypes.c_void_p()
    assert lib.net_create(ctypes.byref(ctx), None) == 0
    ins = (ctypes.c_void_p * 1)(np.ascontiguousarray(x).ctypes.data)
    outs = (ctypes.c_void_p * 1)(out.ctypes.data)
    assert lib.net_run(ctx, ins, outs) == 0
    lib.net_destroy(ctx)
    np.save(y, out)
"""


def sanitizer_env(lib):
    """The sanitizer build's opc links the runtime with ASan, whose library
    must be loaded before Python's own; Python's leaks at exit are not
    opc's."""
    ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    preload = [w for w in ldd.split() if os.path.basename(w).startswith(("libasan.so", "libubsan.so"))]
    if not preload:
        return None
    return dict(os.environ, LD_PRELOAD=" ".join(preload),
                ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")


def shared_library(tmp, model, exe):
    """-o libNAME.so: the generated API and nothing else exported; in one
    process with another model's library, it computes what the executable
    computes."""
    d = os.path.join(tmp, "shared")
    os.mkdir(d)
    lib = os.path.join(d, "libconv.so")
    p = run(model, "-o", lib, "--target", "cpu")
    check("-o libconv.so builds", p.returncode == 0 and
          listing(d) == ["libconv.c", "libconv.h", "libconv.so", "libconv.weights"], p)
    if p.returncode != 0:
        return
    nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True)
    exported = [line.split()[-1] for line in nm.stdout.splitlines()]
    check("the library exports the generated API only",
          nm.returncode == 0 and "net_create" in exported and "net_run" in exported and
          all(name.startswith("net_") for name in exported), nm)

    cuda_lib = os.path.join(d, "cuda", "libconv.so")
    os.mkdir(os.path.dirname(cuda_lib))
    p = run(model, "-o", cuda_lib, "--target", "cuda")
    nm = subprocess.run(["nm", "-D", "--defined-only", cuda_lib], capture_output=True, text=True)
    check("a library for CUDA links against the toolkit and exports the API only",
          p.returncode == 0 and nm.returncode == 0 and "net_run" in nm.stdout and
          all(line.split()[-1].startswith("net_") for line in nm.stdout.splitlines()), p)

    relu_onnx, relu_lib = os.path.join(d, "relu.onnx"), os.path.join(d, "librelu.so")
    relu_model(relu_onnx)
    p = run(relu_onnx, "-o", relu_lib, "--target", "cpu")
    check("a second model's library builds", p.returncode == 0, p)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    r = rng.standard_normal(2).astype(np.float32)
    for name, arr in (("x", x), ("r", r)):
        np.save(os.path.join(d, name + ".npy"), arr)
    e = subprocess.run([exe, "--input", "x=" + os.path.join(d, "x.npy"),
                        "--output", "y=" + os.path.join(d, "exe_y.npy")],
                       capture_output=True, text=True, timeout=60)
    check("the executable runs", e.returncode == 0, e)
    c = subprocess.run([sys.executable, "-c", LOAD_AND_RUN,
                        f"{lib}={d}/x.npy={d}/lib_y.npy", f"{relu_lib}={d}/r.npy={d}/relu_y.npy"],
                       capture_output=True, text=True, timeout=120, env=sanitizer_env(lib))
    check("both libraries load and run in one process", c.returncode == 0, c)
    if c.returncode == 0 and e.returncode == 0:
        check("the library computes what the executable computes",
              np.allclose(np.load(f"{d}/lib_y.npy"), np.load(f"{d}/exe_y.npy"),
                          rtol=1e-5, atol=1e-6))
        check("the second library computes relu",
              np.array_equal(np.load(f"{d}/relu_y.npy"), np.maximum(r, 0)))

    failed = os.path.join(tmp, "shared-failed")
    os.mkdir(failed)
    p = run(model, "-o", os.path.join(failed, "libnet.so"), "--target", "cpu",
            env=dict(os.environ, CC="false"))
    check("a failed library build leaves nothing", p.returncode == 2 and listing(failed) == [], p)


def triton_repository(tmp, model):
    """--emit triton: the layout, config.pbtxt's contents, and nothing left
    behind by a failure. (tests/triton serves it with a real server.)"""
    repo = os.path.join(tmp, "repo")
    p = run(model, "-o", repo, "--emit", "triton", "--target", "cpu", "--model-name", "cnn",
            "--instances", "3")
    check("--emit triton writes a model", p.returncode == 0 and listing(repo) == ["cnn"] and
          listing(os.path.join(repo, "cnn")) == ["1", "config.pbtxt", "libtriton_opc.so"] and
          listing(os.path.join(repo, "cnn", "1")) ==
          ["libnet.c", "libnet.h", "libnet.so", "libnet.weights"], p)
    if p.returncode == 0:
        config = open(os.path.join(repo, "cnn", "config.pbtxt")).read()
        check("config.pbtxt names the model, its tensors, instances and opc's backend",
              'name: "cnn"' in config and 'name: "x"' in config and "TYPE_FP32" in config and
              "dims: [ 1, 3, 8, 8 ]" in config and "count: 3" in config and
              "KIND_CPU" in config and 'backend: "opc"' in config and
              "max_batch_size: 0" in config, config)
    p = run(model, "-o", repo, "--emit", "triton", "--target", "cpu", "--model-name", "py",
            "--triton-backend", "python")
    check("--triton-backend python writes model.py", p.returncode == 0 and
          listing(os.path.join(repo, "py")) == ["1", "config.pbtxt"] and
          listing(os.path.join(repo, "py", "1")) ==
          ["libnet.c", "libnet.h", "libnet.so", "libnet.weights", "model.py"] and
          'backend: "python"' in open(os.path.join(repo, "py", "config.pbtxt")).read(), p)
    triton_batching(tmp, model, repo)
    p = run(model, "-o", repo, "--emit", "triton", "--model-name", "gpu")
    check("--emit triton for cuda asks for GPU instances", p.returncode == 0 and
          "KIND_GPU" in open(os.path.join(repo, "gpu", "config.pbtxt")).read(), p)
    failed = os.path.join(tmp, "repo-failed")
    p = run(model, "-o", failed, "--emit", "triton", "--target", "cpu",
            env=dict(os.environ, CC="false"))
    check("a failed Triton build leaves nothing", p.returncode == 2 and not os.path.exists(failed), p)
    p = run(model, "-o", repo, "--emit", "triton", "--target", "cpu", "--model-name", "other",
            env=dict(os.environ, CC="false"))
    check("... nor a model of its own in an existing repository",
          p.returncode == 2 and listing(repo) == ["batched", "cnn", "gpu", "py"], p)


def triton_batching(tmp, model, repo):
    """--max-batch: a program per batch size with the weights shared; a
    model whose batch cannot be rebound is refused, leaving nothing."""
    p = run(model, "-o", repo, "--emit", "triton", "--target", "cpu", "--model-name", "batched",
            "--max-batch", "1,3,8")
    version = os.path.join(repo, "batched", "1")
    check("--max-batch 1,3,8 writes a program per batch size sharing one weights file",
          p.returncode == 0 and listing(version) ==
          sorted([f"libnet_b{b}.{e}" for b in (1, 3, 8) for e in ("c", "h", "so")] +
                 ["libnet_b1.weights"]), p)
    if p.returncode == 0:
        config = open(os.path.join(repo, "batched", "config.pbtxt")).read()
        check("its config turns dynamic batching on, with dims less the batch",
              "max_batch_size: 8" in config and "dynamic_batching" in config and
              "dims: [ 3, 8, 8 ]" in config and "dims: [ 4, 8, 8 ]" in config, config)
        header = open(os.path.join(version, "libnet_b3.h")).read()
        check("the batch-3 program takes 3 rows", "x: float32 [3, 3, 8, 8]" in header, header)
    # A Reshape to a constant shape of one row: batch 2 cannot be compiled.
    fixed = os.path.join(tmp, "fixed_batch.onnx")
    shape = numpy_helper.from_array(np.array([1, 12], np.int64), "shape")
    save(helper.make_model(helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="flatten")], "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])], [shape]),
        opset_imports=[helper.make_opsetid("", 14)]), fixed)
    refused = os.path.join(tmp, "repo-fixed")
    p = expect_model_error("a model whose batch is fixed is refused by --max-batch", fixed, "-o",
                           refused, "--emit", "triton", "--target", "cpu", "--max-batch", "2",
                           text="cannot be compiled for batch 2 with the first dimension of "
                                "every input rebound")
    check("... leaving nothing", not os.path.exists(refused), p)
    # Output rows that do not follow the input's: a ReduceSum over the batch.
    summed = os.path.join(tmp, "summed.onnx")
    save(helper.make_model(helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["y"], name="sum", keepdims=1)], "summed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])]),
        opset_imports=[helper.make_opsetid("", 13)]), summed)
    expect_model_error("an output whose rows are not the batch's is refused", summed, "-o",
                       refused, "--emit", "triton", "--target", "cpu", "--max-batch", "2",
                       text="output 'y' is not; --max-batch needs outputs whose first "
                            "dimension is the batch")


def serving_program(tmp, model):
    """Several models (here one model twice, by two names): a weights file
    each; --arrivals chooses; a failed build leaves nothing."""
    d = os.path.join(tmp, "serve")
    os.mkdir(d)
    p = run("a=" + model, "b=" + model, "--instances", "a=2", "-o", os.path.join(d, "serve.c"),
            "--dump-after", "schedule")
    check("two models make a serving program",
          p.returncode == 0 and listing(d) == ["serve.a.weights", "serve.b.weights", "serve.c",
                                               "serve.h"], p)
    check("its graph lists the models and each node's copy",
          'model "a" path' in p.stdout and ".instance=2" in p.stdout, p)
    p = run("a=" + model, "b=" + model, "--arrivals", "a=100,b=50/s", "--latency-bound", "20",
            "--report", "-o", os.path.join(d, "plan.c"))
    check("--arrivals chooses and reports",
          p.returncode == 0 and "chosen: a=" in p.stdout and "independent contexts" in p.stdout and
          "opc chose them" in open(os.path.join(d, "plan.h")).read(), p)
    failed = os.path.join(tmp, "serve-failed")
    os.mkdir(failed)
    p = run("a=" + model, "b=" + model, "-o", os.path.join(failed, "serve"), "--target", "cpu",
            env=dict(os.environ, CC="false"))
    check("a failed serving build leaves nothing", p.returncode == 2 and listing(failed) == [], p)


def const_input_program(tmp):
    """A bound input is gone from the program; the result is numpy's."""
    model = os.path.join(tmp, "reshape.onnx")
    reshape_model(model)
    d = os.path.join(tmp, "bound")
    os.mkdir(d)
    shape_pb = os.path.join(d, "shape.pb")
    write_pb(shape_pb, np.array([4, 6], np.int64), "shape")
    exe = os.path.join(d, "net")
    p = run(model, "-o", exe, "--target", "cpu", "--const-input", "shape=" + shape_pb)
    check("--const-input program builds", p.returncode == 0 and os.access(exe, os.X_OK), p)
    if p.returncode != 0:
        return
    source = open(exe + ".c").read()
    check("the bound input is not among the program's inputs",
          '"x"' in source and '"shape"' not in source)
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    x_pb, y_npy = os.path.join(d, "x.pb"), os.path.join(d, "y.npy")
    write_pb(x_pb, x, "x")
    r = subprocess.run([exe, "--input", "x=" + x_pb, "--output", "y=" + y_npy],
                       capture_output=True, text=True, timeout=60)
    ok = r.returncode == 0 and os.path.exists(y_npy)
    check("--const-input program runs", ok, r)
    if ok:
        y = np.load(y_npy)
        check("--const-input program computes relu(reshape(x))", y.shape == (4, 6) and
              np.array_equal(y, np.maximum(x.reshape(4, 6), 0)))
    r = subprocess.run([exe, "--input", "x=" + x_pb, "--input", "shape=" + shape_pb],
                       capture_output=True, text=True, timeout=60)
    check("the program refuses the bound input", r.returncode != 0, r)


def pinned_shape_model(path):
    """Reshape and Unsqueeze whose shape and axes are graph inputs, pinned by
    the declared shapes of r (value_info) and y (the graph output)."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
             helper.make_node("Unsqueeze", ["r", "axes"], ["y"], name="unsqueeze")]
    graph = helper.make_graph(
        nodes, "pinned", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                          helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
                          helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1, 6])],
        value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, [4, 6])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)


def pinned_shape_program(tmp):
    """Shape inputs given at run time, pinned by declared shapes: a value
    that makes those shapes runs and matches ONNX Runtime, another fails
    naming the node, its operator and the input, and writes nothing."""
    import onnxruntime as ort  # the oracle
    d = os.path.join(tmp, "pinned")
    os.mkdir(d)
    model = os.path.join(d, "pinned.onnx")
    pinned_shape_model(model)
    exe = os.path.join(d, "net")
    p = run(model, "-o", exe, "--target", "cpu")
    check("a shape input pinned by its output's declared shape compiles", p.returncode == 0, p)
    if p.returncode != 0:
        return
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    files = {"x": x}
    for name, arr in files.items():
        write_pb(os.path.join(d, name + ".pb"), arr, name)

    def net(shape, axes):
        write_pb(os.path.join(d, "shape.pb"), np.array(shape, np.int64), "shape")
        write_pb(os.path.join(d, "axes.pb"), np.array(axes, np.int64), "axes")
        y = os.path.join(d, "y.npy")
        if os.path.exists(y):
            os.remove(y)
        args = [w for n in ("x", "shape", "axes")
                for w in ("--input", "%s=%s" % (n, os.path.join(d, n + ".pb")))]
        r = subprocess.run([exe, *args, "--output", "y=" + y],
                           capture_output=True, text=True, timeout=60)
        return r, np.load(y) if os.path.exists(y) else None

    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for shape, axes in (([4, 6], [1]), ([-1, 6], [-2]), ([4, -1], [1])):
        r, y = net(shape, axes)
        want = sess.run(None, {"x": x, "shape": np.array(shape, np.int64),
                               "axes": np.array(axes, np.int64)})[0]
        check("pinned shape %s axes %s runs and matches ONNX Runtime" % (shape, axes),
              r.returncode == 0 and y is not None and y.shape == want.shape and
              np.array_equal(y, want), r)
    r, y = net([6, 4], [1])
    check("a shape that makes another shape fails naming node, operator and input",
          r.returncode != 0 and y is None and
          "node 'reshape' (Reshape): input 'shape' is [6, 4], which makes output shape [6, 4], "
          "but this program was compiled for [4, 6] (the declared shape of value 'r')" in r.stderr, r)
    r, y = net([4, 6], [0])
    check("axes that insert elsewhere fail the same way",
          r.returncode != 0 and y is None and
          "node 'unsqueeze' (Unsqueeze): input 'axes' is [0], which makes output shape "
          "[1, 4, 6], but this program was compiled for [4, 1, 6]" in r.stderr, r)
    r, y = net([4, 6], [3])
    check("axes out of range fail", r.returncode != 0 and y is None and
          "input 'axes' is [3], which Unsqueeze does not take here" in r.stderr, r)
    pinned_run_device(d, exe + ".c")

    # A declared shape that no value makes: the input is still to be bound.
    bad = os.path.join(d, "expand.onnx")
    save(helper.make_model(helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")], "expand",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 6])]),
        opset_imports=[helper.make_opsetid("", 13)]), bad)
    expect_model_error("a declared shape that the input cannot make", bad, "--dump-ir",
                       text="node 'expand' (Expand): input 'shape' is not a compile-time "
                       "constant, and the value opc derived from the declared shape of output "
                       "'y' does not make that shape (bind it with --const-input)")


# net_run_device over device buffers (the CPU runtime's): a consistent
# shape runs, another fails with the message, as net_run does.
PINNED_DRIVER = r"""
#include <stdio.h>
#include <cuda_runtime.h>
#include "net.h"
int main(void) {
  net_ctx *c;
  if (net_create(&c, NULL) != 0)
    return 1;
  float x[24], y[24];
  long long shapes[2][2] = {{-1, 6}, {6, 4}}, axes = -2;
  void *dx, *ds, *da, *dy;
  for (int i = 0; i < 24; i++)
    x[i] = (float)i;
  cudaMalloc(&dx, sizeof x); cudaMalloc(&ds, 16); cudaMalloc(&da, 8); cudaMalloc(&dy, sizeof y);
  cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
  cudaMemcpy(da, &axes, 8, cudaMemcpyHostToDevice);
  for (int k = 0; k < 2; k++) {
    const void *in[3] = {dx, ds, da};
    void *out[1] = {dy};
    cudaMemcpy(ds, shapes[k], 16, cudaMemcpyHostToDevice);
    int rc = net_run_device(c, in, out, 0);
    cudaStreamSynchronize(0);
    cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost);
    printf("%d %g %s\n", rc, rc ? 0.0 : (double)y[23], rc ? net_error(c) : "ok");
  }
  net_destroy(c);
  return 0;
}
"""


def pinned_run_device(d, net_c):
    driver = os.path.join(d, "driver.c")
    with open(driver, "w") as f:
        f.write(PINNED_DRIVER)
    flags = run("--cflags", "cpu").stdout.split() + ["-DOPC_NO_MAIN", "-I", d]
    exe = os.path.join(d, "driver")
    b = subprocess.run(os.environ.get("CC", "cc").split() + ["-O1", *flags, net_c, driver,
                       *run("--libs", "cpu").stdout.split(), "-o", exe],
                       capture_output=True, text=True, timeout=120)
    check("a driver of net_run_device builds", b.returncode == 0, b)
    if b.returncode != 0:
        return
    r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    check("net_run_device runs a consistent shape and refuses another",
          r.returncode == 0 and len(lines) == 2 and lines[0] == "0 23 ok" and
          lines[1].startswith("-1 0 node 'reshape' (Reshape): input 'shape' is [6, 4], which "
                              "makes output shape [6, 4]"), r)


def empty_batch_program(tmp):
    """A batch of 0 (a flipped bit in a declared dimension): every node's
    output is empty, so nothing runs; the program once failed in cuDNN's
    tensor descriptor (which refuses a zero dimension)."""
    model = os.path.join(tmp, "conv0.onnx")
    conv_model(model, batch=0)
    d = os.path.join(tmp, "empty")
    os.mkdir(d)
    exe = os.path.join(d, "net")
    p = run(model, "-o", exe, "--target", "cpu")
    check("a batch-0 program builds", p.returncode == 0, p)
    if p.returncode != 0:
        return
    x_npy, y_npy = os.path.join(d, "x.npy"), os.path.join(d, "y.npy")
    np.save(x_npy, np.zeros((0, 3, 8, 8), np.float32))
    r = subprocess.run([exe, "--input", "x=" + x_npy, "--output", "y=" + y_npy],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, OPC_CHECK="1"))
    ok = r.returncode == 0 and os.path.exists(y_npy)
    check("a batch-0 program runs", ok, r)
    if ok:
        y = np.load(y_npy)
        check("a batch-0 program returns an empty [0,4,8,8]", y.shape == (0, 4, 8, 8) and
              y.dtype == np.float32)


def many_outputs_program(tmp):
    """The ready-made main of a model with more inputs and outputs than the
    64 it once had room for (a detector's heads, or intermediate tensors
    kept for debugging): 70 inputs x_k and 70 outputs y_k = x_k * (k + 1),
    every one given by file and checked exactly."""
    count = 70
    nodes, inputs, outputs, inits = [], [], [], []
    for k in range(count):
        inits.append(numpy_helper.from_array(np.array([k + 1], np.float32), "s%d" % k))
        nodes.append(helper.make_node("Mul", ["x%d" % k, "s%d" % k], ["y%d" % k],
                                      name="scale_%d" % k))
        inputs.append(helper.make_tensor_value_info("x%d" % k, TensorProto.FLOAT, [3]))
        outputs.append(helper.make_tensor_value_info("y%d" % k, TensorProto.FLOAT, [3]))
    model = os.path.join(tmp, "many.onnx")
    save(helper.make_model(helper.make_graph(nodes, "many", inputs, outputs, inits),
                           opset_imports=[helper.make_opsetid("", 13)]), model)
    d = os.path.join(tmp, "many")
    os.mkdir(d)
    exe = os.path.join(d, "net")
    p = run(model, "-o", exe, "--target", "cpu")
    check("a program of 70 inputs and 70 outputs builds", p.returncode == 0, p)
    if p.returncode != 0:
        return
    args = [exe]
    for k in range(count):
        np.save(os.path.join(d, "x%d.npy" % k), np.array([k, -1.5, 0.25], np.float32))
        args += ["--input", "x%d=%s" % (k, os.path.join(d, "x%d.npy" % k)),
                 "--output", "y%d=%s" % (k, os.path.join(d, "y%d.npy" % k))]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    check("its main takes 70 --input and 70 --output files", r.returncode == 0, r)
    if r.returncode != 0:
        return
    bad = [k for k in range(count) if not np.array_equal(
        np.load(os.path.join(d, "y%d.npy" % k)),
        np.array([k, -1.5, 0.25], np.float32) * np.float32(k + 1))]
    check("all 70 outputs are the inputs scaled", not bad, None)


# ------------------------------------------------------------ limits

def one_node_model(path, node, inputs, initializers=(), opset=13):
    graph = helper.make_graph(
        [node], "limits", inputs,
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)],
        list(initializers))
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)


def expand_model(path, dims):
    shape = numpy_helper.from_array(np.array(dims, np.int64), "shape")
    one_node_model(path, helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_1"),
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1] * len(dims))],
                   [shape])


def constant_of_shape_model(path, dims):
    """ConstantOfShape of a constant shape: it folds, or runs where too big."""
    shape = numpy_helper.from_array(np.array(dims, np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill"),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "limits", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [shape])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def relu_model(path, node_name="relu", tensor_name="y"):
    nodes = [helper.make_node("Relu", ["x"], [tensor_name], name=node_name),
             helper.make_node("Relu", [tensor_name], ["z"], name="relu_2")]
    graph = helper.make_graph(
        nodes, "limits", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def matmul_model(path):
    """x f32[1024,512] @ w f32[512,1024]: 2 MiB of weights, 4 MiB per activation."""
    w = numpy_helper.from_array(np.ones((512, 1024), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Relu", ["m"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "limits", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024, 1024])], [w])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7f) | (0x80 if n > 0x7f else 0))
        n >>= 7
        if not n:
            return bytes(out)


def many_nodes_model(path, count):
    """`count` Relu nodes, written as protobuf directly: the onnx helpers
    would take minutes. A repeated field is its entries back to back."""
    relu = helper.make_node("Relu", ["x"], ["y"], name="r")
    graph = helper.make_graph(
        [], "many", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    node = relu.SerializeToString()
    node_field = b"\x0a" + varint(len(node)) + node  # GraphProto.node = 1
    graph_bytes = node_field * count + graph.SerializeToString()
    model = helper.make_model(helper.make_graph([], "x", [], []),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model.ClearField("graph")
    with open(path, "wb") as f:  # ModelProto.graph = 7
        f.write(model.SerializeToString() + b"\x3a" + varint(len(graph_bytes)) + graph_bytes)


def expect_limit(name, out, model, *args, text, errors=1):
    """Exit 2, each problem reported once, nothing written (-o OUT.c and -o OUT)."""
    for target in ["net.c", "net"]:
        p = expect_model_error(f"{name} (-o {target})", model, "-o", os.path.join(out, target),
                               *args, text=text)
        check(f"{name}: {errors} message(s)", p.stderr.count("opc: error: ") == errors, p)
        check(f"{name}: writes nothing", listing(out) == [], p)


def limits_group(tmp):
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    m = os.path.join(tmp, "m.onnx")

    expand_model(m, [1 << 21, 1 << 21])
    expect_limit("Expand to 2^42 elements", out, m,
                 text=f"opc: error: {m}: node 'expand_1' (Expand): output 'y' has "
                 "4398046511104 elements, over the limit of 2147483647 elements per tensor")
    expand_model(m, [1 << 31] * 4)  # 2^124 elements: the product must not wrap
    expect_limit("Expand past int64", out, m,
                 text="node 'expand_1' (Expand): output 'y' of shape [2147483648,2147483648,"
                 "2147483648,2147483648] has more than 2^63 elements, over the limit of "
                 "2147483647 elements per tensor")
    expand_model(m, [1 << 16, 1 << 16, 0])  # empty, however large the other dims
    p = run(m, "--dump-ir")
    check("an empty Expand is fine", p.returncode == 0, p)

    constant_of_shape_model(m, [1 << 20, 1 << 20])
    expect_limit("ConstantOfShape to 2^40 elements", out, m,
                 text="node 'fill' (ConstantOfShape): output 'c' has 1099511627776 elements, "
                 "over the limit of 2147483647 elements per tensor")
    # ConstantOfShape has a kernel (a fill): too big to fold, it runs.
    constant_of_shape_model(m, [1 << 14, 1 << 14])
    p = run(m, "--dump-ir")
    check("ConstantOfShape too big to fold runs instead", p.returncode == 0 and
          "= ConstantOfShape(" in p.stdout and "f32[16384,16384]" in p.stdout, p)

    # uint16 has run-time storage now: an Expand too big to fold stays a
    # node that runs, as for float32 (the fold limit applies to the kinds
    # that run only at compile time).
    c = numpy_helper.from_array(np.ones(1, np.uint16), "c")
    shape = numpy_helper.from_array(np.array([1 << 27], np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Expand", ["c", "shape"], ["e"], name="expand_u16"),
         helper.make_node("Cast", ["e"], ["y"], name="cast", to=TensorProto.FLOAT)],
        "limits", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [c, shape])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), m)
    p = run(m, "--dump-ir")
    check("uint16 Expand too big to fold runs instead", p.returncode == 0 and
          "= Expand(" in p.stdout and "u16[134217728]" in p.stdout, p)

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "limits",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1 << 20, 1 << 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), m)
    expect_limit("graph input over the limit", out, m,
                 text="input 'x' has 1099511627776 elements, over the limit of 2147483647")
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20])
    w.raw_data = b""
    one_node_model(m, helper.make_node("Add", ["x", "w"], ["y"], name="add"),
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], [w])
    expect_limit("initializer over the limit", out, m,
                 text="initializer 'w' has 1099511627776 elements, over the limit")

    relu_model(m, node_name="n" * 5000)
    expect_limit("long node name", out, m,
                     text="the name of node 0 is 5000 bytes long ('nnnnnnnnnnnnnnnn")
    p = run(m, "--dump-ir")
    check("long node name: the message is short",
          "over the limit of 4096 bytes per name" in p.stderr and len(p.stderr) < 400, p)
    relu_model(m, tensor_name="t" * 4097)
    expect_limit("long tensor name", out, m,
                 text="an output name of node 0 is 4097 bytes long")
    relu_model(m, tensor_name="t" * 4096)
    p = run(m, "--dump-ir")
    check("a name of 4096 bytes is fine", p.returncode == 0, p)

    many_nodes_model(m, 1000001)
    expect_limit("too many nodes", out, m,
                 text="the graph has 1000001 nodes, over the limit of 1000000 nodes")

    matmul_model(m)
    expect_limit("program over --max-memory", out, m, "--max-memory", "4M",
                 text=f"opc: error: {m}: the program needs 12582912 bytes of device memory "
                 "(activations 10485760, weights 2097152), over the limit of 4194304 bytes "
                 "(--max-memory); the largest: activation 'm' 4194304 bytes, activation 'y' "
                 "4194304 bytes, weight 'w' 2097152 bytes")
    # Two tensors over: the importer reports both, once each.
    expect_limit("tensor over --max-memory", out, m, "--max-memory=1M", errors=2,
                 text="initializer 'w' has 2097152 bytes (524288 elements of f32), over the "
                 "limit of 1048576 bytes per tensor (--max-memory)\nopc: error: " + m +
                 ": input 'x' has 2097152 bytes")
    p = run(m, "-o", os.path.join(out, "net.c"), "--max-memory", "12M")
    check("a program within --max-memory compiles", p.returncode == 0 and
          listing(out) == ["net.c", "net.h", "net.weights"], p)

# ------------------------------------------------------------ names

# File names the ONNX Model Zoo and users give, with the name opc makes from
# each where it needs one: runs of other characters than ASCII letters,
# digits and '_' become one '_' (none at either end), '_' goes before a
# leading digit, and nothing left is "model".
ODD_NAMES = {
    "squeezenet1.1-7.onnx": "squeezenet1_1_7",
    "my model.onnx": "my_model",
    "2nets.onnx": "_2nets",
    "123.onnx": "_123",
    "modèle.onnx": "mod_le",
    "模型.onnx": "model",
    ".onnx": "model",
    "a=b.onnx": "a_b",
    " (v2) .onnx": "v2",
}


def conv_reference(model, x):
    import onnxruntime as ort  # the oracle, needed by this group only
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def close_to(got, want):
    return (got.shape == want.shape and not np.isnan(want).any() and
            np.allclose(got, want, rtol=1e-5, atol=1e-5))


def run_program(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=120)


def names_group(tmp):
    models = os.path.join(tmp, "models")
    os.mkdir(models)
    conv = os.path.join(models, "conv.onnx")
    conv_model(conv)
    x = np.random.default_rng(7).standard_normal((1, 3, 8, 8)).astype(np.float32)
    x_npy = os.path.join(tmp, "x.npy")
    np.save(x_npy, x)
    want = conv_reference(conv, x)
    paths = {}
    for file_name in ODD_NAMES:
        paths[file_name] = os.path.join(models, file_name)
        shutil.copy(conv, paths[file_name])

    # One model needs no name: every output kind, whatever the file is called.
    for k, (file_name, path) in enumerate(paths.items()):
        p = run(path, "--dump-ir")
        check(f"{file_name!r}: --dump-ir", p.returncode == 0 and "input %x: f32[1,3,8,8]" in p.stdout, p)
        d = os.path.join(tmp, f"single{k}")
        os.mkdir(d)
        p = run(path, "-o", os.path.join(d, "net.c"))
        check(f"{file_name!r}: -o net.c", p.returncode == 0 and
              listing(d) == ["net.c", "net.h", "net.weights"], p)
        exe = os.path.join(d, "net")
        p = run(path, "-o", exe, "--target", "cpu")
        check(f"{file_name!r}: -o net builds", p.returncode == 0 and os.access(exe, os.X_OK), p)
        if p.returncode != 0:
            continue
        y_npy = os.path.join(d, "y.npy")
        r = run_program([exe, "--input", "x=" + x_npy, "--output", "y=" + y_npy])
        check(f"{file_name!r}: the executable computes the model",
              r.returncode == 0 and close_to(np.load(y_npy), want), r)

    # A shared library of such a file, loaded and run.
    odd = paths["squeezenet1.1-7.onnx"]
    d = os.path.join(tmp, "shared lib")
    os.mkdir(d)
    lib = os.path.join(d, "libsq.so")
    p = run(odd, "-o", lib, "--target", "cpu")
    check("a library of squeezenet1.1-7.onnx builds", p.returncode == 0 and
          listing(d) == ["libsq.c", "libsq.h", "libsq.so", "libsq.weights"], p)
    if p.returncode == 0:
        y_npy = os.path.join(d, "y.npy")
        c = subprocess.run([sys.executable, "-c", LOAD_AND_RUN, f"{lib}={x_npy}={y_npy}"],
                           capture_output=True, text=True, timeout=120, env=sanitizer_env(lib))
        check("the library computes the model", c.returncode == 0 and
              close_to(np.load(y_npy), want), c)

    # Each file's name where one is needed: a one-model serving program
    # (--instances NAME=1) accepts that name and writes OUT.NAME.weights.
    for k, (file_name, name) in enumerate(ODD_NAMES.items()):
        d = os.path.join(tmp, f"named{k}")
        os.mkdir(d)
        p = run(paths[file_name], "--instances", f"{name}=1", "-o", os.path.join(d, "s.c"))
        check(f"{file_name!r} is named {name}", p.returncode == 0 and
              listing(d) == sorted([f"s.{name}.weights", "s.c", "s.h"]), p)

    # Triton: the made name is the directory's and config.pbtxt's; an
    # explicit name may hold '-'.
    repo = os.path.join(tmp, "repo")
    p = run(odd, paths["模型.onnx"], "conv-1=" + conv, "-o", repo, "--emit", "triton",
            "--target", "cpu")
    check("--emit triton of odd file names", p.returncode == 0 and
          listing(repo) == ["conv-1", "model", "squeezenet1_1_7"], p)
    for name in ["conv-1", "model", "squeezenet1_1_7"] if p.returncode == 0 else []:
        check(f"Triton model {name}: config and library",
              f'name: "{name}"\n' in open(os.path.join(repo, name, "config.pbtxt")).read() and
              "libnet.so" in listing(os.path.join(repo, name, "1")))

    # A serving program of two such files, and one named with '-': each
    # model answers its own requests.
    relu = os.path.join(models, "1 relu.v2.onnx")
    relu_model(relu)
    r = np.array([-1.5, 2.25], np.float32)
    r_npy = os.path.join(tmp, "r.npy")
    np.save(r_npy, r)
    d = os.path.join(tmp, "serve")
    os.mkdir(d)
    serve = os.path.join(d, "serve")
    p = run(relu, paths["modèle.onnx"], "my-conv=" + conv, "--instances", "_1_relu_v2=2",
            "-o", serve, "--target", "cpu")
    check("a serving program of odd file names builds", p.returncode == 0 and
          listing(d) == sorted(["serve", "serve._1_relu_v2.weights", "serve.c", "serve.h",
                                "serve.mod_le.weights", "serve.my-conv.weights"]), p)
    if p.returncode == 0:
        out = os.path.join(tmp, "serve-out")
        os.mkdir(out)
        e = run_program([serve, "--input", "_1_relu_v2:x=" + r_npy, "--input", "mod_le:x=" + x_npy,
                         "--input", "my-conv:x=" + x_npy, "--output-dir", out])
        ok = e.returncode == 0
        check("the serving program runs", ok, e)
        if ok:
            check("its _1_relu_v2 computes relu",
                  np.array_equal(np.load(os.path.join(out, "_1_relu_v2-0-output-0.npy")),
                                 np.maximum(r, 0)))
            for name in ["mod_le", "my-conv"]:
                check(f"its {name} computes the conv",
                      close_to(np.load(os.path.join(out, f"{name}-0-output-0.npy")), want))
    p = run(paths["2nets.onnx"], paths["123.onnx"], "--arrivals", "_2nets=100,_123=50",
            "-o", os.path.join(tmp, "plan.c"))
    check("--arrivals takes the made names", p.returncode == 0, p)
    p = run(paths["2nets.onnx"], paths["123.onnx"], "--instances", "2nets=2",
            "-o", os.path.join(tmp, "plan.c"))
    check("--instances with a file's stem lists the models' names", p.returncode == 1 and
          "(the models: _2nets and _123)" in p.stderr, p)

    # The same for a tensor: "_1y" is no C name once its '_' is dropped.
    d = os.path.join(tmp, "tensor")
    os.mkdir(d)
    underscored = os.path.join(models, "underscored.onnx")
    relu_model(underscored, node_name="_2n", tensor_name="_1y")
    exe = os.path.join(d, "net")
    p = run(underscored, "-o", exe, "--target", "cpu")
    check("a tensor named _1y builds", p.returncode == 0, p)
    if p.returncode == 0:
        y_npy = os.path.join(d, "z.npy")
        e = run_program([exe, "--input", "x=" + r_npy, "--output", "z=" + y_npy])
        check("... and computes relu", e.returncode == 0 and
              np.array_equal(np.load(y_npy), np.maximum(r, 0)), e)

    # Tensors named like the context's own members (its staging buffer, its
    # trace events, the CPU's and the GPUs' fields, the run's output dims)
    # are renamed, not declared twice: on the GPU alone and split with the CPU.
    members = ["staging", "done", "trace", "gpu", "gpu_arena", "cpu_arena", "cpu_error",
               "cpu_failed", "cpu_node", "cpu_stream", "cpu_weights", "output_dims", "io"]
    chain = [helper.make_node("Relu", [a], [b]) for a, b in zip(["x"] + members, members)]
    graph = helper.make_graph(chain, "members", [helper.make_tensor_value_info("x", 1, [2])],
                              [helper.make_tensor_value_info(n, 1, [2]) for n in members])
    named = os.path.join(models, "members.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), named)
    for extra in [[], ["--devices", "gpu,cpu", "--partition", "alternate"]]:
        exe = os.path.join(d, "members")
        p = run(named, "-o", exe, "--target", "cpu", *extra)
        ok = p.returncode == 0
        check(f"tensors named like the context's members build {extra}", ok, p)
        if ok:
            y_npy = os.path.join(d, "members.npy")
            e = run_program([exe, "--input", "x=" + r_npy, "--output", "trace=" + y_npy])
            check("... and compute relu", e.returncode == 0 and
                  np.array_equal(np.load(y_npy), np.maximum(r, 0)), e)

    # Two files of one made name: an error that says how to name them.
    clash = os.path.join(tmp, "clash")
    os.mkdir(clash)
    other = os.path.join(models, "squeezenet1_1-7.onnx")
    shutil.copy(conv, other)
    p = run(odd, other, "-o", os.path.join(clash, "s.c"))
    check("two files of one made name are refused", p.returncode == 1 and
          p.stderr.startswith("opc: error: two models are named 'squeezenet1_1_7' (") and
          "name them with NAME=FILE" in p.stderr and listing(clash) == [], p)
    p = run(paths["模型.onnx"], paths[".onnx"], "--emit", "triton", "-o", os.path.join(clash, "repo"))
    check("... for Triton too", p.returncode == 1 and "two models are named 'model'" in p.stderr and
          listing(clash) == [], p)
    p = run(odd, "sq2=" + other, "-o", os.path.join(clash, "s.c"))
    check("NAME=FILE tells them apart", p.returncode == 0 and
          listing(clash) == sorted(["s.c", "s.h", "s.sq2.weights", "s.squeezenet1_1_7.weights"]), p)
    # A name given is checked as before.
    p = run("bad.name=" + conv, "-o", os.path.join(tmp, "bad.c"))
    check("a given name with a dot is refused", p.returncode == 1 and
          "a model's name must be letters, digits, '_' and '-'" in p.stderr, p)
    p = run(conv, "--emit", "triton", "--model-name", "a b", "-o", os.path.join(tmp, "bad"))
    check("--model-name with a space is refused", p.returncode == 1 and
          "--model-name: 'a b' must be" in p.stderr, p)


def cache_group(tmp):
    """opc builds a program's main once per compiler words and prefix into
    its cache and links it with each model's file: the same outputs as main
    compiled with the model, one object per key, reused, and really linked."""
    model = os.path.join(tmp, "conv.onnx")
    conv_model(model)
    cache = os.path.join(tmp, "cache")
    x = os.path.join(tmp, "x.npy")
    np.save(x, np.linspace(-1, 1, 3 * 8 * 8, dtype=np.float32).reshape(1, 3, 8, 8))

    def build(name, *extra, **env):
        out = os.path.join(tmp, name)
        p = run(model, "-o", out, "--target", "cpu", *extra,
                env={**os.environ, "OPC_CACHE_DIR": cache, **env})
        return out, p

    def objects():
        return sorted(f for f in os.listdir(cache) if f.endswith(".o")) if os.path.isdir(cache) else []

    def output(exe):
        y = exe + "_y.npy"
        p = subprocess.run([exe, "--input", "x=" + x, "--output", "y=" + y], capture_output=True,
                           text=True, timeout=120)
        return np.load(y) if p.returncode == 0 else None

    alone, p = build("alone", OPC_CACHE_DIR="")
    check("OPC_CACHE_DIR empty: main compiled with the model, no cache",
          p.returncode == 0 and not os.path.exists(cache), p)
    first, p = build("first")
    check("the first build puts one main object in the cache", p.returncode == 0 and
          len(objects()) == 1 and len(os.listdir(cache)) == 2, p)
    emitted = os.path.join(tmp, "main.c")
    q = run("--emit-main", emitted)
    sources = [f for f in os.listdir(cache) if f.endswith(".c")]
    check("the cached source is what --emit-main writes", q.returncode == 0 and len(sources) == 1 and
          open(emitted).read() == open(os.path.join(cache, sources[0])).read(), q)
    a, b = output(alone), output(first)
    check("main apart computes what main with the model does",
          a is not None and b is not None and a.shape == b.shape and np.array_equal(a, b))
    obj = os.path.join(cache, objects()[0]) if objects() else None
    stamp = os.stat(obj).st_mtime_ns if obj else None
    second, p = build("second")
    check("a second program reuses the object", p.returncode == 0 and objects() == [os.path.basename(obj)]
          and os.stat(obj).st_mtime_ns == stamp and np.array_equal(output(second), b), p)
    _, p = build("o1", CFLAGS="-O1")
    check("other compiler flags: an object of their own", p.returncode == 0 and len(objects()) == 2, p)
    _, p = build("prefixed", "--prefix", "other")
    check("another prefix: an object of its own", p.returncode == 0 and len(objects()) == 3, p)
    before = sorted(os.listdir(cache))
    _, p = build("failed", CC="false", CFLAGS="-O3")
    check("a compiler that fails on main: exit 2, a message, the cache as it was",
          p.returncode == 2 and "main" in p.stderr and sorted(os.listdir(cache)) == before, p)
    with open(obj, "wb") as f:
        f.write(b"not an object")
    _, p = build("damaged")
    check("the cached object is what is linked (a damaged one fails the link)", p.returncode == 2, p)
    os.remove(obj)
    again, p = build("again")
    check("a removed object is compiled again", p.returncode == 0 and os.path.exists(obj) and
          np.array_equal(output(again), b), p)
    q = run("--emit-main", os.path.join(tmp, "missing", "main.c"))
    check("--emit-main to a folder that is not there: exit 2 and why",
          q.returncode == 2 and "cannot write" in q.stderr, q)


def main():
    with tempfile.TemporaryDirectory(prefix="opc-cli-") as tmp:
        {"usage": usage_group, "models": models_group, "compile": compile_group,
         "limits": limits_group, "names": names_group, "cache": cache_group}[GROUP](tmp)
    print(f"cli {GROUP}: {checks} checks, {failures} failures")
    return 1 if failures or not checks else 0


if __name__ == "__main__":
    sys.exit(main())
