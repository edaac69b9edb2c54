#!/usr/bin/env python3
"""The ninja targets that the tests of some suites need.

  test_targets.py BUILD SUITE [SUITE ...]

Prints, one per line and relative to BUILD, every file target a test of
those suites runs or declares in `depends`, from meson's introspection, so
that tools/test.sh builds only those in the sanitizer build. The runtime's
own targets (runtime/meson.build: libopcrt.a, libopcrt_cpu.a, opc_cpu.h)
are always printed: any test that has opc build a program links them,
whether or not it names them.
"""
import json
import os
import subprocess
import sys


def introspect(build, what):
    out = subprocess.run(["meson", "introspect", build, what], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, suites = os.path.abspath(sys.argv[1]), set(sys.argv[2:])
    files = {}
    wanted = set()
    for target in introspect(build, "--targets"):
        files[target["id"]] = [os.path.relpath(f, build) for f in target["filename"]]
        if target["defined_in"].endswith(os.sep + os.path.join("runtime", "meson.build")):
            wanted.update(files[target["id"]])
    for test in introspect(build, "--tests"):
        if not {s.split(":")[-1] for s in test["suite"]} & suites:
            continue
        for ident in test.get("depends", []):
            wanted.update(files.get(ident, []))
        for arg in test["cmd"]:
            path = os.path.relpath(os.path.join(build, arg), build) if not os.path.isabs(arg) \
                else os.path.relpath(arg, build)
            if any(path in names for names in files.values()):
                wanted.add(path)
    print("\n".join(sorted(wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
