#!/usr/bin/env bash
# Builds and runs the fuzzers (docs/robustness.md, section Fuzzing) in build-fuzz/: clang,
# libFuzzer, ASan+UBSan, only the fuzz targets and the libraries they link.
#   fuzz/run.sh smoke [SECONDS]        every fuzzer over its seed corpus, then SECONDS (12) of
#                                      fuzzing each from the seeds, one fuzzer per CPU at a time
#                                      (tools/test.sh runs this)
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

# logged NAME WHAT CMD..: runs CMD with its output in NAME's log; on failure shows the end of the
# log and says WHAT happened.
logged() {
  local name=$1 what=$2
  shift 2
  if ! "$@" >"$dir/fuzz/$name.log" 2>&1; then
    tail -n 60 "$dir/fuzz/$name.log" >&2
    echo "fuzz: fuzz_$name $what (full log: $dir/fuzz/$name.log)" >&2
    exit 1
  fi
}

# fuzz NAME SECONDS CORPUS_DIR [libFuzzer ARG..]: fuzzes from CORPUS_DIR and the seeds, adding
# new inputs to CORPUS_DIR; prints how many inputs ran.
fuzz() {
  local name=$1 seconds=$2 corpus=$3
  shift 3
  local args=(-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$dir/fuzz/findings/$name-")
  if [ -f "$dir/fuzz/$name.dict" ]; then args+=(-dict="$dir/fuzz/$name.dict"); fi
  mkdir -p "$corpus"
  local start=$SECONDS
  logged "$name" "found a bug: its input is in $dir/fuzz/findings/" \
    "$dir/bin/fuzz_$name" "${args[@]}" "$@" "$corpus" "$dir/fuzz/seeds/$(seeds_of "$name")"
  echo "fuzz: fuzz_$name: $(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz/$name.log") inputs in $((SECONDS - start)) s"
}

# each CMD..: runs `CMD.. NAME` for every fuzzer NAME, as many at once as there are CPUs (each
# one single-threaded), then prints their output in the fuzzers' order; fails when one failed.
each() {
  local batch=$(nproc) failed=0 i j
  for ((i = 0; i < ${#names[@]}; i += batch)); do
    local pids=()
    for ((j = i; j < i + batch && j < ${#names[@]}; ++j)); do
      "$@" "${names[j]}" >"$dir/fuzz/${names[j]}.out" 2>&1 &
      pids+=($!)
    done
    for ((j = i; j < i + batch && j < ${#names[@]}; ++j)); do
      if wait "${pids[j - i]}"; then
        cat "$dir/fuzz/${names[j]}.out"
      else
        cat "$dir/fuzz/${names[j]}.out" >&2
        failed=1
      fi
    done
  done
  return $failed
}

# The seeds alone, so that a failing seed is reported as such.
check_seeds() {
  logged "$1" "fails on a seed of $dir/fuzz/seeds/$(seeds_of "$1")" \
    "$dir/bin/fuzz_$1" -runs=0 "$dir/fuzz/seeds/$(seeds_of "$1")"
  echo "fuzz: fuzz_$1: every seed passes"
}

# SECONDS of fuzzing from the seeds, with a fixed libFuzzer seed: CI explores the same inputs
# each time unless the code changes.
smoke() {
  rm -rf "$dir/fuzz/smoke/$1"
  fuzz "$1" "$seconds" "$dir/fuzz/smoke/$1" -seed="${TRUENOC_FUZZ_SEED:-1}"
}

if [ "$mode" = smoke ]; then
  seconds=${2:-12}
  each check_seeds
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
