#!/usr/bin/env python3
"""CPU latency benchmark: opc-compiled executables vs ONNX Runtime.

  bench_cpu.py --opc BUILD/opc [--models a,b,...] [--exports DIR] [--runs N]
               [--warmup W] [--threads T] [--batch B] [-o bench/results/cpu-DATE.md]

For every zoo model (tools/models/build.py) at batch 1, then every
DIR/NAME.onnx of --exports (bench/cpu/exports.py's torchvision and PP-OCR
exports) as it is:
  1. build the model into the work directory (an export: copy it there),
  2. compile:  opc model.onnx -o net --target cpu [--opc-flags ...]
  3. in each of R rounds (--rounds), in turn:
       ./net --bench N/R --warmup W [--net-flags ...]
     which prints   latency_ms mean=... p50=... p90=... p99=... min=...
     (the thread count is passed as OMP_NUM_THREADS / OPC_THREADS), the
     baseline's net likewise, and onnxruntime in-process (CPUExecutionProvider,
     intra_op_num_threads=T, inter_op_num_threads=1, sequential execution,
     full graph optimisation) over N/R runs after W warm-up runs; each
     statistic is the median over the rounds and each ratio the median of
     the rounds' ratios, so that a burst of load on a shared machine moves
     one round only; each turn starts after a pause (--pause), because
     ONNX Runtime's pool threads spin on after its runs and would share the
     cores with the next engine's round,
  4. time each operator kind in sequence: opc's units under `net --trace`,
     ONNX Runtime's nodes under its own profiler,
and write a markdown table (plus a .json with the raw numbers).
A failing step is reported in the table; the script goes on with the next
model.  Exit status 0 unless the script itself is misused.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_PY = os.path.join(ROOT, "tools", "models", "build.py")


# ------------------------------------------------------------ machine info
def cpu_info():
    model = platform.processor() or "unknown"
    phys = set()
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            cur = {}
            for line in f:
                if not line.strip():
                    if "physical id" in cur or "core id" in cur:
                        phys.add((cur.get("physical id"), cur.get("core id")))
                    cur = {}
                    continue
                k, _, v = line.partition(":")
                k, v = k.strip(), v.strip()
                cur[k] = v
                if k == "model name":
                    model = v
                if k == "flags":
                    flags = set(v.split())
            if "physical id" in cur or "core id" in cur:
                phys.add((cur.get("physical id"), cur.get("core id")))
    except OSError:
        pass
    logical = os.cpu_count() or 1
    try:
        avail = len(os.sched_getaffinity(0))
    except AttributeError:
        avail = logical
    isa = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw",
                       "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile") if f in flags]
    return {"model": model, "logical_cpus": logical,
            "physical_cores": len(phys) if phys else None,
            "cpus_available": avail, "isa": isa}


def git_rev():
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None
    except Exception:
        return None


def opc_version(opc):
    try:
        out = subprocess.run([opc, "--version"], capture_output=True, text=True, timeout=20)
        if out.returncode == 0:
            return (out.stdout.strip() or out.stderr.strip()).splitlines()[0]
    except Exception:
        pass
    return None


# ------------------------------------------------------------------ steps
def tail(s, n=300):
    s = (s or "").strip().replace("\n", " | ")
    return s if len(s) <= n else "..." + s[-n:]


def run_cmd(cmd, timeout, env=None, cwd=None):
    """Run; return (ok, stdout, stderr, note)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=env, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        return False, e.stdout or "", e.stderr or "", "timeout after %ds" % timeout
    except OSError as e:
        return False, "", str(e), "cannot run: %s" % e
    if p.returncode != 0:
        return False, p.stdout, p.stderr, "exit status %d" % p.returncode
    return True, p.stdout, p.stderr, ""


LAT_RE = re.compile(r"latency_ms\b(.*)")
KV_RE = re.compile(r"([A-Za-z0-9_]+)=([-+0-9.eE]+|nan|inf)")


def parse_latency(text):
    """Return dict of the key=value pairs on the last 'latency_ms' line."""
    found = None
    for line in (text or "").splitlines():
        m = LAT_RE.search(line)
        if m:
            found = m.group(1)
    if found is None:
        return None
    vals = {}
    for k, v in KV_RE.findall(found):
        try:
            vals[k] = float(v)
        except ValueError:
            pass
    return vals


ORT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64,
             "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def random_feeds(sess, seed):
    """Inputs of each input's type: floats from N(0, 1); integers within the
    model's opc.input_range.NAME ("lo,hi") metadata, or all ones for an
    opc.input_kind.NAME of "mask" (token ids and attention masks)."""
    rng = np.random.default_rng(seed)
    meta = sess.get_modelmeta().custom_metadata_map
    feeds = {}
    for i in sess.get_inputs():
        dtype = ORT_TYPES.get(i.type)
        if dtype is None:
            raise ValueError("input %s: no random data for %s" % (i.name, i.type))
        if np.issubdtype(dtype, np.floating):
            feeds[i.name] = rng.standard_normal(i.shape).astype(dtype)
        elif meta.get("opc.input_kind." + i.name) == "mask" or dtype == np.bool_:
            feeds[i.name] = np.ones(i.shape, dtype=dtype)
        else:
            lo, hi = (int(v) for v in meta.get("opc.input_range." + i.name, "0,2").split(","))
            feeds[i.name] = rng.integers(lo, hi, size=i.shape).astype(dtype)
    return feeds


def ort_session(model_path, threads, opt, profile_prefix=None):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[opt]
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])


def summary(t):
    t = np.asarray(t)
    return {"mean": float(t.mean()), "p50": float(np.percentile(t, 50)),
            "p90": float(np.percentile(t, 90)), "p99": float(np.percentile(t, 99)),
            "min": float(t.min())}


class OrtTimer:
    """One ONNX Runtime session, timed a round at a time."""

    def __init__(self, model_path, threads, opt, seed=0):
        self.sess = ort_session(model_path, threads, opt)
        self.feeds = random_feeds(self.sess, seed)

    def round(self, runs, warmup):
        for _ in range(warmup):
            self.sess.run(None, self.feeds)
        t = np.empty(runs)
        for i in range(runs):
            t0 = time.perf_counter()
            self.sess.run(None, self.feeds)
            t[i] = (time.perf_counter() - t0) * 1e3
        return summary(t)


def combine(rounds):
    """One latency dict from several rounds' dicts: each statistic's median
    over the rounds, so that a burst of load on the machine during one
    round moves it little."""
    return {k: float(np.median([r[k] for r in rounds])) for k in rounds[0]}


def paired_ratio(num, den, stat="p50"):
    """The median over rounds of num's statistic over den's in the same
    round: the two engines ran seconds apart, so the machine's drift
    between rounds cancels."""
    return float(np.median([a[stat] / b[stat] for a, b in zip(num, den)]))


def list_models():
    out = subprocess.run([sys.executable, BUILD_PY, "--list"], capture_output=True,
                         text=True, check=True)
    return [l.strip() for l in out.stdout.splitlines() if l.strip()]


def fmt(v, nd=3):
    if v is None:
        return "—"
    if v >= 100:
        return "%.1f" % v
    return ("%%.%df" % nd) % v


def bench_model(name, a, work, env, export=None):
    """Times zoo model `name`, built by tools/models/build.py, or the ONNX
    file `export` as it is (bench/cpu/exports.py's)."""
    r = {"model": name, "batch": a.batch, "status": [], "opc": None, "ort": None}
    mdir = os.path.join(work, name)
    os.makedirs(mdir, exist_ok=True)
    model = os.path.join(mdir, "model.onnx")
    if export:
        import shutil
        shutil.copyfile(export, model)
    else:
        ok, so, se, note = run_cmd([sys.executable, BUILD_PY, name, "-o", model,
                                    "--batch", str(a.batch), "--seed", "0"], a.timeout)
        if not ok:
            r["status"].append("build failed (%s): %s" % (note, tail(se)))
            return r
    try:
        import onnx
        m = onnx.load(model, load_external_data=False)
        r["input"] = "; ".join("%s%s" % (i.name, [d.dim_value for d in i.type.tensor_type.shape.dim])
                               for i in m.graph.input)
    except Exception:
        r["input"] = "?"

    # --- compile opc (and the baseline), open ONNX Runtime's session
    nets = {}
    if not a.skip_opc:
        nets["opc"] = compile_opc(a.opc, "opc", model, mdir, a, env, r["status"])
    else:
        r["status"].append("opc skipped")
    if a.baseline:
        nets["baseline"] = compile_opc(a.baseline, "baseline", model, mdir, a, env, r["status"])
    nets = {k: v for k, v in nets.items() if v}
    timers = {}
    try:
        timers["ort"] = OrtTimer(model, a.threads, a.ort_opt)
    except Exception as e:  # report, do not abort the whole run
        r["status"].append("onnxruntime failed: %s" % tail(str(e)))

    # --- the engines in turn, round after round
    rounds = {k: [] for k in list(nets) + list(timers)}
    per_round = max(1, a.runs // a.rounds)
    for _ in range(a.rounds):
        for tag, net in list(nets.items()):
            time.sleep(a.pause)
            lat, device = run_net(net, tag, per_round, a, env, r["status"])
            if lat is None:
                del nets[tag]
                continue
            rounds[tag].append(lat)
            if device and tag == "opc":
                r["device"] = device
        for tag, timer in list(timers.items()):
            time.sleep(a.pause)
            try:
                rounds[tag].append(timer.round(per_round, a.warmup))
            except Exception as e:
                r["status"].append("onnxruntime failed: %s" % tail(str(e)))
                del timers[tag]
    full = {k: v for k, v in rounds.items() if len(v) == a.rounds}
    for tag in full:
        r[tag] = combine(full[tag])
    if "opc" in full:
        kinds = opc_kind_times(os.path.join(mdir, "net"), a, env, mdir)
        if kinds:
            r["opc_kind_us"] = kinds
    if "opc" in full and "baseline" in full:
        r["ratio_baseline_p50"] = paired_ratio(full["opc"], full["baseline"])
    if "ort" in full:
        try:
            r["ort_kind_us"] = ort_kind_times(model, a.threads, a.ort_opt, mdir)
        except Exception as e:
            r["status"].append("onnxruntime profile failed: %s" % tail(str(e)))
    if "opc" in full and "ort" in full:
        r["ratio_p50"] = paired_ratio(full["opc"], full["ort"])
        r["ratio_p90"] = paired_ratio(full["opc"], full["ort"], "p90")
    if not r["status"]:
        r["status"].append("ok")
    return r


def compile_opc(opc, tag, model, mdir, a, env, status):
    """Compiles the model with `opc` into mdir/net (the baseline's into
    mdir/baseline/net): the executable's path, or None after noting the
    problem in status, prefixed by tag."""
    d = mdir if tag == "opc" else os.path.join(mdir, tag)
    os.makedirs(d, exist_ok=True)
    net = os.path.join(d, "net")
    if os.path.exists(net):
        os.remove(net)
    cmd = [opc, model, "-o", net, "--target", "cpu"] + shlex.split(a.opc_flags)
    ok, so, se, note = run_cmd(cmd, a.timeout, env=env)
    if not ok:
        status.append("%s compile failed (%s): %s" % (tag, note, tail(se or so)))
        return None
    if not os.access(net, os.X_OK):
        status.append("%s produced no executable" % tag)
        return None
    return net


def run_net(net, tag, runs, a, env, status):
    """One round of `net --bench`: (latency dict or None, device line or
    None); problems go to status, prefixed by tag."""
    cmd = [net, "--bench", str(runs), "--warmup", str(a.warmup)] + shlex.split(a.net_flags)
    ok, so, se, note = run_cmd(cmd, a.timeout, env=env, cwd=os.path.dirname(net))
    lat = parse_latency(so) or parse_latency(se)
    device = re.search(r"^device: (.*)$", so, re.M)
    if not ok:
        status.append("%s net failed (%s): %s" % (tag, note, tail(se or so)))
        return None, None
    if not lat or "p50" not in lat:
        status.append("%s net printed no 'latency_ms ... p50=' line: %s" % (tag, tail(so)))
        return None, None
    return lat, device.group(1) if device else None


def conv_kind(x_shape, w_shape):
    """Names a convolution's kind from its input and weight shapes, so
    that opc's and ONNX Runtime's profiles compare like with like:
    depthwise (one input channel per group, as many groups as channels),
    pointwise (1x1) or the rest by kernel size."""
    if len(x_shape) < 3 or len(w_shape) < 3:
        return "Conv"
    if w_shape[1] == 1 and x_shape[1] > 1 and w_shape[0] >= x_shape[1]:
        # ONNX Runtime writes a BatchNormalization of its own as a 1x1
        # depthwise convolution: a scale and shift per channel.
        if all(k == 1 for k in w_shape[2:]):
            return "BatchNormalization"
        return "Conv depthwise"
    if all(k == 1 for k in w_shape[2:]):
        return "Conv 1x1"
    return "Conv %s" % "x".join(str(k) for k in w_shape[2:])


# ONNX Runtime's fused and layout nodes, named as the opc kinds they stand for.
ORT_KIND = {"FusedConv": "Conv", "FusedGemm": "Gemm", "FusedMatMul": "MatMul",
            "QuickGelu": "Swish (QuickGelu)",
            "ReorderInput": "layout (NCHWc)", "ReorderOutput": "layout (NCHWc)"}


def opc_unit_kind(unit):
    """A profiled unit's kind: its operator, convolutions split by conv_kind
    using the shapes in the unit's key (`Conv|f32[1,3,224,224],f32[32,3,3,3],...`)."""
    if unit["op"] != "Conv":
        return unit["op"]
    shapes = re.findall(r"\[([0-9,]+)\]", unit.get("key", "").split("->")[0])
    if len(shapes) < 2:
        return "Conv"
    return conv_kind(*[[int(d) for d in s.split(",")] for s in shapes[:2]])


def opc_kind_times(net, a, env, cwd, traces=5):
    """Microseconds per operator kind, summed over the units of the
    quickest of `traces` runs under `net --trace` (units in sequence, as
    they run, with the caches as the previous unit left them), largest
    first; None if tracing fails. One `net --profile` gives each unit's
    key, whose shapes split the convolutions by kind."""
    prof = os.path.join(cwd, "profile.json")
    ok, so, se, note = run_cmd([net, "--profile", prof, "--repeats", "1"], a.timeout,
                               env=env, cwd=cwd)
    if not ok:
        return None
    trace = os.path.join(cwd, "trace.json")
    best = None
    try:
        with open(prof) as f:
            units = {u["name"]: u for u in json.load(f)["units"]}
        for _ in range(traces):
            # A few untimed runs first: the trace is of the run after them.
            ok, so, se, note = run_cmd([net, "--bench", "3", "--warmup", "1", "--trace", trace],
                                       a.timeout, env=env, cwd=cwd)
            if not ok:
                return None
            with open(trace) as f:
                events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
            span = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
            if best is None or span < best[0]:
                best = (span, events)
    except (OSError, ValueError, KeyError):
        return None
    by_kind = {}
    for e in best[1]:
        u = units.get(e["name"], {"op": e.get("cat", "?")})
        k = opc_unit_kind(u)
        by_kind[k] = by_kind.get(k, 0.0) + e["dur"]
    return sorted(by_kind.items(), key=lambda kv: -kv[1])


def ort_node_kind(args):
    op = ORT_KIND.get(args.get("op_name"), args.get("op_name", "?"))
    if op != "Conv":
        return op
    shapes = [list(t.values())[0] for t in args.get("input_type_shape", [])]
    return conv_kind(shapes[0], shapes[1]) if len(shapes) >= 2 else op


def ort_kind_times(model_path, threads, opt, cwd, runs=20, warmup=5):
    """Microseconds per operator kind from ONNX Runtime's own profiler, in
    a session of its own (profiling would disturb the timed one): each
    node's median over `runs` runs, summed by kind, largest first."""
    sess = ort_session(model_path, threads, opt, os.path.join(cwd, "ort_profile"))
    feeds = random_feeds(sess, 0)
    for _ in range(warmup + runs):
        sess.run(None, feeds)
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    per_node = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            per_node.setdefault(e["name"], (ort_node_kind(e["args"]), []))[1].append(e["dur"])
    by_kind = {}
    for kind, durs in per_node.values():
        by_kind[kind] = by_kind.get(kind, 0.0) + float(np.median(durs[-runs:]))
    return sorted(by_kind.items(), key=lambda kv: -kv[1])


def kind_comparison(opc_kinds, ort_kinds, opc_ms, ort_ms):
    """(opc total, ORT total, "kind opc/ORT, ...") in microseconds: each
    engine's per-kind shares of its profile applied to its measured p50
    (opc's trace issues every node eagerly, with an event either side, and
    ONNX Runtime's profiler adds its own cost, so neither profile's sum is
    the latency), for the kinds above 5% of either, the largest excess of
    opc's first."""
    def scaled(kinds, ms):
        total = sum(us for _, us in kinds) or 1.0
        return {k: us / total * ms * 1e3 for k, us in kinds}
    opc, ort = scaled(opc_kinds, opc_ms), scaled(ort_kinds, ort_ms)
    big = [k for k in set(opc) | set(ort)
           if opc.get(k, 0.0) >= 0.05e3 * opc_ms or ort.get(k, 0.0) >= 0.05e3 * ort_ms]
    big.sort(key=lambda k: -(opc.get(k, 0.0) - ort.get(k, 0.0)))
    cells = ["%s %.0f / %.0f" % (k, opc.get(k, 0.0), ort.get(k, 0.0)) for k in big]
    return "%.0f" % (opc_ms * 1e3), "%.0f" % (ort_ms * 1e3), ", ".join(cells)


def write_report(path, results, a, info):
    lines = []
    lines.append("# CPU benchmark: opc vs ONNX Runtime (%s)" % info["date"])
    lines.append("")
    lines.append("| | |")
    lines.append("|---|---|")
    lines.append("| CPU | %s |" % info["cpu"]["model"])
    lines.append("| cores | %s physical, %s logical (%s available to this process) |" % (
        info["cpu"]["physical_cores"] or "?", info["cpu"]["logical_cpus"],
        info["cpu"]["cpus_available"]))
    lines.append("| OS | %s |" % info["platform"])
    lines.append("| date | %s |" % info["datetime"])
    lines.append("| ONNX Runtime | %s (CPUExecutionProvider, graph opt `%s`, intra-op threads %d, inter-op 1, sequential) |"
                 % (info["ort_version"], a.ort_opt, a.threads))
    lines.append("| opc | `%s`%s, `--target cpu %s`, run `--bench %d --warmup %d %s` per round, OMP_NUM_THREADS=OPC_THREADS=%d |"
                 % (a.opc, (" (%s)" % info["opc_version"]) if info["opc_version"] else "",
                    a.opc_flags, max(1, a.runs // a.rounds), a.warmup, a.net_flags, a.threads))
    lines.append("| instruction sets | %s |" % (" ".join(info["cpu"]["isa"]) or "none of AVX's"))
    devices = sorted({r["device"] for r in results if r.get("device")})
    lines.append("| opc's device (`net --bench`) | %s |" % ("; ".join(devices) or "?"))
    if a.generic_blas:
        lines.append("| OpenBLAS | forced to its generic kernels: OPENBLAS_CORETYPE=Prescott |")
    if a.blas:
        lines.append("| opc's GEMM | forced: OPC_BLAS=%s |" % a.blas)
    lines.append("| repo | %s |" % (info["git"] or "?"))
    lines.append("| batch | %d; %d rounds in which the engines take turns, each %d timed runs "
                 "after %d warm-up runs, each turn after %g s of quiet |"
                 % (a.batch, a.rounds, max(1, a.runs // a.rounds), a.warmup, a.pause))
    lines.append("")
    lines.append("Latencies in milliseconds, each the median over the rounds of the round's "
                 "statistic; opc/ORT p50 and p90 (and opc/baseline) are the medians of the "
                 "rounds' ratios, which cancels the machine's drift between rounds; ratio < 1 means "
                 "opc is faster.")
    lines.append("")
    base_head = " baseline p50 | opc/baseline p50 |" if a.baseline else ""
    base_rule = "---:|---:|" if a.baseline else ""
    lines.append("| model | input | opc p50 | opc p90 | ORT p50 | ORT p90 | opc/ORT p50 | opc/ORT p90 |%s status |"
                 % base_head)
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|%s---|" % base_rule)
    for r in results:
        o, t, b = r.get("opc") or {}, r.get("ort") or {}, r.get("baseline") or {}
        st = "; ".join(r["status"]).replace("|", "\\|")
        base = (" %s | %s |" % (fmt(b.get("p50")), fmt(r.get("ratio_baseline_p50"), 2))
                if a.baseline else "")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |%s %s |" % (
            r["model"], r.get("input", "?"), fmt(o.get("p50")), fmt(o.get("p90")),
            fmt(t.get("p50")), fmt(t.get("p90")),
            fmt(r.get("ratio_p50"), 2), fmt(r.get("ratio_p90"), 2), base, st))
    ratios = [r["ratio_p50"] for r in results if r.get("ratio_p50")]
    if ratios:
        g = float(np.exp(np.mean(np.log(ratios))))
        lines.append("")
        lines.append("Geometric mean opc/ORT (p50) over %d model(s): **%.2f**" % (len(ratios), g))
    base_ratios = [r["ratio_baseline_p50"] for r in results if r.get("ratio_baseline_p50")]
    if base_ratios:
        g = float(np.exp(np.mean(np.log(base_ratios))))
        lines.append("")
        lines.append("Geometric mean opc/baseline (p50) over %d model(s): **%.2f** (baseline: `%s`, "
                     "timed right after opc on each model)" % (len(base_ratios), g, a.baseline))
    profiled = [r for r in results if r.get("opc_kind_us") and r.get("ort_kind_us")
                and r.get("opc") and r.get("ort")]
    if profiled:
        lines.append("")
        lines.append("Where the time goes, per operator kind, in microseconds: each engine's "
                     "p50 above shared out by its own profile of one run in sequence (opc: its "
                     "units under `net --trace` after 4 runs, the quickest of 5 such traces; "
                     "ONNX Runtime: its profiler, each node's median of 20 runs). Kinds above "
                     "5% of either engine's time, the largest excess of opc's first. "
                     "Convolutions are split into depthwise, 1x1 and the rest by their weights' "
                     "shapes; opc's convolutions include the activations fused into them, and "
                     "ONNX Runtime's fused nodes count as the operator they start with, its "
                     "NCHWc reorders as layout.")
        lines.append("")
        lines.append("| model | opc µs | ORT µs | kind: opc µs / ORT µs |")
        lines.append("|---|---:|---:|---|")
        for r in profiled:
            lines.append("| %s | %s | %s | %s |" % ((r["model"],) + kind_comparison(
                r["opc_kind_us"], r["ort_kind_us"], r["opc"]["p50"], r["ort"]["p50"])))
    lines.append("")
    lines.append("Command: `%s`" % " ".join(shlex.quote(x) for x in sys.argv))
    lines.append("")
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump({"info": info, "args": vars(a), "results": results}, f, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opc", required=True, help="path to the opc binary")
    ap.add_argument("--baseline", default=None,
                    help="another opc binary (an earlier build) timed on each model too")
    ap.add_argument("--models", default="", help="comma-separated zoo models (default: all "
                    "of them; 'none' for none)")
    ap.add_argument("--exports", default=None,
                    help="also time every DIR/NAME.onnx as it is, after the zoo's models "
                         "(bench/cpu/exports.py writes torchvision and PP-OCR exports)")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10,
                    help="untimed runs before each round of each engine")
    ap.add_argument("--pause", type=float, default=0.2,
                    help="seconds of quiet before each engine's turn: ONNX Runtime's pool "
                    "threads spin on after its runs (session.intra_op.allow_spinning), and "
                    "a round started at once shares the cores with them (default 0.2)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="the timed runs are split into this many rounds, the engines taking "
                    "turns; each statistic is the median over the rounds, each ratio the "
                    "median of the rounds' ratios")
    ap.add_argument("--threads", type=int, default=0,
                    help="intra-op threads for both engines (default: CPUs available)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("-o", "--output", default=None,
                    help="markdown report (default bench/results/cpu-YYYY-MM-DD.md)")
    ap.add_argument("--workdir", default=None, help="build directory (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the temp work directory")
    ap.add_argument("--opc-flags", default="", help="extra flags for opc (one string)")
    ap.add_argument("--net-flags", default="", help="extra flags for ./net --bench (one string)")
    ap.add_argument("--ort-opt", default="all", choices=["disable", "basic", "extended", "all"])
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per step")
    ap.add_argument("--skip-opc", action="store_true", help="time onnxruntime only")
    ap.add_argument("--blas", choices=["openblas", "onednn"], default=None,
                    help="the GEMM library opc's runtime uses (OPC_BLAS; default: oneDNN where "
                    "installed, else OpenBLAS)")
    ap.add_argument("--generic-blas", action="store_true",
                    help="force OpenBLAS's generic SSE3 kernels (OPENBLAS_CORETYPE=Prescott), as "
                         "its own detection chooses on a CPU it does not know")
    a = ap.parse_args(argv)

    now = datetime.datetime.now()
    info = {"date": now.strftime("%Y-%m-%d"), "datetime": now.strftime("%Y-%m-%d %H:%M:%S"),
            "cpu": cpu_info(), "platform": platform.platform(), "git": git_rev()}
    if a.threads <= 0:
        a.threads = info["cpu"]["cpus_available"]
    if a.output is None:
        a.output = os.path.join(ROOT, "bench", "results", "cpu-%s.md" % info["date"])
    try:
        import onnxruntime as ort
        info["ort_version"] = ort.__version__
    except ImportError:
        info["ort_version"] = "not installed"
    a.opc = os.path.abspath(a.opc) if os.sep in a.opc else a.opc
    info["opc_version"] = None if a.skip_opc else opc_version(a.opc)
    if a.baseline:
        a.baseline = os.path.abspath(a.baseline)

    models = [m for m in a.models.split(",") if m] or list_models()
    if models == ["none"]:
        models = []
    known = set(list_models())
    for m in models:
        if m not in known:
            ap.error("unknown model %r (known: %s)" % (m, ", ".join(sorted(known))))
    exports = {}
    if a.exports:
        for path in sorted(glob.glob(os.path.join(a.exports, "*.onnx"))):
            name = os.path.basename(path)[:-len(".onnx")]
            if name in known:
                ap.error("export %s has a zoo model's name" % path)
            exports[name] = path
        if not exports:
            ap.error("no .onnx file in %s" % a.exports)

    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(a.threads)
    env["OPC_THREADS"] = str(a.threads)
    if a.generic_blas:
        env["OPENBLAS_CORETYPE"] = "Prescott"
    if a.blas:
        env["OPC_BLAS"] = a.blas

    tmp = None
    work = a.workdir
    if work is None:
        tmp = tempfile.mkdtemp(prefix="opc-bench-")
        work = tmp
    os.makedirs(work, exist_ok=True)
    results = []
    try:
        for m in models + list(exports):
            t0 = time.time()
            r = bench_model(m, a, work, env, exports.get(m))
            results.append(r)
            o, t = r.get("opc") or {}, r.get("ort") or {}
            print("%-18s opc p50=%s ORT p50=%s ratio=%s [%s] (%.0fs)" % (
                m, fmt(o.get("p50")), fmt(t.get("p50")), fmt(r.get("ratio_p50"), 2),
                "; ".join(r["status"])[:200], time.time() - t0), flush=True)
            write_report(a.output, results, a, info)   # keep partial results
    finally:
        if tmp and not a.keep:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    print("wrote %s" % a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
