#!/usr/bin/env bash
# README command 1: install what is missing, configure, build, and run the main job: compile the
# example spec examples/decode.toml into a bundle of cubins (ptxas, sm_80/86/89/90) and show it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"  # ptxas
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target truenoc
mkdir -p build/out
echo
echo "\$ truenoc build examples/decode.toml -o build/out/decode.tnb"
build/bin/truenoc build examples/decode.toml -o build/out/decode.tnb
echo "\$ truenoc inspect build/out/decode.tnb"
build/bin/truenoc inspect build/out/decode.tnb
