#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/*).

usage: make_corpus.py TESTDATA   (e.g. /usr/share/libonnx-testdata/data)

Run once; its output is committed. ONNX models and TensorProto inputs
come from the ONNX test data (a sample: one or two per operator, all
small), .ir seeds from the pass test cases, .npy and cost database seeds
are generated here. The npy and pb seeds start with the expected type and
shape that tests/fuzz/main_inputs_fuzz.h describes; const_input has the
same files without it, and the test data's SequenceProto and OptionalProto
inputs.
"""
import hashlib
import json
import os
import re
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, 'corpus')

# element_types of backend/main_inputs.c, in order: (numpy dtype, ONNX type)
ELEMENT_TYPES = [('<f4', 1), ('<f8', 11), ('<f2', 10), ('<i8', 7), ('<i4', 6), ('|i1', 3),
                 ('|u1', 2), ('|b1', 9)]


def save(target, data, name=None):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    name = name or hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def expectation(type_index, shape):
    out = bytes([type_index, len(shape)])
    for d in shape:
        out += struct.pack('<H', d)
    return out


def without_expectation(data):
    """The file alone, for --const-input (fuzz_const_input)."""
    return data[2 + 2 * data[1]:]


def onnx_models(testdata):
    """One or two small models per operator, and the small whole models."""
    per_op = {}
    node = os.path.join(testdata, 'node')
    for test in sorted(os.listdir(node)):
        path = os.path.join(node, test, 'model.onnx')
        op = re.sub(r'^test_', '', test).split('_')[0]
        if os.path.getsize(path) < 4096 and per_op.get(op, 0) < 2:
            per_op[op] = per_op.get(op, 0) + 1
            yield test, path
    for group in ['simple', 'pytorch-operator', 'pytorch-converted', 'real']:
        base = os.path.join(testdata, group)
        for test in sorted(os.listdir(base)):
            path = os.path.join(base, test, 'model.onnx')
            if os.path.exists(path) and os.path.getsize(path) < 16384:
                yield test, path


def pb_inputs(testdata):
    """Small TensorProto inputs of every element type the program reads."""
    seen = {}
    node = os.path.join(testdata, 'node')
    for test in sorted(os.listdir(node)):
        data_dir = os.path.join(node, test, 'test_data_set_0')
        if not os.path.isdir(data_dir):
            continue
        for f in sorted(os.listdir(data_dir)):
            path = os.path.join(data_dir, f)
            if not f.endswith('.pb') or os.path.getsize(path) > 2048:
                continue
            t = onnx.TensorProto()
            t.ParseFromString(open(path, 'rb').read())
            key = (t.data_type, len(t.dims), t.HasField('raw_data'))
            if seen.get(key, 0) >= 6 or any(d > 65535 for d in t.dims) or len(t.dims) > 8:
                continue
            seen[key] = seen.get(key, 0) + 1
            types = [k for k, (_, onnx_type) in enumerate(ELEMENT_TYPES) if onnx_type == t.data_type]
            yield expectation(types[0] if types else 0, list(t.dims)) + open(path, 'rb').read()


def typed_field_tensors():
    """The same values in the typed fields (float_data, int32_data, ...)."""
    for k, (descr, onnx_type) in enumerate(ELEMENT_TYPES):
        for shape in [(), (3,), (2, 3)]:
            a = (np.arange(int(np.prod(shape))) % 3).astype(np.dtype(descr)).reshape(shape)
            t = numpy_helper.from_array(a)
            if onnx_type in (1, 11, 7, 6):
                plain = onnx.helper.make_tensor('x', onnx_type, shape, a.flatten().tolist())
                yield expectation(k, shape) + plain.SerializeToString()
            yield expectation(k, shape) + t.SerializeToString()


def npy_file(a, version=1, fortran=False, descr=None):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr or a.dtype.str, fortran, repr(tuple(a.shape)))
    size_bytes = 2 if version == 1 else 4
    pad = 64 - (8 + size_bytes + len(header) + 1) % 64
    header = header + ' ' * pad + '\n'
    length = struct.pack('<H' if version == 1 else '<I', len(header))
    return b'\x93NUMPY' + bytes([version, 0]) + length + header.encode() + a.tobytes()


def npy_seeds():
    for k, (descr, _) in enumerate(ELEMENT_TYPES):
        for shape in [(), (1,), (4,), (2, 3), (1, 3, 2, 2), (2, 1, 1, 1, 1, 1, 1, 2)]:
            a = (np.arange(int(np.prod(shape))) % 5).astype(np.dtype(descr)).reshape(shape)
            yield expectation(k, shape) + npy_file(a)
        a = np.zeros((2, 2), np.dtype(descr))
        yield expectation(k, (2, 2)) + npy_file(a, version=2)
        yield expectation(k, (2, 2)) + npy_file(a, version=3)
        yield expectation(k, (2, 2)) + npy_file(a, fortran=True)
        yield expectation(k, (2, 2)) + npy_file(a, descr=descr.replace('<', '='))
    yield expectation(0, (2,)) + npy_file(np.zeros(2, '>f4'))
    yield expectation(0, (0, 3)) + npy_file(np.zeros((0, 3), '<f4'))


def ir_seeds():
    """Each pass test case's input and expected output, both .ir text."""
    cases = os.path.join(ROOT, 'passes', 'tests', 'cases')
    for name in sorted(os.listdir(cases)):
        text = open(os.path.join(cases, name)).read()
        parts = re.split(r'^---.*$', text, flags=re.M)
        for i, part in enumerate(parts[1:]):
            save('ir', part.lstrip('\n').encode(), '%s.%d' % (name, i))


def profile(units, tf32=True):
    return json.dumps({
        'format': 'opc-profile-1', 'model': 'm', 'device': 'NVIDIA H100', 'target': 'cuda',
        'cuda_runtime': 12040, 'cuda_driver': 12040, 'cudnn': 90100, 'cublas': None,
        'tf32': tf32, 'scheduler': 'ios', 'repeats': 10, 'launches': 3,
        'predicted_us': 12.5, 'measured_us': 13.25,
        'units': units,
        'stages': [{'index': 0, 'units': len(units), 'us': 1.5, 'predicted_us': 1.25}],
    }, indent=2).encode()


def cost_db_seeds():
    conv = ('Conv|f32[1,64,56,56],f32[64,64,3,3],f32[64]->f32[1,64,56,56]|k=3x3|s=1x1|'
            'p=1x1x1x1|d=1x1|g=1|act=relu')
    gemm = 'Gemm|f32[1,512],f32[1000,512],f32[1000]->f32[1,1000]|tB=1'
    unit = lambda name, key, us: {'name': name, 'op': key.split('|')[0], 'stage': 0,
                                  'stream': 0, 'us': us, 'predicted_us': us, 'key': key}
    save('cost_db', profile([unit('a', conv, 20.5), unit('b', conv, 10), unit('c', gemm, 3.25)]))
    save('cost_db', profile([unit('a', conv, 0)], tf32=False))
    save('cost_db', profile([]))
    save('cost_db', b'{"format": "opc-profile-1", "units": [{"key": "k", "us": 1e308}, '
                    b'{"key": "k", "us": 2}, {"key": "\\u00e9\\n", "us": 0.5}]}')
    save('cost_db', b'{"format": "opc-profile-1", "units": [3]}')
    save('cost_db', b'{"format": "chrome-trace", "units": []}')
    for dev in ['h100', 'a100']:
        save('cost_db', open(os.path.join(ROOT, 'passes', 'devices', dev + '.json'), 'rb').read())


# Inputs of the ONNX test data that are SequenceProto or OptionalProto
# files: --const-input binds them to sequence and optional inputs, which
# fuzz_const_input reads the bytes as too.
LIST_INPUTS = ['test_sequence_insert_at_back', 'test_optional_get_element',
               'test_optional_get_element_sequence', 'test_optional_has_element_empty']


def list_inputs(testdata):
    for test in LIST_INPUTS:
        with open(os.path.join(testdata, 'node', test, 'test_data_set_0', 'input_0.pb'), 'rb') as f:
            yield f.read()


def main():
    testdata = sys.argv[1]
    for data in list_inputs(testdata):
        save('const_input', data)
    for test, path in onnx_models(testdata):
        save('onnx', open(path, 'rb').read(), test + '.onnx')
    for data in pb_inputs(testdata):
        save('pb', data)
        save('const_input', without_expectation(data))
    for data in typed_field_tensors():
        save('pb', data)
        save('const_input', without_expectation(data))
    for data in npy_seeds():
        save('npy', data)
        save('const_input', without_expectation(data))
    ir_seeds()
    cost_db_seeds()


if __name__ == '__main__':
    main()
