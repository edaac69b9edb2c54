#!/usr/bin/env python3
"""HIOS on several GPUs, simulated: opc's predicted latency per placement.

  bench_hios.py [--opc build/opc] [--models a,b] [--batches 1,16] [--gpus 2,4]
                [--out bench/results/hios-sim-DATE.md]

For every model of the zoo (built with tools/models/build.py into a cache
directory) and batch size, runs opc with `--report`-free JSON output:

  - one GPU, `--schedule ios`: the IOS baseline (its stage objective);
  - `--gpus N --placement P` for each link bandwidth and placement P in
    lp (HIOS-LP, the paper's Alg. 1), round-robin and contiguous, each
    followed by the paper's sliding-window grouping (Alg. 2).

Nothing runs on a GPU: every figure is the cost model's prediction for an
H100 (passes/devices/h100.json) with the link bandwidth given. The lent
machines have one GPU, so multi-GPU timing is simulated only.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# GB/s in one direction: the device file's NVLink 4 (H100 SXM), the paper's
# pair of A40s on an NVLink bridge (112.5 GB/s both ways), and PCIe 3.0 x16
# (the paper's V100S pair), about 12 GB/s sustained.
LINKS = [("H100 NVLink 4", 450.0), ("A40 NVLink bridge (paper)", 56.25), ("PCIe 3.0 x16", 12.0)]
PLACEMENTS = ["lp", "round-robin", "contiguous"]


def build_model(name, batch, cache):
    path = os.path.join(cache, "%s_b%d.onnx" % (name, batch))
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"), name,
                        "-o", path, "--batch", str(batch), "--seed", "0"], check=True)
    return path


def schedule(opc, model, work, extra):
    js = os.path.join(work, "s.json")
    cmd = [opc, model, "--emit-schedule", js] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("%s failed: %s" % (" ".join(cmd), r.stderr.strip()))
    with open(js) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opc", default=os.path.join(ROOT, "build", "opc"))
    ap.add_argument("--models", default="inception_v3,nasnet_a,randwire")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--gpus", default="2,4")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "opc-bench-models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  "hios-sim-%s.md" % datetime.date.today()))
    a = ap.parse_args()
    os.makedirs(a.cache, exist_ok=True)
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in a.models.split(","):
            for batch in [int(b) for b in a.batches.split(",")]:
                model = build_model(name, batch, a.cache)
                ios = schedule(a.opc, model, work, ["--schedule", "ios"])
                for gpus in [int(g) for g in a.gpus.split(",")]:
                    for link, gbps in LINKS:
                        row = {"model": name, "batch": batch, "gpus": gpus, "link": link,
                               "gbps": gbps, "ios_us": ios["predicted_latency_us"],
                               "sequential_us": ios["sequential_latency_us"]}
                        for p in PLACEMENTS:
                            s = schedule(a.opc, model, work, ["--gpus", str(gpus), "--placement", p,
                                                             "--link-gbps", str(gbps)])
                            row[p] = s["predicted_latency_us"]
                            row[p + "_placed"] = s["placed_latency_us"]
                            row[p + "_transfers"] = len(s["transfers"])
                            row[p + "_used"] = len({u["device"] for st in s["stages"]
                                                    for g in st["groups"] for u in g["units"]})
                        rows.append(row)
                        print("%-13s b%-3d %d GPUs %-27s IOS %8.1f  LP %8.1f (%.2fx)" % (
                            name, batch, gpus, link, row["ios_us"], row["lp"],
                            row["ios_us"] / row["lp"]), flush=True)
    with open(a.out, "w") as f:
        f.write("# HIOS on several GPUs, simulated (%s)\n\n" % datetime.date.today())
        f.write("opc %s, `bench/hios/bench_hios.py`, on %s (%s). **Nothing here ran on a GPU**: "
                "every figure is opc's cost model for an H100 (`passes/devices/h100.json`), with "
                "the link bandwidth of each row and 2 us per transfer plus an event. The machines "
                "lent to this project have one GPU.\n\n" % (rev, platform.node(), platform.machine()))
        f.write("IOS: one GPU, `--schedule ios`, its stage objective. The others: `--gpus N "
                "--placement P`, placement then the sliding window (3 units); LP is HIOS-LP. "
                "Speedup = IOS / the placement's latency (above 1: faster than one GPU). "
                "`placed`: HIOS-LP before grouping. `GPUs used`: GPUs that received units.\n\n")
        f.write("| model | batch | GPUs | link (GB/s) | IOS us | HIOS-LP us | speedup | LP placed us "
                "| transfers | GPUs used | round-robin us | speedup | contiguous us | speedup |\n")
        f.write("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        for r in rows:
            f.write("| %s | %d | %d | %s (%g) | %.1f | %.1f | %.2f | %.1f | %d | %d | %.1f | %.2f | %.1f | %.2f |\n" % (
                r["model"], r["batch"], r["gpus"], r["link"], r["gbps"], r["ios_us"], r["lp"],
                r["ios_us"] / r["lp"], r["lp_placed"], r["lp_transfers"], r["lp_used"],
                r["round-robin"], r["ios_us"] / r["round-robin"], r["contiguous"],
                r["ios_us"] / r["contiguous"]))
    with open(a.out[:-3] + ".json", "w") as f:
        json.dump(rows, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
