#!/usr/bin/env python3
"""The Python package against ONNX Runtime.

Usage: test_python.py OPC WORKDIR
Runs the package from the source tree (python/) with OPC_COMPILER=OPC, so
that it needs no install; test_install.py checks `pip install .`.

- zoo models (SqueezeNet 1.1; BERT-tiny, two int64 inputs and two outputs)
  compiled for the CPU runtime match ONNX Runtime, through opc.compile and
  through opc.InferenceSession with ONNX Runtime's own call;
- inputs and outputs describe what ONNX Runtime describes;
- a wrong name, dtype or shape raises before anything runs, and the
  program still runs afterwards; a refused model raises CompileError with
  opc's message and leaves no directory behind;
- command-line options reach opc; serving options are refused;
- threads: several threads run one Program at once and each gets its own
  input's answer;
- two models' programs live in one process.
"""
import glob
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OPC, WORK = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
os.environ["OPC_COMPILER"] = OPC
sys.path.insert(0, str(HERE.parent))
import opc  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "zoo"))
import reference  # noqa: E402

TOL = 1e-4
failures = checks = 0


def check(name, ok, detail=""):
    global failures, checks
    checks += 1
    if not ok:
        failures += 1
        print(f"FAIL {name} {detail}")


def raises(fn, kind, text=""):
    try:
        fn()
    except kind as e:
        return text in str(e)
    except Exception as e:  # noqa: BLE001 - any other kind is a failure
        print(f"  raised {type(e).__name__}: {e}")
        return False
    return False


def rel_l2(ref, got):
    return float(np.linalg.norm((got - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-30))


def zoo_model(name):
    path = WORK / f"{name}.onnx"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "tools/models/build.py"), name, "-o", str(path)],
                       check=True, capture_output=True)
    return path


def natural_feeds(session, draw):
    """The zoo's inputs for the model (tests/zoo/reference.py): photographs
    for an image input, token ids and a padding mask for a text model."""
    props = dict(session.get_modelmeta().custom_metadata_map)
    return reference.draw_inputs(session, props, 1, draw)


def matches_ort(model):
    ref = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = natural_feeds(ref, 0)
    expected = ref.run(None, feeds)
    names = [o.name for o in ref.get_outputs()]

    program = opc.compile(model, target="cpu")
    check(f"{model.stem}: inputs as ONNX Runtime's",
          [(t.name, list(t.shape)) for t in program.inputs] ==
          [(i.name, i.shape) for i in ref.get_inputs()], program.inputs)
    got = program.run(feeds)
    check(f"{model.stem}: outputs named as ONNX Runtime's", list(got) == names, list(got))
    for n, e in zip(names, expected):
        err = rel_l2(e, got[n]) if n in got else None
        check(f"{model.stem}: Program.run output {n} matches ONNX Runtime",
              err is not None and err < TOL and not np.isnan(got[n]).any(), f"rel L2 {err}")

    session = opc.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    check(f"{model.stem}: get_inputs/get_outputs as ONNX Runtime's",
          [(a.name, a.type, a.shape) for a in session.get_inputs() + session.get_outputs()] ==
          [(a.name, a.type, a.shape) for a in ref.get_inputs() + ref.get_outputs()])
    listed = session.run(None, feeds)
    check(f"{model.stem}: InferenceSession.run(None, feeds) as ONNX Runtime's",
          len(listed) == len(expected) and
          all(rel_l2(e, g) < TOL for e, g in zip(expected, listed)))
    last = session.run([names[-1]], feeds)
    check(f"{model.stem}: InferenceSession.run([name], feeds)",
          len(last) == 1 and rel_l2(expected[-1], last[0]) < TOL)
    return program, feeds, expected


def bad_calls(program, feeds):
    name = program.inputs[0].name
    t = program.inputs[0]
    wrong_type = np.float64 if t.dtype == np.float32 else np.float32
    cases = [
        ("an unknown input", dict(feeds, nosuch=feeds[name]), ValueError, "no input named 'nosuch'"),
        ("a missing input", {k: v for k, v in feeds.items() if k != name}, ValueError,
         f"input '{name}' is missing"),
        ("a wrong dtype", dict(feeds, **{name: feeds[name].astype(wrong_type)}), TypeError,
         f"must be {t.dtype.name}"),
        ("a wrong shape", dict(feeds, **{name: feeds[name].reshape(-1)}), ValueError,
         f"must have shape {list(t.shape)}"),
        ("not a dict", [feeds[name]], TypeError, "dict"),
    ]
    for what, bad, kind, text in cases:
        check(f"{what} raises {kind.__name__}", raises(lambda: program.run(bad), kind, text))
    check("the program still runs after refused calls, on one context",
          set(program.run(feeds)) == {o.name for o in program.outputs} and
          len(program._all) == 1)


def refused_model():
    path = WORK / "unsupported.onnx"
    graph = helper.make_graph(
        [helper.make_node("NotAnOp", ["x"], ["y"], name="mystery")], "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "opc-*")))
    check("a refused model raises CompileError naming the node and operator",
          raises(lambda: opc.compile(path, target="cpu"), opc.CompileError, "NotAnOp (node 'mystery')"))
    after = set(glob.glob(os.path.join(tempfile.gettempdir(), "opc-*")))
    check("a refused model leaves no directory behind", after == before, after - before)
    check("a missing file raises FileNotFoundError",
          raises(lambda: opc.compile(WORK / "none.onnx", target="cpu"), FileNotFoundError))
    check("a serving option is refused",
          raises(lambda: opc.compile(path, target="cpu", instances="x=2"), TypeError, "serving"))
    check("an unknown target is refused",
          raises(lambda: opc.compile(path, target="tpu"), ValueError, "target"))


def options(model, feeds, expected):
    out = WORK / "options"
    program = opc.compile(model, target="cpu", schedule="sequential", opt_level=0,
                          input_shape={"input": (1, 3, 224, 224)}, output_dir=out)
    check("options reach opc (an -O0 sequential program)",
          "sequential schedule" in (out / "libnet.c").read_text())
    check("... and it computes the same", rel_l2(expected[0], program.run(feeds)["logits"]) < TOL)
    program.close()
    check("output_dir is kept after close", (out / "libnet.so").exists())
    check("a closed program refuses to run",
          raises(lambda: program.run(feeds), opc.RunError, "closed"))


def cuda_target(model, feeds, expected):
    """The CUDA library builds and loads; it runs where there is a GPU, and
    where there is none, creating the program raises RunError naming the
    CUDA call that failed."""
    try:
        program = opc.compile(model, target="cuda")
    except opc.RunError as e:
        check("target='cuda' without a GPU raises RunError naming the CUDA call and what is "
              "missing", "cuda" in str(e) and opc._cuda_missing() in str(e), e)
        return
    check("target='cuda' matches ONNX Runtime",
          rel_l2(expected[0], program.run(feeds)["logits"]) < TOL)
    program.close()


def defaults(model, feeds, expected):
    """With no target and no providers, the program runs where this machine
    can: the GPU where a driver and a device are present, else the CPU; and
    a library that cannot be loaded is an opc error, not a raw OSError."""
    where = opc.default_target()
    check("default_target() is the CPU exactly when CUDA is missing",
          (where == "cpu") == (opc._cuda_missing() is not None), where)
    program = opc.compile(model)
    check(f"compile() with no target runs ({where}) and matches ONNX Runtime",
          rel_l2(expected[0], program.run(feeds)["logits"]) < TOL)
    program.close()
    session = opc.InferenceSession(str(model))
    check("InferenceSession() with no providers says where it runs",
          session.get_providers() == ["CUDAExecutionProvider" if where == "cuda"
                                      else "CPUExecutionProvider"], session.get_providers())
    check("... and matches ONNX Runtime", rel_l2(expected[0], session.run(None, feeds)[0]) < TOL)
    if where == "cpu":
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fallback = opc.InferenceSession(str(model), providers=["CUDAExecutionProvider"])
        check("a CUDA provider that is not here falls back to the CPU with a warning",
              fallback.get_providers() == ["CPUExecutionProvider"] and
              any("CUDAExecutionProvider" in str(w.message) for w in caught),
              [str(w.message) for w in caught])
    check("a library that cannot be loaded raises RunError naming it",
          raises(lambda: opc.Program(str(WORK / "no-such-library.so")), opc.RunError,
                 "no-such-library.so"))


def threads(program):
    """Each thread's input gives its own answer, whatever runs beside it."""
    name = program.inputs[0].name
    session = ort.InferenceSession(str(zoo_model("squeezenet1_1")),
                                   providers=["CPUExecutionProvider"])
    inputs = [natural_feeds(session, 1 + k)[name] for k in range(4)]
    serial = [program.run({name: x})["logits"] for x in inputs]
    results = [[] for _ in inputs]
    errors = []
    start = threading.Barrier(len(inputs))

    def work(k):
        try:
            start.wait()
            for _ in range(3):
                results[k].append(program.run({name: inputs[k]})["logits"])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("threads: no error", not errors, errors)
    check("threads: each run answers its own input",
          all(len(r) == 3 and all(rel_l2(serial[k], y) < 1e-6 for y in r)
              for k, r in enumerate(results)))
    check("threads: a context per concurrent run, at most one per thread",
          1 <= len(program._all) <= len(inputs), len(program._all))


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    squeezenet, feeds, expected = matches_ort(zoo_model("squeezenet1_1"))
    bert, bert_feeds, bert_expected = matches_ort(zoo_model("bert_tiny"))
    check("two models' programs run in one process",
          rel_l2(expected[0], squeezenet.run(feeds)["logits"]) < TOL and
          rel_l2(bert_expected[1], bert.run(bert_feeds)["pooler_output"]) < TOL)
    bad_calls(squeezenet, feeds)
    bad_calls(bert, bert_feeds)
    refused_model()
    options(zoo_model("squeezenet1_1"), feeds, expected)
    defaults(zoo_model("squeezenet1_1"), feeds, expected)
    threads(squeezenet)
    cuda_target(zoo_model("squeezenet1_1"), feeds, expected)
    print(f"python: {checks} checks, {failures} failures")
    return 1 if failures or not checks else 0


if __name__ == "__main__":
    sys.exit(main())
