#!/usr/bin/env python3
"""Feeds opc broken copies of test-data models: truncated at several
lengths, bit-flipped (seeded), zero-filled, and an empty file.

Usage: malformed.py OPC TESTDATA [--models N] [--seed S]

Whether a broken copy is still a well-formed protobuf is decided by
Python's protobuf parser, independently of opc:
  not well-formed  opc must exit 2 with 'opc: error:' first on stderr;
  well-formed      (a cut at a field boundary, a flipped weight bit) opc may
                   compile it or reject it cleanly (0 or 2), nothing else.
Crashes, signals, timeouts and usage errors always fail.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

from onnx import ModelProto

SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]


def pick_models(root, count):
    """Every k-th model, so that a spread of sizes and operators is covered."""
    models = []
    for suite in SUITES:
        base = os.path.join(root, suite)
        if os.path.isdir(base):
            models += [os.path.join(base, d, "model.onnx") for d in sorted(os.listdir(base))
                       if os.path.isfile(os.path.join(base, d, "model.onnx"))]
    step = max(1, len(models) // count)
    return models[::step][:count]


def well_formed(blob):
    try:
        ModelProto().ParseFromString(blob)
        return True
    except Exception:
        return False


def variants(data, rng):
    yield "zero-filled", bytes(len(data))
    for cut in sorted({1, 2, 9, len(data) // 4, len(data) // 2, len(data) - 3, len(data) - 1}):
        if 0 < cut < len(data):
            yield f"truncated to {cut} bytes", data[:cut]
    for i in range(4):
        blob = bytearray(data)
        # Early bytes hold the structure (field tags and lengths), later
        # ones mostly weights: flip some of each.
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(min(len(blob), 64)) if rng.random() < 0.5 else rng.randrange(len(blob))
            blob[pos] ^= 1 << rng.randrange(8)
        yield f"bit flip {i}", bytes(blob)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("opc")
    ap.add_argument("testdata")
    ap.add_argument("--models", type=int, default=12)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--timeout", type=float, default=20)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    failures = runs = strict = 0
    with tempfile.TemporaryDirectory(prefix="opc-malformed-") as tmp:
        cases = [("empty file", os.path.join(tmp, "empty.onnx"), b"")]
        for model in pick_models(args.testdata, args.models):
            data = open(model, "rb").read()
            for label, blob in variants(data, rng):
                cases.append((f"{os.path.relpath(model, args.testdata)}: {label}",
                              os.path.join(tmp, "broken.onnx"), blob))
        for label, path, blob in cases:
            with open(path, "wb") as f:
                f.write(blob)
            must_fail = not blob or not well_formed(blob)
            strict += must_fail
            runs += 1
            try:
                p = subprocess.run([args.opc, path, "--dump-ir"], capture_output=True,
                                   text=True, errors="replace", timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"FAIL {label}: timed out")
                failures += 1
                continue
            clean_error = p.returncode == 2 and p.stderr.startswith("opc: error: ")
            ok = clean_error if must_fail else (p.returncode == 0 or clean_error)
            if not ok:
                failures += 1
                first = p.stderr.splitlines()[0] if p.stderr else ""
                print(f"FAIL {label}: exit {p.returncode}: {first}")
    print(f"malformed: {runs} broken models ({strict} not well-formed protobuf), "
          f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
