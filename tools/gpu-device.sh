#!/usr/bin/env bash
# Runs on the GPU machine, in the repository root, with build-gpu/ from tools/gpu-pack.sh beside
# it: puts the source and build folders where the binaries expect them (links to this copy), runs
# tools/gpu-check.sh with any arguments in the environment (GPU_CHECK_*), and leaves its console
# output and a tarball of its logs in $OUT (default /tmp/gpu-check-out).
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(sed -n 1p build-gpu/PATHS)
built=$(sed -n 2p build-gpu/PATHS)
if [ "$(cd "$src" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
  mkdir -p "$(dirname "$src")"
  ln -sfn "$PWD" "$src"
fi
[ -e "$built" ] || ln -sfn "$PWD/build-gpu" "$built"
if [ -d build-gpu/shared-quant ] && [ ! -d ../shared/testdata/quant ]; then
  mkdir -p ../shared/testdata && cp -r build-gpu/shared-quant ../shared/testdata/quant
fi
mkdir -p /tmp/gpu-deps
for lib in build-gpu/deps/*; do
  [ -e "$lib" ] && ! ldconfig -p | grep -qE "^[[:space:]]+$(basename "$lib") " && ln -sf "$PWD/$lib" /tmp/gpu-deps/
done
export LD_LIBRARY_PATH=/tmp/gpu-deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:${CUDA_HOME:-/usr/local/cuda}/bin
result=${OUT:-/tmp/gpu-check-out}
logs=/tmp/gpu-check
rm -rf "$logs"
mkdir -p "$result" "$logs"
OUT=$logs bash tools/gpu-check.sh "$built" 2>&1 | tee "$result/console.log"
rc=${PIPESTATUS[0]}
tar czf "$result/gpu-check.tgz" -C /tmp gpu-check
exit "$rc"
