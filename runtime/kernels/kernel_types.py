"""Instantiates opc's typed kernels: one text, one function per element type.

A typed kernel in opc_kernels.inc starts with a line

    OPC_KERNEL_T(opc_add, i64 i32 i8 u8 f64)

naming the kernel and the types to instantiate it for. Its body uses T for
the element type, T_IS_INT for 1 on integer types, 0 on floating ones,
T_IS_UNSIGNED for 1 on the unsigned integer types, and
T_ACC for the type sums of T accumulate in.
expand() replaces each such block by one ordinary OPC_KERNEL per type,
named with the type's suffix (opc_add_i64, ...), so NVRTC, the C compiler
and the tables see plain kernels. Data movement only needs the element's
size: b1, b2, b4 and b8 stand for any type of 1, 2, 4 or 8 bytes.

float16 (f16) and bfloat16 (bf16) are storage types: T is their bits (an
unsigned short) and arithmetic happens in float. So a kernel that takes
them computes in T_C (float for them, T itself for the others), reads an
element with T_LOAD(x) and stores a result with T_STORE(v), which convert
for the 16-bit types and are plain parentheses for the others. The word
`float` in the type list instantiates float32 under the kernel's own name
(opc_sigmoid, beside opc_sigmoid_f16), for kernels that were float32 only.

The line OPC_ACTIVATION_KERNELS is replaced by one kernel for each row of
scalar.h's OPC_ACTIVATIONS that the file does not write by hand: opc_<name>
for float32, float16 and bfloat16, applying opc_<name>_of(x, f[0] ...) with
the row's count of parameters. So an activation is its row and its formula.

The line `#include "scalar.h"` is replaced by the formulas of
scalar/scalar.h (its text from its first divider line to its second): the kernels call them as helpers, which NVRTC, having no
files to include, and net.c, carrying only the blocks a program uses, then
find in the kernels' own text. The preludes set the formulas' qualifier
OPC_SCALAR and their exponential OPC_SCALAR_EXP.
"""
import re

# suffix: (C type, is an integer type)
TYPES = {
    "float": ("float", 0),
    "f32": ("float", 0),
    "f16": ("unsigned short", 0),
    "bf16": ("unsigned short", 0),
    "f64": ("double", 0),
    "i64": ("long long", 1),
    "i32": ("int", 1),
    "i16": ("short", 1),
    "i8": ("signed char", 1),
    "u64": ("unsigned long long", 1),
    "u32": ("unsigned int", 1),
    "u16": ("unsigned short", 1),
    "u8": ("unsigned char", 1),
    "b1": ("unsigned char", 1),
    "b2": ("unsigned short", 1),
    "b4": ("unsigned int", 1),
    "b8": ("unsigned long long", 1),
}

# The unsigned integer types, whose arithmetic (remainders, comparisons of
# uint64's top half) differs from the signed ones'.
UNSIGNED = {"u8", "u16", "u32", "u64"}

# What sums of T accumulate in: double for floating types, so that a float
# sum loses nothing along a row; long long for integers.
ACCUMULATOR = {0: "double", 1: "long long"}

# The 16-bit types: what T_C, T_LOAD( and T_STORE( become.
SIXTEEN_BITS = {
    "f16": ("float", "opc_half_to_float(", "opc_float_to_half("),
    "bf16": ("float", "opc_bfloat16_to_float(", "opc_float_to_bfloat16("),
}

HEAD = re.compile(r"^OPC_KERNEL_T\(\s*(\w+)\s*,\s*([\w ]+)\)\s*$")


def instantiate(lines, comment, name, suffixes):
    """The kernel's lines once per type, each after its own copy of the
    comment above it; lines[0] is the OPC_KERNEL_T line."""
    out = []
    for k, suffix in enumerate(suffixes):
        if suffix not in TYPES:
            raise SystemExit(f"kernel_types: {name}: unknown type {suffix}")
        ctype, is_int = TYPES[suffix]
        compute, load, store = SIXTEEN_BITS.get(suffix, (ctype, "(", "("))
        if k:
            out += [""] + comment
        out.append(f"OPC_KERNEL({name})" if suffix == "float" else f"OPC_KERNEL({name}_{suffix})")
        for line in lines[1:]:
            line = re.sub(r"\bT_IS_INT\b", str(is_int), line)
            line = re.sub(r"\bT_IS_UNSIGNED\b", str(int(suffix in UNSIGNED)), line)
            line = re.sub(r"\bT_ACC\b", ACCUMULATOR[is_int], line)
            line = re.sub(r"\bT_LOAD\(", load, line)
            line = re.sub(r"\bT_STORE\(", store, line)
            line = re.sub(r"\bT_C\b", compute, line)
            out.append(re.sub(r"\bT\b", ctype, line))
    return out


def comment_above(out):
    """The comment that ends on the last line of out, as lines."""
    if not out or not out[-1].rstrip().endswith("*/"):
        return []
    start = len(out) - 1
    while not out[start].lstrip().startswith("/*"):
        start -= 1
    return out[start:]


INCLUDE_SCALAR = '#include "scalar.h"'


def scalar_formulas(text):
    """scalar.h's formulas: its lines from the first divider ("/* ---")
    up to the second."""
    lines = text.splitlines()
    dividers = [k for k, line in enumerate(lines) if line.startswith("/* ---")]
    if len(dividers) < 2:
        raise SystemExit("kernel_types: scalar.h: the formulas need a divider line before and after")
    start, end = dividers[0], dividers[1]
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


ACTIVATION_KERNELS = "OPC_ACTIVATION_KERNELS"


def activations(text):
    """scalar.h's OPC_ACTIVATIONS rows: (name, parameter count)."""
    m = re.search(r"#define OPC_ACTIVATIONS\(X\)((?:.*\\\n)*.*)", text)
    if not m:
        raise SystemExit("kernel_types: scalar.h: no OPC_ACTIVATIONS list")
    return [(name, int(params)) for name, params in
            re.findall(r"X\(\s*\w+\s*,\s*(\w+)\s*,\s*(\d+)\s*\)", m.group(1))]


def activation_kernels(rows, text):
    """An OPC_KERNEL_T block for each row the text does not define itself."""
    out = []
    for name, params in rows:
        if re.search(rf"^OPC_KERNEL(_T)?\(opc_{name}\b", text, re.M):
            continue
        args = "".join(f", a.f[{k}]" for k in range(params))
        out += [f"/* opc_{name}_of (scalar.h)"
                + (f", f[0 .. {params - 1}] its parameters. */" if params else ". */"),
                f"OPC_KERNEL_T(opc_{name}, float f16 bf16)",
                "{",
                "  const T *x0 = (const T *)a.x[0];",
                "  T *out = (T *)a.y;",
                "  OPC_FOR_EACH(i, a.n) {",
                "    float v = T_LOAD(x0[opc_offset(i, a.rank, a.dims, a.xstride[0])]);",
                f"    out[opc_offset(i, a.rank, a.dims, a.ystride)] = T_STORE(opc_{name}_of(v{args}));",
                "  }",
                "}",
                ""]
    return out


def expand(text, formulas, rows=()):
    """The source with scalar.h's activation kernels written in, every
    OPC_KERNEL_T block instantiated and scalar.h's formulas written in."""
    lines = text.splitlines()
    at = [k for k, line in enumerate(lines) if line.strip() == ACTIVATION_KERNELS]
    if at:
        lines[at[0]:at[0] + 1] = activation_kernels(rows, text)
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == INCLUDE_SCALAR:
            out += formulas
            i += 1
            continue
        m = HEAD.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        end = i
        while lines[end] != "}":
            end += 1
        out += instantiate(lines[i:end + 1], comment_above(out), m.group(1), m.group(2).split())
        i = end + 1
    return "\n".join(out) + "\n"


def main():
    """usage: kernel_types.py scalar.h opc_kernels.inc OUT.inc"""
    import sys
    if len(sys.argv) != 4:
        sys.exit(main.__doc__)
    with open(sys.argv[1]) as f:
        scalar = f.read()
    with open(sys.argv[2]) as f:
        text = expand(f.read(), scalar_formulas(scalar), activations(scalar))
    with open(sys.argv[3], "w") as f:
        f.write("/* Generated by kernel_types.py from opc_kernels.inc: do not edit. */\n")
        f.write(text)


if __name__ == "__main__":
    main()
