#!/bin/bash
# issue52.sh - issue 52's GPU benchmark as one device call of under 10
# minutes, run on the lent GPU machine from the repository root with
# .gpu-carry carried (tools/gpu/pack_opc.sh first):
#
#   1. the serving program of two zoo models (ResNet-50 and SqueezeNet 1.1)
#      against independent contexts under a bounded Poisson load: K = 1 and
#      2, a light and a heavy mix, 5 s each (bench_throughput.py, at most
#      TP_BUDGET = 90 s; runs that would end later are marked, not run);
#   2. bench_gpu.py with the rest of the budget: seven torchvision exports
#      and the zoo's seven networks beside their torchvision peers, opc
#      (lios) in fp32, tf32, fp16 and bf16 against PyTorch eager, CUDA graph,
#      torch.compile reduce-overhead and max-autotune. The slow compiles come
#      last and take what is left (fp16 first), max-autotune keeps 150 s and
#      each of its steps stops at 75 s; whatever does not fit is a row
#      marked "not run" or "timed out".
#
# usage: bash tools/gpu/issue52.sh [main] [--budget SECONDS]   (default 540)
#        bash tools/gpu/issue52.sh rest [--budget SECONDS]     (default 150)
#        bash tools/gpu/issue52.sh --fake main|rest [--budget SECONDS]
#
# Expected duration: main takes its budget, 540 s (+ about 10 s to stop),
# so run it with the device tool's timeout_s 600. `rest`, on the same warm
# machine if device time is left, redoes the torch.compile steps main
# marked "not run" or "timed out" and merges the two into one report.
# Results in $OUT: gpu-bench-DATE-DEVICE-issue52{,-rest,-merged}.{md,json},
# throughput-DATE-cuda.{md,json}, issue52-*.txt (the logs): at most 8 files.
#
# --fake runs it here, without a GPU: the stand-in torch of bench/gpu/fake,
# opc's programs for the CPU runtime, the models ISSUE52_MODELS and
# ISSUE52_ZOO (default squeezenet1_1 each) and the CPU runtime's mixes.
set -u -o pipefail

fake=0
if [ "${1:-}" = "--fake" ]; then
  fake=1
  shift
fi
part=${1:-main}
[ $# -gt 0 ] && shift
budget=540
[ "$part" = rest ] && budget=150
if [ "${1:-}" = "--budget" ]; then
  budget=$2
fi
if [ "$part" != main ] && [ "$part" != rest ]; then
  echo "usage: $0 [--fake] main|rest [--budget SECONDS]" >&2
  exit 2
fi

out=${OUT:-/tmp/opc-gpu/out}
keep=/tmp/opc-gpu/issue52 # survives between calls on a warm machine
mkdir -p "$out" "$keep"
models=resnet50,mobilenet_v2,efficientnet_b0,inception_v3,densenet121,googlenet,squeezenet1_1
zoo=resnet50,mobilenet_v2,efficientnet_b0,inception_v3,densenet121,googlenet,squeezenet1_1
tp_budget=90
if [ $fake = 1 ]; then
  opc=${OPC:-$(pwd)/build/opc}
  target=cpu
  PYTHONPATH="$(pwd)/bench/gpu/fake${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
  models=${ISSUE52_MODELS:-squeezenet1_1}
  zoo=${ISSUE52_ZOO:-squeezenet1_1}
  tp=(--target cpu --models squeezenet1_1 --mixes light --instances 1 --duration 2)
  fake_args=(--opc-target cpu --jobs 2 --runs 5 --warmup 1)
  tp_budget=60
else
  . tools/gpu/env.sh
  opc="$(pwd)/.gpu-carry/bin/opc"
  target=cuda
  # shellcheck disable=SC2054 # the commas are bench_throughput.py's lists
  tp=(--target cuda --models resnet50,squeezenet1_1 --mixes light,heavy --instances 1,2 --duration 5)
  fake_args=(--runs 200 --warmup 30)
fi
left() { echo $((budget - SECONDS)); }
echo "issue52: $part, budget $budget s, opc $opc, target $target"

if [ "$part" = main ]; then
  echo "== the serving program against independent contexts ($SECONDS s) =="
  timeout -k 5 $((tp_budget + 30)) python3 bench/throughput/bench_throughput.py --opc "$opc" "${tp[@]}" \
    --budget $tp_budget --work /tmp/opc-gpu/throughput \
    -o "$out/throughput-$(date -u +%F)-$target.md" > "$out/issue52-throughput.txt" 2>&1
  echo "bench_throughput: exit $?"
  tail -n 12 "$out/issue52-throughput.txt"

  echo "== opc against PyTorch ($SECONDS s, $(left) s left) =="
  deadline=$(($(left) - 15))
  timeout -k 5 $((deadline + 40)) python3 bench/gpu/bench_gpu.py --opc "$opc" "${fake_args[@]}" \
    --models "$models" --zoo "$zoo" --schedulers lios --precisions fp32,tf32,fp16,bf16 \
    --systems eager,cuda-graph,compile,max-autotune --autotune-reserve 150 --autotune-cap 75 \
    --deadline $deadline --tag issue52 > "$out/issue52-bench.txt" 2>&1
  echo "bench_gpu: exit $?"
  grep -E "^bench_gpu: (phase|models prepared|FAILED)|Traceback|Error" "$out/issue52-bench.txt" | head -n 40
  cp "$out"/gpu-bench-*-issue52.json "$keep/" 2>/dev/null
  echo "issue52: main finished in $SECONDS s"
  exit 0
fi

# rest: the torch.compile steps main left, for the models and precisions it
# left them in; merged with main's report (kept in $keep on the warm machine).
main_json=$(ls -t "$keep"/gpu-bench-*-issue52.json 2>/dev/null | head -n 1)
if [ -z "$main_json" ]; then
  echo "issue52 rest: no main report in $keep (run main first, on this machine)" >&2
  exit 1
fi
read -r rest_models rest_precisions < <(python3 - "$main_json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
left = [r for r in rows if r["system"].startswith("torch.compile")
        and r["status"] in ("not run", "timed out")]
models = sorted({r["model"] for r in left})
precisions = [p for p in ("fp16", "fp32", "bf16", "tf32") if any(r["precision"] == p for r in left)]
print(",".join(models) or "-", ",".join(precisions) or "-")
PY
)
if [ "$rest_models" = "-" ]; then
  echo "issue52 rest: main left no torch.compile step"
  exit 0
fi
echo "issue52 rest: $rest_models in $rest_precisions"
deadline=$(($(left) - 10))
timeout -k 5 $((deadline + 30)) python3 bench/gpu/bench_gpu.py --opc "$opc" "${fake_args[@]}" \
  --models "$rest_models" --zoo none --schedulers none --precisions "$rest_precisions" \
  --systems compile,max-autotune --autotune-reserve 60 --autotune-cap 75 --compile-reserve 20 \
  --deadline $deadline --tag issue52-rest > "$out/issue52-rest.txt" 2>&1
echo "bench_gpu: exit $?"
rest_json=$(ls -t "$out"/gpu-bench-*-issue52-rest.json | head -n 1)
python3 bench/gpu/bench_gpu.py --merge "$main_json" "$rest_json" \
  -o "${rest_json%-rest.json}-merged.md" | tail -n 25
echo "issue52: rest finished in $SECONDS s"
