#!/usr/bin/env python3
"""`pip install .` from this source tree into a fresh virtual environment,
as a user would (pip builds in its own isolated environment, with
meson-python from PyPI); then, with nothing of the source or build tree
on the paths, `import opc` compiles a zoo model that must match ONNX
Runtime on a photograph, and the `opc` command is the package's compiler.

Usage: test_install.py WORKDIR
"""
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent.parent
WORK = Path(sys.argv[1])
sys.path.insert(0, str(ROOT / "tests" / "zoo"))
import reference  # noqa: E402

# Runs inside the virtual environment, from WORKDIR. The oracle comes from
# the python3 that runs this test (the venv sees its packages through
# --system-site-packages); opc must come from the venv itself.
SCRIPT = r"""
import os, sys
import numpy as np, onnxruntime as ort
import opc
assert opc.__file__.startswith(sys.prefix), f"opc imported from {opc.__file__}, not {sys.prefix}"
assert opc.compiler_path().startswith(sys.prefix), opc.compiler_path()
x = np.load("input.npy")
ref = ort.InferenceSession("squeezenet1_1.onnx", providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
got = opc.compile("squeezenet1_1.onnx", target="cpu").run({"input": x})["logits"]
err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
print(f"relative L2 error against ONNX Runtime: {err:.2e}")
assert err < 1e-4
"""


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run(cmd, text=True, capture_output=True, **kw)


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    env_dir = WORK / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    py = env_dir / "bin" / "python"
    # Neither the build tree's opc nor the source tree's package may be found.
    env = {k: v for k, v in os.environ.items() if k not in ("OPC_COMPILER", "PYTHONPATH")}
    p = run([py, "-m", "pip", "install", "--quiet", str(ROOT)], env=env, cwd=WORK)
    if p.returncode != 0:
        print(f"FAIL pip install .\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return 1
    model = WORK / "squeezenet1_1.onnx"
    subprocess.run([sys.executable, str(ROOT / "tools/models/build.py"), "squeezenet1_1",
                    "-o", str(model)], check=True, capture_output=True)
    # A photograph, as the zoo feeds it (tests/zoo/reference.py)
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = reference.draw_inputs(sess, dict(sess.get_modelmeta().custom_metadata_map), 5, 0)
    np.save(WORK / "input.npy", feeds["input"])
    failures = 0
    p = run([py, "-c", SCRIPT], env=env, cwd=WORK)
    print(p.stdout, end="")
    if p.returncode != 0:
        failures += 1
        print(f"FAIL the installed package compiles and runs a zoo model\n{p.stderr[-3000:]}")
    p = run([env_dir / "bin" / "opc", "--version"], env=env, cwd=WORK)
    if p.returncode != 0 or not p.stdout.startswith("opc "):
        failures += 1
        print(f"FAIL the installed opc command\n{p.stdout}{p.stderr}")
    p = run([env_dir / "bin" / "opc", str(model), "-o", str(WORK / "net"), "--target", "cpu"],
            env=env, cwd=WORK)
    if p.returncode != 0 or not (WORK / "net").exists():
        failures += 1
        print(f"FAIL the installed opc builds a CPU program (its runtime is in the package)\n"
              f"{p.stderr}")
    # GPU programs against PyPI's CUDA wheels link the driver against opc's
    # stand-in for libcuda, which must be installed in the package (an empty
    # cuda_runtime.h stands for the wheels).
    wheels = WORK / "site" / "nvidia"
    (wheels / "cu13" / "include").mkdir(parents=True)
    (wheels / "cu13" / "include" / "cuda_runtime.h").write_text("")
    p = run([env_dir / "bin" / "opc", "--libs", "cuda"], env=dict(env, OPC_CUDA_HOME=str(wheels)),
            cwd=WORK)
    stubs = [w[2:] for w in p.stdout.split() if w.startswith("-L") and w.endswith("/stubs")]
    if p.returncode != 0 or len(stubs) != 1 or not stubs[0].startswith(str(env_dir)) or \
            not os.path.exists(os.path.join(stubs[0], "libcuda.so")):
        failures += 1
        print(f"FAIL the installed opc links CUDA's wheels with its own libcuda stand-in\n"
              f"{p.stdout}{p.stderr}")
    print(f"python-install: 4 checks, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
