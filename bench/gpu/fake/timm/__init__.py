"""Stand-in timm for bench/gpu/test_bench_logic.py: no model builds."""
__version__ = "0.0-fake"


def create_model(name, pretrained=False, num_classes=1000):
    raise RuntimeError("the stand-in timm has no %s" % name)
