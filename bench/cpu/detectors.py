#!/usr/bin/env python3
"""Detector latency on the CPU: opc's program against ONNX Runtime (issue 49).

  detectors.py --opc BUILD/opc MODEL.onnx... [--photo K] [--threads T]
               [--rounds R] [--runs N] [-o bench/results/FILE.md]

Each model's one input is an image: [1, 3, H, W] (the project's detectors,
tools/models/detectors.py, normalised as photos.py does) or [3, H, W]
(torchvision's detection exports, values in [0, 1]), photograph K at the
input's size. For each model: compile `opc MODEL -o net --target cpu`,
check that the program keeps the boxes ONNX Runtime keeps on that
photograph (the count, and each output within 1e-4 of its scale), then in
each of R rounds time `net --input image=... --bench N/R` (p50) and ONNX
Runtime in-process (intra-op threads T, sequential, full optimisation)
over N/R runs, and report the medians of the rounds' p50s and of their
ratios. Results go to a Markdown table with the machine, the date and the
commit.
"""
import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
import photos  # noqa: E402


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def input_image(model, k):
    """Photograph k in the model's input layout, and the input's name."""
    i = model.graph.input[0]
    dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
    if len(dims) == 4:
        return i.name, photos.image_batch([k], dims).astype(np.float32)
    raw = photos.image(k, dims[1], dims[2]) * photos.STD[:, None, None] + photos.MEAN[:, None, None]
    return i.name, np.clip(raw, 0, 1).astype(np.float32)


def opc_p50(exe, name, path, runs, threads):
    env = dict(os.environ, OPC_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    p = subprocess.run([exe, "--input", f"{name}={path}", "--bench", str(runs), "--warmup", "3"],
                       capture_output=True, text=True, env=env, timeout=3600)
    found = re.search(r"p50=([\d.]+)", p.stdout + p.stderr)
    if p.returncode != 0 or not found:
        raise RuntimeError(f"{exe} --bench failed: {(p.stdout + p.stderr)[-300:]}")
    return float(found.group(1))


def ort_session(path, threads):
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def ort_p50(session, feeds, runs):
    for _ in range(3):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def agreement(exe, model, name, path, want, work):
    """'n boxes, same' or what differs, comparing the program's outputs."""
    cmd = [exe, "--input", f"{name}={path}"]
    files = []
    for k, o in enumerate(model.graph.output):
        files.append(os.path.join(work, f"out{k}.npy"))
        cmd += ["--output", f"{o.name}={files[-1]}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        return "the program failed: " + (p.stdout + p.stderr)[-200:]
    got = [np.load(f) for f in files]
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return f"shape {g.shape}, ONNX Runtime {w.shape}"
    rows = want[0].shape[0] if want[0].ndim else 0
    if all(close(g, w) for g, w in zip(got, want)):
        return f"{rows} boxes, the same as ONNX Runtime's"
    moved = rows_matched_as_sets(got, want)
    if moved is None:
        return "values differ beyond 1e-4 of their scale"
    return (f"{rows} boxes, the same as ONNX Runtime's as sets ({moved} rows in another "
            "order: near-equal scores)")


def close(g, w):
    """Within 1e-4 of w's scale (at least 1); integers exactly."""
    if w.dtype.kind in "iub":
        return bool((g == w).all())
    scale = float(np.abs(w).max()) if w.size else 0.0
    return not w.size or float(np.abs(g.astype(np.float64) - w).max()) <= 1e-4 * max(scale, 1.0)


def rows_matched_as_sets(got, want):
    """How many rows stand in another place when each of the program's rows
    (all outputs' values of that row) is paired with an equal row of ONNX
    Runtime's; None when some row has no pair."""
    n = want[0].shape[0]
    free, moved = set(range(n)), 0
    for i in range(n):
        pair = next((j for j in sorted(free, key=lambda j: abs(j - i))
                     if all(close(g[i], w[j]) for g, w in zip(got, want))), None)
        if pair is None:
            return None
        free.discard(pair)
        moved += pair != i
    return moved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--opc", required=True)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--photo", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.models:
            label = os.path.splitext(os.path.basename(path))[0]
            model = onnx.load(path)
            name, image = input_image(model, args.photo)
            work = os.path.join(tmp, label)
            os.makedirs(work)
            image_path = os.path.join(work, "image.npy")
            np.save(image_path, image)
            exe = os.path.join(work, "net")
            p = subprocess.run([args.opc, path, "-o", exe, "--target", "cpu"], capture_output=True,
                               text=True)
            if p.returncode != 0:
                rows.append((label, "", "", "", "opc refused it: " + (p.stdout + p.stderr).strip()[-200:]))
                continue
            session = ort_session(path, args.threads)
            feeds = {name: image}
            note = agreement(exe, model, name, image_path, session.run(None, feeds), work)
            per = max(1, args.runs // args.rounds)
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(opc_p50(exe, name, image_path, per, args.threads))
                theirs.append(ort_p50(session, feeds, per))
            ratio = float(np.median([a / b for a, b in zip(ours, theirs)]))
            rows.append((label, f"{np.median(ours):.2f}", f"{np.median(theirs):.2f}", f"{ratio:.2f}", note))
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [f"# Detectors on the CPU: opc against ONNX Runtime ({datetime.date.today()})", "",
             f"Machine: {cpu_name()}, {os.cpu_count()} CPUs; "
             f"{args.threads} threads each; commit {commit}; photograph {args.photo}; "
             f"{args.rounds} rounds of {max(1, args.runs // args.rounds)} runs, the median of the "
             "rounds' p50 and of their ratios (bench/cpu/detectors.py). No GPU.", "",
             "| model | opc p50 ms | ONNX Runtime p50 ms | opc / ORT | outputs |",
             "|---|---:|---:|---:|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
