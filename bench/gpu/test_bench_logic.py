#!/usr/bin/env python3
"""Runs bench_gpu.py's GPU path on a machine without a GPU or torch, with the
stand-in torch of bench/gpu/fake (numpy and ONNX Runtime on zoo networks)
and opc's programs built for the CPU runtime, and checks what it reports:

  1. squeezenet1_1, one scheduler: exit 0; a row for opc and for each of
     PyTorch's three systems in each of the four precisions, all ok, with
     times; opc's strict-fp32 error below 1e-4, its fp16 and bf16 errors
     below 1e-2 and 3e-2; the fastest opc row starred;
  2. an opc that compiles the wrong network: exit 1 and a FAIL row;
  3. --merge of the two runs: one table with both models.

usage: test_bench_logic.py OPC WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(HERE, "bench_gpu.py")


def bench(opc, work, name, model, extra=()):
    out = os.path.join(work, name + ".md")
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "fake"))
    p = subprocess.run([sys.executable, BENCH, "--opc-target", "cpu", "--opc", opc,
                        "--models", model, "--schedulers", "ios", "--runs", "3", "--warmup", "1",
                        "--jobs", "2", "--work", os.path.join(work, name), "-o", out] + list(extra),
                       capture_output=True, text=True, env=env, timeout=1200)
    with open(os.path.join(work, name + ".json")) as f:
        return p.returncode, p.stdout + p.stderr, json.load(f), out


def main():
    opc, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []

    def expect(cond, what):
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        if not cond:
            failures.append(what)

    code, out, data, good_md = bench(opc, work, "good", "squeezenet1_1")
    expect(code == 0, "a correct run exits 0 (got %d)" % code)
    systems = {(r["precision"], r["system"]): r for r in data["rows"]}
    for p in ("fp32", "tf32", "fp16", "bf16"):
        for s in ("opc ios", "PyTorch eager", "PyTorch CUDA graph", "torch.compile reduce-overhead"):
            r = systems.get((p, s))
            expect(r is not None and r["status"] == "ok" and r.get("p50", 0) > 0
                   and r.get("p90", 0) >= r.get("p50", 0),
                   "%s %s: ok with p50 <= p90 (%s)" % (p, s, r))
    r = systems.get(("fp32", "opc ios"), {})
    expect(r.get("rel_l2") is not None and r["rel_l2"] < 1e-4,
           "opc fp32 within 1e-4 of the reference (%s)" % r.get("rel_l2"))
    for p, bound in (("fp16", 1e-2), ("bf16", 3e-2)):
        r = systems.get((p, "opc ios"), {})
        expect(r.get("rel_l2") is not None and 0 < r["rel_l2"] < bound,
               "opc %s within %g of the reference, and not exact (%s)" % (p, bound, r.get("rel_l2")))
    with open(good_md) as f:
        text = f.read()
    expect("opc ios ★" in text, "the fastest opc row is starred")
    expect("Geometric mean" in text, "the report has the geometric means")
    r = systems.get(("fp32", "opc ios"), {})
    expect(r.get("floor_us", 0) > 0 and "p50 / floor" in text,
           "opc rows carry --report's floor and the table its ratio (%s)" % r.get("floor_us"))

    # An "opc" that compiles another network: the outputs cannot match.
    other = os.path.join(work, "other.onnx")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"),
                    "squeezenet1_0", "-o", other], check=True, capture_output=True)
    wrong = os.path.join(work, "wrong_opc.sh")
    with open(wrong, "w") as f:
        f.write('#!/bin/sh\ncase "$1" in --*) exec "%s" "$@";; esac\nshift\nexec "%s" "%s" "$@"\n'
                % (opc, opc, other))
    os.chmod(wrong, 0o755)
    code, out, data, bad_md = bench(wrong, work, "bad", "mobilenet_v2",
                                    ["--precisions", "fp32", "--systems", "eager"])
    expect(code == 1, "a wrong opc output makes the run exit 1 (got %d)" % code)
    rows = [r for r in data["rows"] if r["system"] == "opc ios"]
    expect(len(rows) == 1 and rows[0]["status"] == "FAIL" and "relative L2" in rows[0].get("note", ""),
           "the wrong output is a FAIL row (%s)" % rows)

    merged = os.path.join(work, "merged.md")
    p = subprocess.run([sys.executable, BENCH, "--merge", os.path.join(work, "good.json"),
                        os.path.join(work, "bad.json"), "-o", merged],
                       capture_output=True, text=True, timeout=120)
    with open(merged) as f:
        text = f.read()
    expect(p.returncode == 0 and "| squeezenet1_1 |" in text and "| mobilenet_v2 |" in text,
           "--merge joins both runs into one table")
    print("test_bench_logic: %s" % ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
