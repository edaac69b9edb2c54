#!/bin/sh
# The README's first command: set up, build, compile the default model with
# opc for the CPU runtime and run it.
set -eu
cd "$(dirname "$0")/.."
sh tools/setup.sh
[ -f build/build.ninja ] || { rm -rf build && meson setup build; }
ninja -C build
model=build/models/squeezenet1_1.onnx
mkdir -p build/models
python3 tools/models/build.py squeezenet1_1 -o "$model"
./build/opc "$model" -o build/models/squeezenet1_1 --target cpu --report
./build/models/squeezenet1_1 --output "$(./build/opc --dump-ir "$model" | awk '/^output/ {sub(/^%/, "", $2); print $2; exit}')=build/models/squeezenet1_1.out.npy" --bench 20 --warmup 3
echo "main job: compiled $model, ran it, wrote build/models/squeezenet1_1.out.npy"
