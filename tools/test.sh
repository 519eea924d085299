#!/usr/bin/env bash
# README command 2: build and run the whole test suite (doctest units + lit/FileCheck suite).
#   TRUENOC_SANITIZE=1 tools/test.sh   runs it under AddressSanitizer + UBSan (build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
dir=build
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${TRUENOC_SANITIZE:-0}" = 1 ]; then
  dir=build-asan
  args+=(-DTRUENOC_SANITIZE=ON)
fi
cmake -S . -B "$dir" "${args[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" --output-on-failure -V
