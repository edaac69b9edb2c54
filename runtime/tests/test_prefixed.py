#!/usr/bin/env python3
"""Checks the prefixed CPU runtime (libopcrt_cpu.a, opc_cpu.h).

  test_prefixed.py rule FILTER NM CC INCLUDE_DIR OPC_CPU_H LIBOPCRT LIBOPCRT_CPU
    The prefix rule's two forms agree: prefix_header.py's prefix_api() and
    backend/prefix_api.c's cpu_prefix_line() (run by FILTER) give the same
    text for every runtime header, the generated header and a list of edge
    cases, and both give the expected output on those cases. opc_cpu.h is
    complete (the rule changes nothing more in its code, it includes no
    runtime header) and matches libopcrt_cpu.a (each function it declares is
    defined there). libopcrt_cpu.a defines exactly the globals of
    libopcrt.a, each prefixed, and the two archives link into one program,
    every member of both.

  test_prefixed.py real-cuda CC OPC_CPU_H LIBOPCRT_CPU
    opc_cpu.h compiles in one translation unit after the real CUDA 13
    headers (-std=c11 -Wall -Werror), and that program links against the
    real libraries (cudart, cudnn, cublas, nvrtc, the libcuda stub) with
    every member of libopcrt_cpu.a: no clash. Skipped (77) without the
    toolkit's headers; the link is skipped when its libraries are missing.
"""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    'prefix_header', os.path.join(HERE, '..', 'prefix_header.py'))
prefix_header = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prefix_header)

CUDA = os.environ.get('CUDA_HOME', '/usr/local/cuda')
SYSLIBS = ['-ldl', '-lpthread', '-lmvec', '-lm']

# (input, expected output) of the rule.
CASES = [
    ('cudaMalloc(&p, n);', 'cpu_cudaMalloc(&p, n);'),
    ('cudnnHandle_t h; cublasSgemm_v2', 'cpu_cudnnHandle_t h; cpu_cublasSgemm_v2'),
    ('cuLaunchKernel cuModuleLoadData cuInit', 'cpu_cuLaunchKernel cpu_cuModuleLoadData cpu_cuInit'),
    ('CUresult CUstream_st CU_JIT_LOG_VERBOSE CUDA_SUCCESS CUDART_VERSION',
     'cpu_CUresult cpu_CUstream_st cpu_CU_JIT_LOG_VERBOSE cpu_CUDA_SUCCESS cpu_CUDART_VERSION'),
    ('CUDNN_STATUS_SUCCESS CUBLAS_OP_N CU', 'cpu_CUDNN_STATUS_SUCCESS cpu_CUBLAS_OP_N cpu_CU'),
    ('nvrtcProgram NVRTC_SUCCESS nvtxRangePushA NVTX_VERSION',
     'cpu_nvrtcProgram cpu_NVRTC_SUCCESS cpu_nvtxRangePushA cpu_NVTX_VERSION'),
    ('struct dim3 g; dim3 b = {1,1,1};', 'struct cpu_dim3 g; cpu_dim3 b = {1,1,1};'),
    ('typedef struct _nvrtcProgram *nvrtcProgram;',
     'typedef struct cpu__nvrtcProgram *cpu_nvrtcProgram;'),
    # Not API: cu + lowercase, identifiers that only contain an API name,
    # dim3 as part of a longer identifier, other case.
    ('cubin cubinSizeRet cu cuser', 'cubin cubinSizeRet cu cuser'),
    ('my_cudaMalloc x_CUresult __CUDA_ARCH__ net_cudnn 2cuda',
     'my_cudaMalloc x_CUresult __CUDA_ARCH__ net_cudnn 2cuda'),
    ('dim3x xdim3 dim30 _nvrtcProgramX Cuda cUDA NvRTC',
     'dim3x xdim3 dim30 _nvrtcProgramX Cuda cUDA NvRTC'),
    # Nothing is skipped: strings, comments and #include names too.
    ('"cudaMalloc failed" /* cudnnCreate */ // cuInit\n#include <cuda_runtime.h>',
     '"cpu_cudaMalloc failed" /* cpu_cudnnCreate */ // cpu_cuInit\n#include <cpu_cuda_runtime.h>'),
    ('a+cudaFree(b)*CUDA_VERSION-nvtx;cuda', 'a+cpu_cudaFree(b)*cpu_CUDA_VERSION-cpu_nvtx;cpu_cuda'),
    ('é cudaMalloc\tcudaFree\r\n', 'é cpu_cudaMalloc\tcpu_cudaFree\r\n'),
    ('', ''),
]

failures = 0


def fail(msg):
    global failures
    failures += 1
    print('FAIL: ' + msg)


def c_rule(filter_exe, text):
    p = subprocess.run([filter_exe], input=text.encode(), capture_output=True, check=True)
    return p.stdout.decode()


def defined_globals(nm, lib):
    out = subprocess.run([nm, '-g', '--defined-only', lib], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'ABCDGRSTVWiu':
            names.add(parts[2])
    return names


def check_rule(filter_exe, include_dir, header):
    texts = [(repr(i), i) for i, _ in CASES]
    for root, _, files in os.walk(include_dir):
        for f in sorted(files):
            path = os.path.join(root, f)
            with open(path) as fh:
                texts.append((os.path.relpath(path, include_dir), fh.read()))
    with open(header) as fh:
        texts.append(('opc_cpu.h', fh.read()))
    for name, text in texts:
        py = prefix_header.prefix_api(text)
        c = c_rule(filter_exe, text)
        if py != c:
            fail('the C and Python rules differ on %s' % name)
            for a, b in zip(py.splitlines(), c.splitlines()):
                if a != b:
                    print('  python: %s\n  C:      %s' % (a, b))
                    break
        if prefix_header.prefix_api(py) != py:
            fail('the rule is not idempotent on %s' % name)
    for text, want in CASES:
        for form, got in (('python', prefix_header.prefix_api(text)),
                          ('C', c_rule(filter_exe, text))):
            if got != want:
                fail('%s rule on %r gave %r, expected %r' % (form, text, got, want))
    print('rule: %d texts, C and Python agree' % len(texts))


def strip_comments(text):
    return re.sub(r'//[^\n]*', '', re.sub(r'/\*.*?\*/', '', text, flags=re.S))


def check_header(header, cpu_syms):
    with open(header) as fh:
        text = fh.read()
    if prefix_header.prefix_api(strip_comments(text)) != strip_comments(text):
        fail('opc_cpu.h has identifiers outside comments that the rule would still prefix')
    if re.search(r'#\s*include\s*"', text):
        fail('opc_cpu.h includes a header of its own: not self-contained')
    code = strip_comments(text)
    if re.search(r'(?<![A-Za-z0-9_])OPC_CPU_RUNTIME(?![A-Za-z0-9_])', code):
        fail('opc_cpu.h defines OPC_CPU_RUNTIME')
    if '#define OPC_CPU_RUNTIME_PREFIXED' not in code:
        fail('opc_cpu.h does not define OPC_CPU_RUNTIME_PREFIXED')
    # Declared functions: `name(` outside macros, casts and comments.
    decls = set()
    for line in code.splitlines():
        if line.lstrip().startswith('#'):
            continue
        decls.update(re.findall(r'(?<![A-Za-z0-9_])(cpu_[A-Za-z0-9_]+)\s*\(', line))
    decls.discard('cpu_cudaHostFn_t')
    missing = sorted(d for d in decls if d not in cpu_syms)
    if missing:
        fail('declared in opc_cpu.h, not defined in libopcrt_cpu.a: ' + ' '.join(missing))
    bare = sorted(set(re.findall(r'(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*', code)) &
                  {'cudaMalloc', 'cudaStream_t', 'CUresult', 'dim3', 'cudnnHandle_t'})
    if bare:
        fail('opc_cpu.h names unprefixed API identifiers: ' + ' '.join(bare))
    print('header: %d functions declared, all in libopcrt_cpu.a' % len(decls))


def check_symbols(nm, cc, lib, cpu_lib):
    plain = defined_globals(nm, lib)
    cpu = defined_globals(nm, cpu_lib)
    unprefixed = sorted(s for s in cpu if not s.startswith('cpu_'))
    if unprefixed:
        fail('libopcrt_cpu.a defines unprefixed globals: ' + ' '.join(unprefixed[:20]))
    if cpu != {'cpu_' + s for s in plain}:
        fail('libopcrt_cpu.a does not define exactly the globals of libopcrt.a, prefixed')
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'both.c')
        with open(src, 'w') as fh:
            fh.write('int main(void) { return 0; }\n')
        cmd = [cc, src, '-o', os.path.join(tmp, 'both'), '-Wl,--whole-archive', lib, cpu_lib,
               '-Wl,--no-whole-archive'] + SYSLIBS
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            fail('libopcrt.a and libopcrt_cpu.a do not link together:\n' + p.stderr[-4000:])
    print('symbols: %d globals, all prefixed; both archives link together' % len(cpu))
    return cpu


REAL_TU = r'''
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cublas_v2.h>
#include <nvrtc.h>
#include "opc_cpu.h"
#ifdef OPC_CPU_RUNTIME
#error "opc_cpu.h made the real CUDA build look like a CPU-runtime build"
#endif
#ifndef OPC_CPU_RUNTIME_PREFIXED
#error "opc_cpu.h does not define OPC_CPU_RUNTIME_PREFIXED"
#endif

static void cpu_part(void *arg) {
  cpu_cudaStream_t s = arg;
  cpu_cudaStreamSynchronize(s);
}

int main(void) {
  cudaStream_t gs;
  cpu_cudaStream_t cs;
  void *g = 0, *c = 0;
  int n = 0, m = 0;
  cudaGetDeviceCount(&n);
  cpu_cudaGetDeviceCount(&m);
  cudaStreamCreate(&gs);
  cpu_cudaStreamCreate(&cs);
  cudaMalloc(&g, 64);
  cpu_cudaMalloc(&c, 64);
  cudaLaunchHostFunc(gs, cpu_part, cs);
  cudaMemcpyAsync(g, c, 64, cudaMemcpyHostToDevice, gs);
  cudnnHandle_t h;
  cpu_cudnnHandle_t ch;
  cudnnCreate(&h);
  cpu_cudnnCreate(&ch);
  cublasHandle_t b;
  cpu_cublasHandle_t cb;
  cublasCreate(&b);
  cpu_cublasCreate(&cb);
  nvrtcProgram p;
  cpu_nvrtcProgram cp;
  nvrtcCreateProgram(&p, "", "a", 0, 0, 0);
  cpu_nvrtcCreateProgram(&cp, "", "a", 0, 0, 0);
  CUresult r = cuInit(0);
  cpu_CUresult cr = cpu_cuInit(0);
  dim3 d = {1, 1, 1};
  cpu_dim3 cd = {1, 1, 1};
  cpu_nvtxRangePushA("x");
  cpu_nvtxRangePop();
  return (int)r + (int)cr + (int)d.x + (int)cd.x + n + m;
}
'''


def real_cuda(cc, header, cpu_lib):
    inc = os.path.join(CUDA, 'include')
    needed = ['cuda.h', 'cuda_runtime.h', 'cudnn.h', 'cublas_v2.h', 'nvrtc.h']
    if not all(os.path.exists(os.path.join(inc, h)) for h in needed):
        print('no CUDA toolkit headers in %s: skipped' % inc)
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'real.c')
        obj = os.path.join(tmp, 'real.o')
        with open(src, 'w') as fh:
            fh.write(REAL_TU)
        cmd = [cc, '-std=c11', '-D_GNU_SOURCE', '-Wall', '-Wextra', '-Werror',
               '-Wno-deprecated-declarations', '-I' + inc, '-I' + os.path.dirname(header),
               '-c', src, '-o', obj]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            fail('opc_cpu.h does not compile after the real CUDA headers:\n' + p.stderr)
            return
        print('compile: opc_cpu.h after the real CUDA headers')
        lib64 = os.path.join(CUDA, 'lib64')
        libs = ['libcudart.so', 'libcudnn.so', 'libcublas.so', 'libnvrtc.so']
        have_cuda = (os.path.exists(os.path.join(lib64, 'libcuda.so')) or
                     os.path.exists(os.path.join(lib64, 'stubs', 'libcuda.so')))
        if not have_cuda or not all(os.path.exists(os.path.join(lib64, l)) for l in libs):
            print('link: skipped, the CUDA libraries are not all in %s' % lib64)
            return
        cmd = [cc, obj, '-o', os.path.join(tmp, 'real'), '-Wl,--whole-archive', cpu_lib,
               '-Wl,--no-whole-archive', '-L' + lib64, '-L' + os.path.join(lib64, 'stubs'),
               '-lcudnn', '-lcublasLt', '-lcublas', '-lcudart', '-lcuda', '-lnvrtc'] + SYSLIBS
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            fail('libopcrt_cpu.a does not link beside the real CUDA libraries:\n' + p.stderr[-4000:])
            return
        print('link: libopcrt_cpu.a (every member) with cudart, cudnn, cublas, nvrtc, cuda')


def main():
    mode = sys.argv[1]
    if mode == 'rule':
        filter_exe, nm, cc, include_dir, header, lib, cpu_lib = sys.argv[2:9]
        check_rule(filter_exe, include_dir, header)
        cpu = check_symbols(nm, cc, lib, cpu_lib)
        check_header(header, cpu)
    elif mode == 'real-cuda':
        cc, header, cpu_lib = sys.argv[2:5]
        real_cuda(cc, header, cpu_lib)
    else:
        sys.exit('unknown mode ' + mode)
    sys.exit(1 if failures else 0)


main()
