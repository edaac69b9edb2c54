#!/usr/bin/env python3
"""Kernels, predicted time and floor per model, before and after a change.

  kernel_table.py --before OPC --after OPC [--device h100] MODEL.onnx ...

Compiles each model with both opc binaries in float32 and float16
(--precision fp16) and prints a Markdown table of what `--report` says:
schedule units (kernels), predicted µs and floor µs; and the launches the
program issues on the device per run, counted in its net.c: each call of
cuDNN, cuBLAS or cuLaunchKernel, and each asynchronous copy or memset, in
the nodes' run functions (a convolution that tries cuDNN's fused call
first counts as that one call). Nothing runs on a GPU: these are the cost
model's figures for the device file and the program's own text.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile


LAUNCH = re.compile(r"_ok\(c, (cudnn(?!Set|Get|Create|Destroy)\w+|cublas(?!Set|Get|Create|Destroy)\w+"
                    r"|cuLaunchKernel|cudaMemcpyAsync|cudaMemsetAsync)\(")
RUN = re.compile(r"^static int run_\w+\(.*?^}", re.M | re.S)


def launches(c_text):
    """Device launches per run: the calls in the run functions, a function
    that tries cuDNN's fused convolution first counted as that one call."""
    total = 0
    for body in RUN.findall(c_text):
        total += 1 if "FORM_FUSED" in body else len(LAUNCH.findall(body))
    return total


def report(opc, model, precision, device):
    """(units, predicted_us, floor_us, launches) from opc --report and net.c."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [opc, model, "-o", os.path.join(tmp, "net.c"), "--report", "--device", device]
        if precision != "fp32":
            cmd += ["--precision", precision]
        out = subprocess.run(cmd, capture_output=True, text=True)
        with open(os.path.join(tmp, "net.c")) as f:
            c_text = f.read() if out.returncode == 0 else ""
    if out.returncode != 0:
        sys.exit(f"kernel_table: {' '.join(cmd)} failed:\n{out.stderr}")
    units = re.search(r"schedule: \w+, (\d+) units", out.stdout)
    predicted = re.search(r"^predicted ([\d.]+) us", out.stdout, re.M)
    floor = re.search(r"^floor: ([\d.]+) us", out.stdout, re.M)
    if not (units and predicted and floor):
        sys.exit(f"kernel_table: no report in the output of {' '.join(cmd)}")
    return (int(units.group(1)), float(predicted.group(1)), float(floor.group(1)),
            launches(c_text))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--device", default="h100")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    print("| model | precision | kernels before | after | launches before | after "
          "| predicted µs before | after | floor µs before | after |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model in args.models:
        name = os.path.splitext(os.path.basename(model))[0]
        for precision in ("fp32", "fp16"):
            b = report(args.before, model, precision, args.device)
            a = report(args.after, model, precision, args.device)
            print(f"| {name} | {precision} | {b[0]} | {a[0]} | {b[3]} | {a[3]} | {b[1]:.2f} "
                  f"| {a[1]:.2f} | {b[2]:.2f} | {a[2]:.2f} |")


if __name__ == "__main__":
    main()
