#!/bin/sh
# Installs what opc needs on a Debian machine. Safe to run again: it only
# installs what is missing.
set -eu

# clang, libclang-rt-dev (libFuzzer) and time: the fuzz targets (tools/fuzz.sh).
debs="meson ninja-build pkg-config gcc libprotobuf-c-dev protobuf-c-compiler
libjansson-dev libglpk-dev libonnx-dev libonnx-testdata libopenblas-dev libdnnl2 python3
clang libclang-rt-dev time"
missing=""
for p in $debs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing Debian packages:$missing"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

# The oracle (ONNX Runtime) and the model builders run on the python3 of the PATH.
if ! python3 -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
  echo "setup: installing Python packages: onnx onnxruntime numpy"
  python3 -m pip install -q onnx onnxruntime numpy
fi
# CUDA for the GPU programs: where no toolkit is found ($OPC_CUDA_HOME, else
# /usr/local/cuda, holding include/cuda_runtime.h; or $OPC_CUDA_HOME already
# a wheels' tree), PyPI's CUDA wheels (tools/cuda-wheels.txt) go into the
# site-packages of this python3, where opc looks for them (README, "Using opc").
# Never where a toolkit is.
cuda_home=${OPC_CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda_home/include/cuda_runtime.h" ] && [ ! -f "$cuda_home/cu13/include/cuda_runtime.h" ] &&
   ! python3 - tools/cuda-wheels.txt <<'PY'
import sys
from importlib import metadata
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, version = line.split("==")
        try:
            if metadata.version(name) != version:
                sys.exit(1)
        except metadata.PackageNotFoundError:
            sys.exit(1)
PY
then
  echo "setup: no CUDA toolkit at $cuda_home: installing PyPI's CUDA wheels (tools/cuda-wheels.txt, about 1 GB)"
  python3 -m pip install -q -r tools/cuda-wheels.txt
fi
# The zoo's inputs: scikit-image's bundled photographs (tools/models/photos.py,
# cut and resized once into a cache) and lines of text rendered with Pillow
# (which scikit-image brings) for the trained PP-OCR models of the
# rapidocr-onnxruntime wheel (tools/models/ppocr.py: pinned, checked).
if ! python3 -c "import skimage, PIL" 2>/dev/null; then
  echo "setup: installing Python packages: scikit-image"
  python3 -m pip install -q scikit-image
fi
python3 tools/models/photos.py --check 2>/dev/null || python3 tools/models/photos.py --write
python3 tools/models/ppocr.py --check 2>/dev/null || python3 tools/models/ppocr.py --fetch

# Triton Inference Server for the triton suite (tests/triton):
# - nvidia-pytriton's wheel carries a tritonserver binary with its Python
#   backend; only that binary is used, so the wheel's Python dependencies
#   (an older numpy) are not installed;
# - the Python backend's stub embeds Debian's libpython3.11, so the models'
#   imports come from Debian's packages: python3-numpy;
# - tritonclient sends HTTP and gRPC requests;
# - perf_analyzer, Triton's load generator: PyPI's perf-analyzer is a
#   placeholder on the index this machine reaches, so it comes from
#   tritonclient 2.40.0's wheel, the last to carry the binary, into
#   ~/.cache/opc/perf_analyzer; its two libraries are nvidia-pytriton's.
if ! dpkg-query -W -f='${Status}' python3-numpy 2>/dev/null | grep -q "install ok installed"; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing Debian packages: python3-numpy"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-numpy >/dev/null
fi
# (pytriton's own modules need the dependencies left out: find, don't import.)
if ! python3 -c "import importlib.util as u, tritonclient.grpc, tritonclient.http; assert u.find_spec('pytriton')" 2>/dev/null; then
  echo "setup: installing Python packages: nvidia-pytriton (its tritonserver), tritonclient"
  python3 -m pip install -q --no-deps nvidia-pytriton==0.7.0
  python3 -m pip install -q "tritonclient[http,grpc]==2.73.0"
fi
perf_dir=${HOME:-/root}/.cache/opc/perf_analyzer
if [ ! -x "$perf_dir/bin/perf_analyzer" ]; then
  echo "setup: fetching perf_analyzer (tritonclient 2.40.0's wheel)"
  python3 - "$perf_dir" <<'PY'
import glob, importlib.util, os, subprocess, sys, tempfile, zipfile
dest = sys.argv[1]
package = importlib.util.find_spec("pytriton").submodule_search_locations[0]
libs = os.path.join(os.path.dirname(package), "nvidia_pytriton.libs")
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--platform", "manylinux1_x86_64", "tritonclient==2.40.0", "-d", tmp], check=True)
    wheel = zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0])
    os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
    os.makedirs(os.path.join(dest, "lib"), exist_ok=True)
    binary = os.path.join(dest, "bin", "perf_analyzer")
    with open(binary + ".tmp", "wb") as f:
        f.write(wheel.read("tritonclient-2.40.0.data/data/bin/perf_analyzer"))
    os.chmod(binary + ".tmp", 0o755)
    for want, pattern in (("libb64.so.0d", "libb64-*.so.0d"), ("libcudart.so.12", "libcudart-*.so.12*")):
        link = os.path.join(dest, "lib", want)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(glob.glob(os.path.join(libs, pattern))[0], link)
    os.rename(binary + ".tmp", binary)
PY
fi
