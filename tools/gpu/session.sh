#!/bin/bash
# session.sh - the whole of one device call, run on the lent GPU machine from
# the repository root with .gpu-carry carried (tools/gpu/pack_opc.sh first):
#
#   1. the GPU check (gpu_check.sh --skip-build): the ONNX node tests with
#      --target cuda and the default model under every configuration,
#   2. more zoo models under the configurations the newer parts add: HIOS on
#      the one GPU (--gpus 1), programs for 2 and 4 GPUs with all their GPUs
#      on the one (OPC_GPU_MAP), HOPE's ILP partition and the forced
#      alternating one (--devices gpu,cpu), fp16 and bf16, each checked
#      against ONNX Runtime and timed (default_model.py),
#   3. a program for two GPUs, which must refuse to start on one unless
#      OPC_GPU_MAP says where its GPUs run,
#   4. the 16-bit programs of four zoo models against ONNX Runtime, then the
#      half-precision benchmark against PyTorch (bench_gpu.py: fp32, fp16
#      and bf16; eager, CUDA graph and torch.compile).
#
# usage: tools/gpu/session.sh check [--budget SECONDS]   steps 1-3 (default 330)
#        tools/gpu/session.sh bench [--budget SECONDS]   step 4 (default 300)
#        tools/gpu/session.sh zoo [--budget SECONDS]     the other zoo models on 2 and
#                                                        4 GPUs mapped to one, fp16, bf16
#        tools/gpu/session.sh int8                       issue 51's figures: int8
#                                                        ResNet-50 and MobileNetV2
#                                                        against fp16 and fp32
#                                                        (bench/int8/bench_int8_gpu.py)
# Two device calls, made back to back while the machine is warm, so that the
# second can be spent on what the first shows instead. Each step starts only
# while the budget lasts; every result goes to $OUT (at most 8 files a call:
# the device tool brings back no more).
set -u -o pipefail

part=${1:-}
budget=330
[ "$part" = bench ] && budget=300
[ "$part" = zoo ] && budget=200
[ "${2:-}" = "--budget" ] && budget=$3
out=${OUT:-/tmp/opc-gpu/out}
mkdir -p "$out" /tmp/opc-gpu
left() { echo $((budget - SECONDS)); }
# merge_json OUT FILE...: one JSON list of the files' objects.
merge_json() {
  python3 - "$@" <<'PY'
import json, sys
json.dump([json.load(open(f)) for f in sys.argv[2:]], open(sys.argv[1], "w"), indent=1)
PY
}

if [ "$part" = int8 ]; then
  . tools/gpu/env.sh
  python3 bench/int8/bench_int8_gpu.py --opc "$(pwd)/.gpu-carry/bin/opc" \
    --models resnet50,mobilenet_v2 --work /tmp/opc-gpu/int8
  echo "session: finished in $SECONDS s"
  exit
fi
if [ "$part" = bench ]; then
  . tools/gpu/env.sh
  opc="$(pwd)/.gpu-carry/bin/opc"
  # First the 16-bit programs on the zoo's models, checked against ONNX
  # Runtime: quick, and what the benchmark's opc rows rest on.
  for m in squeezenet1_1 googlenet inception_v3 efficientnet_b0; do
    python3 tools/gpu/default_model.py --opc "$opc" --model "$m" --configs lios,lios-fp16,lios-bf16 \
      --runs 100 --warmup 20 --work "/tmp/opc-gpu/half-$m"
  done 2>&1 | tee "$out/half-models.txt"
  python3 bench/gpu/bench_gpu.py --opc "$opc" \
    --models squeezenet1_1,googlenet,inception_v3,resnet50,mobilenet_v2,densenet121 \
    --schedulers lios --precisions fp32,fp16,bf16 --systems eager,cuda-graph,compile --zoo none \
    --runs 200 --warmup 30 --deadline $((budget - SECONDS - 60)) --compile-reserve 40 --tag half
  echo "session: finished in $SECONDS s"
  exit
fi
if [ "$part" = zoo ]; then
  # Every zoo model the check does not cover, under the configurations that
  # have run on few models or none on real CUDA: programs for 2 and 4 GPUs
  # on the one (OPC_GPU_MAP) and the 16-bit ones. Four models at a time on
  # the 16 cores: correctness is the point; their timings share the GPU and
  # the CPU and mean little.
  . tools/gpu/env.sh
  opc="$(pwd)/.gpu-carry/bin/opc"
  models=${ZOO_MODELS:-squeezenet1_0 squeezenet1_1 nasnet_a randwire resnet50 mobilenet_v2 densenet121 mobilenet_v3 shufflenet_v2 deeplabv3 torch_export_cnn swin bert_tiny}
  deadline=$(($(date +%s) + budget - 45))
  export opc deadline ZOO_TARGET ZOO_CONFIGS
  printf '%s\n' $models | xargs -P 4 -I{} sh -c '
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "== {}: not run (budget) =="; exit 0; fi
    python3 tools/gpu/default_model.py --opc "$opc" --model {} --target "${ZOO_TARGET:-cuda}" \
      --configs "${ZOO_CONFIGS:-lios,hios-2-on-1,hios-4-on-1,lios-fp16,lios-bf16}" --runs 20 --warmup 5 \
      --work /tmp/opc-gpu/zoo-{} --json /tmp/opc-gpu/zoo-{}.json > /tmp/opc-gpu/zoo-{}.txt 2>&1
    cat /tmp/opc-gpu/zoo-{}.txt' 2>&1 | tee "$out/zoo.txt"
  merge_json "$out/zoo.json" /tmp/opc-gpu/zoo-*.json
  echo "session: zoo finished in $SECONDS s"
  exit
fi
if [ "$part" != check ]; then
  echo "usage: $0 check|bench|zoo [--budget SECONDS]" >&2
  exit 1
fi

bash tools/gpu/gpu_check.sh --skip-build --budget $((budget * 64 / 100)) --runs 300

. tools/gpu/env.sh
opc="$(pwd)/.gpu-carry/bin/opc"
log="$out/models.txt"
{
  echo "== libraries the CPU units load =="
  ldconfig -p | grep -E "libopenblas|libdnnl|libgomp" || echo "(none of OpenBLAS, oneDNN, libgomp)"
  nproc
  for m in googlenet inception_v3 efficientnet_b0; do
    if [ "$(left)" -lt 40 ]; then
      echo "== $m: not run (budget) =="
      continue
    fi
    echo "== $m ($SECONDS s) =="
    python3 tools/gpu/default_model.py --opc "$opc" --model "$m" \
      --configs lios,sequential,hios,hios-2-on-1,hios-4-on-1,hope-ilp,hope-alternate,lios-fp16,lios-bf16 \
      --runs 100 --warmup 20 --work "/tmp/opc-gpu/model-$m" --json "/tmp/opc-gpu/model-$m.json"
  done
  merge_json "$out/models.json" /tmp/opc-gpu/model-*.json

  echo "== a program for two GPUs on this one-GPU machine ($SECONDS s) =="
  two=/tmp/opc-gpu/two
  mkdir -p "$two"
  python3 tools/models/build.py squeezenet1_1 -o "$two/m.onnx" --batch 1 --seed 0 &&
    "$opc" "$two/m.onnx" -o "$two/net" --target cuda --gpus 2 && {
      "$two/net" --bench 3 --warmup 1
      echo "exit status $? (expected: not 0, with a message naming the GPU count)"
      OPC_GPU_MAP=0,0 "$two/net" --bench 3 --warmup 1
      echo "exit status $? with OPC_GPU_MAP=0,0 (expected: 0)"
    }
} 2>&1 | tee "$log"

echo "session: finished in $SECONDS s"
