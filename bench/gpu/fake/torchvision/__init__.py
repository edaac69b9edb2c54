"""Stand-in torchvision for bench/gpu/test_bench_logic.py (see fake torch)."""
__version__ = "0.0-fake"
from . import models  # noqa: E402,F401
