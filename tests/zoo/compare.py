#!/usr/bin/env python3
"""Compare a produced tensor with a reference tensor.

  compare.py REF.npy GOT.npy [--tol 1e-4] [--name LABEL]

Prints one line with the relative L2 error ||got - ref|| / ||ref|| and the
maximum absolute difference.  Exit status: 0 if shapes and dtypes match and
GOT has no NaN/Inf and rel L2 < tol (floating types) or equals REF (integer
and bool types); 1 otherwise (also if a file cannot be read); 2 for usage
errors.
"""

import argparse
import sys

import numpy as np


def compare(ref, got, tol):
    """Return (ok, message)."""
    if ref.shape != got.shape:
        return False, "shape mismatch: ref %s got %s" % (ref.shape, got.shape)
    if got.dtype != ref.dtype:
        return False, "dtype mismatch: ref %s got %s" % (ref.dtype, got.dtype)
    if ref.dtype.kind in "biu":  # integers and bools: exact
        wrong = ref != got
        if not wrong.any():
            return True, "exact shape=%s dtype=%s" % (ref.shape, ref.dtype)
        idx = int(np.argmax(wrong.ravel()))
        return False, "%d of %d values differ (first at flat index %d: ref %s got %s)" % (
            int(wrong.sum()), ref.size, idx, ref.ravel()[idx], got.ravel()[idx])
    r = ref.astype(np.float64, copy=False)
    g = got.astype(np.float64, copy=False)
    if not np.all(np.isfinite(r)):
        return False, "reference contains NaN/Inf"
    bad = ~np.isfinite(g)
    if bad.any():
        return False, "got contains %d NaN/Inf of %d values (first at flat index %d)" % (
            int(bad.sum()), g.size, int(np.argmax(bad.ravel())))
    if r.size == 0:
        return True, "rel_l2=0 max_abs=0 (empty) shape=%s" % (ref.shape,)
    diff = g - r
    nd = float(np.linalg.norm(diff.ravel()))
    nr = float(np.linalg.norm(r.ravel()))
    rel = nd / nr if nr > 0 else nd
    idx = int(np.argmax(np.abs(diff).ravel()))
    mx = float(np.abs(diff).ravel()[idx])
    msg = "rel_l2=%.3e max_abs=%.3e (at flat index %d: ref %.6g got %.6g) shape=%s tol=%.1e" % (
        rel, mx, idx, float(r.ravel()[idx]), float(g.ravel()[idx]), ref.shape, tol)
    return rel < tol, msg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref")
    ap.add_argument("got")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--name", default=None, help="label printed with the result")
    a = ap.parse_args(argv)
    label = (a.name + ": ") if a.name else ""
    try:
        ref = np.load(a.ref, allow_pickle=False)
        got = np.load(a.got, allow_pickle=False)
    except Exception as e:  # missing/corrupt file is a failure, not a crash
        print("FAIL %scannot load: %s" % (label, e))
        return 1
    ok, msg = compare(ref, got, a.tol)
    print("%s %s%s" % ("PASS" if ok else "FAIL", label, msg))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
