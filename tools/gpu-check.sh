#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and the build folder present (built elsewhere is fine):
# runs every GPU-labelled test (among them the kernel library's correctness sweep: each kernel on
# fresh random inputs at odd sizes against a double-precision CPU reference, and the tensor-core
# layout probes), the same tests under compute-sanitizer's memcheck, racecheck, synccheck and
# initcheck, the runtime benchmark and the kernel-library benchmark (with the PyTorch reference
# when python3 can import torch), then prints one summary. The sanitizer tools run beside the
# plain tests (they are mostly host work); the benchmarks run after both, alone on the GPU.
#   tools/gpu-check.sh [BUILD_DIR]      (default: build)
# Environment: GPU_CHECK_STEPS (default "tests sanitize bench") picks steps; GPU_CHECK_SANITIZE_S
# (default 300) bounds each sanitizer tool's run, which then counts as failed; GPU_CHECK_TESTS
# (a doctest -tc filter, default every GPU test) narrows the tests of both steps; GPU_CHECK_LIMIT_S
# (default 300) bounds each other program (a kernel that never finishes then fails the check,
# timeout's exit 124); GPU_CHECK_BENCH_ARGS (e.g. "--reps 15") goes to the kernel benchmark.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${OUT:-$build/gpu-check}
limit=${GPU_CHECK_LIMIT_S:-300}
steps=" ${GPU_CHECK_STEPS:-tests sanitize bench} "
filter=(-ts=gpu)
[ -n "${GPU_CHECK_TESTS:-}" ] && filter+=("-tc=$GPU_CHECK_TESTS")
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

# compute-sanitizer over the same tests, its four tools started now beside the plain tests and
# waited for before the benchmarks. A tool that reports an error, or that does not finish in
# time, fails the check.
san_rc=0
san_summary=""
if [[ $steps == *" sanitize "* ]]; then
  sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  if [ ! -x "$sanitizer" ]; then
    echo "error: compute-sanitizer not found"
    san_rc=1
    san_summary="  compute-sanitizer not found"$'\n'
  fi
  # The four tools run at once (each is mostly host work). The tests provoke failing driver calls
  # on purpose (an impossible allocation) and check them, so API errors are not reported.
  limit_s=${GPU_CHECK_SANITIZE_S:-300}
  declare -A pids
  if [ -x "$sanitizer" ]; then
    for tool in memcheck racecheck synccheck initcheck; do
      extra=()
      targs=("${filter[@]}")
      [ "$tool" = memcheck ] && extra=(--leak-check full)
      # racecheck does not order shared accesses by barrier.arrive -> barrier.sync, which PTX's
      # memory model makes a synchronization: it reports every reuse of the named-barrier probe's
      # ring slots, with or without predicated barriers (H200, 2026-11-30; docs/performance.md).
      [ "$tool" = racecheck ] && targs+=("-tce=*named barrier probe*")
      timeout "$limit_s" "$sanitizer" --tool "$tool" "${extra[@]}" --report-api-errors no --error-exitcode 97 \
        --print-limit 50 "$build/test/truenoc_tests" "${targs[@]}" > "$out/sanitize-$tool.log" 2>&1 &
      pids[$tool]=$!
    done
  fi
fi

tests_rc=0
if [[ $steps == *" tests "* ]]; then
  # With the runtime's extent checks on (truenort/Bundle.h), as the gpu-sim suite runs: every
  # launch's buffers against the templates' extents, through the real cuMemGetAddressRange.
  TRUENORT_CHECK_EXTENTS=1 timeout "$limit" "$build/test/truenoc_tests" "${filter[@]}" --duration=true 2>&1 |
    tee "$out/gpu-tests.log"
  tests_rc=${PIPESTATUS[0]}
  # Without a usable device every GPU test is skipped: that is a failed check, not a pass. The
  # simulator's own test cases skip themselves and still count as run, so the whole suite must
  # show H1, which every GPU runs.
  if grep -qE '^\[doctest\] test cases: +0 \|' "$out/gpu-tests.log" ||
    { [ -z "${GPU_CHECK_TESTS:-}" ] && ! grep -q ' s: gpu: H1 the bundle loads with zero JIT$' "$out/gpu-tests.log"; }; then
    echo "error: no GPU test ran (no usable CUDA device or driver here)"
    tests_rc=1
  fi
fi

if [[ $steps == *" sanitize "* ]]; then
  for tool in memcheck racecheck synccheck initcheck; do
    [ -n "${pids[$tool]:-}" ] || continue
    wait "${pids[$tool]}"
    rc=$?
    summary=$(grep -E '^========= (ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY)' "$out/sanitize-$tool.log" | tr '\n' ' ')
    tests=$(grep -E '^\[doctest\] test cases' "$out/sanitize-$tool.log" | sed 's/\[doctest\] //')
    case $rc in
      0) verdict="clean" ;;
      124) verdict="timed out after $limit_s s"; san_rc=1 ;;
      97) verdict="errors reported"; san_rc=1 ;;
      *) verdict="exit $rc"; san_rc=1 ;;
    esac
    san_summary+=$(printf '  %-10s %s; %s %s' "$tool" "$verdict" "$summary" "$tests")$'\n'
    grep -E '^========= (Invalid|Race|Barrier|Uninitialized|Error|Leaked|Program hit)' "$out/sanitize-$tool.log" |
      sort | uniq -c | sort -rn | head -5 | sed "s/^/  $tool: /"
  done
  # A tool stopped by its time limit can leave its test program running on the GPU: stop it
  # before anything is timed.
  pkill -f "$build/test/truenoc_tests" 2>/dev/null
fi

bench_rc=0
kbench_rc=0
merged=""
if [[ $steps == *" bench "* ]]; then
  timeout "$limit" "$build/bin/truenoc_bench_runtime" "$build/test/gpu_test.tnb" "$build/test/decode.tnb" "$build/test/decode_ptx.tnb" \
    "$build/test/decode_per_kernel.tnb" \
    --csv "$out/bench-runtime.csv" 2>&1 | tee "$out/bench-runtime.log"
  bench_rc=${PIPESTATUS[0]}

  # Kernel-library benchmark. The build makes its bundle; remake it if the spec or truenoc changed since.
  bundle="$build/bin/bench_kernels.tnb"
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
    timeout "$limit" "$build/bin/truenoc_bench_kernels" "$bundle" ${GPU_CHECK_BENCH_ARGS:-} --csv "$out/bench-kernels.csv" 2>&1 | tee "$out/bench-kernels.log"
    kbench_rc=${PIPESTATUS[0]}
  fi
  if [ -f "$out/bench-kernels.csv" ]; then
    if python3 -c 'import torch' 2>/dev/null; then
      timeout "$limit" python3 tools/bench/torch_ref.py "$out/bench-kernels.csv" -o "$out/bench-kernels-torch.csv" 2>&1 |
        grep -v 'no PyTorch equivalent' | tee "$out/torch-ref.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || kbench_rc=1
      [ -f "$out/bench-kernels-torch.csv" ] && merged="$out/torch-ref.log"
    else
      echo "torch_ref: python3 cannot import torch; no PyTorch column"
    fi
  fi
fi

echo
echo "== summary =="
[ -f "$out/gpu-tests.log" ] && printf '%-32s %s\n' "GPU tests" "$(grep -E '^\[doctest\] test cases' "$out/gpu-tests.log" | sed 's/\[doctest\] //') (exit $tests_rc)"
[ -n "$san_summary" ] && printf 'compute-sanitizer\n%s' "$san_summary"
[ -f "$out/bench-runtime.log" ] && grep -E '^(enqueue|launch|load|H11|bundle load)' "$out/bench-runtime.log" | sed 's/^/  /'
echo "benchmark exit $bench_rc; logs in $out"
echo
if [ -n "$merged" ]; then
  sed -n '/^op  /,/^GB\/s = /p' "$merged"
elif [ -f "$out/bench-kernels.log" ]; then
  sed -n '/^op  /,/^ref: /p' "$out/bench-kernels.log"
fi
echo "kernel benchmark exit $kbench_rc"
[ "$tests_rc" -eq 0 ] && [ "$san_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$kbench_rc" -eq 0 ]
