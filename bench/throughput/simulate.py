#!/usr/bin/env python3
"""The serving plan in simulation, on opc's device model (default h100):
for TOP's multi-model mix (Inception-V3, ResNet-50 and SqueezeNet at 30, 60
and 120 requests per second, doubled on its server as TOP's paper does) and
heavier multiples of it, `opc ... --arrivals ... --report` chooses the
instances and launcher intervals and compares the joint schedule with
independent contexts per request and with IOS per model on the same
seeded arrivals. No GPU runs here; the figures are the cost model's.

    simulate.py [--opc OPC] [--scales 2,8,16,24] [-o FILE.md]
"""
import argparse
import datetime
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODELS = ["inception_v3", "resnet50", "squeezenet1_1"]
TOP_MIX = {"inception_v3": 30, "resnet50": 60, "squeezenet1_1": 120}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opc", default=str(ROOT / "build" / "opc"))
    ap.add_argument("--scales", default="2,8,16,24")
    ap.add_argument("--device", default="h100")
    ap.add_argument("--work", default="/tmp/opc-bench-throughput")
    ap.add_argument("-o", "--output", default=None)
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    for m in MODELS:
        if not (work / f"{m}.onnx").exists():
            subprocess.run([sys.executable, str(ROOT / "tools/models/build.py"), m, "-o",
                            str(work / f"{m}.onnx"), "--seed", "0"], check=True)
    date = datetime.date.today().isoformat()
    out = Path(a.output) if a.output else \
        ROOT / "bench" / "results" / f"throughput-simulated-{date}-{a.device}-model.md"
    lines = [f"# Serving plans in simulation ({date}, the {a.device} cost model)", "",
             "`bench/throughput/simulate.py`: the models of the zoo (seeded weights, batch 1), "
             "TOP's mix (30, 60, 120 requests/s) times each scale. Every system sees the same "
             "seeded Poisson arrivals. Joint schedule: opc's serving program with the instances and "
             "intervals opc chose; independent contexts: as many contexts of each model's own "
             "program as the joint schedule has copies, each serving one request at a time; IOS per "
             "model: one context of each model, scheduled by IOS. Predicted, not measured.", ""]
    for scale in [float(s) for s in a.scales.split(",")]:
        rates = ",".join(f"{m}={r * scale:g}" for m, r in TOP_MIX.items())
        r = subprocess.run([a.opc] + [str(work / f"{m}.onnx") for m in MODELS] +
                           ["--arrivals", rates, "--report", "--device", a.device],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr)
        text = r.stdout
        chosen = next((l for l in text.splitlines() if l.startswith("chosen:")), "chosen: ?")
        start = text.index("simulated against the baselines")
        end = text.index("schedule:", start) if "schedule:" in text[start:] else len(text)
        lines += [f"## {scale:g} x TOP's mix: {rates}", "", chosen.replace("chosen:", "opc chose:"), "",
                  "```", text[start:end].rstrip(), "```", ""]
        print(f"scale {scale:g}: {chosen}", flush=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"simulate: wrote {out}")


if __name__ == "__main__":
    main()
