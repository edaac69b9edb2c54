#!/usr/bin/env bash
# End-to-end zoo test: build a model, make an onnxruntime reference, compile
# it with opc, run the executable and compare every output.
#
#   run_zoo_test.sh NAME BATCH OPC_BIN WORKDIR [extra opc flags...]
#
# Environment:
#   OPC_ZOO_SEED        input seed (default: $RANDOM; always printed)
#   OPC_ZOO_MODEL_SEED  weight seed passed to build.py --seed (default 0)
#   OPC_ZOO_PRECISION   the bounds of tests/zoo/compare.py to hold the outputs
#                       to: fp32 (default), tf32, fp16 or bf16
#   OPC_ZOO_TARGET      value of opc --target (default cpu)
#   OPC_ZOO_TIMEOUT     seconds allowed for opc and for the run (default 900)
#   PYTHON              python interpreter (default python3)
#
# Contract used (opc):
#   $OPC_BIN WORKDIR/model.onnx -o WORKDIR/net --target cpu [extra flags]
#   WORKDIR/net --input NAME=in.npy ... --output NAME=out.npy ...
# Exit status 0 only if every output matches.

set -u -o pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 NAME BATCH OPC_BIN WORKDIR [extra opc flags...]" >&2
    exit 2
fi

name=$1
batch=$2
opc=$3
workdir=$4
shift 4

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PYTHON:-python3}
seed=${OPC_ZOO_SEED:-$RANDOM}
mseed=${OPC_ZOO_MODEL_SEED:-0}
precision=${OPC_ZOO_PRECISION:-fp32}
target=${OPC_ZOO_TARGET:-cpu}
tmo=${OPC_ZOO_TIMEOUT:-900}

mkdir -p "$workdir" || exit 2
work=$(cd "$workdir" && pwd)
tag="zoo[$name b=$batch seed=$seed model_seed=$mseed]"

echo "$tag: input seed $seed (reproduce with OPC_ZOO_SEED=$seed OPC_ZOO_MODEL_SEED=$mseed)"

fail() {
    echo "$tag: FAIL: $*"
    exit 1
}

# optional timeout wrapper
if command -v timeout >/dev/null 2>&1; then
    tm=(timeout "$tmo")
else
    tm=()
fi

case $opc in
    */*) [ -x "$opc" ] || fail "opc binary '$opc' not found or not executable" ;;
    *) command -v "$opc" >/dev/null 2>&1 || fail "opc binary '$opc' not found" ;;
esac

# 1. model (a build product; not committed)
"$py" "$root/tools/models/build.py" "$name" -o "$work/model.onnx" \
    --batch "$batch" --seed "$mseed" || fail "build.py $name failed"

# 2. reference
rm -rf "$work/ref"
"$py" "$here/reference.py" "$work/model.onnx" --seed "$seed" --outdir "$work/ref" \
    || fail "reference.py failed"

# 3. compile
rm -f "$work/net"
echo "$tag: $opc $work/model.onnx -o $work/net --target $target $*"
"${tm[@]}" "$opc" "$work/model.onnx" -o "$work/net" --target "$target" "$@"
rc=$?
[ $rc -eq 0 ] || fail "opc exited with status $rc"
[ -x "$work/net" ] || fail "opc did not produce an executable $work/net"

# 4. run
args=()
while IFS= read -r line || [ -n "$line" ]; do
    [ -n "$line" ] && args+=(--input "$line")
done < "$work/ref/inputs.txt"
names=()
refs=()
gots=()
k=0
while IFS= read -r line || [ -n "$line" ]; do
    [ -n "$line" ] || continue
    oname=${line%%=*}
    names+=("$oname")
    refs+=("${line#*=}")
    gots+=("$work/got_$k.npy")
    rm -f "$work/got_$k.npy"
    args+=(--output "$oname=$work/got_$k.npy")
    k=$((k + 1))
done < "$work/ref/outputs.txt"

echo "$tag: $work/net ${args[*]}"
"${tm[@]}" "$work/net" "${args[@]}"
rc=$?
[ $rc -eq 0 ] || fail "net exited with status $rc"

# 5. compare
status=0
for i in "${!names[@]}"; do
    if [ ! -f "${gots[$i]}" ]; then
        echo "FAIL ${names[$i]}: net did not write ${gots[$i]}"
        status=1
        continue
    fi
    "$py" "$here/compare.py" "${refs[$i]}" "${gots[$i]}" --precision "$precision" \
        --baseline "$work/ref/baseline_$i.npy" \
        --name "${names[$i]}" || status=1
done

if [ $status -eq 0 ]; then
    echo "$tag: PASS (${#names[@]} output(s), $precision bounds)"
else
    fail "output mismatch ($precision bounds)"
fi
exit 0
