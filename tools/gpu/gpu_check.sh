#!/bin/bash
# gpu_check.sh - run on the lent GPU machine from the repository root (the
# device tool's copy of the working tree, with .gpu-carry carried):
#
#   1. unpacks .gpu-carry/debs into /tmp/opc-gpu/prefix (tools/gpu/env.sh),
#   2. builds opc there with the venv's meson and ninja (gcc 13),
#   3. a smoke test: one small model compiled for CUDA and run, verbosely,
#   4. the ONNX node conformance set with --target cuda on the GPU
#      (tools/gpu/conformance_cuda.py; abs+rel 1e-4, strict fp32),
#   5. the default model, squeezenet1_1 from tools/models/build.py, under
#      every scheduler against ONNX Runtime (relative L2 < 1e-4) and timed
#      (tools/gpu/default_model.py),
#   6. a summary table.
# Everything printed also goes to $OUT/gpu_check.txt (when OUT is set, else
# /tmp/opc-gpu/gpu_check.txt). Aimed at ~9 minutes on 16 cores: the
# conformance run stops starting tests when the time budget runs short.
#
# usage: tools/gpu/gpu_check.sh [--jobs N] [--budget SECONDS] [--only SUBSTRING]
#                               [--skip-build] [--skip-conformance] [--runs N]
#                               [--target cuda|cpu]
#   --skip-build   use the carried .gpu-carry/bin/opc (tools/gpu/pack_opc.sh)
#   --target cpu   the same steps on opc's CPU runtime: tests this script on a
#                  machine without a GPU
# Exit status 0 when every step passed.
set -u -o pipefail

jobs=$(nproc 2>/dev/null || echo 4)
budget=520
only=""
skip_build=0
skip_conformance=0
runs=300
target=cuda
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --skip-conformance) skip_conformance=1; shift ;;
    --runs) runs=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    *) echo "usage: $0 [--jobs N] [--budget S] [--only SUBSTRING] [--skip-build] [--skip-conformance] [--runs N] [--target cuda|cpu]" >&2
       exit 1 ;;
  esac
done

if [ ! -f tools/gpu/gpu_check.sh ]; then
  echo "gpu_check: run it from the repository root" >&2
  exit 1
fi
work=/tmp/opc-gpu
mkdir -p "$work"
if [ -n "${OUT:-}" ]; then
  log="$OUT/gpu_check.txt"
else
  log="$work/gpu_check.txt"
fi

section() {
  echo
  echo "== $* ($SECONDS s) =="
}

check() {
  section "machine"
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  uname -srm
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  else
    echo "nvidia-smi: not found"
  fi
  . tools/gpu/env.sh || return 1
  gcc --version | head -n 1
  command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 1
  python3 --version
  echo "python3: $(command -v python3)"
  echo "meson: $(meson --version 2>&1), ninja: $(ninja --version 2>&1)"
  echo "protoc-c: $(command -v protoc-c) ($(protoc-c --version 2>&1 | head -n 1))"
  echo "CC: $CC"
  echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
  [ -f .gpu-carry/bin/opc.info ] && sed 's/^/carried /' .gpu-carry/bin/opc.info

  local build="$work/build" opc build_status
  if [ "$skip_build" = 1 ]; then
    opc="$(pwd)/.gpu-carry/bin/opc"
    build_status="skipped: carried $opc"
  else
    section "build"
    local t0=$SECONDS
    local setup=(meson setup "$build" "-Donnx_proto=$OPC_ONNX_PROTO" "-Dtestdata=$OPC_TESTDATA"
                 -Dcuda=/usr/local/cuda --buildtype=debugoptimized)
    [ -d "$build/meson-private" ] && setup+=(--reconfigure)
    # Plain gcc for opc itself; $CC (cuDNN flags) is for emitted programs.
    if CC=gcc "${setup[@]}" >"$work/meson-setup.txt" 2>&1 && ninja -C "$build" -j "$jobs" >"$work/ninja.txt" 2>&1; then
      opc="$build/opc"
      build_status="ok ($((SECONDS - t0)) s, $(gcc -dumpfullversion))"
      grep -E "Program protoc-c|Run-time dependency|Project version" "$work/meson-setup.txt"
    else
      tail -n 40 "$work/meson-setup.txt" "$work/ninja.txt" 2>/dev/null
      build_status="FAILED (log above)"
      opc="$(pwd)/.gpu-carry/bin/opc"
      echo "gpu_check: the build failed; going on with the carried $opc"
    fi
    echo "build: $build_status"
  fi
  if [ ! -x "$opc" ]; then
    echo "gpu_check: no opc to run"
    python3 tools/gpu/summary.py --build "$build_status; no opc"
    return 1
  fi
  "$opc" --version

  section "smoke test: test_relu with --target $target"
  local smoke="$work/smoke"
  rm -rf "$smoke" && mkdir -p "$smoke"
  local relu="$OPC_TESTDATA/node/test_relu"
  if "$opc" "$relu/model.onnx" -o "$smoke/net" --target "$target"; then
    ldd "$smoke/net" | grep -E "cudnn|cublas|cudart|nvrtc|libcuda|opcrt|openblas" || true
    "$smoke/net" --input "x=$relu/test_data_set_0/input_0.pb" --output "y=$smoke/y.npy" \
      && python3 -c "
import sys, numpy as np, onnx
from onnx import numpy_helper
t = onnx.TensorProto(); t.ParseFromString(open('$relu/test_data_set_0/output_0.pb', 'rb').read())
e = numpy_helper.to_array(t); g = np.load('$smoke/y.npy')
print('smoke: max abs difference %g' % float(np.abs(g - e).max()))"
  fi

  local conf_json="$work/conformance.json"
  rm -f "$conf_json"
  if [ "$skip_conformance" = 0 ]; then
    section "conformance: ONNX node tests, --target $target, strict fp32"
    # Leave ~100 s for the default model and the summary.
    local left=$((budget - SECONDS - 100))
    [ "$left" -lt 30 ] && left=30
    local only_args=()
    [ -n "$only" ] && only_args=(--only "$only")
    python3 tools/gpu/conformance_cuda.py --opc "$opc" --target "$target" \
      --data "$OPC_TESTDATA/node" --work "$work/conformance" --jobs "$jobs" \
      --gpu-jobs "$jobs" --deadline "$left" --summary-json "$conf_json" "${only_args[@]}" \
      > "$work/conformance.txt" 2>&1
    # The full list goes to its own file; here only what needs reading.
    grep -E "^(FAIL|PASS +[^ ]+: )" "$work/conformance.txt" | head -n 60
    tail -n 1 "$work/conformance.txt"
    [ -n "${OUT:-}" ] && cp "$work/conformance.txt" "$OUT/conformance-$target.txt"
  fi

  section "default model: squeezenet1_1, --target $target"
  local model_json="$work/default-model.json"
  rm -f "$model_json"
  python3 tools/gpu/default_model.py --opc "$opc" --target "$target" --runs "$runs" \
    --warmup 50 --work "$work/default-model" --json "$model_json"

  section "summary"
  local device
  device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 \
           | tr 'A-Z' 'a-z' | sed 's/^nvidia //; s/[^a-z0-9]\{1,\}/-/g; s/-$//')
  [ -z "$device" ] && device=$target
  python3 tools/gpu/summary.py --build "$build_status" --conformance "$conf_json" --model "$model_json"
  local status=$?
  echo "gpu_check: finished in $SECONDS s; save this log as bench/results/gpu-check-$(date -u +%Y-%m-%d)-$device.txt"
  return $status
}

check 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
