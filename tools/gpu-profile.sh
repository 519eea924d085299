#!/usr/bin/env bash
# Nsight Compute's report of one kernel launch of the kernel benchmark, for working on a ratio of
# docs/performance.md: the benchmark runs only the cases whose op starts with OP (one timed launch
# each), ncu profiles the launch of a kernel matching REGEX after SKIP earlier ones (each case
# makes 4: 3 warm-up, 1 timed). Clocks are left as they are (--clock-control none).
#   tools/gpu-profile.sh BUILD_DIR OP REGEX [SKIP]      (on the GPU machine; report on stdout)
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1 op=$2 regex=$3 skip=${4:-0}
ncu=$(command -v ncu || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ncu")
"$ncu" --clock-control none --kernel-name "regex:$regex" --launch-skip "$skip" --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
  --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis \
  "$build/bin/truenoc_bench_kernels" "$build/bin/bench_kernels.tnb" --only "$op" --reps 1
