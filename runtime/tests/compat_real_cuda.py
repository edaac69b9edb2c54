#!/usr/bin/env python3
"""Checks the runtime's headers (runtime/include) against the real CUDA
toolkit's. Skipped (77) when the toolkit is not installed.

  - The runtime's test programs compile unchanged against the real CUDA,
    cuDNN and cuBLAS headers.
  - Every enumerator the runtime's headers give a value (CUDA_R_16F = 2,
    CUBLAS_COMPUTE_32F = 68, CUDNN_DATA_BFLOAT16 = 9, ...) has that value in
    the real headers.
  - Every function the runtime's headers declare, declared again after the
    real headers, is compatible with the real declaration: same parameter
    and return types.

Usage: compat_real_cuda.py CC SOURCE...
"""
import os
import re
import subprocess
import sys
import tempfile

CUDA_INCLUDE = os.environ.get('CUDA_INCLUDE', '/usr/local/cuda/include')
RUNTIME_INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'include')
HEADERS = ['cuda.h', 'cuda_runtime_api.h', 'library_types.h', 'cuda_runtime.h', 'cudnn.h',
           'cublas_v2.h', 'cublasLt.h', 'nvrtc.h', 'nvtx3/nvToolsExt.h']
REAL_INCLUDES = ''.join('#include <%s>\n' % h for h in
                        ['cuda.h', 'cuda_runtime.h', 'cudnn.h', 'cublas_v2.h', 'cublasLt.h', 'nvrtc.h',
                         'nvtx3/nvToolsExt.h'])
FLAGS = ['-std=c11', '-D_GNU_SOURCE', '-fsyntax-only', '-Wall', '-Werror',
         '-Wno-deprecated-declarations', '-Wno-unused-function']


def code_of(header):
    """The header's text without comments and preprocessor lines."""
    with open(os.path.join(RUNTIME_INCLUDE, header)) as f:
        text = f.read()
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    return re.sub(r'^\s*#[^\n]*', '', text, flags=re.M)


def enumerators(code):
    """(name, value) of each enumerator written NAME = integer."""
    out = []
    for body in re.findall(r'enum[^{;]*\{(.*?)\}', code, re.S):
        for item in body.split(','):
            m = re.match(r'^\s*([A-Za-z_]\w*)\s*=\s*(-?(?:0x[0-9a-fA-F]+|\d+))\s*$', item)
            if m:
                out.append((m.group(1), m.group(2)))
    return out


def prototypes(code):
    """The function declarations at file scope, one line each."""
    out = []
    for chunk in code.split(';'):
        decl = ' '.join(re.split(r'[{}]', chunk)[-1].split())
        if '(' in decl and not re.match(r'(typedef|struct|enum|union|extern)\b', decl):
            out.append(decl)
    return out


def compile_text(cc, name, text):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return subprocess.run([cc] + FLAGS + ['-I' + CUDA_INCLUDE, path],
                              capture_output=True, text=True)


def check_headers(cc):
    """The enumerators' values and the prototypes, each header in one file
    compiled after the real headers; returns the number of failures."""
    names, decls = [], []
    for header in HEADERS:
        code = code_of(header)
        names += enumerators(code)
        decls += prototypes(code)
    text = REAL_INCLUDES
    for name, value in names:
        text += '_Static_assert((long long)%s == %s, "%s is not %s");\n' % (name, value, name, value)
    for decl in decls:
        text += decl + ';\n'
    p = compile_text(cc, 'runtime_headers.c', text)
    if p.returncode != 0:
        print('FAIL the runtime\'s enumerators and prototypes against the real headers\n%s' % p.stderr)
        return 1
    print('ok   %d enumerators and %d prototypes match the real headers' % (len(names), len(decls)))
    return 0


def main():
    cc, sources = sys.argv[1], sys.argv[2:]
    needed = ['cuda.h', 'cuda_runtime.h', 'cudnn.h', 'cublas_v2.h', 'nvrtc.h', 'nvtx3/nvToolsExt.h']
    if not all(os.path.exists(os.path.join(CUDA_INCLUDE, h)) for h in needed):
        print('no CUDA toolkit headers in %s: skipped' % CUDA_INCLUDE)
        sys.exit(77)
    failures = check_headers(cc)
    for src in sources:
        cmd = [cc] + FLAGS + ['-I' + CUDA_INCLUDE, src]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            failures += 1
            print('FAIL %s\n%s' % (src, p.stderr))
        else:
            print('ok   %s' % os.path.basename(src))
    sys.exit(1 if failures else 0)


main()
