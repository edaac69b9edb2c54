#!/usr/bin/env python3
"""Stand-in for the opc compiler, used only to test the zoo harness and the
benchmark script before opc exists.  It honours the same command-line
contract but "compiles" to a small python launcher that runs onnxruntime.

  fake_opc.py MODEL.onnx -o NET --target cpu [--perturb EPS] [--fail-run]
  NET --input NAME=in.npy ... --output NAME=out.npy ...
  NET --bench N --warmup W [--threads T]   (prints "latency_ms mean=... p50=...")

--perturb EPS  the produced executable adds EPS * N(0,1) * rms(out) noise
--fail-run     the produced executable exits with status 3
"""

import argparse
import os
import stat
import sys

LAUNCHER = r'''#!%(python)s
import sys, time
import numpy as np
import onnxruntime as ort
MODEL = %(model)r
PERTURB = %(perturb)r
FAIL = %(fail)r
args = sys.argv[1:]
if FAIL:
    print("fake net: failing on purpose", file=sys.stderr)
    sys.exit(3)
ins, outs, bench, warm, threads = {}, {}, 0, 0, 0
i = 0
while i < len(args):
    a = args[i]
    if a == "--input":
        n, p = args[i + 1].split("=", 1); ins[n] = p; i += 2
    elif a == "--output":
        n, p = args[i + 1].split("=", 1); outs[n] = p; i += 2
    elif a == "--bench":
        bench = int(args[i + 1]); i += 2
    elif a == "--warmup":
        warm = int(args[i + 1]); i += 2
    elif a == "--threads":
        threads = int(args[i + 1]); i += 2
    else:
        print("fake net: unknown argument %%s" %% a, file=sys.stderr); sys.exit(2)
so = ort.SessionOptions()
if threads:
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
s = ort.InferenceSession(MODEL, so, providers=["CPUExecutionProvider"])
feeds = {}
for x in s.get_inputs():
    feeds[x.name] = (np.load(ins[x.name]) if x.name in ins else
                     np.zeros(x.shape, np.float32))
if bench:
    for _ in range(warm):
        s.run(None, feeds)
    t = []
    for _ in range(bench):
        t0 = time.perf_counter(); s.run(None, feeds); t.append((time.perf_counter() - t0) * 1e3)
    t = np.array(t)
    print("latency_ms mean=%%.4f p50=%%.4f p90=%%.4f p99=%%.4f min=%%.4f" %% (
        t.mean(), np.percentile(t, 50), np.percentile(t, 90), np.percentile(t, 99), t.min()))
    sys.exit(0)
res = s.run(None, feeds)
rng = np.random.default_rng(1234)
for o, v in zip(s.get_outputs(), res):
    if o.name in outs:
        if PERTURB and v.dtype.kind == "f":  # integer and bool outputs stay exact
            rms = float(np.sqrt(np.mean(np.square(v, dtype=np.float64))))
            v = (v + PERTURB * rms * rng.standard_normal(v.shape)).astype(v.dtype)
        np.save(outs[o.name], v)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("-o", dest="out", required=True)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--perturb", type=float, default=0.0)
    ap.add_argument("--fail-run", action="store_true")
    ap.add_argument("--fail-compile", action="store_true")
    a = ap.parse_args()
    if a.fail_compile:
        print("fake opc: error: failing on purpose", file=sys.stderr)
        return 1
    if a.target != "cpu":
        print("fake opc: only --target cpu", file=sys.stderr)
        return 1
    with open(a.out, "w") as f:
        f.write(LAUNCHER % dict(python=sys.executable, model=os.path.abspath(a.model),
                                perturb=a.perturb, fail=a.fail_run))
    os.chmod(a.out, os.stat(a.out).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return 0


if __name__ == "__main__":
    sys.exit(main())
