#!/usr/bin/env python3
"""Makes libopcrt_cpu.a from libopcrt.a: the same CPU runtime with every
global symbol it defines renamed NAME -> cpu_NAME, so that it can be linked
beside the real CUDA libraries, or beside libopcrt.a itself.

Every symbol that `nm -g --defined-only` lists is renamed, whatever its kind:
functions and data (T, D, B, R, thread-local ones too), weak definitions
(W, V: the `.resolver` of a GCC target_clones function), indirect functions
(i: the target_clones function itself), GNU unique (u) and common (C)
symbols. `objcopy --redefine-syms` renames every occurrence in every member,
the references of the other members included, so the members still find each
other. Symbols the archive only references (libc, libm, libdl, pthread,
libmvec, libgcc's __cpu_model) are left alone. The result is checked: a
defined global without the prefix (an LTO object, say, which objcopy cannot
rename) fails the build.

Usage: prefix_symbols.py NM OBJCOPY IN.a OUT.a [PREFIX]
"""
import os
import subprocess
import sys
import tempfile

# The letters of defined symbols that nm -g prints (undefined ones are U, w, v).
DEFINED = set('ABCDGRSTVWiu')


def defined_globals(nm, lib):
    out = subprocess.run([nm, '-g', '--defined-only', lib], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        # "ADDRESS TYPE NAME"; member headers ("x.o:") and blank lines are skipped.
        if len(parts) == 3 and parts[1] in DEFINED:
            names.add(parts[2])
        elif len(parts) == 2 and parts[0] in DEFINED:  # a symbol without an address
            names.add(parts[1])
    return names


def main():
    nm, objcopy, src, dst = sys.argv[1:5]
    prefix = sys.argv[5] if len(sys.argv) > 5 else 'cpu_'
    names = defined_globals(nm, src)
    if not names:
        sys.exit('prefix_symbols: %s defines no global symbol' % src)
    if os.path.exists(dst):
        os.remove(dst)
    with tempfile.TemporaryDirectory() as tmp:
        syms = os.path.join(tmp, 'redefine.syms')
        with open(syms, 'w') as f:
            for name in sorted(names):
                f.write('%s %s%s\n' % (name, prefix, name))
        subprocess.run([objcopy, '--redefine-syms=' + syms, src, dst], check=True)
    left = sorted(n for n in defined_globals(nm, dst) if not n.startswith(prefix))
    if left:
        os.remove(dst)
        sys.exit('prefix_symbols: %d global symbols of %s kept their names: %s'
                 % (len(left), dst, ' '.join(left[:20])))


main()
