"""A Triton Inference Server model (Python backend) that runs a program opc compiled.

opc MODEL.onnx -o REPO --emit triton wrote this file beside libnet.so, the
program as a shared library, and libnet.weights. Each instance of the model
(config.pbtxt's instance_group) is a process of its own that loads the
library and makes one context; each request is one net_run. It needs only
NumPy and the standard library, and finds everything beside itself, so the
model's folder may be copied to another machine with the same libraries.
"""
import ctypes
import os

import numpy as np
import triton_python_backend_utils as pb_utils

HERE = os.path.dirname(os.path.abspath(__file__))

# net.h's element types, by the names net_input_type() gives.
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8,
          "uint64": np.uint64, "uint32": np.uint32, "uint16": np.uint16, "uint8": np.uint8,
          "bool": np.bool_}


def declare(lib):
    """ctypes signatures of the generated API."""
    vp, cp, ip = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    dims = ctypes.POINTER(ctypes.c_longlong)
    for name, restype, argtypes in (
            ("net_create", ip, [ctypes.POINTER(vp), cp]), ("net_run", ip, [vp, vp, vp]),
            ("net_destroy", None, [vp]), ("net_error", cp, [vp]),
            ("net_num_inputs", ip, []), ("net_input_name", cp, [ip]),
            ("net_input_type", cp, [ip]), ("net_input_rank", ip, [ip]),
            ("net_input_dims", dims, [ip]), ("net_num_outputs", ip, []),
            ("net_output_name", cp, [ip]), ("net_output_type", cp, [ip]),
            ("net_output_rank", ip, [ip]), ("net_output_dims", dims, [ip])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes


def tensors(lib, which):
    """(name, dtype, shape) of every input or output, in the API's order."""
    count = getattr(lib, f"net_num_{which}s")()
    name, kind = getattr(lib, f"net_{which}_name"), getattr(lib, f"net_{which}_type")
    rank, dims = getattr(lib, f"net_{which}_rank"), getattr(lib, f"net_{which}_dims")
    return [(name(i).decode(), np.dtype(DTYPES[kind(i).decode()]),
             tuple(dims(i)[k] for k in range(rank(i)))) for i in range(count)]


class TritonPythonModel:
    def initialize(self, args):
        self.lib = ctypes.CDLL(os.path.join(HERE, "libnet.so"))
        declare(self.lib)
        if args.get("model_instance_kind") == "GPU":
            # The CUDA runtime the library links is reached through its handle.
            status = self.lib.cudaSetDevice(int(args["model_instance_device_id"]))
            if status != 0:
                raise RuntimeError(f"cudaSetDevice({args['model_instance_device_id']}) "
                                   f"failed with error {status}")
        self.inputs = tensors(self.lib, "input")
        self.outputs = tensors(self.lib, "output")
        self.ctx = ctypes.c_void_p()
        weights = os.path.join(HERE, "libnet.weights")
        status = self.lib.net_create(ctypes.byref(self.ctx),
                                     weights.encode() if os.path.exists(weights) else None)
        if status != 0:
            message = self.lib.net_error(self.ctx).decode() if self.ctx else "out of memory"
            if self.ctx:
                self.lib.net_destroy(self.ctx)
                self.ctx = None
            raise RuntimeError(f"creating the program failed: {message}")

    def execute(self, requests):
        return [self.run(request) for request in requests]

    def run(self, request):
        arrays = []
        for name, dtype, shape in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is None:
                return failure(f"input '{name}' is missing")
            array = np.ascontiguousarray(tensor.as_numpy())
            if array.dtype != dtype or array.shape != shape:
                return failure(f"input '{name}' must be {dtype.name} {list(shape)}, "
                               f"not {array.dtype.name} {list(array.shape)}")
            arrays.append(array)
        results = [np.empty(shape, dtype) for _, dtype, shape in self.outputs]
        ins = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        outs = (ctypes.c_void_p * max(1, len(results)))(*[r.ctypes.data for r in results])
        if self.lib.net_run(self.ctx, ins, outs) != 0:
            return failure(self.lib.net_error(self.ctx).decode(errors="replace"))
        return pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor(name, result) for (name, _, _), result in zip(self.outputs, results)])

    def finalize(self):
        if self.ctx:
            self.lib.net_destroy(self.ctx)
            self.ctx = None


def failure(message):
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))
