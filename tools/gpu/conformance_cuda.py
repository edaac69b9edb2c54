#!/usr/bin/env python3
"""ONNX node conformance on a real GPU: compile every test model with
`opc --target cuda`, run it on every test data set and compare with the
expected outputs (|got - expected| <= 1e-4 + 1e-4 * |expected|, strict fp32).

usage: conformance_cuda.py --opc OPC [--data DIR] [--work DIR] [--jobs N]
                           [--gpu-jobs M] [--only SUBSTRING] [--deadline S]
                           [--precision fp32|tf32] [--target cuda|cpu]
                           [--summary-json FILE]

The rules of what must compile, the expected rejections, the binding of
shape-deciding inputs to their test data (--const-input) and the comparison
are those of tests/conformance/run.py (imported, not copied), so the two
runners judge alike and report the same two figures, unbound and bound;
this one differs in the target and in running the
programs at most M at a time (they share one GPU) while N compile. --target
cpu runs the same steps against opc's CPU runtime, to test this script on a
machine without a GPU. --deadline stops starting tests after S seconds; the
rest count as NOT RUN. Exits non-zero on any FAIL.
"""
import argparse
import concurrent.futures
import importlib.util
import json
import os
import shutil
import sys
import threading
import time

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_conformance_module():
    path = os.path.join(ROOT, "tests", "conformance", "run.py")
    spec = importlib.util.spec_from_file_location("opc_conformance_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    needed = ["EXPECTED_REJECTIONS", "should_compile", "graph_inputs", "compare", "run",
              "first_error", "supported_ops"]
    missing = [n for n in needed if not hasattr(module, n)]
    if missing:
        sys.exit("conformance_cuda: %s lacks %s; update this script" % (path, ", ".join(missing)))
    return module


conf = load_conformance_module()


def check_test(test_dir, args, ops, gpu_slots, deadline):
    """(status, name, message, bound input names)"""
    name = os.path.basename(test_dir)
    if time.monotonic() > deadline:
        return "NOT RUN", name, "time budget spent", []
    model_path = os.path.join(test_dir, "model.onnx")
    try:
        model = onnx.load(model_path)
    except Exception as exc:  # a model onnx itself cannot read
        return "REJECTED", name, "onnx cannot load it: %s" % exc, []
    expect_ok = conf.should_compile(model, ops) and name not in conf.EXPECTED_REJECTIONS
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    exe = os.path.join(work, "net")
    inputs = [i.name for i in conf.graph_inputs(model)]
    outputs = [o.name for o in model.graph.output]
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    set0 = os.path.join(test_dir, sets[0]) if sets else test_dir
    # Inputs that decide shapes are bound to data set 0 where opc asks for
    # it, exactly as the CPU runner does (its "bound" figure).
    code, out, bound, _ = conf.compile_binding(args, model_path, exe, inputs, set0)
    names = sorted(bound)
    if code is None or code < 0:
        return "FAIL", name, "opc crashed or hung: %s" % conf.first_error(out), names
    if code != 0:
        reason = conf.first_error(out)
        if bound:
            reason = "with %s bound: %s" % (", ".join(names), reason)
        if expect_ok and not conf.NO_KERNEL_FOR_TYPE.search(reason):
            return "FAIL", name, "rejected a supported model: " + reason, names
        return "REJECTED", name, reason, names
    problem = conf.run_data_sets(args, test_dir, work, exe, model_path, inputs, outputs, sets,
                                 bound, (), None, slot=gpu_slots)
    if problem:
        return "FAIL", name, problem[1], names
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    notes = []
    if bound:
        notes.append("bound: " + ", ".join(names))
    if name in conf.EXPECTED_REJECTIONS:
        notes.append("listed in EXPECTED_REJECTIONS but passes")
    return "PASS", name, "; ".join(notes), names


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opc", required=True)
    ap.add_argument("--data", default=os.path.join(
        os.environ.get("OPC_TESTDATA", "/usr/share/libonnx-testdata/data"), "node"))
    ap.add_argument("--work", default="/tmp/opc-gpu/conformance")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                    help="tests compiled at a time (default: the CPU count)")
    ap.add_argument("--gpu-jobs", type=int, default=8, help="programs run at a time")
    ap.add_argument("--only", default=None,
                    help="run the tests whose name contains this (or any of a comma-separated list)")
    ap.add_argument("--ops", default=os.path.join(ROOT, "ir", "ops.def"))
    ap.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32"])
    ap.add_argument("--deadline", type=float, default=0,
                    help="start no test after this many seconds (0: no limit)")
    ap.add_argument("--keep", action="store_true", help="keep the work folders of passing tests")
    ap.add_argument("--summary-json", default=None, help="write the counts and failures here")
    args = ap.parse_args()
    args.opc = os.path.abspath(args.opc)
    start = time.monotonic()
    deadline = start + args.deadline if args.deadline > 0 else float("inf")

    ops = conf.supported_ops(args.ops)
    tests = sorted(os.path.join(args.data, d) for d in os.listdir(args.data)
                   if os.path.exists(os.path.join(args.data, d, "model.onnx")))
    if args.only:
        wanted = args.only.split(",")
        tests = [t for t in tests if any(w in os.path.basename(t) for w in wanted)]
    os.makedirs(args.work, exist_ok=True)
    print("conformance-%s: %d tests from %s, %d compiling and %d running at a time"
          % (args.target, len(tests), args.data, args.jobs, args.gpu_jobs), flush=True)

    gpu_slots = threading.Semaphore(max(1, args.gpu_jobs))
    counts = {"PASS": 0, "FAIL": 0, "REJECTED": 0, "NOT RUN": 0}
    bound_passes = 0
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = pool.map(lambda t: check_test(t, args, ops, gpu_slots, deadline), tests)
        for status, name, message, bound in results:
            counts[status] += 1
            if status == "PASS" and bound:
                bound_passes += 1
            if status == "FAIL":
                failures.append({"test": name, "message": message})
            if status != "NOT RUN":
                print("%-8s %s%s" % (status, name, ": " + message if message else ""), flush=True)
    elapsed = time.monotonic() - start
    print("conformance-%s: %d passed (%d unbound, %d with inputs bound), %d failed, "
          "%d rejected (unsupported), %d not run (time) in %.0f s"
          % (args.target, counts["PASS"], counts["PASS"] - bound_passes, bound_passes,
             counts["FAIL"], counts["REJECTED"], counts["NOT RUN"], elapsed))
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump({"target": args.target, "precision": args.precision, "counts": counts,
                       "bound_passes": bound_passes,
                       "failures": failures, "seconds": round(elapsed, 1), "tests": len(tests)},
                      f, indent=1)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
