#!/usr/bin/env python3
"""Every input the zoo test can draw, for one model's fp16 and bf16 programs.

  zoo_sweep.py MODEL SEEDS WORKDIR [--opc build/opc]

The zoo test (tests/zoo/zoo_test.py) draws a random seed; for a batch-1
image model the seed modulo the 18 photographs decides its inputs (for
PP-OCR, modulo its 8 lines of text), so SEEDS = 18 (8) covers them all.
For each seed this builds the references (tests/zoo/reference.py, with the
bf16 storage-rounding floor), runs the model's fp16 and bf16 programs (built
once, at -O0: the C compiler's level changes no arithmetic) on the test
input and the other input, and prints per precision and seed: the
signal-relative error of each, the bf16 floor's, their ratio, whether
compare.check passes, and the negative control against its bound.
bench/results/bf16-floor-sweep-*.txt hold its output.
"""
import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tests" / "zoo"))
sys.path.insert(0, str(ROOT / "tools" / "models"))
import compare  # noqa: E402
import ppocr  # noqa: E402
import zoo_test as z  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("seeds", type=int)
    ap.add_argument("workdir")
    ap.add_argument("--opc", default=str(ROOT / "build" / "opc"))
    a = ap.parse_args()
    work = Path(a.workdir) / a.model
    work.mkdir(parents=True, exist_ok=True)
    model = work / "model.onnx"
    mflags, rflags = [], []
    if a.model in ppocr.MODELS:
        shutil.copyfile(ppocr.model_path(a.model), model)
        dims = "x".join(str(d) for d in ppocr.input_shape(a.model))
        mflags = ["--input-shape", f"{ppocr.INPUT}={dims}"]
        rflags = mflags + ["--input-kind", f"{ppocr.INPUT}=text"]
    else:
        subprocess.run([sys.executable, str(ROOT / "tools/models/build.py"), a.model, "-o",
                        str(model), "--batch", "1"], check=True, capture_output=True)
    exes = {}
    for p in ("fp16", "bf16"):
        exes[p] = work / f"net-{p}"
        subprocess.run([a.opc, str(model), "-o", str(exes[p]), "--target", "cpu", "--precision",
                        p] + mflags, check=True, env=dict(os.environ, CFLAGS="-O0"))
    clock = z.Clock()
    for seed in range(a.seeds):
        rd = work / f"ref{seed}"
        subprocess.run([sys.executable, str(ROOT / "tests/zoo/reference.py"), str(model), "--seed",
                        str(seed), "--outdir", str(rd), "--others", "4"] + rflags,
                       check=True, capture_output=True)
        draws = [z.Draw(rd)] + [z.Draw(rd / f"other{d}") for d in range(1, 5)]
        for p, exe in exes.items():
            row = [f"{a.model} seed {seed} {p}"]
            outs = {}
            for d in (0, 1):
                outs[d], error = z.run_program(exe, draws[d], work, p, {}, clock)
                if error:
                    sys.exit(error)
                ref, base = draws[d].refs[0], z.baselines(draws, d)[0]
                e = compare.errors(ref, outs[d][0], base)[1]
                ok, _ = z.check_outputs(draws, d, outs[d], p)
                floor = draws[d].floors.get(p, [None])[0]
                if floor is None:
                    row.append(f"d{d} err {e:.3f} {'ok' if ok else 'FAIL'}")
                else:
                    f = compare.errors(ref, floor, base)[1]
                    row.append(f"d{d} err {e:.3f} floor {f:.3f} ratio {e / f:.2f} "
                               f"{'ok' if ok else 'FAIL'}")
            wrong, _ = z.check_outputs(draws, 0, outs[1], p)
            ref0, base0 = draws[0].refs[0], z.baselines(draws, 0)[0]
            neg = compare.errors(ref0, outs[1][0], base0)[1]
            bound = compare.bounds(p, ref0, base0, draws[0].floors.get(p, [None])[0])[1]
            row.append(f"neg {neg:.2f} vs bound {bound:.3f} {'WEAK' if wrong else 'ok'}")
            print(" | ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
