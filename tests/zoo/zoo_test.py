"""End-to-end zoo test: one model against ONNX Runtime under every configuration.

    zoo_test.py OPC NAME BATCH WORKDIR [CONFIG,...]

Builds the model once (tools/models/build.py), draws a fresh random input from
a recorded seed and computes ONNX Runtime's outputs once, then for each
configuration (every scheduler, -O0, direct launches instead of a replayed
CUDA graph, HIOS on 2 and 4 emulated GPUs) compiles the model with opc for the CPU runtime, runs it with the
runtime's race checker on (OPC_CHECK=1) and compares every output: relative
L2 error below 1e-4 and no NaN. Reproduce a failure with OPC_ZOO_SEED.

Finally the same model's net.c, in both graph modes and both precisions,
must compile and link with -Wall -Werror against the real CUDA toolkit,
cuDNN and cuBLAS (there is no GPU here to run it). A list of configurations
(CONFIGS, FOLDED) runs those alone, without the CUDA builds.
"""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOL = 1e-4

CONFIGS = {
    "ios": ["--schedule", "ios"],
    "lios": ["--schedule", "lios"],
    "greedy": ["--schedule", "greedy"],
    "sequential": ["--schedule", "sequential"],
    "O0": ["-O0"],
    "no-cuda-graph": ["--no-cuda-graph"],
    "gpus2": ["--gpus", "2"],
    # every unit in turn on another GPU: a transfer on nearly every edge;
    # LIOS's streams within each GPU
    "gpus4": ["--gpus", "4", "--placement", "round-robin", "--schedule", "lios"],
    # the GPU and the host CPU (HOPE): every other unit on the CPU, a copy on
    # nearly every edge; then the ILP's own partition
    "hope-alternate": ["--devices", "gpu,cpu", "--partition", "alternate"],
    "hope-ilp": ["--devices", "gpu,cpu", "--partition", "ilp",
                 "--cpu-device", str(HERE / "cpu_as_fast.json")],
    # convolutions, GEMMs, pooling and the data between them in 16 bits
    # (stored channels-last around the convolutions: choose-layout)
    "fp16": ["--precision", "fp16"],
    "bf16": ["--precision", "bf16"],
    # and in ONNX's order throughout
    "fp16-nchw": ["--precision", "fp16", "--layout", "nchw"],
}

# Programs for several GPUs run on fewer (OPC_GPU_MAP): not in the default
# list, which keeps the race checker's one-GPU-per-device view; a test of
# their own names them.
FOLDED = {
    "gpus2-on-1": (CONFIGS["gpus2"], {"OPC_DEVICE_COUNT": "1", "OPC_GPU_MAP": "0,0"}),
    # peer copies between the two devices and copies within each
    "gpus4-on-2": (CONFIGS["gpus4"], {"OPC_DEVICE_COUNT": "2", "OPC_GPU_MAP": "0,1,1,0"}),
}

# The accuracy each precision must keep against ONNX Runtime's float32:
# relative L2 error below this (issue 17's figures); strict float32 below TOL.
PRECISION_TOL = {"fp16": 1e-2, "bf16": 3e-2, "fp16-nchw": 1e-2}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


def read_pairs(path):
    pairs = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            name, _, file = line.partition("=")
            pairs.append((name, file))
    return pairs


def rel_l2(ref, got):
    """The relative L2 error of a floating output; integer and bool outputs
    must be exact (error 0)."""
    if ref.shape != got.shape:
        return None, f"shape {got.shape} != {ref.shape}"
    if ref.dtype != got.dtype:
        return None, f"dtype {got.dtype} != {ref.dtype}"
    if ref.dtype.kind in "biu":
        wrong = int(np.count_nonzero(ref != got))
        return (0.0, None) if wrong == 0 else (None, f"{wrong} of {ref.size} values differ")
    if not np.all(np.isfinite(got)):
        return None, "NaN or Inf in output"
    denom = np.linalg.norm(ref.astype(np.float64))
    err = np.linalg.norm((got - ref).astype(np.float64)) / (denom if denom > 0 else 1.0)
    return err, None


CUDA_VARIANTS = {
    "graph-fp32": [],
    "graph-tf32": ["--precision", "tf32"],
    "direct-fp32": ["--no-cuda-graph"],
    "direct-tf32": ["--no-cuda-graph", "--precision", "tf32"],
    "graph-fp32-gpus2": ["--gpus", "2"],
    "graph-fp32-hope": ["--devices", "gpu,cpu", "--partition", "alternate"],
    "graph-fp16": ["--precision", "fp16"],
    "graph-bf16": ["--precision", "bf16"],
}


def cuda_builds(opc, model, work, label):
    """Compiles and links net.c for CUDA in every variant; returns the failure count."""
    cflags = run([opc, "--cflags", "cuda"]).stdout.split()
    libs = run([opc, "--libs", "cuda"]).stdout.split()
    failures = 0
    for variant, flags in CUDA_VARIANTS.items():
        src = work / f"cuda-{variant}.c"
        r = run([opc, str(model), "-o", str(src)] + flags)
        if r.returncode == 0:
            cc = os.environ.get("CC", "cc").split()
            r = run(cc + ["-O1", "-Wall", "-Wextra", "-Werror", str(src), "-o",
                          str(work / f"cuda-{variant}")] + cflags + libs)
        if r.returncode:
            print(f"FAIL {label} cuda {variant}: does not build\n{r.stdout}{r.stderr}")
            failures += 1
        else:
            print(f"PASS {label} cuda {variant}: compiles and links against CUDA")
        for f in work.glob(f"cuda-{variant}*"):
            f.unlink()
    return failures


# HOPE's heuristic against its ILP (the paper's model, one unit at a time per
# processor), on the made-up CPU that makes the ILP split: the factor the
# README states.
HOPE_HEURISTIC_FACTOR = 1.5


def check_hope_heuristic(opc, model, work, label):
    """The greedy partition's latency within HOPE_HEURISTIC_FACTOR of the ILP's."""
    latency = {}
    for partition in ("ilp", "heuristic"):
        out = work / f"hope-{partition}.json"
        r = run([opc, str(model), "--devices", "gpu,cpu", "--partition", partition,
                 "--cpu-device", str(HERE / "cpu_as_fast.json"), "--emit-schedule", str(out)])
        if r.returncode:
            print(f"FAIL {label} hope-heuristic: --partition {partition}: {r.stderr.strip()}")
            return 1
        latency[partition] = json.loads(out.read_text())["hope"]["model_latency_us"]
        out.unlink()
    ratio = latency["heuristic"] / latency["ilp"]
    verdict = "PASS" if ratio <= HOPE_HEURISTIC_FACTOR else "FAIL"
    print(f"{verdict} {label} hope-heuristic: {latency['heuristic']:.1f} us against the ILP's "
          f"{latency['ilp']:.1f} us, ratio {ratio:.3f} (at most {HOPE_HEURISTIC_FACTOR})")
    return 0 if verdict == "PASS" else 1


def check_folded(opc, model, label):
    """The operator types the model's metadata "opc.must_fold" names (a
    subgraph built from constants and shapes alone) must all be gone after
    opc's fold-constants pass."""
    import onnx
    props = {p.key: p.value for p in onnx.load(str(model), load_external_data=False).metadata_props}
    kinds = [k for k in props.get("opc.must_fold", "").split(",") if k]
    if not kinds:
        return 0
    r = run([opc, str(model), "-o", str(model.with_suffix(".c")), "--dump-after=fold-constants"])
    for f in [model.with_suffix(".c"), model.with_suffix(".h"), model.with_suffix(".weights")]:
        f.unlink(missing_ok=True)
    left = sorted({k for k in kinds for line in r.stdout.splitlines() if f"= {k}(" in line})
    if r.returncode or left:
        print(f"FAIL {label} fold: {'left after fold-constants: ' + ', '.join(left) if left else r.stderr}")
        return 1
    print(f"PASS {label} fold: no {', '.join(kinds)} left after fold-constants")
    return 0


def main():
    opc, name, batch, workdir = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    configs = sys.argv[5].split(",") if len(sys.argv) > 5 else list(CONFIGS)
    seed = int(os.environ.get("OPC_ZOO_SEED", random.randrange(1 << 30)))
    work = workdir / f"{name}-b{batch}"
    work.mkdir(parents=True, exist_ok=True)
    print(f"zoo {name} batch {batch}: input seed {seed} (reproduce with OPC_ZOO_SEED={seed})")

    model = work / "model.onnx"
    r = run([sys.executable, str(ROOT / "tools/models/build.py"), name, "-o", str(model),
             "--batch", batch])
    if r.returncode:
        print(r.stdout + r.stderr)
        return 1
    ref_dir = work / "ref"
    r = run([sys.executable, str(HERE / "reference.py"), str(model), "--seed", str(seed),
             "--outdir", str(ref_dir)])
    if r.returncode:
        print(r.stdout + r.stderr)
        return 1
    inputs = read_pairs(ref_dir / "inputs.txt")
    refs = read_pairs(ref_dir / "outputs.txt")

    failures = check_folded(opc, model, f"{name} b{batch}")
    if "hope-ilp" in configs:
        failures += check_hope_heuristic(opc, model, work, f"{name} b{batch}")
    for config in configs:
        exe = work / f"net-{config}"
        flags, env = FOLDED[config] if config in FOLDED else (CONFIGS[config], {})
        r = run([opc, str(model), "-o", str(exe), "--target", "cpu", "--verify-each"] + flags)
        if r.returncode:
            print(f"FAIL {name} b{batch} {config}: opc exited {r.returncode}\n{r.stderr}")
            failures += 1
            continue
        cmd = [str(exe)]
        for n, f in inputs:
            cmd += ["--input", f"{n}={f}"]
        outs = []
        for k, (n, _) in enumerate(refs):
            out = work / f"got-{config}-{k}.npy"
            outs.append(out)
            cmd += ["--output", f"{n}={out}"]
        r = run(cmd, env=dict(os.environ, OPC_CHECK="1", **env))
        if r.returncode:
            print(f"FAIL {name} b{batch} {config}: program exited {r.returncode}\n{r.stderr}")
            failures += 1
            continue
        worst = 0.0
        tol = PRECISION_TOL.get(config, TOL)
        for (n, ref_file), out in zip(refs, outs):
            err, why = rel_l2(np.load(ref_file), np.load(out))
            if why or err >= tol:
                print(f"FAIL {name} b{batch} {config}: output {n}: "
                      f"{why or f'relative L2 error {err:.3g} >= {tol}'}")
                failures += 1
                break
            worst = max(worst, err)
        else:
            print(f"PASS {name} b{batch} {config}: relative L2 error {worst:.2e}")
        for f in [exe, exe.with_suffix(".c"), exe.with_suffix(".weights")]:
            f.unlink(missing_ok=True)
    if configs == list(CONFIGS):
        failures += cuda_builds(opc, model, work, f"{name} b{batch}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
