#!/usr/bin/env python3
"""TfIdfVectorizer at run time (opc_tfidf) against ONNX Runtime, exactly.

usage: test_tfidf.py OPC WORK_DIR

The ONNX node tests cover mode TF on int32 only, without weights; here one
program holds the other modes (IDF, TFIDF with weights), int64 and int32
rows, a 1-D input, trigrams, n-grams mapped to columns out of pool order
and skips up to 3. Negative control: ONNX Runtime's output for the same
rows with max_skip_count 0 must differ from what the program returned for
every case that counts (TF, TFIDF) with skips.
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_case  # noqa: E402
from onnx_case import compare_exact, reference, run_opc, value_info  # noqa: E402

rng = np.random.default_rng(61)
# 3 unigrams, 2 bigrams, 2 trigrams; columns out of pool order; 8 columns
# (column 7 has no n-gram and stays 0).
GRAMS = dict(ngram_counts=[0, 3, 7], ngram_indexes=[5, 0, 2, 1, 3, 4, 6],
             pool_int64s=[1, 2, 3, 1, 2, 3, 4, 0, 5, 1, 5, 2, 2],
             weights=[0.5, 1.5, 2.0, 3.0, 0.25, 4.0, 1.0])
# name, rows, mode, min and max gram length, max_skip_count
CASES = [
    ("idf_i32", rng.integers(0, 6, (3, 9)).astype(np.int32), "IDF", 1, 3, 2),
    ("tfidf_i64", rng.integers(0, 6, (2, 11)).astype(np.int64), "TFIDF", 1, 2, 1),
    ("tf_trigrams", rng.integers(0, 6, (4, 8)).astype(np.int32), "TF", 2, 3, 3),
    ("tfidf_1d", rng.integers(0, 6, (12,)).astype(np.int64), "TFIDF", 2, 2, 0),
]


def tfidf_model(cases, skip=None):
    nodes, inputs, outputs = [], [], []
    for name, x, mode, lo, hi, s in cases:
        inputs.append(value_info(name + "_x", x))
        nodes.append(helper.make_node("TfIdfVectorizer", [name + "_x"], [name], mode=mode,
                                      min_gram_length=lo, max_gram_length=hi,
                                      max_skip_count=s if skip is None else skip, **GRAMS))
        outputs.append(onnx.ValueInfoProto(name=name))
    return onnx_case.model(nodes, inputs, outputs, opset=9, name="tfidf", ir_version=8)


def main():
    opc, work = sys.argv[1:3]
    failures = []
    m = tfidf_model(CASES)
    feeds = {name + "_x": x for name, x, *_ in CASES}
    want = reference(m, feeds)
    got, why = run_opc(opc, m, feeds, os.path.join(work, "program"))
    if why:
        sys.exit(f"FAIL: {why}")
    for name, *_ in CASES:
        why = compare_exact(got[name], want[name])
        if why:
            failures.append(f"{name}: {why}")
    unskipped = reference(tfidf_model(CASES, skip=0), feeds)
    for name, _, mode, _, _, s in CASES:
        if s and mode != "IDF" and compare_exact(got[name], unskipped[name]) is None:
            failures.append(f"{name}: the reference without skips matches too")
    if failures:
        print("\n".join("FAIL " + f for f in failures))
        return 1
    print(f"tfidf: {len(CASES)} cases match ONNX Runtime exactly; the no-skip control differs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
