#!/usr/bin/env python3
"""Generates the test models in a fresh directory, then runs the C test on it.

Usage: run_import_test.py MAKE_MODELS TEST_IMPORT_EXE
"""
import subprocess
import sys
import tempfile

make_models, exe = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory(prefix="opc-frontend-") as tmp:
    subprocess.run([sys.executable, make_models, tmp], check=True)
    sys.exit(subprocess.run([exe, tmp]).returncode)
