"""Each model is the zoo network of the same name (tools/models/build.py),
run by ONNX Runtime; a model whose name starts with "broken_" has no zoo
network and fails to build."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))


class ZooNet(torch.nn.Module):
    def __init__(self, name):
        folder = tempfile.mkdtemp(prefix="fake-torchvision-")
        atexit.register(shutil.rmtree, folder, True)
        self.onnx_path = os.path.join(folder, name + ".onnx")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"), name,
                        "-o", self.onnx_path], check=True, capture_output=True)
        import onnxruntime as ort
        self.session = ort.InferenceSession(self.onnx_path, providers=["CPUExecutionProvider"])
        self.children_ = [torch.nn.modules.batchnorm._BatchNorm()]

    def __deepcopy__(self, memo):
        return self

    def forward(self, x):
        # The zoo networks have batch 1; larger batches run one sample at a time.
        name = self.session.get_inputs()[0].name
        y = torch.Tensor(np.concatenate([self.session.run(None, {name: x.array[i:i + 1]})[0]
                                         for i in range(x.array.shape[0])]))
        if torch._capturing:
            torch._capturing[-1].steps.append((self, x, y))
        return y


def _builder(name):
    def build(weights=None, **kwargs):
        return ZooNet(name)
    return build


for _name in ["inception_v3", "googlenet", "squeezenet1_1", "resnet50", "mobilenet_v2",
              "densenet121", "efficientnet_b0"]:
    globals()[_name] = _builder(_name)
