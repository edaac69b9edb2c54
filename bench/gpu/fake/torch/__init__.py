"""A stand-in for the few parts of torch that bench_gpu.py uses, backed by
numpy and ONNX Runtime, so that its GPU path can be tested on a machine
without a GPU or torch (bench/gpu/test_bench_logic.py). Timings are host
clock times and mean nothing; the numbers that flow are real: a "model" is
a zoo ONNX file (tools/models/build.py) run by ONNX Runtime."""
import contextlib
import os
import time
import types

import numpy as np

__version__ = "0.0-fake"
version = types.SimpleNamespace(cuda="fake")
float32 = np.float32
float16 = np.float16
bfloat16 = "bfloat16"  # numpy has no bfloat16: held as float32, rounded to its 8-bit mantissa
channels_last = "channels_last"  # a storage order: the values, all that flows here, are the same


def _as_type(array, dtype):
    """The array in dtype: float16 for real, bfloat16 as rounded float32."""
    if dtype is bfloat16:
        bits = np.asarray(array, dtype=np.float32).view(np.uint32)
        bits = (bits + 0x7fff + ((bits >> 16) & 1)) & np.uint32(0xffff0000)
        return bits.view(np.float32)
    return np.asarray(array).astype(dtype)


class Tensor:
    def __init__(self, array):
        self.array = np.asarray(array)

    shape = property(lambda self: self.array.shape)
    dtype = property(lambda self: self.array.dtype)

    def cuda(self):
        return Tensor(self.array.copy())

    def cpu(self):
        return Tensor(self.array.copy())

    def float(self):
        return Tensor(self.array.astype(np.float32))

    def numpy(self):
        return self.array

    def clone(self):
        return Tensor(self.array.copy())

    def numel(self):
        return self.array.size

    def copy_(self, other):
        self.array[...] = other.array
        return self

    def to(self, device_or_dtype=None, memory_format=None):
        if device_or_dtype in (float16, bfloat16, float32):
            return Tensor(_as_type(self.array, device_or_dtype))
        return self

    def dim(self):
        return self.array.ndim

    def contiguous(self, memory_format=None):
        return self


def from_numpy(a):
    return Tensor(a)


def empty(shape, dtype=np.float32):
    return Tensor(np.empty(shape, dtype=dtype))


class Generator:
    def __init__(self, device="cpu"):
        self.rng = np.random.default_rng(0)

    def manual_seed(self, seed):
        self.rng = np.random.default_rng(seed)
        return self


def randn(*shape, generator=None):
    rng = generator.rng if generator else np.random.default_rng()
    return Tensor(rng.standard_normal(shape, dtype=np.float32))


def manual_seed(seed):
    np.random.seed(seed)


@contextlib.contextmanager
def no_grad():
    yield


# ------------------------------------------------------------------- nn
class _Module:
    training = False

    def modules(self):
        return [self] + list(getattr(self, "children_", []))

    def parameters(self):
        return [Tensor(np.zeros(10))]

    def eval(self):
        self.training = False
        return self

    def train(self):
        self.training = True
        return self

    def cuda(self):
        return self

    def cpu(self):
        return self

    def __call__(self, x):
        return self.forward(x)

    def to(self, dtype=None, memory_format=None):
        return _Cast(self, dtype) if dtype is not None else self


class _Cast(_Module):
    """A module converted with .to(dtype): its input and output rounded to
    dtype, the network itself run in float32 (ONNX Runtime)."""

    def __init__(self, inner, dtype):
        self.inner, self.dtype = inner, dtype

    def forward(self, x):
        # Captured as one step of its own: a replay converts the new input.
        capturing = _capturing[:]
        del _capturing[:]
        try:
            y = self.inner(Tensor(_as_type(x.array, float32)))
        finally:
            _capturing[:] = capturing
        out = Tensor(_as_type(y.array, self.dtype))
        if _capturing:
            _capturing[-1].steps.append((self, x, out))
        return out


class _BatchNorm(_Module):
    momentum = 0.1

    def reset_running_stats(self):
        self.reset = True


nn = types.SimpleNamespace(Module=_Module, modules=types.SimpleNamespace(
    batchnorm=types.SimpleNamespace(_BatchNorm=_BatchNorm)))

# -------------------------------------------------------------- backends
backends = types.SimpleNamespace(
    cudnn=types.SimpleNamespace(benchmark=False, allow_tf32=True, version=lambda: 0),
    cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)))

# ------------------------------------------------------------------ cuda
_capturing = []


class _Event:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


class _Stream:
    def wait_stream(self, other):
        pass


class _CUDAGraph:
    def __init__(self):
        self.steps = []

    def replay(self):
        for module, x, y in self.steps:
            y.copy_(module.forward(x))


@contextlib.contextmanager
def _graph(g):
    _capturing.append(g)
    try:
        yield
    finally:
        _capturing.pop()


@contextlib.contextmanager
def _stream(s):
    yield


class _Props:
    name = "Fake GPU 1GB"
    multi_processor_count = 1
    total_memory = 2 ** 30


cuda = types.SimpleNamespace(
    is_available=lambda: True, synchronize=lambda: None, Event=_Event, Stream=_Stream,
    stream=_stream, current_stream=lambda: _Stream(), CUDAGraph=_CUDAGraph, graph=_graph,
    get_device_properties=lambda i: _Props(), empty_cache=lambda: None)

# ------------------------------------------------------ compile and onnx
_dynamo = types.SimpleNamespace(reset=lambda: None)


def compile(model, mode=None):
    """The model itself; under FAKE_TORCH_MAX_AUTOTUNE_SLEEP=S, a
    max-autotune model's first call sleeps S seconds, as a slow compile
    would, and skips whatever Exception it meets on the way, as Inductor
    skips a failed autotuning choice (bench/gpu/test_bench_logic.py stops
    it at its cap)."""
    delay = float(os.environ.get("FAKE_TORCH_MAX_AUTOTUNE_SLEEP", "0"))
    if mode != "max-autotune" or delay <= 0:
        return model
    state = {"compiled": False}

    def compiled(x):
        if not state["compiled"]:
            for _ in range(10):  # ten autotuning choices, a failed one skipped as Inductor does
                try:
                    time.sleep(delay / 10)
                except Exception:
                    pass
            state["compiled"] = True
        return model(x)
    return compiled


def _export(model, args, path, dynamo=None, opset_version=None, **kwargs):
    import shutil
    shutil.copyfile(model.onnx_path, path)


onnx = types.SimpleNamespace(export=_export)
