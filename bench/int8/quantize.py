#!/usr/bin/env python3
"""quantize.py - a zoo model in int8 as ONNX Runtime's quantize_static
writes it after its quant_pre_process (shape inference and ONNX Runtime's
basic optimisations, which fold each BatchNormalization into its Conv): QDQ format, per-channel int8 weights, uint8 activations,
reduce_range (7-bit weights, which keeps this CPU's ONNX Runtime exact:
see backend/tests/kernels/test_quantized_models.py), calibrated on the
photographs of tools/models/photos.py.

The quantizer writes some bias DequantizeLinear nodes with a scale of
shape [1] and a zero point of shape [] (ONNX wants the same shape); ONNX
Runtime and opc both take them as one value. Both engines run the file as
the quantizer wrote it.

usage: quantize.py FLOAT.onnx INT8.onnx [--calib N]
"""
import argparse
import os
import sys

import onnx
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "models"))
import photos  # noqa: E402


class Photos(CalibrationDataReader):
    def __init__(self, name, shape, count):
        self.feeds = iter([{name: photos.image_batch([k % photos.count()], shape)}
                           for k in range(count)])

    def get_next(self):
        return next(self.feeds, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--calib", type=int, default=8)
    a = ap.parse_args()
    m = onnx.load(a.src)
    x = m.graph.input[0]
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    pre = a.dst + ".pre.onnx"
    quant_pre_process(a.src, pre)
    quantize_static(pre, a.dst, Photos(x.name, shape, a.calib), quant_format=QuantFormat.QDQ,
                    per_channel=True, reduce_range=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    os.remove(pre)
    print("quantize.py: wrote %s" % a.dst)


if __name__ == "__main__":
    main()
