#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and the build folder present (built elsewhere is fine):
# runs every GPU-labelled test, the runtime benchmark and the kernel-library benchmark (with the
# PyTorch reference when python3 can import torch), then prints one summary.
#   tools/gpu-check.sh [BUILD_DIR]      (default: build)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${OUT:-$build/gpu-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

"$build/test/truenoc_tests" -ts=gpu -s 2>&1 | tee "$out/gpu-tests.log"
tests_rc=${PIPESTATUS[0]}
# Without a usable device every GPU test is skipped: that is a failed check, not a pass.
if grep -qE '^\[doctest\] test cases: +0 \|' "$out/gpu-tests.log"; then
  echo "error: no GPU test ran (no usable CUDA device or driver here)"
  tests_rc=1
fi
"$build/bin/truenoc_bench_runtime" "$build/test/gpu_test.tnb" "$build/test/decode.tnb" "$build/test/decode_ptx.tnb" \
  --csv "$out/bench-runtime.csv" 2>&1 | tee "$out/bench-runtime.log"
bench_rc=${PIPESTATUS[0]}

# Kernel-library benchmark. The build makes its bundle; remake it if the spec or truenoc changed since.
bundle="$build/bin/bench_kernels.tnb"
kbench_rc=0
rm -f "$out/bench-kernels.csv" "$out/bench-kernels.log" "$out/bench-kernels-torch.csv" "$out/torch-ref.log"
if [ ! -f "$bundle" ] || [ tools/bench/kernels.toml -nt "$bundle" ] || [ "$build/bin/truenoc" -nt "$bundle" ]; then
  "$build/bin/truenoc" build tools/bench/kernels.toml -o "$bundle" 2>&1 | tee "$out/bench-kernels-build.log"
  kbench_rc=${PIPESTATUS[0]}
fi
# cuBLAS (the GEMV reference) is dlopen'ed; point at a copy outside the loader path if there is one.
if [ -z "${TRUENOC_CUBLAS:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
  for lib in "${CUDA_HOME:-/usr/local/cuda}"/lib64/libcublas.so.1[0-9] \
             $(python3 -c 'import nvidia.cublas as c; print(*c.__path__)' 2>/dev/null | sed 's|$|/lib/libcublas.so.1[0-9]|'); do
    if [ -f "$lib" ]; then export TRUENOC_CUBLAS="$lib"; break; fi
  done
fi
if [ "$kbench_rc" -eq 0 ]; then
  "$build/bin/truenoc_bench_kernels" "$bundle" --csv "$out/bench-kernels.csv" 2>&1 | tee "$out/bench-kernels.log"
  kbench_rc=${PIPESTATUS[0]}
fi
merged=""
if [ -f "$out/bench-kernels.csv" ]; then
  if python3 -c 'import torch' 2>/dev/null; then
    python3 tools/bench/torch_ref.py "$out/bench-kernels.csv" -o "$out/bench-kernels-torch.csv" 2>&1 | tee "$out/torch-ref.log"
    [ -f "$out/bench-kernels-torch.csv" ] && merged="$out/torch-ref.log"
  else
    echo "torch_ref: python3 cannot import torch; no PyTorch column"
  fi
fi

echo
echo "== summary =="
printf '%-32s %s\n' "GPU tests" "$(grep -E '^\[doctest\] test cases' "$out/gpu-tests.log" | sed 's/\[doctest\] //') (exit $tests_rc)"
grep -E '^(enqueue|launch|load|H11|bundle load)' "$out/bench-runtime.log" | sed 's/^/  /'
echo "benchmark exit $bench_rc; logs in $out"
echo
if [ -n "$merged" ]; then
  sed -n '/^op  /,/^GB\/s = /p' "$merged"
elif [ -f "$out/bench-kernels.log" ]; then
  sed -n '/^op  /,/^ref: /p' "$out/bench-kernels.log"
fi
echo "kernel benchmark exit $kbench_rc"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$kbench_rc" -eq 0 ]
