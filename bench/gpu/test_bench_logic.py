#!/usr/bin/env python3
"""Runs bench_gpu.py's GPU path on a machine without a GPU or torch, with the
stand-in torch of bench/gpu/fake (numpy and ONNX Runtime on zoo networks)
and opc's programs built for the CPU runtime, and checks what it reports:

  1. squeezenet1_1, one scheduler: exit 0; a row for opc and for each of
     PyTorch's four systems in each of the four precisions, all ok, with
     times; opc's strict-fp32 error below 1e-4, its fp16 and bf16 errors
     below 1e-2 and 3e-2; the fastest opc row starred;
  2. an opc that compiles the wrong network: exit 1 and a FAIL row;
  3. --merge of the two runs: one table with both models;
  4. the budget: the zoo's squeezenet1_1 beside its peer, with a
     max-autotune compile that outlasts --autotune-cap (the stand-in sleeps)
     and the run killed as the next step starts: the zoo's opc rows ok
     against ONNX Runtime and shown with the peer's PyTorch rows, the capped
     step "timed out", the step it was killed in "not run" (not reached),
     no row dropped; and --deadline 1: every step a "not run" row, exit 0;
  5. --merge of a part that redoes a run's rest keeps the measured rows.

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


def bench_cmd(opc, work, name, model, extra):
    return [sys.executable, BENCH, "--opc-target", "cpu", "--opc", opc, "--models", model,
            "--schedulers", "ios", "--runs", "3", "--warmup", "1", "--jobs", "2",
            "--work", os.path.join(work, name), "-o", os.path.join(work, name + ".md")] + list(extra)


def bench(opc, work, name, model, extra=("--zoo", "none")):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "fake"))
    p = subprocess.run(bench_cmd(opc, work, name, model, extra),
                       capture_output=True, text=True, env=env, timeout=1200)
    with open(os.path.join(work, name + ".json")) as f:
        return p.returncode, p.stdout + p.stderr, json.load(f), os.path.join(work, name + ".md")


def bench_killed(opc, work, name, model, extra, kill_at):
    """Runs the bench and kills it when it prints a line starting with
    kill_at, as the device tool stops a command at its limit. Killed, it
    cannot remove its temporary files (the fake torchvision's models), so
    they go to a folder of the test's own, removed with it."""
    tmp = os.path.join(work, name + "-tmp")
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "fake"), FAKE_TORCH_MAX_AUTOTUNE_SLEEP="60",
               TMPDIR=tmp)
    p = subprocess.Popen(bench_cmd(opc, work, name, model, extra), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    seen = []
    for line in p.stdout:
        seen.append(line)
        if line.startswith(kill_at):
            p.kill()
            break
    p.wait()
    with open(os.path.join(work, name + ".json")) as f:
        return p.returncode, "".join(seen), json.load(f), os.path.join(work, name + ".md")


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
        for s in ("opc ios", "PyTorch eager", "PyTorch CUDA graph", "torch.compile reduce-overhead",
                  "torch.compile max-autotune"):
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
                                    ["--precisions", "fp32", "--systems", "eager", "--zoo", "none"])
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

    # The budget. fp16's max-autotune step comes first (COMPILE_PRIORITY) and
    # outlasts its cap; the run is killed as fp32's starts.
    code, out, data, budget_md = bench_killed(
        opc, work, "budget", "squeezenet1_1",
        ["--zoo", "squeezenet1_1", "--precisions", "fp32,fp16", "--systems", "eager,max-autotune",
         "--autotune-cap", "2"], "bench_gpu: start squeezenet1_1 fp32 torch.compile max-autotune")
    expect(code != 0, "the budget run was killed as fp32's max-autotune started (exit %s)" % code)
    rows = {(r["model"], r["precision"], r["system"]): r for r in data["rows"]}
    expect(len(rows) == 2 + 2 * 3, "every planned step has a row: %d" % len(rows))
    r = rows.get(("squeezenet1_1", "fp16", "torch.compile max-autotune"), {})
    expect(r.get("status") == "timed out" and "cap of 2 s" in r.get("note", ""),
           "the max-autotune step past its cap is marked timed out (%s)" % r)
    r = rows.get(("squeezenet1_1", "fp32", "torch.compile max-autotune"), {})
    expect(r.get("status") == "not run" and "not reached" in r.get("note", ""),
           "the step the run was killed in is marked not reached (%s)" % r)
    for p, bound in (("fp32", 1e-4), ("fp16", 1e-2)):
        r = rows.get(("zoo:squeezenet1_1", p, "opc ios"), {})
        expect(r.get("status") == "ok" and r.get("rel_l2") is not None and r["rel_l2"] < bound,
               "the zoo's %s opc row is ok against ONNX Runtime (%s)" % (p, r))
    with open(budget_md) as f:
        text = f.read()
    expect("| zoo:squeezenet1_1 | fp32 | PyTorch eager [squeezenet1_1] |" in text
           and "- zoo, PyTorch eager, fp32:" in text and "timed out: 1" in text,
           "the zoo's rows sit beside the peer's PyTorch rows, with their own geometric mean")

    code, out, data, _ = bench(opc, work, "deadline", "squeezenet1_1",
                               ["--zoo", "squeezenet1_1", "--precisions", "fp32", "--deadline", "1"])
    rows = data["rows"]
    expect(code == 0 and len(rows) == 1 + 1 + 4 and all(
        r["status"] == "not run" and "time budget" in r["note"] for r in rows),
        "past --deadline every step is a not-run row and the run exits 0 (%d: %s)" % (code, rows))
    # --merge of a part that redoes the rest of a run: its "not run" rows
    # do not replace what the first part measured; its measured ones do.
    parts = []
    for k, statuses in enumerate([("ok", "not run"), ("not run", "ok")]):
        rows = [{"model": "m", "precision": p, "system": "PyTorch eager", "status": st, "p50": 1.0 + k,
                 "p90": 1.0 + k} for p, st in zip(("fp16", "bf16"), statuses)]
        parts.append(os.path.join(work, "part%d.json" % k))
        with open(parts[-1], "w") as f:
            json.dump({"info": {}, "args": {}, "models": {"m": {}}, "rows": rows}, f)
    p = subprocess.run([sys.executable, BENCH, "--merge"] + parts + ["-o", os.path.join(work, "parts.md")],
                       capture_output=True, text=True, timeout=120)
    with open(os.path.join(work, "parts.json")) as f:
        got = sorted((r["precision"], r["status"], r["p50"]) for r in json.load(f)["rows"])
    expect(got == [("bf16", "ok", 2.0), ("fp16", "ok", 1.0)],
           "--merge keeps measured rows over a later part's not-run rows (%s)" % got)
    print("test_bench_logic: %s" % ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
