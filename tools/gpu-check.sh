#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and the build folder present (built elsewhere is fine):
# runs every GPU-labelled test and the runtime benchmark, then prints one summary table.
#   tools/gpu-check.sh [BUILD_DIR]      (default: build)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${OUT:-$build/gpu-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

"$build/test/truenoc_tests" -ts=gpu -s 2>&1 | tee "$out/gpu-tests.log"
tests_rc=${PIPESTATUS[0]}
"$build/bin/truenoc_bench_runtime" "$build/test/gpu_test.tnb" "$build/test/decode.tnb" "$build/test/decode_ptx.tnb" \
  --csv "$out/bench-runtime.csv" 2>&1 | tee "$out/bench-runtime.log"
bench_rc=${PIPESTATUS[0]}

echo
echo "== summary =="
printf '%-32s %s\n' "GPU tests" "$(grep -E '^\[doctest\] test cases' "$out/gpu-tests.log" | sed 's/\[doctest\] //') (exit $tests_rc)"
grep -E '^(enqueue|launch|load|H11|bundle load)' "$out/bench-runtime.log" | sed 's/^/  /'
echo "benchmark exit $bench_rc; logs in $out"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
