"""`opc` on the command line after `pip install .`, and `python -m opc`:
the compiler inside the package, with the same arguments."""
import os
import sys

from . import CompileError, compiler_path


def main():
    try:
        path = compiler_path()
    except CompileError as e:
        print(e, file=sys.stderr)
        return 1
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
