#!/usr/bin/env python3
"""Prints gpu_check.sh's summary table from the JSON its steps wrote.

usage: summary.py --build STATUS [--conformance FILE] [--model FILE]
Exit status 0 when the build (or a skipped one: the carried opc), the
conformance run and the default model all passed, 1 otherwise. A step
whose file is missing counts as not run.
"""
import argparse
import json
import os
import sys


def load(path):
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="one line: how the build went")
    ap.add_argument("--conformance", default=None)
    ap.add_argument("--model", default=None)
    a = ap.parse_args()

    rows = [("build", a.build)]
    ok = a.build.startswith(("ok", "skipped"))
    conf = load(a.conformance)
    if conf is None:
        rows.append(("conformance", "not run (no result)"))
        ok = False
    else:
        c = conf["counts"]
        rows.append(("conformance (%s, %s)" % (conf["target"], conf["precision"]),
                     "%d passed (%d unbound), %d failed, %d rejected, %d not run (time) of %d, "
                     "%.0f s" % (c["PASS"], c["PASS"] - conf.get("bound_passes", 0), c["FAIL"],
                                 c["REJECTED"], c["NOT RUN"], conf["tests"], conf["seconds"])))
        ok = ok and c["FAIL"] == 0 and c["NOT RUN"] == 0
        for f in conf["failures"][:15]:
            rows.append(("  FAIL " + f["test"], f["message"][:160]))
        if len(conf["failures"]) > 15:
            rows.append(("  ...", "%d more failures" % (len(conf["failures"]) - 15)))
    model = load(a.model)
    if model is None:
        rows.append(("default model", "not run (no result)"))
        ok = False
    elif "error" in model:
        rows.append(("default model " + model["model"], "FAIL: " + model["error"]))
        ok = False
    else:
        for r in model["configs"]:
            lat = r.get("latency_ms") or {}
            text = "%s  rel L2 %s  p50 %s ms  p90 %s ms" % (
                r["status"], "%.2e (< %g)" % (r["rel_l2"], r["tolerance"]) if "rel_l2" in r else "-",
                "%.4f" % lat["p50"] if "p50" in lat else "-",
                "%.4f" % lat["p90"] if "p90" in lat else "-")
            if r.get("message"):
                text += "  " + r["message"][:160]
            rows.append(("%s %s (%s)" % (model["model"], r["config"], model["target"]), text))
            ok = ok and r["status"] == "PASS"
        if not model["configs"]:
            ok = False
    width = max(len(k) for k, _ in rows)
    print("== summary ==")
    for k, v in rows:
        print("%-*s  %s" % (width, k, v))
    print("gpu_check: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
