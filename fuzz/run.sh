#!/usr/bin/env bash
# Builds and runs the fuzzers (docs/robustness.md, section Fuzzing) in build-fuzz/: clang,
# libFuzzer, ASan+UBSan, only the fuzz targets and the libraries they link.
#   fuzz/run.sh smoke [SECONDS]        every fuzzer over its seed corpus, then SECONDS (12) of
#                                      fuzzing each from the seeds, in one run each, one fuzzer
#                                      per CPU at a time (tools/test.sh runs this)
#   fuzz/run.sh NAME [SECONDS] [ARG..] fuzz NAME (tir, spec, bundle or runtime) for SECONDS (600),
#                                      growing build-fuzz/fuzz/corpus/NAME; ARGs go to libFuzzer
# Findings are saved as build-fuzz/fuzz/findings/NAME-crash-* (also -leak-, -timeout-, -oom-);
# replay one with build-fuzz/bin/fuzz_NAME FILE. Without clang or libFuzzer this is a skip, and
# an error when CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-fuzz
names=(tir spec bundle runtime)
mode=${1:-smoke}

cxx=$(command -v clang++-14 || command -v clang++ || true)
probe='extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }'
if [ -z "$cxx" ] || ! echo "$probe" | "$cxx" -x c++ -fsanitize=fuzzer,address,undefined -o /dev/null - 2>/dev/null; then
  why="clang++ with libFuzzer and the sanitizers (Debian: clang-14 libclang-rt-14-dev) is missing"
  if [ "${CI:-}" = true ]; then
    echo "fuzz: error: $why (CI=true)" >&2
    exit 1
  fi
  echo "fuzz: skipped: $why" >&2
  exit 0
fi

# CXX is read when the folder is first configured; later runs keep its compiler.
# TRUENOC_FUZZ_SEED_TRUENOC: a truenoc that builds the seed bundles (tools/test.sh passes the
# main build's), so that this folder need not compile the command line; empty: this folder's.
CXX="$cxx" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRUENOC_FUZZ=ON -DTRUENOC_TESTS=OFF \
  -DTRUENOC_FUZZ_SEED_TRUENOC="${TRUENOC_FUZZ_SEED_TRUENOC:-}" >/dev/null
cmake --build "$dir" --target fuzzers -j"$(nproc)"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
seeds_of() { if [ "$1" = runtime ]; then echo bundle; else echo "$1"; fi; }
mkdir -p "$dir/fuzz/findings"

# fuzz NAME SECONDS CORPUS_DIR [libFuzzer ARG..]: runs every input of CORPUS_DIR and the seeds,
# then fuzzes for SECONDS from them, adding new inputs to CORPUS_DIR; prints how many inputs ran.
# Its output goes to NAME's log; on failure it shows the end of the log and says whether an input
# already there failed (before libFuzzer's INITED line) or a new one.
fuzz() {
  local name=$1 seconds=$2 corpus=$3
  shift 3
  local args=(-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$dir/fuzz/findings/$name-")
  if [ -f "$dir/fuzz/$name.dict" ]; then args+=(-dict="$dir/fuzz/$name.dict"); fi
  mkdir -p "$corpus"
  local start=$SECONDS log="$dir/fuzz/$name.log" seeds="$dir/fuzz/seeds/$(seeds_of "$name")"
  if ! "$dir/bin/fuzz_$name" "${args[@]}" "$@" "$corpus" "$seeds" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    if grep -q 'INITED cov' "$log"; then
      echo "fuzz: fuzz_$name found a bug: its input is in $dir/fuzz/findings/ (full log: $log)" >&2
    else
      echo "fuzz: fuzz_$name fails on an input of $seeds or $corpus, saved in $dir/fuzz/findings/ (full log: $log)" >&2
    fi
    exit 1
  fi
  echo "fuzz: fuzz_$name: every seed passes; $(sed -n 's/^stat::number_of_executed_units: *//p' "$log") inputs in $((SECONDS - start)) s"
}

# each CMD..: runs `CMD.. NAME` for every fuzzer NAME, as many at once as there are CPUs (each
# one single-threaded), the slowest first (fuzz_spec: its seeds take most of the time) and the
# next as soon as one ends; then prints their output in the fuzzers' order; fails when one failed.
each() {
  local max=$(nproc) failed=0 name
  local -A running=() status=()  # pid -> fuzzer, fuzzer -> exit status
  reap() {
    local pid rc=0
    wait -n -p pid || rc=$?
    status[${running[$pid]}]=$rc
    unset "running[$pid]"
  }
  for name in spec tir bundle runtime; do
    while ((${#running[@]} >= max)); do reap; done
    "$@" "$name" >"$dir/fuzz/$name.out" 2>&1 &
    running[$!]=$name
  done
  while ((${#running[@]} > 0)); do reap; done
  for name in "${names[@]}"; do
    if [ "${status[$name]}" = 0 ]; then
      cat "$dir/fuzz/$name.out"
    else
      cat "$dir/fuzz/$name.out" >&2
      failed=1
    fi
  done
  return $failed
}

# Every seed, then SECONDS of fuzzing from them, with a fixed libFuzzer seed: CI explores the same
# inputs each time unless the code changes.
smoke() {
  rm -rf "$dir/fuzz/smoke/$1"
  fuzz "$1" "$seconds" "$dir/fuzz/smoke/$1" -seed="${TRUENOC_FUZZ_SEED:-1}"
}

if [ "$mode" = smoke ]; then
  seconds=${2:-12}
  each smoke
  exit 0
fi

case " ${names[*]} " in
  *" $mode "*) ;;
  *) echo "usage: fuzz/run.sh smoke [SECONDS] | fuzz/run.sh {${names[*]}} [SECONDS] [libFuzzer ARG..]" >&2; exit 2 ;;
esac
seconds=${2:-600}
shift $(( $# < 2 ? $# : 2 ))
fuzz "$mode" "$seconds" "$dir/fuzz/corpus/$mode" "$@"
