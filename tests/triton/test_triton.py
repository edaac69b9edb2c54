#!/usr/bin/env python3
"""A real Triton Inference Server serving what `opc --emit triton` writes.

Usage: test_triton.py OPC WORKDIR [--results FILE.md] [--seconds S]

tools/setup.sh installs the server (nvidia-pytriton's tritonserver and its
Python backend), tritonclient and perf_analyzer. The test:
- writes a model repository for the CPU target: SqueezeNet 1.1 on opc's
  native backend with dynamic batching (--max-batch 4: programs for batch
  1, 2 and 4, which share one weights file); BERT-tiny as "bert" (two int64
  inputs) on the native backend without batching; SqueezeNet again as
  "squeezenet_py" on Triton's Python backend. It then moves the repository
  elsewhere, so that the server reads a copy that must find everything
  beside itself (libtriton_opc.so included);
- starts tritonserver on free localhost ports, with no environment of opc's;
- sends requests over HTTP and gRPC and compares the answers with ONNX
  Runtime (relative L2 below 1e-4): one row each, then requests of 3 and 2
  rows (run on the batch-4 program with a padding row, and on batch 2),
  then 8 concurrent requests of different images, which the dynamic
  batcher groups (the server's statistics must show a batch of more than
  one row);
- sends bad requests (a wrong shape, a wrong type, an unknown input), each
  of which must get a Triton error, with the server still live and serving;
- runs a bounded perf_analyzer load on SqueezeNet at concurrency 1 and 4;
- serves, in a second server, a Relu whose second request fails inside
  net_run (OPC_RT_FAIL): that request gets opc's message, the others
  their answers, and the server stays up.
With --results it also loads the Python backend's SqueezeNet and a Python
model that does no work, runs the same model in-process through opc's
Python package, and writes the comparison as a Markdown table.
The server is always stopped, also when a check fails.
"""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests" / "zoo"))
import reference  # noqa: E402

TOL = 1e-4
failures = checks = 0


def check(name, ok, detail=""):
    global failures, checks
    checks += 1
    if not ok:
        failures += 1
        print(f"FAIL {name} {detail}", flush=True)


def rel_l2(ref, got):
    return float(np.linalg.norm((got - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-30))


def triton_install():
    """tritonserver and the Python backend's files, from nvidia-pytriton."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None:
        sys.exit("nvidia-pytriton is not installed: run sh tools/setup.sh")
    server = Path(spec.submodule_search_locations[0]) / "tritonserver"
    return server


def backend_dir(server, work):
    """backends/python as Triton wants it. Links, not copies: the stub finds
    its libraries relative to where it really is."""
    d = work / "backends" / "python"
    d.mkdir(parents=True)
    stub = server / "python_backend_stubs" / f"{sys.version_info[0]}.{sys.version_info[1]}"
    for f in (server / "backends/python/libtriton_python.so",
              server / "backends/python/triton_python_backend_utils.py",
              stub / "triton_python_backend_stub"):
        (d / f.name).symlink_to(f)
    return d.parent


def free_ports(count):
    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


MAX_BATCH = 4

# What each model's folder holds: the native backend's, batched and not,
# and the Python backend's. Batch 2 and 4 share batch 1's weights.
FILES = {
    "squeezenet1_1": ["config.pbtxt", "libtriton_opc.so", "1/libnet_b1.so", "1/libnet_b2.so",
                      "1/libnet_b4.so", "1/libnet_b1.weights"],
    "bert": ["config.pbtxt", "libtriton_opc.so", "1/libnet.so", "1/libnet.weights"],
    "squeezenet_py": ["config.pbtxt", "1/model.py", "1/libnet.so", "1/libnet.weights"],
}


def opc_emit(opc, args, generated):
    p = subprocess.run([opc, *args, "-o", str(generated), "--emit", "triton", "--target", "cpu"],
                       capture_output=True, text=True)
    check(f"opc --emit triton {' '.join(a for a in args if a.startswith('-'))} writes its models",
          p.returncode == 0, p.stderr)


def build_models(opc, work, bench=False):
    models = {}
    for name, zoo in (("squeezenet1_1", "squeezenet1_1"), ("bert", "bert_tiny")):
        path = work / f"{zoo}.onnx"
        subprocess.run([sys.executable, str(ROOT / "tools/models/build.py"), zoo, "-o", str(path)],
                       check=True, capture_output=True)
        models[name] = path
    models["squeezenet_py"] = models["squeezenet1_1"]
    generated = work / "generated"
    opc_emit(opc, [str(models["squeezenet1_1"]), "--max-batch", str(MAX_BATCH)], generated)
    opc_emit(opc, [f"bert={models['bert']}"], generated)
    opc_emit(opc, [f"squeezenet_py={models['squeezenet1_1']}", "--triton-backend", "python"],
             generated)
    if bench:
        write_floor_native(opc, work, generated)
        opc_emit(opc, [f"bert_batched={models['bert']}", "--max-batch", str(MAX_BATCH)], generated)
        opc_emit(opc, [f"bert_py={models['bert']}", "--triton-backend", "python"], generated)
    for name, files in FILES.items():
        for f in files:
            check(f"{name}/{f} is written", (generated / name / f).exists())
    check("identical weights are shared", not (generated / "squeezenet1_1/1/libnet_b2.weights").exists())
    config = (generated / "squeezenet1_1/config.pbtxt").read_text()
    check("config.pbtxt names opc's backend and turns dynamic batching on",
          'backend: "opc"' in config and f"max_batch_size: {MAX_BATCH}" in config
          and "dynamic_batching" in config and "dims: [ 3, 224, 224 ]" in config, config)
    repo = work / "repo"
    shutil.copytree(generated, repo, symlinks=True)
    shutil.rmtree(generated)
    write_floor_model(repo / "floor")
    write_lying_model(repo)
    return models, repo


def failing_run(opc, server_files, work):
    """A run that fails inside the server: a Relu program whose CPU runtime
    fails its third cudaMemcpyAsync (OPC_RT_FAIL, runtime/README.md), which
    is the second request's input copy. That request must get net_error()'s
    message, the others their answers, and the server must stay up."""
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException
    from onnx import TensorProto, helper
    import onnx
    path = work / "relu.onnx"
    onnx.save(helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])]),
        opset_imports=[helper.make_opsetid("", 13)]), path)
    repo = work / "failing-repo"
    opc_emit(opc, [str(path)], repo)
    server = Server(server_files, repo, work / "backends", work,
                    {"OPC_RT_FAIL": "cudaMemcpyAsync:3"}, "server-failing.log")
    try:
        up = server.ready()
        check("tritonserver loads the failing model", up)
        if not up:
            print(server.log_path.read_text()[-4000:])
            return
        client = http.InferenceServerClient(f"127.0.0.1:{server.http}")
        x = np.array([[-1, 2, -3, 4]], np.float32)
        outcomes = []
        for _ in range(3):
            i = http.InferInput("x", [1, 4], "FP32")
            i.set_data_from_numpy(x)
            try:
                outcomes.append(client.infer("relu", [i]).as_numpy("y").tolist())
            except InferenceServerException as e:
                outcomes.append(str(e))
        answer = np.maximum(x, 0).tolist()
        check("a failed net_run answers its request with opc's message, the others are answered",
              outcomes[0] == answer and outcomes[2] == answer and isinstance(outcomes[1], str)
              and "cudaMemcpyAsync of input 'x'" in outcomes[1], outcomes)
        print(f"  a failed run: {outcomes[1][:200]}")
        check("the server is live after a failed run", client.is_server_live())
    finally:
        server.stop()


def write_lying_model(repo):
    """BERT's program under a config.pbtxt that gives attention_mask 16
    tokens, not 32: Triton lets such a request through, so opc's backend
    must refuse it itself."""
    shutil.copytree(repo / "bert", repo / "bert_lying", symlinks=True)
    config = repo / "bert_lying" / "config.pbtxt"
    text = config.read_text().replace('name: "bert"', 'name: "bert_lying"')
    mask = text.index('name: "attention_mask"')
    config.write_text(text[:mask] + text[mask:].replace("dims: [ 1, 32 ]", "dims: [ 1, 16 ]", 1))


FLOOR_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            pb_utils.get_input_tensor_by_name(request, "input").as_numpy()
            out.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("logits", np.zeros((1, 1000), np.float32))]))
        return out
"""


def write_floor_model(d):
    """SqueezeNet's inputs and outputs with no work between them: what
    Triton and its Python backend cost a request by themselves."""
    (d / "1").mkdir(parents=True)
    (d / "1" / "model.py").write_text(FLOOR_MODEL)
    (d / "config.pbtxt").write_text(
        'name: "floor"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "input" data_type: TYPE_FP32 dims: [ 1, 3, 224, 224 ] } ]\n'
        'output [ { name: "logits" data_type: TYPE_FP32 dims: [ 1, 1000 ] } ]\n'
        'instance_group [ { count: 1 kind: KIND_CPU } ]\n')


class Server:
    def __init__(self, server, repo, backends, work, env_extra=None, log="server.log"):
        self.http, self.grpc, metrics = free_ports(3)
        # A stock environment. The Python backend's stub embeds Debian's
        # libpython, which takes its prefix from the first python3 on the
        # PATH; pyenv's on the PATH would hand it pyenv's library instead.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPC", "PYENV", "PYTHON")) and k != "LD_LIBRARY_PATH"}
        env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
        env.update(env_extra or {})
        self.log = open(work / log, "w")
        self.proc = subprocess.Popen(
            [str(server / "bin/tritonserver"), f"--model-repository={repo}",
             f"--backend-directory={backends}", f"--http-port={self.http}",
             f"--grpc-port={self.grpc}", f"--metrics-port={metrics}", "--exit-timeout-secs=10"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.log_path = work / log

    def ready(self, seconds=120):
        end = time.time() + seconds
        while time.time() < end and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/health/ready",
                                            timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.5)
        return False

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def feeds_for(model, draw=0):
    """The zoo's inputs for the model (tests/zoo/reference.py: photographs,
    or token ids and a padding mask) and ONNX Runtime's outputs."""
    ref = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    props = dict(ref.get_modelmeta().custom_metadata_map)
    feeds = reference.draw_inputs(ref, props, 7, draw)
    names = [o.name for o in ref.get_outputs()]
    return feeds, dict(zip(names, ref.run(None, feeds)))


def stacked(model, draws):
    """Rows of several draws stacked into one request, and ONNX Runtime's
    answer for each row on its own, stacked likewise."""
    pairs = [feeds_for(model, d) for d in draws]
    feeds = {n: np.concatenate([f[n] for f, _ in pairs]) for n in pairs[0][0]}
    expected = {n: np.concatenate([e[n] for _, e in pairs]) for n in pairs[0][1]}
    return feeds, expected


def infer(client_module, client, model, feeds, outputs):
    inputs = []
    for name, array in feeds.items():
        kind = "FP32" if array.dtype == np.float32 else "INT64" if array.dtype == np.int64 else "FP64"
        i = client_module.InferInput(name, list(array.shape), kind)
        i.set_data_from_numpy(array)
        inputs.append(i)
    result = client.infer(model, inputs,
                          outputs=[client_module.InferRequestedOutput(n) for n in outputs])
    return {n: result.as_numpy(n) for n in outputs}


def answers(server, models):
    import tritonclient.grpc as grpc
    import tritonclient.http as http
    clients = {"HTTP": (http, http.InferenceServerClient(f"127.0.0.1:{server.http}")),
               "gRPC": (grpc, grpc.InferenceServerClient(f"127.0.0.1:{server.grpc}"))}
    for name, model in models.items():
        feeds, expected = feeds_for(model)
        for proto, (module, client) in clients.items():
            compare(module, client, name, feeds, expected, f"{name} over {proto}")
    # Requests of several rows: 3 runs on the batch-4 program, its last
    # row padding; 2 on the batch-2 program.
    for (proto, (module, client)), rows in zip(clients.items(), (3, 2)):
        feeds, expected = stacked(models["squeezenet1_1"], range(1, rows + 1))
        compare(module, client, "squeezenet1_1", feeds, expected,
                f"a request of {rows} rows over {proto}")
    return clients


def compare(module, client, name, feeds, expected, what):
    try:
        got = infer(module, client, name, feeds, list(expected))
        errors = {n: rel_l2(expected[n], got[n]) for n in expected}
        check(f"{what} matches ONNX Runtime", all(e < TOL for e in errors.values()), errors)
    except Exception as e:  # noqa: BLE001 - a failed request is a failed check
        check(f"{what} answers", False, e)


def batch_rows(server, model):
    """{rows: count} of the batches the model's instances ran."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http}/v2/models/{model}/stats",
                                timeout=10) as r:
        stats = json.load(r)["model_stats"][0]
    return {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}


def concurrent_requests(server, models, count=8, attempts=4):
    """`count` requests of different images at once, from as many threads:
    the dynamic batcher groups those that wait while the instance is busy,
    and each must still get its own image's answer. Whether any waited
    depends on how the threads happen to send, so a burst that ran as
    batches of one row is tried again, up to `attempts` bursts."""
    import tritonclient.http as http
    draws = [feeds_for(models["squeezenet1_1"], 10 + d) for d in range(count)]

    def one(draw, start):
        feeds, expected = draw
        client = http.InferenceServerClient(f"127.0.0.1:{server.http}")
        i = http.InferInput("input", list(feeds["input"].shape), "FP32")
        i.set_data_from_numpy(feeds["input"])
        start.wait()
        try:
            return rel_l2(expected["logits"], client.infer("squeezenet1_1", [i]).as_numpy("logits"))
        except Exception as e:  # noqa: BLE001 - a failed request is a failed check
            return str(e)

    seen = []
    for _ in range(attempts):
        before = batch_rows(server, "squeezenet1_1")
        start = threading.Barrier(count)
        with ThreadPoolExecutor(count) as pool:
            errors = list(pool.map(lambda d: one(d, start), draws))
        check(f"{count} concurrent requests each get their own answer",
              all(isinstance(e, float) and e < TOL for e in errors), errors)
        time.sleep(0.5)  # the backend reports a batch after answering it
        after = batch_rows(server, "squeezenet1_1")
        seen.append({b: after[b] - before.get(b, 0) for b in after if after[b] > before.get(b, 0)})
        if any(b > 1 for b in seen[-1]):
            break
    check("the dynamic batcher ran a batch of more than one row",
          any(b > 1 for burst in seen for b in burst), f"batches run (rows: count): {seen}")
    print(f"  bursts of {count} concurrent requests ran as batches (rows: count) {seen}")


def bad_requests(clients, models):
    from tritonclient.utils import InferenceServerException
    feeds, expected = feeds_for(models["squeezenet1_1"])
    x = feeds["input"]
    cases = {
        "a wrong shape": {"input": x[:, :, :, :100].copy()},
        "a wrong type": {"input": x.astype(np.float64)},
        "an unknown input": {"image": x},
    }
    for proto, (module, client) in clients.items():
        for what, bad in cases.items():
            try:
                infer(module, client, "squeezenet1_1", bad, list(expected))
                check(f"{what} over {proto} gets an error", False, "it was answered")
            except InferenceServerException as e:
                check(f"{what} over {proto} gets an error", True)
                print(f"  {proto}, {what}: {str(e)[:160]}")
            check(f"the server is live after {what} over {proto}", client.is_server_live())
        got = infer(module, client, "squeezenet1_1", feeds, list(expected))
        check(f"the server still answers over {proto}",
              rel_l2(expected["logits"], got["logits"]) < TOL)
        lying(module, client, models, proto)


def lying(module, client, models, proto):
    """A request that Triton's config allows and the program does not."""
    from tritonclient.utils import InferenceServerException
    feeds, expected = feeds_for(models["bert"])
    feeds["attention_mask"] = feeds["attention_mask"][:, :16].copy()
    try:
        infer(module, client, "bert_lying", feeds, list(expected))
        check(f"opc's backend refuses a shape its program does not take over {proto}", False,
              "it was answered")
    except InferenceServerException as e:
        check(f"opc's backend refuses a shape its program does not take over {proto}",
              "input 'attention_mask' must be INT64 [1, 32], not INT64 [1, 16]" in str(e), e)
        print(f"  {proto}, a shape only the config allows: {str(e)[:160]}")
    check(f"the server is live after that over {proto}", client.is_server_live())


def perf_analyzer_load(server, model, seconds, work, concurrency=(1,), how="http"):
    """{concurrency: figures} of bounded perf_analyzer loads, one run each;
    `how`: http, grpc, or http-shm (inputs and outputs in system shared
    memory, so that HTTP carries no tensor)."""
    result = {}
    for c in concurrency:
        r = perf_analyzer_run(server, model, seconds, work, c, how)
        if r is None:
            return None
        result[c] = r
    return result


def perf_analyzer_data(model, work):
    """perf_analyzer's --input-data for a model of token ids: the zoo's
    tokens (its random ones would fall outside the vocabulary)."""
    if not model.startswith("bert"):
        return []
    feeds, _ = feeds_for(work / "bert_tiny.onnx")
    batched = model == "bert_batched"  # its config's dims leave out the batch
    data = {n: {"content": a.ravel().tolist(), "shape": list(a.shape[1:] if batched else a.shape)}
            for n, a in feeds.items()}
    path = work / f"{model}-input.json"
    path.write_text(json.dumps({"data": [data]}))
    return ["--input-data", str(path)]


def perf_analyzer_run(server, model, seconds, work, concurrency, how):
    home = Path(os.environ.get("HOME", "/root"))
    perf_dir = Path(os.environ.get("OPC_PERF_ANALYZER_DIR", home / ".cache/opc/perf_analyzer"))
    binary = perf_dir / "bin/perf_analyzer"
    if not binary.exists():
        check("perf_analyzer is installed", False, f"{binary}: run sh tools/setup.sh")
        return None
    csv = work / f"perf-{model}-{concurrency}-{how}.csv"
    levels = str(concurrency)
    url = f"127.0.0.1:{server.grpc if how == 'grpc' else server.http}"
    extra = ["--shared-memory", "system"] if how == "http-shm" else []
    env = dict(os.environ, LD_LIBRARY_PATH=str(perf_dir / "lib"))
    extra += perf_analyzer_data(model, work)
    p = subprocess.run([str(binary), "-m", model, "-u", url, *extra,
                        "-i", "grpc" if how == "grpc" else "http", "--concurrency-range", levels, "-p", str(int(seconds * 1000)),
                        "--max-trials", "3", "--stability-percentage", "1000",
                        "--percentile", "99", "-f", str(csv)],
                       capture_output=True, text=True, env=env, timeout=300)
    check(f"perf_analyzer runs a bounded load on {model} at concurrency {levels} ({how})",
          p.returncode == 0 and csv.exists(), p.stdout[-1500:] + p.stderr[-1500:])
    if p.returncode != 0 or not csv.exists():
        return None
    header, row = csv.read_text().splitlines()[:2]
    fields = dict(zip(header.split(","), row.split(",")))
    return {"throughput": float(fields["Inferences/Second"]),
            "p50_ms": float(fields["p50 latency"]) / 1000,
            "p99_ms": float(fields["p99 latency"]) / 1000}


def in_process(lib_path, weights, seconds, feeds=None):
    """net_run of a program of the served repository, called from this
    process in a loop for `seconds`: the work alone, with no server. The
    inputs are `feeds` (arrays in the program's input order, each row
    repeated to the program's batch), else small floats."""
    import ctypes
    lib = ctypes.CDLL(str(lib_path))
    lib.net_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    lib.net_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.net_destroy.argtypes = [ctypes.c_void_p]
    lib.net_input_dims.restype = lib.net_output_dims.restype = ctypes.POINTER(ctypes.c_longlong)
    lib.net_input_element_size.restype = lib.net_output_element_size.restype = ctypes.c_int

    def buffers(which):
        count = getattr(lib, f"net_num_{which}s")()
        rank, dims = getattr(lib, f"net_{which}_rank"), getattr(lib, f"net_{which}_dims")
        size = getattr(lib, f"net_{which}_element_size")
        return [np.zeros(int(np.prod([dims(i)[k] for k in range(rank(i))])) * size(i), np.uint8)
                for i in range(count)]

    ins, outs = buffers("input"), buffers("output")
    if feeds is None:
        ins[0][:] = np.random.default_rng(1).integers(0, 60, ins[0].size, dtype=np.uint8)  # small floats
    else:
        for buf, a in zip(ins, feeds):
            rows = np.ascontiguousarray(a).view(np.uint8).ravel()
            buf[:] = np.tile(rows, buf.size // rows.size)
    in_ptrs = (ctypes.c_void_p * len(ins))(*[a.ctypes.data for a in ins])
    out_ptrs = (ctypes.c_void_p * len(outs))(*[a.ctypes.data for a in outs])
    ctx = ctypes.c_void_p()
    if lib.net_create(ctypes.byref(ctx), str(weights).encode()) != 0:
        raise RuntimeError(f"net_create failed for {lib_path}")
    for _ in range(3):
        lib.net_run(ctx, in_ptrs, out_ptrs)
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        lib.net_run(ctx, in_ptrs, out_ptrs)
        times.append(time.perf_counter() - t)
    lib.net_destroy(ctx)
    times = np.array(times) * 1000
    return {"throughput": len(times) / times.sum() * 1000,
            "p50_ms": float(np.percentile(times, 50)), "p99_ms": float(np.percentile(times, 99))}


def write_floor_native(opc, work, generated):
    """SqueezeNet's input and output with next to no work between them
    (the first 1000 values of the input), on opc's backend."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    consts = [numpy_helper.from_array(np.array(v, np.int64), n)
              for n, v in (("starts", [0]), ("ends", [1000]), ("axes", [1]))]
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["input"], ["flat"], axis=1),
         helper.make_node("Slice", ["flat", "starts", "ends", "axes"], ["logits"])], "floor",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], consts)
    path = work / "floor_native.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    opc_emit(opc, [f"floor_native={path}"], generated)


BENCH_PATHS = [
    # (key, what, model, concurrency, how); in-process paths have how None
    ("native", "Triton, native backend, concurrency 1", "squeezenet1_1", 1, "http"),
    ("native4", "Triton, native backend, concurrency 4 (dynamic batching)", "squeezenet1_1", 4,
     "http"),
    ("python", "Triton, Python backend, concurrency 1", "squeezenet_py", 1, "http"),
    ("local", "in process, batch-1 program", "squeezenet1_1/1/libnet_b1", 1, None),
    ("local4", "in process, batch-4 program (an inference is a row)", "squeezenet1_1/1/libnet_b4",
     4, None),
    ("native_shm", "Triton, native backend, concurrency 1, tensors in shared memory",
     "squeezenet1_1", 1, "http-shm"),
    ("floor", "Triton, native backend, a model with no work", "floor_native", 1, "http"),
    ("floor_grpc", "... the same over gRPC", "floor_native", 1, "grpc"),
    ("floor_shm", "... the same, tensors in shared memory", "floor_native", 1, "http-shm"),
    ("floor_py", "Triton, Python backend, a model with no work", "floor", 1, "http"),
    ("floor_local", "in process, the model with no work", "floor_native/1/libnet", 1, None),
    ("bert", "BERT-tiny (32 tokens), native backend, concurrency 1", "bert_batched", 1, "http"),
    ("bert4", "BERT-tiny, native backend, concurrency 4 (dynamic batching)", "bert_batched", 4,
     "http"),
    ("bert_py", "BERT-tiny, Python backend, concurrency 1", "bert_py", 1, "http"),
    ("bert_local", "in process, BERT-tiny's batch-1 program", "bert_batched/1/libnet_b1", 1, None),
    ("bert_local4", "in process, BERT-tiny's batch-4 program (an inference is a row)",
     "bert_batched/1/libnet_b4", 4, None),
]


def benchmark(server, repo, work, seconds, rounds=3):
    """The figures of --results: every path in turn, `rounds` times over,
    so that the machine's drift falls on all of them alike."""
    runs = {key: [] for key, *_ in BENCH_PATHS}
    for _ in range(rounds):
        for key, _, model, concurrency, how in BENCH_PATHS:
            if how is None:
                lib = repo / model
                weights = lib.parent / (lib.name + ".weights")
                if not weights.exists():
                    weights = lib.parent / "libnet_b1.weights"
                feeds = None
                if model.startswith("bert"):
                    feeds = list(feeds_for(work / "bert_tiny.onnx")[0].values())
                r = in_process(lib.parent / (lib.name + ".so"), weights, seconds, feeds)
                if concurrency > 1:  # rows a run
                    r["throughput"] *= concurrency
            else:
                r = perf_analyzer_load(server, model, seconds, work, (concurrency,), how)
                if r is None:
                    return None
                r = r[concurrency]
            runs[key].append(r)
    return runs


def write_results(path, runs, seconds, load):
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    med = {k: {f: float(np.median([r[f] for r in v])) for f in v[0]} for k, v in runs.items()}

    def over(key, base):
        """The median over the rounds of the p50 difference within a round."""
        return float(np.median([a["p50_ms"] - b["p50_ms"] for a, b in zip(runs[key], runs[base])]))

    lines = [
        f"# Triton: opc's native backend against the Python backend and in-process calls "
        f"({datetime.date.today()}, CPU target)",
        "",
        f"Machine: {cpu}, {os.cpu_count()} cores, {platform.platform()}; load average "
        f"{load[0]} before the run and {load[1]} after it (the machine is shared with other "
        "jobs, so single figures drift by milliseconds). Models: SqueezeNet 1.1 (602 KB in, "
        "4 KB out) and BERT-tiny (two int64 inputs of 32 tokens, 512 bytes in; 16 KB out), "
        "from tools/models/build.py, on opc's CPU runtime. Triton: tritonserver from nvidia-pytriton "
        "0.7.0, one instance per model; perf_analyzer 2.40.0, HTTP unless said, requests of "
        f"one row, {seconds:g} s windows (3). Native backend: libtriton_opc.so, "
        f"`--max-batch {MAX_BATCH}` (programs for batch 1, 2, 4), dynamic batching on. Python "
        "backend: `--triton-backend python`, max_batch_size 0. In process: `net_run` of the "
        "served repository's program through ctypes, in a loop, one caller. A model with no "
        "work: SqueezeNet's input and output (602 KB in, 4 KB out), its output the first 1000 "
        f"values of its input. Every path ran alone, in turn, {len(runs['native'])} rounds; "
        "the table gives the median over the rounds and the range of p50. "
        "`tests/triton/test_triton.py --results` wrote it.",
        "",
        "| path | inferences/s | p50 ms | p50 range ms | p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, what, *_ in BENCH_PATHS:
        m, p50s = med[key], [r["p50_ms"] for r in runs[key]]
        lines.append(f"| {what} | {m['throughput']:.1f} | {m['p50_ms']:.3f} | "
                     f"{min(p50s):.3f}-{max(p50s):.3f} | {m['p99_ms']:.3f} |")
    lines += [
        "",
        "p50 over in-process, the median of each round's difference: SqueezeNet at concurrency "
        f"1, native backend {over('native', 'local'):+.3f} ms over HTTP, "
        f"{over('native_shm', 'local'):+.3f} ms with the tensors in shared memory; Python "
        f"backend {over('python', 'local'):+.3f} ms. The model with no work, native backend: "
        f"{over('floor', 'floor_local'):+.3f} ms over HTTP, "
        f"{over('floor_grpc', 'floor_local'):+.3f} ms over gRPC, "
        f"{over('floor_shm', 'floor_local'):+.3f} ms in shared memory; Python backend "
        f"{over('floor_py', 'floor_local'):+.3f} ms over HTTP. Throughput at concurrency 4 with "
        f"dynamic batching: {med['native4']['throughput'] / med['native']['throughput']:.2f} "
        "times concurrency 1's; the batch-4 program in process: "
        f"{med['local4']['throughput'] / med['local']['throughput']:.2f} times the batch-1 "
        "program's rows per second.",
        "",
        "BERT-tiny (32 tokens; `--max-batch 4` as SqueezeNet, the zoo's tokens as perf_analyzer's "
        f"input): native backend {over('bert', 'bert_local'):+.3f} ms over in-process at "
        f"concurrency 1 over HTTP, Python backend {over('bert_py', 'bert_local'):+.3f} ms; throughput at concurrency 4 with dynamic batching "
        f"{med['bert4']['throughput'] / med['bert']['throughput']:.2f} times concurrency 1's; "
        f"the batch-4 program in process: {med['bert_local4']['throughput'] / med['bert_local']['throughput']:.2f}"
        " times the batch-1 program's rows per second.",
    ]
    Path(path).write_text("\n".join(lines) + "\n")
    Path(path).with_suffix(".json").write_text(json.dumps(runs, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("opc")
    ap.add_argument("work")
    ap.add_argument("--results")
    ap.add_argument("--seconds", type=float, default=2)
    args = ap.parse_args()
    opc = os.path.abspath(args.opc)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server_files = triton_install()
    models, repo = build_models(opc, work, args.results is not None)
    # meson's timeout sends SIGTERM: leave through the finally below, which
    # stops the server (it runs in a session of its own).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("triton: terminated"))
    server = Server(server_files, repo, backend_dir(server_files, work), work)
    native = bench = None
    try:
        up = server.ready()
        check("tritonserver loads both models and is ready", up)
        if not up:
            print(server.log_path.read_text()[-4000:])
        else:
            clients = answers(server, models)
            concurrent_requests(server, models)
            bad_requests(clients, models)
            if args.results:
                load = [open("/proc/loadavg").read().split()[0]]
                bench = benchmark(server, repo, work, args.seconds)
                load.append(open("/proc/loadavg").read().split()[0])
                native = None  # written to --results below
            else:
                native = perf_analyzer_load(server, "squeezenet1_1", args.seconds, work, (1, 4))
    finally:
        server.stop()
    check("the server stopped", server.proc.poll() is not None)
    failing_run(opc, server_files, work)
    if failures == 0 and native:
        for c, r in native.items():
            print(f"native backend over HTTP, concurrency {c}: {r['throughput']:.1f} "
                  f"inferences/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
    if bench is None and args.results:
        check("the benchmark ran", False)
    if failures == 0 and bench:
        write_results(args.results, bench, args.seconds, load)
    print(f"triton: {checks} checks, {failures} failures")
    return 1 if failures or not checks else 0


if __name__ == "__main__":
    sys.exit(main())
