#!/usr/bin/env python3
"""Whether two opc executables emit the same program for the zoo.

  emitted_diff.py OLD_OPC NEW_OPC [--models DIR] [--only NAME ...] [--lines N]

A refactoring of the compiler must not change what it emits, except where
a commit says so. This compiles every zoo model (tools/models/build.py,
built once into DIR, by default ~/.cache/opc/emitted-diff) and the two
PP-OCR models under the option sets the zoo test uses (tests/zoo/
zoo_test.py: CONFIGS and CUDA_VARIANTS) with both executables, and
compares net.c, net.h and net.weights byte for byte. Prints one line per
difference and a summary; exits 1 if anything differs or either compiler
fails where the other does not.
"""
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "zoo"))
sys.path.insert(0, str(ROOT / "tools" / "models"))
import zoo_test  # noqa: E402  (CONFIGS, CUDA_VARIANTS: the usual option sets)
import build  # noqa: E402
import ppocr  # noqa: E402


def option_sets():
    sets = {}
    for name, flags in list(zoo_test.CONFIGS.items()) + list(zoo_test.CUDA_VARIANTS.items()):
        if flags not in sets.values():
            sets[name] = flags
    sets["default"] = []
    return sets


def models(cache, only):
    cache.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in build.MODELS:
        if only and name not in only:
            continue
        f = cache / f"{name}.onnx"
        if not f.exists():
            subprocess.run([sys.executable, str(ROOT / "tools/models/build.py"), name,
                            "-o", str(f)], check=True)
        out[name] = (f, [])
    for name in ("ppocr_rec", "ppocr_det"):
        if only and name not in only:
            continue
        dims = "x".join(str(d) for d in ppocr.input_shape(name))
        out[name] = (Path(ppocr.model_path(name)), ["--input-shape", f"{ppocr.INPUT}={dims}"])
    return out


def emit(opc, model, flags, where, keep):
    """Compiles into where (the same path for both compilers: net.c names
    its weights file) and moves the files to keep."""
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([opc, str(model), "-o", str(where / "net.c")] + flags,
                       capture_output=True, text=True)
    where.rename(keep)
    return r.returncode, r.stderr.strip().splitlines()[-1:] if r.returncode else []


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--models", default=str(Path.home() / ".cache/opc/emitted-diff"))
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--lines", type=int, default=12,
                    help="lines of each net.c diff to print (0: all)")
    args = ap.parse_args()
    differ = 0
    compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for mname, (model, model_flags) in models(Path(args.models), set(args.only)).items():
            for sname, flags in option_sets().items():
                flags = model_flags + flags
                out = tmp / "out"
                a, b = tmp / mname / sname / "old", tmp / mname / sname / "new"
                a.parent.mkdir(parents=True)
                ra, ea = emit(args.old, model, flags, out, a)
                rb, eb = emit(args.new, model, flags, out, b)
                compared += 1
                if ra != rb:
                    print(f"{mname} {sname}: exit {ra} vs {rb} {ea} {eb}")
                    differ += 1
                    continue
                for f in ("net.c", "net.h", "net.weights"):
                    pa, pb = a / f, b / f
                    if pa.exists() != pb.exists() or (
                            pa.exists() and not filecmp.cmp(pa, pb, shallow=False)):
                        print(f"{mname} {sname}: {f} differs")
                        differ += 1
                        if f == "net.c":
                            d = subprocess.run(["diff", str(pa), str(pb)],
                                               capture_output=True, text=True).stdout
                            lines = d.splitlines()
                            print("  " + "\n  ".join(lines[:args.lines] if args.lines else lines))
    print(f"{compared} model-and-option compilations, {differ} differences")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
