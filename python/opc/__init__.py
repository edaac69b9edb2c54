"""opc from Python: compile an ONNX model and run it in this process.

    import opc
    program = opc.compile("model.onnx", target="cpu")
    outputs = program.run({"x": x})          # a dict of NumPy arrays

    session = opc.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    logits, = session.run(None, {"x": x})    # ONNX Runtime's call

Without a target (or providers), programs run on the GPU where a CUDA
driver and a device are present, and on the CPU otherwise
(default_target()).

`compile` runs the opc compiler with `-o libNAME.so`, so the keyword
options are the command line's, spelt with underscores: schedule="ios",
input_shape={"x": (1, 3, 224, 224)}, const_input={"shape": "shape.npy"},
precision="tf32", no_cuda_graph=True, opt_level=0 (-O0). The compiled
library is loaded with ctypes and keeps to itself: programs of several
models live side by side in one process.

Threads: a Program may be run from several threads at once. Each call
takes a context of its own (an arena, streams and handles; made on first
need and kept for later calls), because one context runs one inference at
a time; ctypes lets go of the GIL while a run is in C, so the runs overlap.
"""
import collections
import ctypes
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
import weakref

import numpy as np

__all__ = ["compile", "Program", "TensorInfo", "InferenceSession", "CompileError", "RunError",
           "compiler_path", "default_target"]

_HERE = os.path.dirname(os.path.abspath(__file__))

# The element types of net.h, by the name net_input_type() gives.
_DTYPES = {
    "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16), "int64": np.dtype(np.int64),
    "int32": np.dtype(np.int32), "int16": np.dtype(np.int16),
    "int8": np.dtype(np.int8), "uint64": np.dtype(np.uint64),
    "uint32": np.dtype(np.uint32), "uint16": np.dtype(np.uint16),
    "uint8": np.dtype(np.uint8), "bool": np.dtype(np.bool_),
    # numpy has no bfloat16: its 16 bits, as onnx's numpy_helper gives them
    # (so a bfloat16 input or output reads as uint16 here, and to
    # InferenceSession's get_inputs() as tensor(uint16))
    "bfloat16": np.dtype(np.uint16),
}
# ONNX Runtime's spelling of the same types, for InferenceSession.
_ORT_TYPES = {"float32": "tensor(float)", "float64": "tensor(double)",
              "float16": "tensor(float16)", "int64": "tensor(int64)", "int32": "tensor(int32)",
              "int16": "tensor(int16)", "int8": "tensor(int8)", "uint64": "tensor(uint64)",
              "uint32": "tensor(uint32)", "uint16": "tensor(uint16)", "uint8": "tensor(uint8)",
              "bool": "tensor(bool)"}

# Options given once per NAME=VALUE pair.
_PAIR_OPTIONS = {"input_shape", "const_input"}
# Options that make a serving program, whose API (net_submit, net_wait) is
# not the one Program drives.
_SERVING_OPTIONS = {"instances", "arrivals", "queue_capacity", "latency_bound"}
# Options that would change what compile() itself decides.
_OWN_OPTIONS = {"o", "output", "target", "dump_ir", "dump_after", "help", "version",
                "list_operators", "cflags", "libs"}


class CompileError(Exception):
    """opc refused the model or the options; the message is opc's."""


class RunError(RuntimeError):
    """The compiled program failed at run time; the message names the node."""


TensorInfo = collections.namedtuple("TensorInfo", "name dtype shape")
TensorInfo.__doc__ = "An input or output: its name, NumPy dtype and shape (a tuple)."


def compiler_path():
    """The opc compiler: $OPC_COMPILER, else the one inside this package,
    else the first `opc` on the PATH."""
    env = os.environ.get("OPC_COMPILER")
    if env:
        return env
    inside = os.path.join(_HERE, "bin", "opc")
    if os.access(inside, os.X_OK):
        return inside
    found = shutil.which("opc")
    if found:
        return found
    raise CompileError("opc: no compiler found: install the package with pip, "
                       "or set OPC_COMPILER to the opc executable")


def _cuda_missing():
    """None where the CUDA driver loads and sees a device; else what is
    missing, in words."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"no CUDA driver ({e})"
    status = driver.cuInit(0)
    if status != 0:
        return f"the CUDA driver does not start (cuInit returned {status})"
    count = ctypes.c_int(0)
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return "no CUDA device"
    return None


def default_target():
    """"cuda" where a CUDA driver and a device are present, else "cpu"."""
    return "cuda" if _cuda_missing() is None else "cpu"


def _dims_text(value):
    if isinstance(value, str):
        return value
    return "x".join(str(int(d)) for d in value)


def _command_options(options):
    """The command line's arguments for compile()'s keyword options."""
    args = []
    for key, value in options.items():
        if key in _OWN_OPTIONS:
            raise TypeError(f"opc.compile: '{key}' is compile()'s own to decide")
        if key in _SERVING_OPTIONS:
            raise TypeError(f"opc.compile: '{key}' makes a serving program, which Program "
                            "does not run; use the command line and the serving API")
        if value is None or value is False:
            continue
        if key == "opt_level":
            args.append(f"-O{int(value)}")
            continue
        flag = "--" + key.replace("_", "-")
        if key in _PAIR_OPTIONS:
            if not isinstance(value, dict):
                raise TypeError(f"opc.compile: '{key}' takes a dict of input name to value")
            for name, v in value.items():
                v = _dims_text(v) if key == "input_shape" else os.fspath(v)
                args += [flag, f"{name}={v}"]
        elif value is True:
            args.append(flag)
        else:
            args += [flag, str(value)]
    return args


def compile(path, target=None, *, prefix="net", output_dir=None, **options):
    """Compiles the ONNX model at `path` into a shared library and loads it.

    target: "cuda" or "cpu" (opc's CPU runtime); by default
    default_target(), the GPU where there is one. output_dir: where libNAME.so, its C source, header and
    weights go; by default a temporary directory removed with the Program.
    The other keyword options are the command line's (see the module's
    text). Raises CompileError with opc's message when it refuses.
    """
    if target is None:
        target = default_target()
    if target not in ("cuda", "cpu"):
        raise ValueError(f"opc.compile: target must be 'cuda' or 'cpu', not {target!r}")
    model = os.fspath(path)
    if not os.path.exists(model):
        raise FileNotFoundError(f"opc.compile: no model at {model}")
    owned = output_dir is None
    workdir = tempfile.mkdtemp(prefix="opc-") if owned else os.fspath(output_dir)
    os.makedirs(workdir, exist_ok=True)
    lib = os.path.join(workdir, f"lib{prefix}.so")
    cmd = [compiler_path(), model, "-o", lib, "--target", target, "--prefix", prefix]
    cmd += _command_options(options)
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)
        message = p.stderr.strip() or f"opc exited with status {p.returncode}"
        raise CompileError(message)
    return Program(lib, prefix=prefix, _owned_dir=workdir if owned else None, _target=target)


class _Api:
    """The generated C API of one loaded library, with ctypes signatures."""

    def __init__(self, lib_path, prefix):
        # RTLD_LOCAL (ctypes' default) keeps each model's net_* apart.
        try:
            self.lib = ctypes.CDLL(os.path.abspath(lib_path))
        except OSError as e:
            missing = _cuda_missing()
            hint = f"; {missing}: compile with target='cpu'" if missing else ""
            raise RunError(f"opc: cannot load {lib_path}: {e}{hint}") from None
        vp, cp, ip = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        dims = ctypes.POINTER(ctypes.c_longlong)
        for name, restype, argtypes in (
                ("create", ip, [ctypes.POINTER(vp), cp]), ("run", ip, [vp, vp, vp]),
                ("destroy", None, [vp]), ("error", cp, [vp]),
                ("num_inputs", ip, []), ("input_name", cp, [ip]), ("input_type", cp, [ip]),
                ("input_rank", ip, [ip]), ("input_dims", dims, [ip]),
                ("num_outputs", ip, []), ("output_name", cp, [ip]), ("output_type", cp, [ip]),
                ("output_rank", ip, [ip]), ("output_dims", dims, [ip]),
                ("output_shape", ip, [vp, ip, dims])):
            try:
                fn = getattr(self.lib, f"{prefix}_{name}")
            except AttributeError:
                raise CompileError(f"opc: {lib_path} has no {prefix}_{name}: "
                                   "not a library opc built with this prefix") from None
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)

    def tensors(self, which):
        count = self.num_inputs() if which == "input" else self.num_outputs()
        name, kind = getattr(self, which + "_name"), getattr(self, which + "_type")
        rank, dims = getattr(self, which + "_rank"), getattr(self, which + "_dims")
        infos = []
        for i in range(count):
            d = dims(i)
            infos.append(TensorInfo(name(i).decode(), _DTYPES[kind(i).decode()],
                                    tuple(int(d[k]) for k in range(rank(i)))))
        return infos


def _release(api, contexts, owned_dir):
    for ctx in contexts:
        api.destroy(ctx)
    contexts.clear()
    if owned_dir:
        shutil.rmtree(owned_dir, ignore_errors=True)


class Program:
    """A compiled model loaded into this process (see opc.compile)."""

    def __init__(self, lib_path, prefix="net", weights=None, _owned_dir=None, _target=None):
        """Loads a library that `opc -o libNAME.so` built. weights: its
        weights file, by default the one beside the library (none when they
        are embedded)."""
        self.path = os.path.abspath(lib_path)
        self._api = _Api(self.path, prefix)
        self.inputs = self._api.tensors("input")
        self.outputs = self._api.tensors("output")
        if weights is None:
            beside = self.path[:-len(".so")] + ".weights"
            weights = beside if os.path.exists(beside) else None
        self._weights = None if weights is None else os.fsencode(weights)
        self._free = []   # contexts not running now
        self._all = []    # every context, for release
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _release, self._api, self._all, _owned_dir)
        self._target = _target
        # The first context is made now, so that a failure shows here.
        self._free.append(self._new_context())

    def _new_context(self):
        ctx = ctypes.c_void_p()
        status = self._api.create(ctypes.byref(ctx), self._weights)
        if status != 0:
            message = self._api.error(ctx).decode(errors="replace") if ctx else "out of memory"
            if ctx:
                self._api.destroy(ctx)
            missing = _cuda_missing() if self._target == "cuda" else None
            hint = f" ({missing}: compile with target='cpu' to run on the CPU)" if missing else ""
            raise RunError(f"opc: creating the program failed: {message}{hint}")
        with self._lock:
            self._all.append(ctx)
        return ctx

    def _checked_inputs(self, feeds):
        if not hasattr(feeds, "keys"):
            raise TypeError("opc: run() takes a dict of input name to array")
        names = [t.name for t in self.inputs]
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise ValueError(f"opc: no input named {unknown[0]!r}; the inputs are {names}")
        missing = [n for n in names if n not in feeds]
        if missing:
            raise ValueError(f"opc: input {missing[0]!r} is missing; the inputs are {names}")
        arrays = []
        for t in self.inputs:
            a = np.asarray(feeds[t.name])
            if a.dtype != t.dtype:
                raise TypeError(f"opc: input {t.name!r} must be {t.dtype.name}, not {a.dtype.name}")
            if a.shape != t.shape:
                raise ValueError(f"opc: input {t.name!r} must have shape {list(t.shape)}, "
                                 f"not {list(a.shape)}")
            arrays.append(np.ascontiguousarray(a))
        return arrays

    def run(self, feeds):
        """One inference: feeds maps every input's name to an array of its
        dtype and shape. Returns a dict of output name to a new array. A
        wrong name, dtype or shape raises before anything runs."""
        if not self._finalizer.alive:
            raise RunError("opc: the program is closed")
        arrays = self._checked_inputs(feeds)
        outputs = [np.empty(t.shape, t.dtype) for t in self.outputs]
        ins = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        outs = (ctypes.c_void_p * max(1, len(outputs)))(*[o.ctypes.data for o in outputs])
        with self._lock:
            ctx = self._free.pop() if self._free else None
        if ctx is None:
            ctx = self._new_context()
        try:
            status = self._api.run(ctx, ins, outs)
            if status != 0:
                raise RunError("opc: " + self._api.error(ctx).decode(errors="replace"))
            shapes = [self._shape_in_run(ctx, i) for i in range(len(outputs))]
        finally:
            with self._lock:
                self._free.append(ctx)
        # Where the data decides an output's size (NonZero), its buffer is
        # sized for the bound and the run's elements come first.
        return {t.name: o if o.shape == shape else o.reshape(-1)[:int(np.prod(shape))].reshape(shape).copy()
                for t, o, shape in zip(self.outputs, outputs, shapes)}

    def _shape_in_run(self, ctx, i):
        dims = (ctypes.c_longlong * 8)()
        rank = self._api.output_shape(ctx, i, dims)
        return tuple(int(dims[k]) for k in range(rank))

    def close(self):
        """Releases every context (and the temporary directory compile()
        made). Also done when the Program is garbage-collected."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _NodeArg:
    """What ONNX Runtime's get_inputs() and get_outputs() give."""

    def __init__(self, info):
        self.name = info.name
        self.shape = list(info.shape)
        self.type = _ORT_TYPES[info.dtype.name]

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"


class InferenceSession:
    """ONNX Runtime's InferenceSession over a compiled program, so that a
    script can swap one for the other. providers picks the target, as
    ONNX Runtime does: the first of the list that this machine has
    (CUDAExecutionProvider or TensorrtExecutionProvider: "cuda", where a
    driver and a device are present; CPUExecutionProvider: "cpu"), with a
    warning and the CPU where none is. Without providers, target= or
    default_target(). sess_options and provider_options are accepted and
    ignored; other keyword options go to compile()."""

    def __init__(self, path, sess_options=None, providers=None, provider_options=None,
                 target=None, **options):
        if target is None:
            target = self._target_of(providers)
        self.target = target
        self.program = compile(path, target=target, **options)

    @staticmethod
    def _target_of(providers):
        if not providers:
            return default_target()
        names = [p[0] if isinstance(p, tuple) else p for p in providers]
        for name in names:
            if name in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
                missing = _cuda_missing()
                if missing is None:
                    return "cuda"
                warnings.warn(f"opc: {name} is not available here ({missing})")
            elif name == "CPUExecutionProvider":
                return "cpu"
        warnings.warn(f"opc: none of the providers {names} is available; running on the CPU")
        return "cpu"

    def get_inputs(self):
        return [_NodeArg(t) for t in self.program.inputs]

    def get_outputs(self):
        return [_NodeArg(t) for t in self.program.outputs]

    def get_providers(self):
        return ["CUDAExecutionProvider" if self.target == "cuda" else "CPUExecutionProvider"]

    def run(self, output_names, input_feed, run_options=None):
        """A list of the outputs named (None: all, in the model's order)."""
        results = self.program.run(input_feed)
        names = output_names or [t.name for t in self.program.outputs]
        unknown = [n for n in names if n not in results]
        if unknown:
            raise ValueError(f"opc: no output named {unknown[0]!r}; the outputs are "
                             f"{[t.name for t in self.program.outputs]}")
        return [results[n] for n in names]
