#!/usr/bin/env bash
# README command 1: install what is missing, configure, build, and run the main job:
# compile the example kernels to PTX for sm_80 and sm_90 and assemble each with ptxas.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target truenoc
ptxas=$(command -v ptxas || true)
[ -n "$ptxas" ] || ptxas=${CUDA_HOME:-/usr/local/cuda}/bin/ptxas
mkdir -p build/out
echo
for example in examples/*.tir; do
  name=$(basename "$example" .tir)
  for target in sm_80 sm_90; do
    ptx=build/out/$name.$target.ptx
    build/bin/truenoc emit-ptx "$example" --target "$target" -o "$ptx"
    line="$ptx ($(wc -l < "$ptx") lines)"
    if [ -x "$ptxas" ]; then
      "$ptxas" -arch="$target" -v -o "build/out/$name.$target.cubin" "$ptx" 2> "build/out/$name.$target.log"
      usage=$(grep -o 'Used [0-9]* registers.*' "build/out/$name.$target.log" | head -1)
      line="$line -> build/out/$name.$target.cubin ($(wc -c < "build/out/$name.$target.cubin") bytes; $usage)"
    fi
    echo "$line"
  done
done
