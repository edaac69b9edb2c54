# shellcheck shell=sh
# env.sh - sourced (`. tools/gpu/env.sh`) on the lent GPU machine, from the
# repository root, by gpu_check.sh and before bench/gpu/bench_gpu.py.
#
# Sets up what that machine needs to build and run opc's programs:
#   OPC_GPU_PREFIX   where .gpu-carry/debs are unpacked (dpkg -x; never into /)
#   PATH             the venv's python3, meson and ninja; the unpacked protoc-c
#                    (through a wrapper that gives it its libraries)
#   PKG_CONFIG_PATH  the unpacked protobuf-c and jansson (.pc files rewritten)
#   LD_LIBRARY_PATH  .gpu-carry/bin (carried opc's libraries), the venv's
#                    cuBLAS/cudart 13 and cuDNN 9.19, the CUDA toolkit (an
#                    opc built there finds protobuf-c through its rpath)
#   CC               gcc with cuDNN 9.19's header and library first, so that
#                    `opc --target cuda` builds against the cuDNN it runs with
#   OPC_TESTDATA     the unpacked ONNX test data (data/, with node/ in it)
#   OPC_ONNX_PROTO   the unpacked onnx.proto
# Idempotent: sourcing it twice unpacks once and does not grow the paths.

opc_gpu_root=$(pwd)
if [ ! -f "$opc_gpu_root/tools/gpu/env.sh" ]; then
  echo "env.sh: source it from the repository root" >&2
  return 1 2>/dev/null || exit 1
fi

OPC_GPU_PREFIX=${OPC_GPU_PREFIX:-/tmp/opc-gpu/prefix}
export OPC_GPU_PREFIX
OPC_GPU_VENV=${OPC_GPU_VENV:-/opt/torch/.venv}
export OPC_GPU_VENV

# Unpack the carried packages once.
if [ -d "$opc_gpu_root/.gpu-carry/debs" ] && [ ! -f "$OPC_GPU_PREFIX/.unpacked" ]; then
  mkdir -p "$OPC_GPU_PREFIX"
  for deb in "$opc_gpu_root"/.gpu-carry/debs/*.deb; do
    dpkg -x "$deb" "$OPC_GPU_PREFIX"
  done
  if [ -f "$opc_gpu_root/.gpu-carry/onnx-node-testdata.tar.gz" ]; then
    mkdir -p "$OPC_GPU_PREFIX/usr/share/libonnx-testdata/data"
    tar -C "$OPC_GPU_PREFIX/usr/share/libonnx-testdata/data" -xzf "$opc_gpu_root/.gpu-carry/onnx-node-testdata.tar.gz"
  fi
  # The .pc files say prefix=/usr; point them at the unpacked tree.
  for pc in "$OPC_GPU_PREFIX"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|^prefix=/usr\$|prefix=$OPC_GPU_PREFIX/usr|" "$pc"
  done
  # protoc-c needs the unpacked libprotoc and libprotobuf; a wrapper gives
  # them to it alone, so that nothing else (torch, onnx) sees Debian's.
  mkdir -p "$OPC_GPU_PREFIX/wrap"
  {
    echo '#!/bin/sh'
    echo "LD_LIBRARY_PATH=\"$OPC_GPU_PREFIX/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" exec \"$OPC_GPU_PREFIX/usr/bin/protoc-c\" \"\$@\""
  } > "$OPC_GPU_PREFIX/wrap/protoc-c"
  chmod +x "$OPC_GPU_PREFIX/wrap/protoc-c"
  touch "$OPC_GPU_PREFIX/.unpacked"
fi

opc_gpu_lib="$OPC_GPU_PREFIX/usr/lib/x86_64-linux-gnu"
opc_gpu_site=$(ls -d "$OPC_GPU_VENV"/lib/python3.*/site-packages 2>/dev/null | head -n 1)
opc_gpu_cudnn="$opc_gpu_site/nvidia/cudnn"
opc_gpu_cu13="$opc_gpu_site/nvidia/cu13/lib"

# Prepends $2 to the colon list named $1 unless it is there already.
opc_gpu_prepend() {
  eval "opc_gpu_old=\${$1:-}"
  case ":$opc_gpu_old:" in
    *":$2:"*) ;;
    *) eval "export $1=\"$2\${opc_gpu_old:+:\$opc_gpu_old}\"" ;;
  esac
}

# Appended in reverse: the first listed ends up first.
[ -d /usr/local/cuda/lib64 ] && opc_gpu_prepend LD_LIBRARY_PATH /usr/local/cuda/lib64
[ -d "$opc_gpu_cudnn/lib" ] && opc_gpu_prepend LD_LIBRARY_PATH "$opc_gpu_cudnn/lib"
[ -d "$opc_gpu_cu13" ] && opc_gpu_prepend LD_LIBRARY_PATH "$opc_gpu_cu13"
opc_gpu_prepend LD_LIBRARY_PATH "$opc_gpu_root/.gpu-carry/bin"

opc_gpu_prepend PATH "$OPC_GPU_PREFIX/wrap"
[ -d "$OPC_GPU_VENV/bin" ] && opc_gpu_prepend PATH "$OPC_GPU_VENV/bin"
opc_gpu_prepend PKG_CONFIG_PATH "$opc_gpu_lib/pkgconfig"
# No CPATH or LIBRARY_PATH: pkg-config would then leave those folders out
# of its flags, and meson would depend on them being set at build time.

# cuDNN 9.19 from the venv before the system's 9.14 (header in
# /usr/include/x86_64-linux-gnu, found by gcc on its own). The wheel has only
# libcudnn.so.9, so give the linker an unversioned name for it.
if [ -f "$opc_gpu_cudnn/include/cudnn.h" ] && [ -f "$opc_gpu_cudnn/lib/libcudnn.so.9" ]; then
  mkdir -p /tmp/opc-gpu/link
  ln -sf "$opc_gpu_cudnn/lib/libcudnn.so.9" /tmp/opc-gpu/link/libcudnn.so
  CC="gcc -I$opc_gpu_cudnn/include -L/tmp/opc-gpu/link"
else
  CC=${CC:-gcc}
fi
command -v gcc >/dev/null 2>&1 || CC=cc
export CC

OPC_TESTDATA="$OPC_GPU_PREFIX/usr/share/libonnx-testdata/data"
OPC_ONNX_PROTO="$OPC_GPU_PREFIX/usr/include/onnx/onnx.proto"
export OPC_TESTDATA OPC_ONNX_PROTO
# The zoo's photographs and PP-OCR's models, carried (pack_opc.sh).
OPC_PHOTOS="$PWD/.gpu-carry/data/photos.npz"
OPC_PPOCR="$PWD/.gpu-carry/data/ppocr"
export OPC_PHOTOS OPC_PPOCR
# Python output must not wait in buffers: the device tool returns what was
# printed when a command is stopped at its limit.
export PYTHONUNBUFFERED=1
