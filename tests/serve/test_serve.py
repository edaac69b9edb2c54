"""Serving programs (opc A.onnx B.onnx --instances ... -o serve), on the CPU
runtime with its race checker on.

    test_serve.py OPC WORKDIR GROUP

outputs CONFIG  several requests of three zoo models (float and int64
                inputs) at once, each request's outputs equal, bit for bit,
                to those of the model's own single-model program on the same
                inputs, and close to ONNX Runtime's (relative L2 below 1e-4);
                the program's net.c builds against the real CUDA toolkit with
                -Wall -Werror. CONFIG: lios, ios, sequential, no-cuda-graph.
load            a Poisson load: per model arrived = served + backlog, the
                totals add up, and the trace names the copies of each round
api             tests/serve/api_test.c linked with the program: full queue,
                bad arguments, polling, threads, destroy with requests left
errors          bad command lines and files get clear errors, never a crash
plan            --arrivals: the choice is deterministic, written into net.h,
                flagged when the load is too much, and the two simulators
                agree where they must (one copy of one model)
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODELS = ["squeezenet1_1", "torch_export_cnn", "bert_tiny"]
INSTANCES = "squeezenet1_1=2,torch_export_cnn=3"
CONFIGS = {
    "lios": [],
    "ios": ["--schedule", "ios"],
    "sequential": ["--schedule", "sequential"],
    "no-cuda-graph": ["--no-cuda-graph"],
}
failures = 0


def run(cmd, env=None, timeout=900):
    full = dict(os.environ, **(env or {}))
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          env=full)


def check(ok, what, detail=""):
    global failures
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else "\n" + detail))
    failures += 0 if ok else 1
    return ok


def build_models(work):
    for m in MODELS:
        path = work / f"{m}.onnx"
        if not path.exists():
            r = run([sys.executable, ROOT / "tools/models/build.py", m, "-o", path, "--seed", "0"])
            if r.returncode:
                sys.exit(f"cannot build {m}: {r.stdout}{r.stderr}")
    return [work / f"{m}.onnx" for m in MODELS]


def compile_serve(opc, models, out, flags=(), target="cpu"):
    return run([opc] + models + ["--instances", INSTANCES, "-o", out, "--target", target] +
               list(flags))


def io_names(model_path):
    import onnx
    g = onnx.load(str(model_path), load_external_data=False).graph
    inits = {i.name for i in g.initializer}
    return [i.name for i in g.input if i.name not in inits], [o.name for o in g.output]


def ort_outputs(model_path, feeds):
    import onnxruntime as ort
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def rel_l2(ref, got):
    if ref.dtype.kind in "biu":
        return 0.0 if np.array_equal(ref, got) else float("inf")
    denom = np.linalg.norm(ref.astype(np.float64))
    return float(np.linalg.norm((got - ref).astype(np.float64)) / (denom or 1.0))


def close(got, ref, exact):
    if exact or got.dtype.kind in "biu":
        return np.array_equal(got, ref)
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return bool(np.all(np.abs(got.astype(np.float64) - ref) <= 4e-7 * max(scale, 1e-30)))


def group_outputs(opc, work, config):
    flags = CONFIGS[config]
    models = build_models(work)
    d = work
    shutil.rmtree(d / "out", ignore_errors=True)
    (d / "out").mkdir(parents=True)
    r = compile_serve(opc, models, d / "serve", flags)
    if not check(r.returncode == 0, f"{config}: opc builds the serving program", r.stderr):
        return
    requests = 4
    # Replaying CUDA graphs, the CPU runtime computes the same bits whatever
    # runs beside; issuing directly, a convolution folds its bias into its
    # epilogue only when the bias is already queued behind it, which
    # depends on timing, and the last bit can differ.
    exact = "--no-cuda-graph" not in flags
    r = run([d / "serve", "--requests", requests, "--output-dir", d / "out", "--seed", 7],
            env={"OPC_CHECK": "1"})
    if not check(r.returncode == 0, f"{config}: {requests} requests of each model, race checker on",
                 r.stdout + r.stderr):
        return
    for m, path in zip(MODELS, models):
        single = d / f"single-{m}"
        r = run([opc, path, "-o", single, "--target", "cpu"] + flags)
        if not check(r.returncode == 0, f"{config}: single-model program of {m}", r.stderr):
            continue
        ins, outs = io_names(path)
        worst_ort = 0.0
        same = True
        for k in range(requests):
            cmd = [single]
            for i, name in enumerate(ins):
                cmd += ["--input", f"{name}={d / 'out' / f'{m}-{k}-input-{i}.npy'}"]
            for o, name in enumerate(outs):
                cmd += ["--output", f"{name}={d / f'ref-{m}-{k}-{o}.npy'}"]
            r = run(cmd)
            if not check(r.returncode == 0, f"{config}: {m} request {k} through the single program",
                         r.stderr):
                same = False
                continue
            feeds = {name: np.load(d / "out" / f"{m}-{k}-input-{i}.npy") for i, name in enumerate(ins)}
            expected = ort_outputs(path, feeds)
            for o in range(len(outs)):
                got = np.load(d / "out" / f"{m}-{k}-output-{o}.npy")
                ref = np.load(d / f"ref-{m}-{k}-{o}.npy")
                same &= got.shape == ref.shape and got.dtype == ref.dtype and close(got, ref, exact)
                worst_ort = max(worst_ort, rel_l2(expected[o], got))
        check(same, f"{config}: {m}: every request's outputs equal the single-model program's"
              + ("" if exact else " (to a few units in the last place)"))
        check(worst_ort < 1e-4, f"{config}: {m}: against ONNX Runtime, relative L2 {worst_ort:.2e} < 1e-4")
    # Graph and direct modes alike must build against the real toolkit.
    cflags = run([opc, "--cflags", "cuda"]).stdout.split()
    libs = run([opc, "--libs", "cuda"]).stdout.split()
    r = compile_serve(opc, models, d / "cuda.c", flags, target="cuda")
    if r.returncode == 0:
        cc = os.environ.get("CC", "cc").split()
        r = run(cc + ["-O1", "-Wall", "-Wextra", "-Werror", d / "cuda.c", "-o", d / "cuda"] + cflags +
                libs)
    check(r.returncode == 0, f"{config}: net.c compiles and links against CUDA with -Wall -Werror",
          r.stdout + r.stderr)


def parse_load(text):
    """{model: {column: value}} from the load table, and the total line."""
    rows, total = {}, None
    lines = text.splitlines()
    header = next((l.split() for l in lines if l.startswith("model ")), None)
    for line in lines:
        parts = line.split()
        if header and len(parts) == len(header) and not line.startswith("model "):
            try:
                rows[parts[0]] = {h: float(v) for h, v in zip(header[1:], parts[1:])}
            except ValueError:
                pass
        m = re.match(r"total: (\d+) arrived, (\d+) served \(([\d.]+)/s\), backlog (\d+); (\d+) rounds", line)
        if m:
            total = [float(x) for x in m.groups()]
    return rows, total


def group_load(opc, work):
    models = build_models(work)[:2]
    d = work
    r = run([opc] + models + ["--instances", "squeezenet1_1=2,torch_export_cnn=2", "-o", d / "serve",
                              "--target", "cpu"])
    if not check(r.returncode == 0, "load: opc builds the program", r.stderr):
        return
    duration = 2.0
    r = run([d / "serve", "--load", "poisson:40,squeezenet1_1=20", "--duration", duration,
             "--trace", d / "trace.json"], env={"OPC_CHECK": "1"})
    if not check(r.returncode == 0, "load: a Poisson load runs under the race checker",
                 r.stdout + r.stderr):
        return
    print(r.stdout)
    rows, total = parse_load(r.stdout)
    check(set(rows) == {"squeezenet1_1", "torch_export_cnn"} and total is not None,
          "load: a row per model and a total", r.stdout)
    if total is None:
        return
    arrived = sum(v["arrived"] for v in rows.values())
    served = sum(v["served"] for v in rows.values())
    for name, v in rows.items():
        check(v["arrived"] == v["served"] + v["backlog"] and v["arrived"] > 0,
              f"load: {name}: arrived {v['arrived']:.0f} = served {v['served']:.0f} + backlog {v['backlog']:.0f}")
        check(abs(v["served/s"] - v["served"] / duration) <= 0.02 * v["served/s"] + 0.01,
              f"load: {name}: throughput {v['served/s']} = served / duration")
        check(0 < v["p50_ms"] <= v["p90_ms"] <= v["p99_ms"], f"load: {name}: percentiles in order")
    check(total[0] == arrived and total[1] == served and total[3] == arrived - served,
          "load: the total line adds the rows up")
    trace = json.loads((d / "trace.json").read_text())["traceEvents"]
    rounds = [e for e in trace if e.get("tid") == 0 and e.get("ph") == "X"]
    requests = [e for e in trace if e.get("tid", 0) > 0 and e.get("ph") == "X"]
    rejected = sum(v["rejected"] for v in rows.values())
    check(len(requests) == arrived - rejected, f"load: the trace has every request ({len(requests)})")
    named = {int(re.match(r"round (\d+):", e["name"]).group(1)): e["name"] for e in rounds}
    in_rounds = all(f"{e['name']}" in named.get(e["args"]["round"], "") for e in requests)
    check(in_rounds and len(named) == total[4],
          f"load: each of the {len(named)} rounds names the copies that ran in it")
    copies_ok = all(int(e["name"].rsplit(".", 1)[1]) < 2 for e in requests)
    check(copies_ok, "load: every request ran on one of its model's 2 copies")


def group_api(opc, work):
    models = build_models(work)
    d = work
    r = compile_serve(opc, models, d / "serve.c", ["--queue-capacity", "8"])
    if not check(r.returncode == 0, "api: opc writes the program", r.stderr):
        return
    cflags = run([opc, "--cflags", "cpu"]).stdout.split()
    libs = run([opc, "--libs", "cpu"]).stdout.split()
    cc = os.environ.get("CC", "cc").split()
    r = run(cc + ["-O1", "-Wall", "-Wextra", "-Werror", "-DOPC_NO_MAIN", '-DSERVE_H="serve.h"',
                  "-I", d, HERE / "api_test.c", d / "serve.c", "-o", d / "api_test", "-pthread"] +
            cflags + libs)
    if not check(r.returncode == 0, "api: api_test.c links with the program", r.stdout + r.stderr):
        return
    r = run([d / "api_test", d], env={"OPC_CHECK": "1"})
    check(r.returncode == 0, "api: " + (r.stdout.strip() or "api_test"), r.stdout + r.stderr)


def expect_error(cmd, status, pattern, what):
    r = run(cmd)
    ok = r.returncode == status and re.search(pattern, r.stderr) is not None
    return check(ok, f"errors: {what} (exit {r.returncode})", r.stdout + r.stderr)


def group_errors(opc, work):
    models = build_models(work)
    d = work
    sq, cnn, bert = models
    expect_error([opc, sq, cnn, "--instances", "nosuch=2", "-o", d / "x"], 1,
                 r"--instances: expected NAME=K with NAME one of the models, got 'nosuch'",
                 "--instances names no model")
    expect_error([opc, sq, cnn, "--instances", "squeezenet1_1=0", "-o", d / "x"], 1,
                 r"--instances: expected a number from 1 to", "--instances 0")
    expect_error([opc, sq, sq, "-o", d / "x"], 1, r"two models are named 'squeezenet1_1'",
                 "two models of one name")
    expect_error([opc, "bad name=" + str(sq), cnn, "-o", d / "x"], 1, r"a model's name must be",
                 "a model name with a space")
    expect_error([opc, sq, cnn, bert, "--instances", "squeezenet1_1=8,torch_export_cnn=8,bert_tiny=8",
                  "-o", d / "x"], 2, r"more than 256 combinations", "too many combinations")
    expect_error([opc, sq, cnn, "--dump-ir"], 1, r"--dump-ir reads one model", "--dump-ir of two")
    expect_error([opc, sq, cnn, "--input-shape", "nosuch=1x3", "-o", d / "x"], 2,
                 r"--input-shape names 'nosuch', which is not an input of any model",
                 "--input-shape of no model")
    check(not list(d.glob("x*")), "errors: nothing written after a failed compile")
    r = run([opc, sq, cnn, "-o", d / "serve", "--target", "cpu"])
    if not check(r.returncode == 0, "errors: the program builds", r.stderr):
        return
    prog = d / "serve"
    expect_error([prog, "--load", "poisson:5,nosuch=3"], 1, r"no model 'nosuch'", "--load unknown model")
    expect_error([prog, "--load", "uniform:5"], 1, r"expected poisson:RATE", "--load bad spec")
    expect_error([prog, "--policy", "squeezenet1_1=5"], 1, r"runs 1 to 1 requests per round",
                 "--policy above the instances")
    expect_error([prog, "--input", "nosuch:x=y.npy"], 1, r"no model 'nosuch' with that input",
                 "--input of no model")
    weights = d / "serve.torch_export_cnn.weights"
    saved = weights.read_bytes()
    weights.unlink()
    expect_error([prog, "--weights", d], 2,
                 r"model 'torch_export_cnn': cannot read weights file .*serve\.torch_export_cnn\.weights",
                 "a missing weights file of one model")
    damaged = bytearray(saved)
    damaged[-100] ^= 0xFF
    weights.write_bytes(bytes(damaged))
    expect_error([prog, "--weights", d], 2, r"checksum mismatch", "a damaged weights file")
    weights.write_bytes(saved[:-8])
    expect_error([prog, "--weights", d], 2, r"not the weights of this program", "a truncated weights file")
    weights.write_bytes(saved)
    r = run([prog, "--weights", d])
    check(r.returncode == 0, "errors: runs again with the file restored", r.stderr)


def report_rows(text, system):
    """{model: (served/s, p50, p99)} of one system in --report's comparison."""
    rows, current = {}, None
    for line in text.splitlines():
        if line.startswith("  ") and len(line.split()) >= 6:
            if line[2:30].strip():
                current = line[2:30].strip()
            parts = line[30:].split()
            if current and current.startswith(system) and len(parts) >= 6:
                rows[parts[0]] = tuple(float(x) for x in parts[2:5])
    return rows


def group_plan(opc, work):
    models = build_models(work)
    sq, cnn, bert = models
    d = work
    # One copy of one model: the launcher's replay and the device-level
    # simulation of a context must predict the same latency.
    r = run([opc, sq, "--instances", "squeezenet1_1=1", "--arrivals", "squeezenet1_1=100", "--report"])
    joint, contexts = report_rows(r.stdout, "joint"), report_rows(r.stdout, "independent")
    ok = r.returncode == 0 and "squeezenet1_1" in joint and "squeezenet1_1" in contexts
    if ok:
        (_, j50, _), (_, c50, _) = joint["squeezenet1_1"], contexts["squeezenet1_1"]
        ok = abs(j50 - c50) <= 0.05 * c50
    check(ok, "plan: one copy: the launcher's replay and the context simulation agree on p50",
          r.stdout + r.stderr)
    # Three models at a light load: a choice, the same twice, in net.h.
    cmd = [opc] + models + ["--arrivals", "squeezenet1_1=200/s,torch_export_cnn=500,bert_tiny=300",
                            "--report", "-o", d / "plan.c"]
    r1, r2 = run(cmd), run(cmd)
    chosen = [re.search(r"^chosen: (.*)$", x.stdout, re.M) for x in (r1, r2)]
    ok = r1.returncode == 0 and all(chosen) and chosen[0].group(1) == chosen[1].group(1)
    check(ok, "plan: --arrivals chooses, and chooses the same twice", r1.stdout[-2000:] + r1.stderr)
    if ok:
        header = (d / "plan.h").read_text()
        counts = dict(re.findall(r"(\w+)=(\d+)", chosen[0].group(1)))
        listed = dict(re.findall(r"\*\s+\d+\s+(\w+) \(.*\): (\d+) instance", header))
        check("opc chose them for --arrivals" in header and counts == listed,
              f"plan: net.h lists the chosen instances {counts}", header[:3000])
    r = run([opc] + models + ["--arrivals", "squeezenet1_1=1e6", "-o", d / "over.c"])
    check(r.returncode == 0 and "no candidate serves this load" in r.stderr,
          "plan: a load beyond the device is warned about", r.stderr)
    expect_error([opc, sq, cnn, "--arrivals", "squeezenet1_1=fast"], 1,
                 r"--arrivals: expected NAME=RATE", "--arrivals with a bad rate")
    expect_error([opc, sq, cnn, "--arrivals", "nosuch=5"], 1, r"--arrivals: expected NAME=RATE",
                 "--arrivals of no model")
    expect_error([opc, sq, cnn, "--latency-bound", "5", "-o", d / "x"], 1,
                 r"--latency-bound needs --arrivals", "--latency-bound alone")


def main():
    opc, workdir, group = Path(sys.argv[1]).resolve(), Path(sys.argv[2]), sys.argv[3]
    # Each group (and configuration) its own folder: meson runs them side by side.
    work = workdir / "serve" / "-".join(sys.argv[3:5])
    work.mkdir(parents=True, exist_ok=True)
    if group == "outputs":
        group_outputs(opc, work, sys.argv[4])
    elif group == "load":
        group_load(opc, work)
    elif group == "api":
        group_api(opc, work)
    elif group == "errors":
        group_errors(opc, work)
    elif group == "plan":
        group_plan(opc, work)
    else:
        sys.exit(f"unknown group {group}")
    print(f"serve {group}: {'FAIL' if failures else 'ok'}, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
