#!/usr/bin/env bash
# README command 2: build and run the whole test suite (doctest units + lit/FileCheck suite), then
# the fuzzers' smoke test (fuzz/run.sh: a clang ASan+UBSan build in build-fuzz/, under a minute of
# fuzzing; docs/robustness.md, section Fuzzing).
#   TRUENOC_SANITIZE=1 tools/test.sh   runs the suite under AddressSanitizer + UBSan (build-asan/).
#   TRUENOC_FUZZ=0 tools/test.sh       leaves the fuzzers out (not in CI).
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
# The five ctest entries (unit, gpu-sim, python-install, python, lit) side by side; -V prefixes
# every line of output with its test's number.
ctest --test-dir "$dir" --output-on-failure -V -j"$(nproc)"
if [ "${TRUENOC_FUZZ:-1}" = 0 ] && [ "${CI:-}" != true ]; then
  echo "truenoc: fuzz smoke test left out (TRUENOC_FUZZ=0)" >&2
else
  # The seed bundles come from this build's truenoc: the fuzz build compiles no command line.
  TRUENOC_FUZZ_SEED_TRUENOC="$PWD/$dir/bin/truenoc" bash fuzz/run.sh smoke
fi
