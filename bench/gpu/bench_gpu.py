#!/usr/bin/env python3
"""GPU benchmark: opc against PyTorch on the lent GPU machine.

  . tools/gpu/env.sh        # first, on the GPU machine (libraries, CC, paths)
  bench_gpu.py [--opc OPC] [--models a,b] [--zoo a,b|none] [--schedulers ios,lios,...|none]
               [--precisions fp32,tf32,fp16,bf16]
               [--systems eager,cuda-graph,compile,max-autotune]
               [--runs 300] [--warmup 50] [--deadline 540] [--autotune-reserve 150]
               [--autotune-cap 90] [--step-cap 120] [--tag NAME] [-o FILE.md]
  bench_gpu.py --dry-run --opc OPC [--zoo-model squeezenet1_1] [-o FILE.md]
  bench_gpu.py --merge A.json B.json ... -o FILE.md
  bench_gpu.py --list

Models: torchvision's Inception-V3, GoogLeNet, SqueezeNet 1.1, ResNet-50,
MobileNetV2, DenseNet-121 and EfficientNet-B0, and timm's NASNet-A Large,
each with seeded random weights at batch 1, exported with torch.onnx.export
(the TorchScript exporter where this torch still has it). Besides them, the
zoo's networks (--zoo; tools/models/build.py, ONNX only): opc compiles the
zoo's file and is checked against ONNX Runtime on it, and its PyTorch peer
is torchvision's network of the same architecture (ZOO; its own weights,
timed once as an export above and shown again beside the zoo's rows as
"SYSTEM [peer]"). There is no ONNX-to-PyTorch converter on the GPU
machine, and the peers are what a PyTorch user would run. The torchvision
models' BatchNorm statistics are those of four seeded random batches, as
training would set them, so that random networks are as well scaled as
trained ones (--no-bn-calibration keeps PyTorch's defaults). For each model:
  1. opc compiles it under every scheduler and precision (--target cuda; in
     parallel, before anything is timed), and each program runs on the same
     input with `--bench RUNS --warmup WARMUP`;
  2. PyTorch runs it eagerly, as one whole-model CUDA graph, and through
     torch.compile in modes "reduce-overhead" and "max-autotune", in strict
     float32, in TF32 and in float16 and bfloat16 (the model and input
     converted with .to(dtype), the same weights, channels-last for CNNs),
     timed with CUDA events around each of RUNS runs after WARMUP warm-ups;
  3. every output is compared with PyTorch's eager strict-float32 output:
     opc must be within relative L2 1e-4 in strict float32, 1e-2 in fp16 and
     3e-2 in bf16 (ACCURACY).
Both sides time the same thing: the input copied from pageable host memory,
the network, and the output copied back, one run at a time. Percentiles are
nearest-rank, as the program's --bench computes them.

The budget: the run goes in phases (gpu_run), the slow torch.compile steps
last; no step starts after --deadline seconds, max-autotune keeps
--autotune-reserve seconds for itself and each of its steps is stopped at
--autotune-cap (other steps at --step-cap). Every planned step is a row
from the start: "not run" (not reached, or no time left) or "timed out"
where it did not finish, never dropped.

The table (markdown, with a .json beside it holding every number) goes to
-o, else to $OUT/gpu-bench-DATE-DEVICE[-TAG].md when the device tool's OUT
is set, else to bench/results/. It is rewritten after every model, so a run
stopped at its time limit still leaves what it measured. Runs split over
several device calls (--models subsets, --tag) are joined with --merge,
where a later part's "not run" row does not replace a measured one.

--dry-run needs no GPU, torch or CUDA driver: on a zoo model
(tools/models/build.py) it compiles with opc under every scheduler and
precision for --target cuda (compile and link against the CUDA toolkit only;
skipped when there is none), builds the fp32, fp16 and bf16 ones for --target cpu (the CPU
runtime has no TF32; it has the 16-bit types), checks their outputs against ONNX Runtime (relative
L2 < 1e-4, after a 2-run --bench) and prints the table with
the GPU columns marked "not run (dry run)". Exit status: 1 when opc failed to
compile a model or an opc strict-float32 output was wrong, else 0.
"""
import argparse
import concurrent.futures
import contextlib
import datetime
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_PY = os.path.join(ROOT, "tools", "models", "build.py")
REFERENCE_PY = os.path.join(ROOT, "tests", "zoo", "reference.py")

# name: (where it comes from, input height and width)
MODELS = {
    "inception_v3": ("torchvision", 299),
    "googlenet": ("torchvision", 224),
    "squeezenet1_1": ("torchvision", 224),
    "resnet50": ("torchvision", 224),
    "mobilenet_v2": ("torchvision", 224),
    "densenet121": ("torchvision", 224),
    "efficientnet_b0": ("torchvision", 224),
    "nasnetalarge": ("timm", 331),
}
# The zoo's networks (tools/models/build.py, ONNX only), each with its PyTorch
# peer: torchvision's network of the same architecture, from MODELS, with its
# own seeded weights. opc compiles the zoo's file and is checked against ONNX
# Runtime on it; the peer's PyTorch rows are shown beside it. Their rows are
# named "zoo:NAME".
ZOO = {"efficientnet_b0": "efficientnet_b0", "mobilenet_v2": "mobilenet_v2",
       "densenet121": "densenet121", "resnet50": "resnet50", "inception_v3": "inception_v3",
       "googlenet": "googlenet", "squeezenet1_1": "squeezenet1_1"}
ZOO_PREFIX = "zoo:"
SCHEDULERS = ["ios", "lios", "greedy", "sequential"]
PRECISIONS = ["fp32", "tf32", "fp16", "bf16"]
TORCH_SYSTEMS = ["eager", "cuda-graph", "compile", "max-autotune"]
TORCH_LABEL = {"eager": "PyTorch eager", "cuda-graph": "PyTorch CUDA graph",
               "compile": "torch.compile reduce-overhead",
               "max-autotune": "torch.compile max-autotune"}
TORCH_MODE = {"compile": "reduce-overhead", "max-autotune": "max-autotune"}
# The order in which the slow torch.compile steps take the time left: the
# issue's goals are in fp16 first.
COMPILE_PRIORITY = ["fp16", "fp32", "bf16", "tf32"]
NOT_REACHED = "not reached: the run was stopped before this step"
STRICT_TOL = 1e-4
# The relative L2 error each opc precision must keep against PyTorch's (or
# ONNX Runtime's) strict float32; TF32 is not bounded (cuDNN decides it).
ACCURACY = {"fp32": STRICT_TOL, "fp16": 1e-2, "bf16": 3e-2}
DRY = "not run (dry run)"


def opc_label(scheduler):
    return "opc " + scheduler


# ----------------------------------------------------------------- helpers
def run(cmd, timeout, env=None, cwd=None):
    """(exit status or None on time-out, stdout + stderr)"""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout
    except OSError as exc:
        return 127, str(exc)


def last_line(text):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    for l in lines:
        if "error" in l:
            return l[:300]
    return lines[-1][:300] if lines else "(no message)"


def parse_latency(text):
    """The numbers of the last `latency_ms mean=… p50=…` line, or None."""
    found = None
    for line in (text or "").splitlines():
        if line.startswith("latency_ms "):
            found = line
    if found is None:
        return None
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-+0-9.eE]+|nan|inf)", found)}


def percentile(sorted_times, p):
    """Nearest rank, as the emitted program's --bench does it."""
    n = len(sorted_times)
    k = int(math.ceil(p * n)) - 1
    return sorted_times[min(max(k, 0), n - 1)]


def stats(times):
    t = sorted(times)
    return {"mean": sum(t) / len(t), "p50": percentile(t, 0.5), "p90": percentile(t, 0.9),
            "p99": percentile(t, 0.99), "min": t[0], "runs": len(t)}


def rel_l2(ref, got):
    """Relative L2 error, or None with a reason."""
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    if ref.shape != got.shape:
        if ref.size != got.size:
            return None, "shape %s, expected %s" % (got.shape, ref.shape)
        got = got.reshape(ref.shape)
    if not np.all(np.isfinite(got)):
        return None, "NaN or Inf in the output"
    denom = float(np.linalg.norm(ref))
    return float(np.linalg.norm(got - ref)) / (denom if denom > 0 else 1.0), None


def slug(text):
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return re.sub(r"^nvidia-", "", s) or "unknown"


def tool_version(cmd):
    code, out = run(cmd, 30)
    return out.strip().splitlines()[0] if code == 0 and out.strip() else None


def graph_io(model_path):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    inputs = [i.name for i in m.graph.input if i.name not in inits]
    return inputs, [o.name for o in m.graph.output]


class Clock:
    """The run's time budget: steps that would not fit are reported, not run."""

    def __init__(self, seconds):
        self.start = time.monotonic()
        self.seconds = seconds

    def left(self):
        if self.seconds <= 0:
            return float("inf")
        return self.seconds - (time.monotonic() - self.start)


# ------------------------------------------------------------ the results
class Results:
    """Rows of the table, the per-model notes and the run's description;
    written to markdown and JSON after every change that matters."""

    def __init__(self, info, args, path):
        self.info, self.args, self.path = info, args, path
        self.rows = []
        self.models = {}

    def add(self, model, precision, system, **fields):
        row = {"model": model, "precision": precision, "system": system, "status": "ok"}
        row.update(fields)
        self.rows = [r for r in self.rows if (r["model"], r["precision"], r["system"])
                     != (model, precision, system)]
        self.rows.append(row)
        return row

    def to_json(self):
        return {"info": self.info, "args": self.args, "models": self.models, "rows": self.rows}

    def save(self):
        data = self.to_json()
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        # Written aside and renamed: a run killed at its limit leaves whole files.
        write_whole(os.path.splitext(self.path)[0] + ".json", json.dumps(data, indent=1))
        text = render(data)
        write_whole(self.path, text)
        return text


def write_whole(path, text):
    with open(path + ".part", "w") as f:
        f.write(text)
    os.replace(path + ".part", path)


def fmt_ms(v):
    if v is None:
        return "—"
    return "%.1f" % v if v >= 100 else "%.3f" % v


def base_system(system):
    """The system's label without a peer's name ("... [resnet50]")."""
    return system.split(" [")[0]


def system_order(system):
    system = base_system(system)
    if system.startswith("opc "):
        s = system[4:]
        return (0, SCHEDULERS.index(s) if s in SCHEDULERS else 99, system)
    names = [TORCH_LABEL[k] for k in TORCH_SYSTEMS]
    return (1, names.index(system) if system in names else 99, system)


def best_opc(rows, model, precision):
    """The opc row with the lowest median among those that ran correctly."""
    cands = [r for r in rows if r["model"] == model and r["precision"] == precision
             and r["system"].startswith("opc ") and r.get("p50") and r["status"] == "ok"]
    return min(cands, key=lambda r: r["p50"]) if cands else None


def render(data):
    """The markdown report from the JSON form (also used by --merge)."""
    info, rows = data["info"], data["rows"]
    dry = info.get("dry_run")
    lines = ["# GPU benchmark: opc against PyTorch (%s, %s)" % (info.get("date", "?"),
                                                              info.get("device", "?")), ""]
    lines += ["| | |", "|---|---|"]
    for key, label in [("device", "device"), ("driver", "driver"), ("libraries", "libraries"),
                       ("opc", "opc"), ("opc_programs", "opc's programs"), ("method", "method"),
                       ("host", "host"), ("command", "command")]:
        values = info.get(key)
        if values is None:
            continue
        if isinstance(values, list):
            values = "<br>".join(str(v) for v in values)
        lines.append("| %s | %s |" % (label, str(values).replace("|", "\\|")))
    lines.append("")
    if dry:
        lines.append("Dry run: no GPU was used. The opc rows' error is that of the same "
                     "program built for opc's CPU runtime, against ONNX Runtime.")
    else:
        lines.append("Times in milliseconds. opc speedup = the row's time / the time of opc's "
                     "fastest scheduler for that model and precision (marked ★); above 1, "
                     "opc is faster. p50 / floor: the measured median over the floor of opc's "
                     "--report (the longest chain of kernels, each at the device file's peak "
                     "or bandwidth, plus a launch). The error is the relative L2 distance to "
                     "PyTorch's eager strict-float32 output; opc in fp32 must stay below %g."
                     % STRICT_TOL)
        if any(m.startswith(ZOO_PREFIX) for m in data.get("models", {})):
            lines.append("")
            lines.append("zoo:NAME rows: opc on the zoo's network (tools/models/build.py), its "
                         "error against ONNX Runtime on that file; the rows marked [peer] are "
                         "those of torchvision's network of the same architecture (its own "
                         "weights), their error against the peer's own strict-float32 output.")
    lines.append("")
    lines.append("| model | precision | system | p50 ms | p90 ms | opc speedup p50 | "
                 "opc speedup p90 | p50 / floor | rel. L2 error | status |")
    lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    models = [m for m in data.get("models", {}) if any(r["model"] == m for r in rows)]
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    geo = {}
    for model in models:
        peer = data.get("models", {}).get(model, {}).get("peer")
        kind = "zoo" if model.startswith(ZOO_PREFIX) else "exports"
        for precision in PRECISIONS:
            group = [r for r in rows if r["model"] == model and r["precision"] == precision]
            if peer:  # the peer's PyTorch rows, named as such
                group += [dict(r, system="%s [%s]" % (r["system"], peer)) for r in rows
                          if r["model"] == peer and r["precision"] == precision
                          and not r["system"].startswith("opc ")]
            group.sort(key=lambda r: system_order(r["system"]))
            best = best_opc(rows, model, precision)
            for r in group:
                sp50 = sp90 = None
                if best and r.get("p50") and r["status"] == "ok":
                    sp50 = r["p50"] / best["p50"]
                    sp90 = r["p90"] / best["p90"] if r.get("p90") and best.get("p90") else None
                    if not r["system"].startswith("opc "):
                        geo.setdefault((kind, precision, base_system(r["system"])), []).append(sp50)
                star = " ★" if best is r else ""
                err = r.get("rel_l2")
                status = r["status"]
                if r.get("compile_s") is not None:
                    status += " (compiled in %.1f s)" % r["compile_s"]
                if r.get("note"):
                    status += ": " + r["note"]
                floor = r.get("floor_us")
                if dry and "p50" not in r:
                    p50 = p90 = s50 = s90 = DRY
                    to_floor = "%s (floor %.1f µs)" % (DRY, floor) if floor else DRY
                else:
                    p50, p90 = fmt_ms(r.get("p50")), fmt_ms(r.get("p90"))
                    s50 = "%.2f" % sp50 if sp50 else "—"
                    s90 = "%.2f" % sp90 if sp90 else "—"
                    to_floor = ("%.2f" % (r["p50"] * 1000 / floor)
                                if floor and r.get("p50") else "—")
                lines.append("| %s | %s | %s%s | %s | %s | %s | %s | %s | %s | %s |" % (
                    model, precision, r["system"], star, p50, p90, s50, s90, to_floor,
                    "%.2e" % err if err is not None else "—",
                    status.replace("|", "\\|").replace("\n", " ")))
    if geo:
        lines += ["", "Geometric mean of opc's speedup (p50) over each system (zoo: opc on "
                  "the zoo's network against its torchvision peer):", ""]
        for (kind, precision, system), v in sorted(geo.items()):
            lines.append("- %s, %s, %s: %.2f× over %d model(s)" % (
                kind, system, precision, math.exp(sum(math.log(x) for x in v) / len(v)), len(v)))
    left = {}
    for r in rows:
        if r["status"] in ("not run", "timed out"):
            left.setdefault(r["status"], []).append(r)
    if left and not dry:
        lines += ["", "Steps not measured (marked in the table, never dropped):", ""]
        for status, rs in sorted(left.items()):
            lines.append("- %s: %d (%s)" % (status, len(rs), ", ".join(sorted(
                {"%s %s" % (r["system"], r["precision"]) for r in rs}))))
    peers = [(m, d) for m, d in data.get("models", {}).items() if d.get("peer")]
    if peers:
        lines += ["", "The zoo's networks and their peers (parameters):", ""]
        for m, d in peers:
            peer = data["models"].get(d["peer"], {})
            lines.append("- %s: %s; peer torchvision %s: %s" % (
                m, d.get("parameters", "?"), d["peer"], peer.get("parameters", "?")))
    notes = [(m, n) for m, d in data.get("models", {}).items() for n in d.get("notes", [])]
    if notes:
        lines += ["", "Notes:", ""]
        lines += ["- %s: %s" % (m, n) for m, n in notes]
    lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------- opc steps
# The C compiler opc builds its programs with. tools/gpu/env.sh sets CC to a
# command with flags (cuDNN's header and library folders), which opc takes but
# torch.compile's Inductor does not: it runs $CC as one program name. So main()
# takes CC out of this process's environment and hands it to opc alone.
OPC_CC = None


def opc_env():
    return dict(os.environ, CC=OPC_CC) if OPC_CC else None


def compile_opc(opc, model_path, exe, target, scheduler, precision, timeout):
    """Compiles with --report, whose floor the table compares the measured
    time with (parse_floor)."""
    t0 = time.time()
    code, out = run([opc, model_path, "-o", exe, "--target", target, "--schedule", scheduler,
                     "--precision", precision, "--report"], timeout, env=opc_env())
    return code, out, round(time.time() - t0, 1)


def parse_floor(text):
    """The floor opc's --report states, in microseconds: the least its
    device file allows on the longest chain of kernels; None without one."""
    m = re.search(r"^floor: ([0-9.]+) us", text, re.M)
    return float(m.group(1)) if m else None


def run_opc(exe, inputs, outputs, out_dir, tag, runs, warmup, timeout):
    """Runs the program once on the input files and, with runs > 0, times it.
    Returns (latency dict or None, {output name: array}, error or None)."""
    cmd = [exe]
    for name, path in inputs:
        cmd += ["--input", "%s=%s" % (name, path)]
    files = {}
    for name in outputs:
        files[name] = os.path.join(out_dir, "out-%s-%s.npy" % (tag, re.sub(r"\W", "_", name)))
        cmd += ["--output", "%s=%s" % (name, files[name])]
    if runs > 0:
        cmd += ["--bench", str(runs), "--warmup", str(warmup)]
    code, out = run(cmd, timeout)
    if code != 0:
        return None, {}, "program %s: %s" % ("timed out" if code is None else "exited %d" % code,
                                             last_line(out))
    lat = parse_latency(out)
    if runs > 0 and not lat:
        return None, {}, "no latency_ms line in the program's output"
    return lat, {n: np.load(p) for n, p in files.items()}, None


def compile_all(jobs_list, a, clock):
    """Compiles (key, model path, exe, target, scheduler, precision) in
    parallel; returns {key: (exit status, output, seconds)}."""
    timeout = int(max(60, min(1200, clock.left() - 30)))
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = {pool.submit(compile_opc, a.opc, m, exe, target, s, p, timeout): key
                   for key, m, exe, target, s, p in jobs_list}
        for fut in concurrent.futures.as_completed(futures):
            results[futures[fut]] = fut.result()
    return results


# ---------------------------------------------------------------- dry run
def cpu_checked(precision, precisions):
    """The dry run checks the CPU builds of fp32, fp16 and bf16: the CPU
    runtime has no TF32, so a tf32 build computes what the fp32 one does."""
    return precision != "tf32" or "fp32" not in precisions


def dry_run(a, res):
    """Every step that needs no GPU, on a zoo model."""
    model = a.zoo_model
    work = os.path.join(a.work, model)
    os.makedirs(work, exist_ok=True)
    notes = res.models.setdefault(model, {"source": "zoo (tools/models/build.py)", "notes": []})["notes"]
    path = os.path.join(work, "model.onnx")
    code, out = run([sys.executable, BUILD_PY, model, "-o", path, "--seed", str(a.seed)], 600)
    ref_dir = os.path.join(work, "ref")
    if code == 0:
        code, out = run([sys.executable, REFERENCE_PY, path, "--seed", str(a.seed),
                         "--outdir", ref_dir], 600)
    if code != 0:
        notes.append("model or ONNX Runtime reference failed: " + last_line(out))
        return False
    inputs = [tuple(l.strip().split("=", 1)) for l in open(os.path.join(ref_dir, "inputs.txt")) if l.strip()]
    refs = [tuple(l.strip().split("=", 1)) for l in open(os.path.join(ref_dir, "outputs.txt")) if l.strip()]
    outputs = [n for n, _ in refs]

    cuda = os.environ.get("OPC_CUDA", "/usr/local/cuda")
    have_cuda = os.path.exists(os.path.join(cuda, "include", "cudnn.h"))
    if not have_cuda:
        notes.append("no CUDA toolkit with cuDNN at %s: --target cuda builds skipped" % cuda)
    jobs_list = []
    for s in a.schedulers:
        for p in a.precisions:
            if have_cuda:
                jobs_list.append(((s, p, "cuda"), path, os.path.join(work, "net-cuda-%s-%s" % (s, p)),
                                  "cuda", s, p))
            if cpu_checked(p, a.precisions):
                jobs_list.append(((s, p, "cpu"), path, os.path.join(work, "net-cpu-%s-%s" % (s, p)),
                                  "cpu", s, p))
    compiled = compile_all(jobs_list, a, Clock(0))
    ok = True
    for s in a.schedulers:
        for p in a.precisions:
            fields, status, parts = {}, "ok", []
            if have_cuda:
                code, out, secs = compiled[(s, p, "cuda")]
                exe = os.path.join(work, "net-cuda-%s-%s" % (s, p))
                fields["floor_us"] = parse_floor(out)
                if code == 0 and os.access(exe, os.X_OK):
                    parts.append("cuda build ok (%.1f s)" % secs)
                else:
                    status, ok = "FAIL", False
                    parts.append("cuda build failed: " + last_line(out))
            if not cpu_checked(p, a.precisions):
                parts.append("the CPU runtime computes in fp32 alone: checked in the fp32 row")
                res.add(model, p, opc_label(s), status=status, note="; ".join(parts))
                continue
            code, out, secs = compiled[(s, p, "cpu")]
            exe = os.path.join(work, "net-cpu-%s-%s" % (s, p))
            if code != 0:
                status, ok = "FAIL", False
                parts.append("cpu build failed: " + last_line(out))
            else:
                # A few timed runs exercise the --bench path and its parsing.
                lat, got, err = run_opc(exe, inputs, outputs, work, "%s-%s" % (s, p), 2, 1, 600)
                if err:
                    status, ok = "FAIL", False
                    parts.append("cpu run: " + err)
                else:
                    worst, wrong = 0.0, []
                    for name, ref in refs:
                        e, why = rel_l2(np.load(ref), got[name])
                        if why or e >= ACCURACY.get(p, STRICT_TOL):
                            wrong.append("%s: %s" % (name, why or "rel. L2 %.2e" % e))
                        worst = max(worst, e if e is not None else float("inf"))
                    fields["rel_l2"] = worst
                    if wrong:
                        status, ok = "FAIL", False
                        parts.append("cpu runtime vs ONNX Runtime: " + "; ".join(wrong))
                    else:
                        parts.append("cpu runtime vs ONNX Runtime ok (CPU p50 %.1f ms)" % lat["p50"])
            res.add(model, p, opc_label(s), status=status, note="; ".join(parts), **fields)
    for p in a.precisions:
        for system in a.systems:
            res.add(model, p, TORCH_LABEL[system], status=DRY, note="needs torch and a GPU")
    res.save()
    return ok


# ------------------------------------------------------------ torch steps
def set_tf32(torch, on):
    """TF32 in cuDNN convolutions and cuBLAS matmuls, on or off."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.backends.cudnn.allow_tf32 = on
            torch.backends.cuda.matmul.allow_tf32 = on
        except (AttributeError, RuntimeError):
            # Newer torch: the fp32_precision switches.
            torch.backends.cudnn.conv.fp32_precision = "tf32" if on else "ieee"
            torch.backends.cuda.matmul.fp32_precision = "tf32" if on else "ieee"


def build_torch_model(torch, name, seed):
    torch.manual_seed(seed)
    source = MODELS[name][0]
    if source == "timm":
        import timm
        return timm.create_model(name, pretrained=False, num_classes=1000)
    import torchvision.models as tvm
    kwargs = {"weights": None}
    if name in ("inception_v3", "googlenet"):
        # No auxiliary heads (they only run in training) and the models'
        # own initialisation rather than a warning about it.
        kwargs.update(aux_logits=False, init_weights=True)
    return getattr(tvm, name)(**kwargs)


def calibrate_batchnorm(torch, model, size, seed, device):
    """Sets every BatchNorm's running statistics to those of seeded random
    batches, as training would, so that the network is as well scaled as a
    trained one; the weights stay random."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a plain average over the batches
    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, size, size, generator=g).to(device))
    model.eval()
    return len(bns)


def export_onnx(torch, model, x, path, opset):
    """Exports with the TorchScript exporter when this torch has it (the
    classic Shape/Gather/... graphs), else with the dynamo exporter.
    Returns a description of what was used."""
    kwargs = dict(input_names=["input"], output_names=["logits"], do_constant_folding=True)
    how = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, (x,), path, dynamo=False, opset_version=opset, **kwargs)
            how = "torch.onnx.export(dynamo=False), opset %d" % opset
        except TypeError as exc:  # a torch whose export takes no `dynamo`
            torch.onnx.export(model, (x,), path, opset_version=opset, **kwargs)
            how = "torch.onnx.export (its default exporter), opset %d, after TypeError: %s" % (
                opset, str(exc)[:120])
        except Exception as exc:  # the TorchScript exporter is gone or failed
            first = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")
            torch.onnx.export(model, (x,), path, dynamo=True, **kwargs)
            how = "torch.onnx.export(dynamo=True) after the TorchScript exporter failed (%s)" % first
    # opc reads one file: fold any external weights back in (all < 2 GB).
    import onnx
    m = onnx.load(path)
    onnx.save_model(m, path, save_as_external_data=False)
    for f in os.listdir(os.path.dirname(path)):
        if f.endswith(".data") and f.startswith(os.path.basename(path)):
            os.remove(os.path.join(os.path.dirname(path), f))
    return how


def prepare_model(torch, name, a, res, work):
    """Builds, calibrates and exports one model and computes the reference.
    Returns a dict for the later steps, or None."""
    info = res.models.setdefault(name, {"notes": []})
    size = MODELS[name][1]
    t0 = time.time()
    model = build_torch_model(torch, name, a.seed)
    info["source"] = "%s %s" % (MODELS[name][0], name)
    info["parameters"] = int(sum(p.numel() for p in model.parameters()))
    model = model.cuda().eval()
    if a.bn_calibration:
        info["batchnorms_calibrated"] = calibrate_batchnorm(torch, model, size, a.seed, "cuda")
    x = np.random.default_rng(a.seed).standard_normal((1, 3, size, size), dtype=np.float32)
    in_path = os.path.join(work, "input.npy")
    np.save(in_path, x)
    path = os.path.join(work, "model.onnx")
    import copy
    cpu_model = copy.deepcopy(model).cpu().eval()
    info["export"] = export_onnx(torch, cpu_model, torch.from_numpy(x), path, a.opset)
    del cpu_model
    inputs, outputs = graph_io(path)
    if len(inputs) != 1:
        info["notes"].append("the export has %d inputs: %s" % (len(inputs), inputs))
        return None
    set_tf32(torch, False)
    with torch.no_grad():
        ref = model(torch.from_numpy(x).cuda())
    ref = ref.float().cpu().numpy()
    # ONNX Runtime on the exported file: tells an export problem from an opc one.
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        got = sess.run(None, {inputs[0]: x})[0]
        err, why = rel_l2(ref, got)
        info["onnxruntime_vs_pytorch_rel_l2"] = err
        if why or err >= STRICT_TOL:
            info["notes"].append("ONNX Runtime on the export differs from PyTorch: %s"
                                 % (why or "rel. L2 %.2e" % err))
    except Exception as exc:
        info["notes"].append("ONNX Runtime check not run: %s" % str(exc)[:200])
    info["prepare_s"] = round(time.time() - t0, 1)
    return {"model": model, "x": x, "path": path, "inputs": [(inputs[0], in_path)],
            "outputs": outputs, "ref": ref, "work": work}


def time_torch(torch, fn, runs, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return stats(times)


def torch_system(torch, system, prep, precision, a):
    """Times one PyTorch system; returns (stats, output array, extra fields)."""
    model = prep["model"]
    x_host = torch.from_numpy(prep["x"])  # pageable, as the opc program's input
    half = getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}.get(precision, ""), None)
    if half is not None:  # the same weights, converted; float32 in and out as opc's API
        import copy
        model = copy.deepcopy(model).to(half)
        x_host = x_host.to(half)
    x_dev = x_host.cuda()
    if half is not None and x_dev.dim() == 4:
        # Channels-last, as PyTorch's tensor-core convolutions want it (and
        # as opc stores 16-bit convolutions' data: choose-layout).
        model = model.to(memory_format=torch.channels_last)
        x_dev = x_dev.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        y = model(x_dev)
    y_host = torch.empty(y.shape, dtype=y.dtype)
    extra = {}
    set_tf32(torch, precision == "tf32")
    with torch.no_grad():
        if system == "eager":
            def fn():
                x_dev.copy_(x_host)
                y_host.copy_(model(x_dev))
        elif system == "cuda-graph":
            static_x = x_dev.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):  # cuDNN autotuning and allocations before capture
                    model(static_x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_y = model(static_x)

            def fn():
                static_x.copy_(x_host)
                graph.replay()
                y_host.copy_(static_y)
        else:
            torch._dynamo.reset()
            compiled = torch.compile(model, mode=TORCH_MODE[system])
            t0 = time.time()
            compiled(x_dev)
            torch.cuda.synchronize()
            extra["compile_s"] = round(time.time() - t0, 1)

            def fn():
                x_dev.copy_(x_host)
                y_host.copy_(compiled(x_dev))
        st = time_torch(torch, fn, a.runs, a.warmup)
    return st, y_host.float().numpy(), extra


# ---------------------------------------------------------------- GPU run
class StepTimeout(BaseException):
    """Not an Exception: torch's compilers catch those (a failed autotuning
    choice is skipped), and the cap must get through them."""


@contextlib.contextmanager
def capped(seconds):
    """Raises StepTimeout in the main thread after `seconds` (none: <= 0),
    and again every 5 s until the step is left, should something swallow
    it. A torch.compile spends its time in Python or waiting on its
    workers, so the alarm stops it; a step cut this way is marked "timed
    out"."""
    usable = (seconds and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise StepTimeout("stopped at its cap of %.0f s" % seconds)
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def zoo_key(name):
    return ZOO_PREFIX + name


def plan_rows(a, res):
    """Every step of the run as a row marked not reached, saved before
    anything runs: a run killed at its limit still lists what it left."""
    for key in [zoo_key(z) for z in a.zoo] + a.models:
        for p in a.precisions:
            for s in a.schedulers:
                res.add(key, p, opc_label(s), status="not run", note=NOT_REACHED)
            if not key.startswith(ZOO_PREFIX):
                for system in a.systems:
                    res.add(key, p, TORCH_LABEL[system], status="not run", note=NOT_REACHED)
    res.save()


def out_of_time(a):
    return "time budget spent (--deadline %g s)" % a.deadline


def prepare_zoo(name, a, res, work):
    """Builds a zoo network and ONNX Runtime's outputs on its test input
    (CPU only: runs in the pool while the GPU prepares the torchvision
    models). Returns the prep dict of prepare_model, or None."""
    info = res.models.setdefault(zoo_key(name), {"notes": []})
    info["source"] = "zoo (tools/models/build.py %s, seed %d); reference: ONNX Runtime" % (
        name, a.seed)
    info["peer"] = ZOO[name]
    t0 = time.time()
    path = os.path.join(work, "model.onnx")
    ref_dir = os.path.join(work, "ref")
    code, out = run([sys.executable, BUILD_PY, name, "-o", path, "--seed", str(a.seed)], 600)
    if code == 0:
        code, out = run([sys.executable, REFERENCE_PY, path, "--seed", str(a.seed),
                         "--outdir", ref_dir, "--others", "1"], 600)
    if code != 0:
        info["notes"].append("zoo model or ONNX Runtime reference failed: " + last_line(out))
        return None
    import onnx
    m = onnx.load(path, load_external_data=False)
    # As torch counts parameters(): BatchNorm's running statistics are buffers.
    stats = {n.input[k] for n in m.graph.node if n.op_type == "BatchNormalization"
             for k in (3, 4) if len(n.input) > k}
    info["parameters"] = int(sum(int(np.prod(t.dims)) for t in m.graph.initializer
                                 if t.name not in stats))
    pairs = lambda f: [tuple(l.strip().split("=", 1)) for l in open(os.path.join(ref_dir, f))
                       if l.strip()]
    refs = pairs("outputs.txt")
    info["prepare_s"] = round(time.time() - t0, 1)
    return {"path": path, "inputs": pairs("inputs.txt"), "outputs": [n for n, _ in refs],
            "refs": {n: np.load(f) for n, f in refs}, "work": work}


def time_opc(a, res, clock, key, prep, p, s, compiled):
    """One opc row: the program run, checked and timed. False when opc
    failed (compile, run or accuracy)."""
    label = opc_label(s)
    code, out, secs = compiled.get((key, s, p), (None, "not compiled: " + out_of_time(a), 0))
    if code is None:
        res.add(key, p, label, status="timed out" if "timed out" in out else "not run",
                compile_s=secs, note="opc: " + last_line(out))
        return True
    if code != 0:
        why = last_line(out)
        res.add(key, p, label, status="FAIL", compile_s=secs,
                note=why if why.startswith("opc") else "opc: " + why)
        return False
    if clock.left() < 20:
        res.add(key, p, label, status="not run", note=out_of_time(a))
        return True
    exe = os.path.join(prep["work"], "net-%s-%s" % (s, p))
    lat, got, err = run_opc(exe, prep["inputs"], prep["outputs"], prep["work"], "%s-%s" % (s, p),
                            a.runs, a.warmup, int(max(10, min(a.step_cap, clock.left()))))
    if err:
        res.add(key, p, label, status="timed out" if "timed out" in err else "FAIL",
                compile_s=secs, note=err)
        return "timed out" in err
    worst, why = 0.0, None
    for name in prep["refs"]:
        e, w = rel_l2(prep["refs"][name], got[name])
        worst = max(worst, e if e is not None else float("inf"))
        why = why or w
    row = res.add(key, p, label, compile_s=secs, rel_l2=worst if not why else None,
                  floor_us=parse_floor(out),
                  **{k: lat[k] for k in ("p50", "p90", "mean", "min") if k in lat})
    ok = True
    if why or (p in ACCURACY and worst >= ACCURACY[p]):
        row["status"] = "FAIL"
        row["note"] = why or "relative L2 %.2e >= %g" % (worst, ACCURACY[p])
        ok = False
    print("bench_gpu: %s %s %s p50=%s rel_l2=%s %s" % (
        key, p, label, fmt_ms(row.get("p50")), worst, row["status"]), flush=True)
    return ok


def time_peer(torch, a, res, clock, name, prep, p, system):
    """One PyTorch row, started only while the budget lasts and stopped at
    its cap (--step-cap; --autotune-cap for max-autotune)."""
    label = TORCH_LABEL[system]
    need = {"compile": a.compile_reserve, "max-autotune": min(a.autotune_cap, 60)}.get(system, 20)
    if clock.left() < need:
        res.add(name, p, label, status="not run", note=out_of_time(a))
        return
    cap = a.autotune_cap if system == "max-autotune" else a.step_cap
    cap = max(1, min(cap, clock.left() - 5))
    print("bench_gpu: start %s %s %s (cap %.0f s)" % (name, p, label, cap), flush=True)
    t0 = time.time()
    try:
        with capped(cap):
            st, y, extra = torch_system(torch, system, prep, p, a)
        e, why = rel_l2(prep["ref"], y)
        row = res.add(name, p, label, rel_l2=e, **extra,
                      **{k: st[k] for k in ("p50", "p90", "mean", "min")})
        if why:
            row["note"] = why
    except StepTimeout as exc:
        res.add(name, p, label, status="timed out",
                note="%s (%s)" % (exc, "still compiling" if system in TORCH_MODE else "running"))
        reset_torch(torch)
    except Exception as exc:
        res.add(name, p, label, status="FAIL", note="%s: %s" % (
            type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else ""))
        reset_torch(torch)
    print("bench_gpu: %s %s %s %s (%.1f s)" % (name, p, label, res.rows[-1].get("p50")
                                               or res.rows[-1]["status"], time.time() - t0),
          flush=True)
    res.save()


def reset_torch(torch):
    """After a failed or stopped step: no compiled graphs, no pending work."""
    try:
        torch._dynamo.reset()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:
        pass


def reduce_overhead_seconds(res, model, precision):
    """How long reduce-overhead took to compile the model in this run."""
    for r in res.rows:
        if (r["model"], r["precision"], r["system"]) == (model, precision, TORCH_LABEL["compile"]):
            return r.get("compile_s") if r.get("compile_s") is not None else float("inf")
    return float("inf")


def gpu_run(a, res):
    """The benchmark in phases, so that the slow steps come last and take
    what time is left: (1) the models prepared (the zoo's built on the CPU
    while the GPU exports torchvision's) and every opc program compiled;
    (2) opc's programs timed, then PyTorch eager and CUDA graph; (3)
    torch.compile reduce-overhead, until --autotune-reserve seconds are
    left; (4) torch.compile max-autotune, each capped at --autotune-cap
    seconds. Phases 3 and 4 go by precision (COMPILE_PRIORITY), then model.
    Every step planned is a row from the start; one that did not fit is
    marked "not run" or "timed out", never dropped."""
    import torch
    if not torch.cuda.is_available():
        sys.exit("bench_gpu: torch sees no GPU; use --dry-run on a machine without one")
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    clock = Clock(a.deadline)
    plan_rows(a, res)
    ok = True
    preps = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs))
    futures = {}
    jobs_list = []
    t0 = time.time()

    def compile_all_of(key, prep):
        timeout = int(max(60, min(1200, clock.left() - 30)))
        for s in a.schedulers:
            for p in a.precisions:
                exe = os.path.join(prep["work"], "net-%s-%s" % (s, p))
                jobs_list.append(exe)
                futures[(key, s, p)] = pool.submit(compile_opc, a.opc, prep["path"], exe,
                                                   a.opc_target, s, p, timeout)

    zoo_futures = {}
    for name in a.zoo:
        if clock.left() < 60:
            res.models.setdefault(zoo_key(name), {"notes": []})["notes"].append(
                "not prepared: " + out_of_time(a))
            continue
        work = os.path.join(a.work, "zoo-" + name)
        os.makedirs(work, exist_ok=True)
        zoo_futures[name] = pool.submit(prepare_zoo, name, a, res, work)
    print("bench_gpu: phase 1: preparing %d torchvision and %d zoo models" % (
        len(a.models), len(a.zoo)), flush=True)
    for name in a.models:
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        if clock.left() < 60:
            res.models.setdefault(name, {"notes": []})["notes"].append(
                "not prepared: " + out_of_time(a))
            continue
        try:
            with capped(max(1, min(a.step_cap, clock.left() - 5))):
                prep = prepare_model(torch, name, a, res, work)
        except (Exception, StepTimeout) as exc:
            prep = None
            res.models.setdefault(name, {"notes": []})["notes"].append(
                "build or export failed: %s: %s" % (type(exc).__name__, str(exc)[:300]))
            reset_torch(torch)
        if prep:
            prep["refs"] = {prep["outputs"][0]: prep["ref"]}  # PyTorch's, strict fp32
            preps[name] = prep
            compile_all_of(name, prep)
        print("bench_gpu: %s prepared (%s s, %s)" % (
            name, res.models.get(name, {}).get("prepare_s", "-"),
            res.models.get(name, {}).get("export", "not exported")), flush=True)
        res.save()
    for name, fut in zoo_futures.items():
        try:
            prep = fut.result(timeout=max(1, clock.left()))
        except concurrent.futures.TimeoutError:
            prep = None
            res.models[zoo_key(name)]["notes"].append("not prepared: " + out_of_time(a))
        if prep:
            preps[zoo_key(name)] = prep
            compile_all_of(zoo_key(name), prep)
    compiled = {}
    for key, f in futures.items():
        try:
            compiled[key] = f.result(timeout=max(1, clock.left()))
        except concurrent.futures.TimeoutError:
            compiled[key] = (None, "not compiled by the deadline: " + out_of_time(a), 0)
    pool.shutdown(wait=False, cancel_futures=True)
    res.save()
    print("bench_gpu: models prepared and %d opc compiles done in %.0f s" % (
        len(futures), time.time() - t0), flush=True)
    if jobs_list and "opc_programs" not in res.info:
        code, out = run(["ldd", jobs_list[0]], 30)
        libs = [l.strip() for l in out.splitlines()
                if re.search(r"cudnn|cublas|cudart|nvrtc|libcuda\.", l)]
        res.info["opc_programs"] = "built with `%s`; loads %s" % (
            OPC_CC or "cc", "; ".join(libs) or "?")
    for key in [zoo_key(z) for z in a.zoo] + a.models:
        if key not in preps:  # marked once, in every row of the model
            why = "; ".join(res.models.get(key, {}).get("notes", [])) or "model not prepared"
            for r in [r for r in res.rows if r["model"] == key]:
                failed = "not prepared: time" not in why
                r.update(status="FAIL" if failed else "not run", note=why)
                ok = ok and not failed

    print("bench_gpu: phase 2: opc, PyTorch eager and CUDA graph (%.0f s left)" % clock.left(),
          flush=True)
    for key, prep in preps.items():
        for p in a.precisions:
            for s in a.schedulers:
                ok = time_opc(a, res, clock, key, prep, p, s, compiled) and ok
            if key in MODELS:
                for system in a.systems:
                    if system not in TORCH_MODE:
                        time_peer(torch, a, res, clock, key, prep, p, system)
            res.save()
        if not a.keep:
            for f in os.listdir(prep["work"]):
                if f.startswith("net-"):
                    os.remove(os.path.join(prep["work"], f))

    for system in [x for x in TORCH_SYSTEMS if x in TORCH_MODE and x in a.systems]:
        print("bench_gpu: phase %s: %s (%.0f s left)" % (
            "3" if system == "compile" else "4", TORCH_LABEL[system], clock.left()), flush=True)
        for p in sorted(a.precisions, key=COMPILE_PRIORITY.index):
            names = [m for m in a.models if m in preps]
            if system == "max-autotune":  # the quickest to compile first: most fit
                names.sort(key=lambda m: reduce_overhead_seconds(res, m, p))
            for name in names:
                keep_for_autotune = (a.autotune_reserve if system == "compile"
                                     and "max-autotune" in a.systems else 0)
                if clock.left() - keep_for_autotune < a.compile_reserve and system == "compile":
                    res.add(name, p, TORCH_LABEL[system], status="not run",
                            note="%s (%g s kept for max-autotune)" % (out_of_time(a),
                                                                     keep_for_autotune))
                    res.save()
                    continue
                time_peer(torch, a, res, clock, name, preps[name], p, system)
                reset_torch(torch)
    for prep in preps.values():
        prep["model"] = None
    set_tf32(torch, False)
    res.save()
    return ok


# ------------------------------------------------------------ description
def describe(a, dry):
    now = datetime.datetime.now(datetime.timezone.utc)
    info = {"date": now.strftime("%Y-%m-%d"), "datetime": now.strftime("%Y-%m-%d %H:%M UTC"),
            "dry_run": dry, "host": "%s, %d CPUs, %s" % (platform.node(), os.cpu_count() or 0,
                                                          platform.platform())}
    libs = ["python %s" % platform.python_version(), "numpy %s" % np.__version__]
    for mod in ("onnx", "onnxruntime"):
        try:
            libs.append("%s %s" % (mod, __import__(mod).__version__))
        except ImportError:
            libs.append("%s: not installed" % mod)
    gcc = tool_version([(OPC_CC or "cc").split()[0], "--version"])
    if gcc:
        libs.append(gcc)
    if dry:
        info["device"] = "none (dry run)"
    else:
        import torch
        libs.insert(0, "torch %s (CUDA %s, cuDNN %s)" % (
            torch.__version__, torch.version.cuda, torch.backends.cudnn.version()))
        for mod in ("torchvision", "timm"):
            try:
                libs.insert(1, "%s %s" % (mod, __import__(mod).__version__))
            except ImportError:
                libs.insert(1, "%s: not installed" % mod)
        props = torch.cuda.get_device_properties(0)
        info["device"] = "%s, %d SMs, %.0f GiB" % (props.name, props.multi_processor_count,
                                                   props.total_memory / 2 ** 30)
        info["device_name"] = props.name
        drv = tool_version(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        info["driver"] = drv or "?"
    info["libraries"] = libs
    opc_info = [tool_version([a.opc, "--version"]) or "%s (does not run)" % a.opc]
    carried = os.path.join(os.path.dirname(a.opc), "opc.info")
    if os.path.exists(carried):
        opc_info += [l.strip() for l in open(carried) if l.strip() and not l.startswith("opc:")]
    else:
        code, out = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], 10)
        if code == 0:
            opc_info.append("git %s" % out.strip())
    info["opc"] = opc_info
    if dry:
        info["method"] = ("zoo model %s (tools/models/build.py, seed %d); each scheduler and "
                          "precision compiled for --target cuda and --target cpu; the CPU "
                          "programs checked against ONNX Runtime" % (a.zoo_model, a.seed))
    else:
        info["method"] = (
            "batch 1; seeded random weights (seed %d)%s; input N(0,1) from numpy seed %d; "
            "opc: `--target cuda --schedule S --precision P`, program run with `--bench %d "
            "--warmup %d`; PyTorch: CUDA events around each of %d runs after %d warm-ups, "
            "torch.backends.cudnn.benchmark=%s; both copy the input from pageable host memory "
            "and the output back within each timed run; fp32 = TF32 off in cuDNN and cuBLAS, "
            "tf32 = on (allow_tf32)" % (
                a.seed, ", BatchNorm statistics from 4 seeded random batches of 8"
                if a.bn_calibration else "", a.seed, a.runs, a.warmup, a.runs, a.warmup,
                a.cudnn_benchmark))
    info["command"] = "`%s`" % " ".join(shlex.quote(x) for x in sys.argv)
    return info


def default_output(info, tag):
    device = "dry-run" if info.get("dry_run") else slug(info.get("device_name", "gpu"))
    name = "gpu-bench-%s-%s%s.md" % (info["date"], device, "-" + tag if tag else "")
    if os.environ.get("OUT"):
        return os.path.join(os.environ["OUT"], name)
    return os.path.join(ROOT, "bench", "results", name)


def merge(paths, output):
    """Joins the JSON of several runs into one report."""
    data = None
    for path in paths:
        with open(path) as f:
            part = json.load(f)
        if data is None:
            data = part
            data["info"]["parts"] = [path]
            continue
        # A later part's row replaces an earlier one, unless the later did
        # not run the step and the earlier did (a part that redoes the rest
        # of a run plans, and marks, steps already measured).
        key = lambda r: (r["model"], r["precision"], r["system"])
        old = {key(r): r for r in data["rows"]}
        new = [r for r in part["rows"]
               if r["status"] != "not run" or old.get(key(r), r)["status"] == "not run"]
        keys = {key(r) for r in new}
        data["rows"] = [r for r in data["rows"] if key(r) not in keys] + new
        data["models"].update(part["models"])
        for key in ("device", "driver", "libraries", "opc", "opc_programs", "method", "command"):
            old, new = data["info"].get(key), part["info"].get(key)
            if new is not None and new != old:
                old_list = old if isinstance(old, list) else [old] if old is not None else []
                new_list = new if isinstance(new, list) else [new]
                data["info"][key] = old_list + [v for v in new_list if v not in old_list]
        data["info"]["parts"].append(path)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    text = render(data)
    with open(output, "w") as f:
        f.write(text)
    with open(os.path.splitext(output)[0] + ".json", "w") as f:
        json.dump(data, f, indent=1)
    return text


def split_list(text, known, what, ap):
    items = [x.strip() for x in text.split(",") if x.strip()]
    for x in items:
        if x not in known:
            ap.error("unknown %s %r (known: %s)" % (what, x, ", ".join(known)))
    return items


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    default_opc = os.path.join(ROOT, ".gpu-carry", "bin", "opc")
    if not os.path.exists(default_opc):
        default_opc = os.path.join(ROOT, "build", "opc")
    ap.add_argument("--opc", default=default_opc, help="default: .gpu-carry/bin/opc, else build/opc")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--systems", default=",".join(TORCH_SYSTEMS), help="PyTorch's systems to time")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=13, help="for the TorchScript exporter")
    ap.add_argument("--jobs", type=int, default=0, help="parallel opc compiles (default: CPUs, 2 in a dry run)")
    ap.add_argument("--deadline", type=float, default=540,
                    help="seconds after which no further step starts (0: none)")
    ap.add_argument("--zoo", default=",".join(ZOO),
                    help="zoo networks for opc, each beside its torchvision peer (none: no zoo)")
    ap.add_argument("--compile-reserve", type=float, default=30,
                    help="start a torch.compile reduce-overhead step only with this many seconds left")
    ap.add_argument("--autotune-reserve", type=float, default=150,
                    help="seconds that reduce-overhead leaves to the max-autotune phase")
    ap.add_argument("--autotune-cap", type=float, default=90,
                    help="seconds after which a max-autotune step is stopped and marked timed out")
    ap.add_argument("--step-cap", type=float, default=120,
                    help="the same for every other step (a model's preparation, a timing)")
    ap.add_argument("--no-bn-calibration", dest="bn_calibration", action="store_false")
    ap.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false")
    ap.add_argument("--work", default=None, help="work folder (default: a fresh one under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the compiled programs")
    ap.add_argument("--tag", default="", help="added to the default report name (a part of a split run)")
    ap.add_argument("-o", "--output", default=None, help="the markdown report (.json beside it)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: see above")
    ap.add_argument("--zoo-model", default="squeezenet1_1", help="the dry run's model")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="join the JSON of several runs")
    ap.add_argument("--list", action="store_true", help="print the models and exit")
    # Only for bench/gpu/test_bench_logic.py, which runs the GPU path with a
    # stand-in torch on a machine without a GPU.
    ap.add_argument("--opc-target", default="cuda", choices=["cuda", "cpu"], help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.list:
        for name, (source, size) in MODELS.items():
            print("%-18s %-12s 1x3x%dx%d" % (name, source, size, size))
        for name, peer in ZOO.items():
            print("%-18s %-12s peer: torchvision %s" % (zoo_key(name), "zoo", peer))
        return 0
    if a.merge:
        if not a.output:
            ap.error("--merge needs -o")
        print(merge(a.merge, a.output))
        print("bench_gpu: wrote %s" % a.output)
        return 0
    a.models = split_list(a.models, list(MODELS), "model", ap)
    a.zoo = [] if a.zoo == "none" else split_list(a.zoo, list(ZOO), "zoo model", ap)
    # A zoo network's PyTorch rows are its peer's: time the peer too.
    a.models += [ZOO[z] for z in a.zoo if ZOO[z] not in a.models]
    # none: PyTorch's rows alone (a part that redoes a run's torch.compile steps)
    a.schedulers = ([] if a.schedulers == "none" else
                    split_list(a.schedulers, SCHEDULERS, "scheduler", ap))
    a.precisions = split_list(a.precisions, PRECISIONS, "precision", ap)
    a.systems = split_list(a.systems, TORCH_SYSTEMS, "system", ap)
    a.opc = os.path.abspath(a.opc)
    global OPC_CC
    OPC_CC = os.environ.pop("CC", None)
    if a.jobs <= 0:
        a.jobs = 2 if a.dry_run else (os.cpu_count() or 4)
    if not os.access(a.opc, os.X_OK):
        sys.exit("bench_gpu: no opc at %s (build it, or tools/gpu/pack_opc.sh)" % a.opc)
    if tool_version([a.opc, "--version"]) is None:
        sys.exit("bench_gpu: %s does not run; on the GPU machine, source tools/gpu/env.sh first "
                 "(LD_LIBRARY_PATH for libprotobuf-c)" % a.opc)
    if not a.dry_run and "OPC_GPU_PREFIX" not in os.environ:
        print("bench_gpu: warning: tools/gpu/env.sh was not sourced; CC and LD_LIBRARY_PATH "
              "may not find cuDNN", flush=True)

    tmp = None
    if a.work is None:
        tmp = a.work = tempfile.mkdtemp(prefix="opc-bench-gpu-")
    os.makedirs(a.work, exist_ok=True)
    info = describe(a, a.dry_run)
    if a.output is None:
        a.output = (os.path.join(tempfile.gettempdir(), "gpu-bench-dry-run.md") if a.dry_run
                    else default_output(info, a.tag))
    args = {k: v for k, v in vars(a).items() if k not in ("merge", "list")}
    res = Results(info, args, a.output)
    try:
        ok = dry_run(a, res) if a.dry_run else gpu_run(a, res)
        print(res.save())
    finally:
        if tmp and not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("bench_gpu: wrote %s and %s" % (a.output, os.path.splitext(a.output)[0] + ".json"))
    if not ok:
        print("bench_gpu: FAILED: opc failed to compile, run or match on some model (see the table)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
