#!/usr/bin/env python3
"""Writes the C source of opc's link-time stand-in for libcuda.so.1.

  cuda_stub.py runtime/include/cuda.h OUT.c

PyPI's CUDA wheels carry no libcuda (the driver comes with the GPU's
kernel module, and the toolkit's lib64/stubs is not in any wheel), yet a
GPU program links -lcuda. The stand-in defines every driver function that
the CPU runtime's cuda.h declares, which are all an emitted program may
call (it compiles against that header too), with the same parameters.
Each returns CUDA_ERROR_STUB_LIBRARY (34, as the toolkit's stub does): the
library is for the linker only, and a program that loads it at run time
instead of the driver is told so on its first call.
"""
import re
import sys


def main():
    header, out = sys.argv[1], sys.argv[2]
    with open(header, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    functions = re.findall(r"\bCUresult\s+(cu\w+)\s*\(([^;]*?)\)\s*;", text, flags=re.S)
    if not functions:
        sys.exit(f"cuda_stub.py: no CUresult functions declared in {header}")
    with open(out, "w", encoding="utf-8") as f:
        f.write("/* Written by runtime/stubs/cuda_stub.py from runtime/include/cuda.h. */\n")
        f.write("#include \"cuda.h\"\n\n")
        f.write("#define STUB_LIBRARY ((CUresult)34) /* CUDA_ERROR_STUB_LIBRARY */\n\n")
        for name, params in functions:
            params = " ".join(params.split())
            f.write(f"CUresult {name}({params}) {{\n  return STUB_LIBRARY;\n}}\n\n")


if __name__ == "__main__":
    main()
