#!/usr/bin/env python3
"""Makes opc_cpu.h: the runtime's headers (runtime/include) as one
self-contained header whose CUDA, cuDNN, cuBLAS, NVRTC and NVTX API carries
the prefix cpu_, to go with libopcrt_cpu.a (prefix_symbols.py). A program
includes it beside the real CUDA headers, or beside the runtime's own.

THE PREFIX RULE (prefix_api() below; backend/prefix_api.c is the same rule
in C, which the emitter applies to emitted C text, and
runtime/tests/test_prefixed.py checks that the two agree):

    (?<![A-Za-z0-9_])(?:(?:cuda|cudnn|cublas|cu[A-Z]|CU|nvrtc|NVRTC|nvtx|NVTX)[A-Za-z0-9_]*
                       |(?:dim3|_nvrtcProgram)(?![A-Za-z0-9_]))

that is, a maximal run of identifier characters [A-Za-z0-9_], not preceded
by one, is an API identifier and becomes cpu_<it> when it
  - starts with cuda, cudnn, cublas, cu and an uppercase letter (cuInit,
    cuLaunchKernel), CU (CUresult, CUstream_st, CUDA_SUCCESS, CUDNN_*,
    CUBLAS_*, CUDART_VERSION), nvrtc, NVRTC, nvtx or NVTX, or
  - is one of the exceptions, whole: dim3 (struct dim3 and its typedef) and
    _nvrtcProgram (the struct tag behind nvrtcProgram).
Nothing is skipped: comments, string literals and #include names are text
like any other (cu followed by a lowercase letter, as in cubin, is not
API). The rule is idempotent: cpu_cudaMalloc has `_` before `cuda`.

opc_cpu.h applies the rule to the headers' code; their comments are kept as
written, unprefixed. It also renames, outside the rule, the runtime's own
macros: OPC_CPU_RUNTIME (set by the runtime's headers: "built against the CPU
runtime") becomes OPC_CPU_RUNTIME_PREFIXED, so that a file that includes the
real CUDA headers and opc_cpu.h does not take itself for a CPU-runtime
build, and the include guards OPC_<NAME>_H become OPC_CPU_PREFIXED_<NAME>_H,
so that opc_cpu.h and the runtime's own headers can be included together.

Usage: prefix_header.py INCLUDE_DIR OUT.h
"""
import os
import re
import sys

PREFIX = 'cpu_'

API_RE = re.compile(
    r'(?<![A-Za-z0-9_])'
    r'(?:(?:cuda|cudnn|cublas|cu[A-Z]|CU|nvrtc|NVRTC|nvtx|NVTX)[A-Za-z0-9_]*'
    r'|(?:dim3|_nvrtcProgram)(?![A-Za-z0-9_]))')

# The headers, each after those it includes.
HEADERS = ['cuda.h', 'cuda_runtime_api.h', 'library_types.h', 'cuda_runtime.h', 'cudnn.h',
           'cublas_v2.h', 'cublasLt.h', 'nvrtc.h', 'nvtx3/nvToolsExt.h']

LOCAL_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')
SYSTEM_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+<[^>]+>\s*$')
GUARD_RE = re.compile(r'(?<![A-Za-z0-9_])OPC_([A-Za-z0-9_]+_H)(?![A-Za-z0-9_])')
CPU_RUNTIME_RE = re.compile(r'(?<![A-Za-z0-9_])OPC_CPU_RUNTIME(?![A-Za-z0-9_])')


def api_pattern():
    """The prefix rule as a compiled regular expression."""
    return API_RE


def prefix_api(text, prefix=PREFIX):
    """text with every API identifier (the rule above) prefixed."""
    return API_RE.sub(lambda m: prefix + m.group(0), text)


def inline_headers(include_dir):
    """The headers' text in dependency order, each once: a runtime header's
    #include of another runtime header is replaced by that header's text (or
    dropped when it came already), system #includes are kept, once each."""
    done = set()
    seen_system = set()
    out = []

    def add(name, via):
        if name in done:
            return
        done.add(name)
        path = os.path.join(include_dir, name)
        out.append('/* ---- %s%s ---- */\n' % (name, ' (included by %s)' % via if via else ''))
        with open(path) as f:
            for line in f:
                m = LOCAL_INCLUDE_RE.match(line)
                if m:
                    # Relative to the including header's folder, as the compiler does.
                    inc = os.path.normpath(os.path.join(os.path.dirname(name), m.group(1)))
                    if not os.path.exists(os.path.join(include_dir, inc)):
                        sys.exit('prefix_header: %s includes "%s", which is not in %s'
                                 % (name, m.group(1), include_dir))
                    add(inc, name)
                    continue
                if SYSTEM_INCLUDE_RE.match(line):
                    key = line.strip()
                    if key in seen_system:
                        continue
                    seen_system.add(key)
                out.append(line)
        if out and not out[-1].endswith('\n'):
            out.append('\n')

    for name in HEADERS:
        add(name, None)
    # A header added to runtime/include must be added to HEADERS too.
    for root, _, files in os.walk(include_dir):
        for fname in files:
            rel = os.path.relpath(os.path.join(root, fname), include_dir)
            if rel.endswith('.h') and rel not in done:
                sys.exit('prefix_header: %s is not in prefix_header.py\'s HEADERS' % rel)
    return ''.join(out)


# Comments, and the string and character literals a comment marker may hide in.
COMMENT_RE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def prefix_code(text):
    """prefix_api() on the code of C text, its comments left as written."""
    out, pos = [], 0
    for m in COMMENT_RE.finditer(text):
        out.append(prefix_api(text[pos:m.start()]))
        c = m.group(0)
        out.append(c if c.startswith('/') else prefix_api(c))
        pos = m.end()
    out.append(prefix_api(text[pos:]))
    return ''.join(out)


def build_header(include_dir):
    body = inline_headers(include_dir)
    body = CPU_RUNTIME_RE.sub('OPC_CPU_RUNTIME_PREFIXED', body)
    body = GUARD_RE.sub(lambda m: 'OPC_CPU_PREFIXED_' + m.group(1), body)
    body = prefix_code(body)
    return ('/*\n'
            ' * opc_cpu.h - generated by runtime/prefix_header.py from runtime/include;\n'
            ' * do not edit. The headers of opc\'s CPU runtime with every API identifier\n'
            ' * prefixed by cpu_, for libopcrt_cpu.a (prefix_header.py states the rule).\n'
            ' * The comments are the runtime\'s own: they name the API unprefixed.\n'
            ' */\n'
            '#ifndef OPC_CPU_H\n'
            '#define OPC_CPU_H\n\n'
            + body +
            '\n#endif /* OPC_CPU_H */\n')


def main():
    include_dir, out = sys.argv[1], sys.argv[2]
    text = build_header(include_dir)
    with open(out, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
