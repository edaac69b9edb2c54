#!/usr/bin/env python3
"""The kernels compile in both languages, whole and cut into pieces.

usage: test_compile.py KERNEL_SOURCE_DUMP KERNELS_DIR EXPANDED_INC

EXPANDED_INC is opc_kernels.inc with its typed kernels instantiated
(kernel_types.py); it is what the steps below call opc_kernels.inc.

1. opc_kernels.inc after prelude_cpu.h: C11 with -Wall -Wextra -Werror
   (but -Wtype-limits and -Wtautological-compare: a kernel written once for
   every type has NaN and sign tests that are constant for some types).
2. opc_kernels.inc after prelude_cuda.h: CUDA, nvcc -x cu --ptx -G (what
   NVRTC compiles, unoptimised; skipped without nvcc).
3. The embedded text of every kernel alone (its helpers and notes with it),
   as C: each kernel's block in net.c is self-contained.
4. The embedded text of all kernels together, as CUDA (-G too).
"""
import os
import shutil
import subprocess
import sys
import tempfile

failures = []


def compile_c(path, include):
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-type-limits",
           "-Wno-tautological-compare", "-fsyntax-only", "-I", include, path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode == 0, p.stderr


def nvcc():
    for cand in [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]:
        if cand and os.path.exists(cand):
            return cand
    return None


def compile_cuda(path, include, out):
    # -G turns NVVM's optimiser off: what is checked here is that all the
    # kernels compile together (declarations, names, the CUDA dialect), which
    # the front end decides, in 1 s instead of 23. Every kernel is compiled
    # optimised, alone, as net.c compiles it, by kernels-nvrtc.
    cmd = [nvcc(), "-x", "cu", "--ptx", "-G", "-arch=compute_80", "-I", include, path, "-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode == 0, p.stderr


def main():
    dump, kdir, expanded = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    with tempfile.TemporaryDirectory() as tmp:
        whole_c = os.path.join(tmp, "whole.c")
        with open(whole_c, "w") as f:
            f.write('#include "opc_kargs.h"\n#include "prelude_cpu.h"\n#include "%s"\n' % expanded + '')
        ok, err = compile_c(whole_c, kdir)
        if not ok:
            failures.append("opc_kernels.inc as C:\n" + err)
        names = subprocess.run([dump, "--list"], capture_output=True, text=True,
                               check=True).stdout.split()
        if len(names) < 60:
            failures.append(f"only {len(names)} kernels in the embedded source")
        for name in names:
            path = os.path.join(tmp, f"{name}.c")
            with open(path, "w") as f:
                f.write(subprocess.run([dump, "--cpu", name], capture_output=True, text=True,
                                       check=True).stdout)
            ok, err = compile_c(path, kdir)
            if not ok:
                failures.append(f"{name} alone, as C:\n{err}")
        if nvcc():
            whole_cu = os.path.join(tmp, "whole.cu")
            with open(whole_cu, "w") as f:
                f.write('#include "prelude_cuda.h"\n#include "opc_kargs.h"\n'
                        '#include "%s"\n' % expanded)
            ok, err = compile_cuda(whole_cu, kdir, os.path.join(tmp, "whole.ptx"))
            if not ok:
                failures.append("opc_kernels.inc as CUDA:\n" + err)
            embedded = os.path.join(tmp, "embedded.cu")
            with open(embedded, "w") as f:
                f.write(subprocess.run([dump], capture_output=True, text=True,
                                       check=True).stdout)
            ok, err = compile_cuda(embedded, kdir, os.path.join(tmp, "embedded.ptx"))
            if not ok:
                failures.append("the embedded source as CUDA:\n" + err)
        else:
            print("nvcc not found: CUDA compilation not checked")
    for f in failures:
        print("FAIL", f)
    print(f"{len(names)} kernels, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
