#!/bin/sh
# fetch_debs.sh - run on the CPU machine (Debian 12), from anywhere.
#
# The lent GPU machine (Ubuntu 24.04, no network) has no protobuf-c, no
# protoc-c, no jansson header, no onnx.proto and no ONNX test data. This
# downloads the Debian packages that provide them into .gpu-carry/debs, which
# the device tool carries and tools/gpu/gpu_check.sh unpacks there with
# `dpkg -x` into a prefix under /tmp. Nothing is installed here.
#
# usage: tools/gpu/fetch_debs.sh [--force]
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
dest="$root/.gpu-carry/debs"
# The device tool carries at most 64 MiB, working tree included.
limit_kib=$((40 * 1024))

# protoc-c needs libprotobuf.so.32 and libprotoc.so.32 at run time (ldd
# /usr/bin/protoc-c); libstdc++, libgcc and zlib are on the GPU machine.
# libonnx-dev provides /usr/include/onnx/onnx.proto, libonnx-testdata the
# node conformance set. OpenBLAS is on the GPU machine already.
packages="libprotobuf-c-dev libprotobuf-c1 protobuf-c-compiler libprotoc32 libprotobuf32
libjansson-dev libjansson4 libonnx-dev libonnx-testdata"

cd "$root"
if ! grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null; then
  echo '/.gpu-carry/' >> .git/info/exclude
  echo "fetch_debs: added /.gpu-carry/ to .git/info/exclude"
fi

if [ "${1:-}" = "--force" ]; then
  rm -rf "$dest"
fi
mkdir -p "$dest"

# Check the runtime needs of protoc-c against what we carry, so a future
# Debian update that adds a library is noticed here rather than there.
if command -v protoc-c >/dev/null 2>&1; then
  for lib in $(ldd "$(command -v protoc-c)" | awk '/=>/ {print $1}'); do
    case $lib in
      libprotobuf.so.32|libprotoc.so.32|libstdc++.so.6|libgcc_s.so.1|libc.so.6|libm.so.6|libz.so.1) ;;
      *) echo "fetch_debs: warning: protoc-c also needs $lib; add its package" >&2 ;;
    esac
  done
fi

# apt's sandbox user cannot write into most folders; download in a
# temporary folder it can write and move the files over.
tmp=$(mktemp -d /tmp/opc-debs.XXXXXX)
chmod 777 "$tmp"
trap 'rm -rf "$tmp"' EXIT
missing=""
for p in $packages; do
  if ls "$dest/${p}_"*.deb >/dev/null 2>&1; then
    continue
  fi
  missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "fetch_debs: downloading$missing"
  (cd "$tmp" && apt-get download $missing)
  mv "$tmp"/*.deb "$dest"/
fi

# The test data package is small enough (about 6 MB) to carry whole; if it
# ever grows, carry only data/node as a tarball instead.
testdata_kib=$(du -k "$dest"/libonnx-testdata_*.deb | awk '{print $1}')
if [ "$testdata_kib" -gt $((20 * 1024)) ]; then
  echo "fetch_debs: libonnx-testdata is ${testdata_kib} KiB; carrying only data/node"
  mkdir -p "$tmp/x"
  dpkg -x "$dest"/libonnx-testdata_*.deb "$tmp/x"
  tar -C "$tmp/x/usr/share/libonnx-testdata/data" -czf "$root/.gpu-carry/onnx-node-testdata.tar.gz" node
  rm -f "$dest"/libonnx-testdata_*.deb
fi

echo "fetch_debs: contents of .gpu-carry:"
(cd "$root/.gpu-carry" && find . -type f -exec du -k {} + | sort -k2)
total_kib=$(du -sk "$root/.gpu-carry" | awk '{print $1}')
tree_kib=$(git ls-files -co --exclude-standard -z | du -ck --files0-from=- 2>/dev/null | tail -1 | awk '{print $1}')
echo "fetch_debs: .gpu-carry is ${total_kib} KiB; the working tree that travels is ${tree_kib} KiB; the device tool carries at most 65536 KiB"
if [ "$total_kib" -gt "$limit_kib" ]; then
  echo "fetch_debs: error: .gpu-carry is over ${limit_kib} KiB" >&2
  exit 1
fi
