#!/usr/bin/env python3
"""Compiles the runtime's test programs against the real CUDA toolkit's
headers: code written for opc's CPU runtime must build unchanged against
CUDA, cuDNN and cuBLAS. Skipped (77) when the toolkit is not installed.

Usage: compat_real_cuda.py CC SOURCE...
"""
import os
import subprocess
import sys

CUDA_INCLUDE = os.environ.get('CUDA_INCLUDE', '/usr/local/cuda/include')


def main():
    cc, sources = sys.argv[1], sys.argv[2:]
    needed = ['cuda.h', 'cuda_runtime.h', 'cudnn.h', 'cublas_v2.h', 'nvrtc.h']
    if not all(os.path.exists(os.path.join(CUDA_INCLUDE, h)) for h in needed):
        print('no CUDA toolkit headers in %s: skipped' % CUDA_INCLUDE)
        sys.exit(77)
    failures = 0
    for src in sources:
        cmd = [cc, '-std=c11', '-D_GNU_SOURCE', '-fsyntax-only', '-Wall', '-Werror',
               '-Wno-deprecated-declarations', '-Wno-unused-function', '-I' + CUDA_INCLUDE, src]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            failures += 1
            print('FAIL %s\n%s' % (src, p.stderr))
        else:
            print('ok   %s' % os.path.basename(src))
    sys.exit(1 if failures else 0)


main()
