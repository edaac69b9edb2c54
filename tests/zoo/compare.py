#!/usr/bin/env python3
"""The zoo's one check of an output against ONNX Runtime's.

  compare.py REF.npy GOT.npy [--precision fp32|tf32|fp16|bf16]
             [--baseline MEAN.npy] [--floor FLOOR.npy] [--name LABEL]

A floating output must pass two bounds of its precision (PRECISIONS):

  relative L2      ||got - ref|| / ||ref||
  signal-relative  ||got - ref|| / ||ref - baseline||, where baseline is the
                   mean of the reference over other inputs: the error
                   against the part of the output that the input decides.

A model whose output hardly depends on its input would pass the first bound
with almost any answer; the second bound is what makes the check tell a
right answer from a wrong one, and the input sensitivity
||ref - baseline|| / ||ref|| (at least MIN_SENSITIVITY) says whether it can.

In bfloat16 a model may amplify rounding beyond the precision's bounds:
given the floor (storage_floor.py: ONNX Runtime with every weight and
stored value rounded to bfloat16), each bound is the precision's or
FLOOR_FACTOR times the floor's own error, whichever is larger.

Exact: shapes, element types, integer and bool values; NaN and Inf only
where the reference has them, at the same places (infinities of the same
sign). A NaN in the reference is a test error, never a pass.

Exit status: 0 if the output passes, 1 if it does not (or a file cannot be
read), 2 for usage errors.
"""

import argparse
import sys

import numpy as np

# precision -> (relative L2 bound, signal-relative bound). In 16 bits the
# signal-relative bound is the one that binds: issue 17's relative L2 bounds
# (1e-2, 3e-2) were measured on outputs that hardly depended on their input,
# where the constant part dilutes any error. On the calibrated zoo, storage
# rounding alone (every weight and activation rounded, all else exact, in
# ONNX Runtime) gives Inception-V3 a relative L2 of 0.047 in fp16 and 0.22
# in bf16 (docs/testing.md).
PRECISIONS = {
    "fp32": (1e-4, 1e-3),
    "tf32": (1e-2, 1e-3),
    "fp16": (0.1, 0.1),
    "bf16": (0.3, 0.3),
}
# A 16-bit program may lose up to this many times what storing every value
# in 16 bits alone loses in ONNX Runtime (storage_floor.py). opc rounds at
# other places than the floor does (a folded BatchNormalization's weights,
# fewer stored values), so its error is the floor's give or take; twice
# the floor still fails every zoo model's negative control.
FLOOR_FACTOR = 2.0
# The precisions whose bounds follow the floor: bfloat16, which keeps
# float32's range. float16's storage rounding overflows (largest 65504)
# where opc keeps a value in float32 (PP-OCR's detector: a floor error of
# 1.55), so its floor says nothing about opc; its fixed bound holds every
# zoo model with room (docs/half-precision.md).
FLOOR_PRECISIONS = ("bf16",)

# The input-dependent part of an output over the whole output, below which
# the signal-relative bound would be too loose to mean anything.
MIN_SENSITIVITY = 0.2


class ReferenceError(Exception):
    """The reference itself is unusable (a NaN): a test error."""


def norm(a):
    return float(np.linalg.norm(np.asarray(a, np.float64).ravel()))


def sensitivity(ref, baseline):
    """||ref - baseline|| / ||ref|| over the finite elements."""
    r = np.asarray(ref, np.float64)
    b = np.asarray(baseline, np.float64)
    finite = np.isfinite(r) & np.isfinite(b)
    whole = norm(r[finite])
    return norm((r - b)[finite]) / whole if whole > 0 else 0.0


def errors(ref, got, baseline):
    """(relative L2, signal-relative or None) of got against ref over ref's
    finite elements."""
    r = np.asarray(ref, np.float64)
    finite = np.isfinite(r)
    diff = norm((np.asarray(got, np.float64) - r)[finite])
    whole = norm(r[finite])
    rel = diff / whole if whole > 0 else diff
    if baseline is None:
        return rel, None
    b = np.asarray(baseline, np.float64)
    signal = norm((r - b)[finite & np.isfinite(b)])
    return rel, diff / signal if signal > 0 else float("inf")


def bounds(precision, ref=None, baseline=None, floor=None):
    """(relative L2 bound, signal-relative bound): the precision's, widened
    to FLOOR_FACTOR times the floor's errors where those are larger."""
    rel_bound, signal_bound = PRECISIONS[precision]
    if floor is None or precision not in FLOOR_PRECISIONS:
        return rel_bound, signal_bound
    # A floor that overflowed (an infinity where the reference is finite)
    # widens nothing.
    rel, signal_rel = errors(ref, floor, baseline)
    if np.isfinite(rel):
        rel_bound = max(rel_bound, FLOOR_FACTOR * rel)
    if signal_rel is not None and np.isfinite(signal_rel):
        signal_bound = max(signal_bound, FLOOR_FACTOR * signal_rel)
    return rel_bound, signal_bound


def check(ref, got, precision="fp32", baseline=None, floor=None):
    """(ok, message, figures): figures has rel_l2 and signal_rel (None where
    not applicable) and bounds, the (relative L2, signal-relative) bounds
    where `floor` (bf16) widened them (bounds()), else None.
    Raises ReferenceError for a NaN in the reference."""
    figures = {"rel_l2": None, "signal_rel": None, "bounds": None}
    if got.shape != ref.shape:
        return False, "shape %s, expected %s" % (got.shape, ref.shape), figures
    if got.dtype != ref.dtype:
        return False, "element type %s, expected %s" % (got.dtype, ref.dtype), figures
    if ref.dtype.kind in "biu":
        wrong = ref != got
        if wrong.any():
            k = int(np.argmax(wrong.ravel()))
            return False, "%d of %d values differ (first at flat index %d: got %s, expected %s)" % (
                int(wrong.sum()), ref.size, k, got.ravel()[k], ref.ravel()[k]), figures
        figures["rel_l2"] = 0.0
        return True, "exact", figures
    r = ref.astype(np.float64)
    g = got.astype(np.float64)
    if np.isnan(r).any():
        raise ReferenceError("the reference has %d NaN of %d values" % (int(np.isnan(r).sum()),
                                                                      r.size))
    inf = np.isinf(r)
    misplaced = (~np.isfinite(g) & ~inf) | (inf & (g != r))
    if misplaced.any():
        k = int(np.argmax(misplaced.ravel()))
        return False, "%d NaN or Inf where the reference has none or another (first at flat " \
            "index %d: got %r, expected %r)" % (int(misplaced.sum()), k, float(g.ravel()[k]),
                                                float(r.ravel()[k])), figures
    rel, signal_rel = errors(r, g, baseline)
    figures["rel_l2"] = rel
    rel_bound, signal_bound = bounds(precision, r, baseline, floor)
    text = "relative L2 %.2e" % rel
    problems = []
    if rel >= rel_bound:
        problems.append("relative L2 %.3g >= %.3g" % (rel, rel_bound))
    if signal_rel is not None:
        figures["signal_rel"] = signal_rel
        text += ", signal-relative %.2e" % signal_rel
        if signal_rel > signal_bound:
            problems.append("signal-relative error %.3g > %.3g" % (signal_rel, signal_bound))
    if (rel_bound, signal_bound) != PRECISIONS[precision]:
        figures["bounds"] = (rel_bound, signal_bound)
        text += " (bounds %.3g, %.3g: %g times storage rounding's)" % (rel_bound, signal_bound,
                                                                       FLOOR_FACTOR)
    if problems:
        return False, "; ".join(problems), figures
    return True, text, figures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref")
    ap.add_argument("got")
    ap.add_argument("--precision", default="fp32", choices=sorted(PRECISIONS))
    ap.add_argument("--baseline", default=None,
                    help="the mean of the reference over other inputs (.npy)")
    ap.add_argument("--floor", default=None,
                    help="the output under storage rounding (.npy; bf16)")
    ap.add_argument("--name", default=None, help="label printed with the result")
    a = ap.parse_args(argv)
    label = (a.name + ": ") if a.name else ""
    try:
        ref = np.load(a.ref, allow_pickle=False)
        got = np.load(a.got, allow_pickle=False)
        baseline = np.load(a.baseline, allow_pickle=False) if a.baseline else None
        floor = np.load(a.floor, allow_pickle=False) if a.floor else None
    except Exception as e:  # a missing or corrupt file is a failure, not a crash
        print("FAIL %scannot load: %s" % (label, e))
        return 1
    try:
        ok, message, _ = check(ref, got, a.precision, baseline, floor)
    except ReferenceError as e:
        print("ERROR %s%s" % (label, e))
        return 1
    print("%s %s%s" % ("PASS" if ok else "FAIL", label, message))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
