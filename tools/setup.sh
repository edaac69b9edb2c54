#!/bin/sh
# Installs what opc needs on a Debian machine. Safe to run again: it only
# installs what is missing.
set -eu

# clang, libclang-rt-dev (libFuzzer) and time: the fuzz targets (tools/fuzz.sh).
debs="meson ninja-build pkg-config gcc libprotobuf-c-dev protobuf-c-compiler
libjansson-dev libonnx-dev libonnx-testdata libopenblas-dev python3
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
