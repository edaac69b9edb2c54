#!/bin/sh
# pack_opc.sh - run on the CPU machine: copies a built opc into .gpu-carry/bin
# together with the shared libraries the GPU machine lacks, so that the
# device tool can carry it (name .gpu-carry in `carry`).
#
# usage: tools/gpu/pack_opc.sh [BUILD_DIR]     (default: build)
#
# opc links protobuf-c, jansson and GLPK dynamically. The GPU machine has
# no protobuf-c or GLPK at all, and carrying the rest too keeps the binary
# independent of what that image happens to hold. The scripts there put
# .gpu-carry/bin on LD_LIBRARY_PATH (tools/gpu/env.sh). The prefixed CPU
# runtime goes to .gpu-carry/bin/runtime: `--target cuda` links it.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
case $build in
  /*) ;;
  *) build="$root/$build" ;;
esac
opc="$build/opc"
dest="$root/.gpu-carry/bin"

if [ ! -x "$opc" ]; then
  echo "pack_opc: no opc at $opc; run 'ninja -C $build' first" >&2
  exit 1
fi
cd "$root"
if ! grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null; then
  echo '/.gpu-carry/' >> .git/info/exclude
fi
mkdir -p "$dest"
cp "$opc" "$dest/opc"

# Every shared library opc links except the C library's own: protobuf-c,
# jansson, GLPK (the HOPE ILP) and what GLPK needs.
for lib in $(ldd "$opc" | awk '/=>/ {print $1}'); do
  case $lib in
    libc.so.*|libm.so.*|libz.so.*|ld-linux*) continue ;;
  esac
  path=$(ldd "$opc" | awk -v l="$lib" '$1 == l {print $3}')
  # -L: carry the file, not the symbolic link.
  cp -L "$path" "$dest/$lib"
done

# `--target cuda` links the prefixed CPU runtime (a --devices gpu,cpu
# program's CPU units; nothing of it otherwise), which opc looks for in
# runtime/ beside itself, as in the build tree.
mkdir -p "$dest/runtime"
for f in libopcrt.a libopcrt_cpu.a opc_cpu.h; do
  if [ ! -f "$build/runtime/$f" ]; then
    echo "pack_opc: no $build/runtime/$f; run 'ninja -C $build' first" >&2
    exit 1
  fi
  cp "$build/runtime/$f" "$dest/runtime/$f"
done
# Without their debugging sections the archives are a fifth of the size.
command -v strip >/dev/null 2>&1 && strip -g "$dest"/runtime/*.a

# The zoo's inputs: the photographs (tools/models/photos.py's cache) and
# PP-OCR's models; the GPU machine has neither scikit-image nor a network.
python3 "$root/tools/models/photos.py" --check 2>/dev/null || python3 "$root/tools/models/photos.py" --write
python3 "$root/tools/models/ppocr.py" --check 2>/dev/null || python3 "$root/tools/models/ppocr.py" --fetch
mkdir -p "$root/.gpu-carry/data/ppocr"
cp "${OPC_PHOTOS:-$HOME/.cache/opc/photos-v1.npz}" "$root/.gpu-carry/data/photos.npz"
cp "$(python3 -c "import sys; sys.path.insert(0, '$root/tools/models'); import ppocr; print(ppocr.cache_dir())")"/*.onnx \
  "$root/.gpu-carry/data/ppocr/"

{
  echo "opc: $("$opc" --version)"
  echo "built from: $build"
  echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')"
  echo "packed: $(date -u '+%Y-%m-%d %H:%M UTC')"
} > "$dest/opc.info"

cat "$dest/opc.info"
ls -l "$dest"
# The carried binary must run with only .gpu-carry/bin on the library path
# for the libraries it brings.
if ! LD_LIBRARY_PATH="$dest" "$dest/opc" --version >/dev/null; then
  echo "pack_opc: error: the packed opc does not run" >&2
  exit 1
fi
echo "pack_opc: .gpu-carry/bin is $(du -sk "$dest" | awk '{print $1}') KiB"
