#!/usr/bin/env bash
# Builds and runs the fuzzers (docs/robustness.md, section Fuzzing) in build-fuzz/: clang,
# libFuzzer, ASan+UBSan, only the fuzz targets and the libraries they link.
#   fuzz/run.sh smoke [SECONDS]        every fuzzer over its seed corpus, then SECONDS (12) of
#                                      fuzzing each from the seeds (tools/test.sh runs this)
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
CXX="$cxx" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRUENOC_FUZZ=ON -DTRUENOC_TESTS=OFF >/dev/null
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

if [ "$mode" = smoke ]; then
  seconds=${2:-12}
  for name in "${names[@]}"; do
    # The seeds alone first, so that a failing seed is reported as such.
    logged "$name" "fails on a seed of $dir/fuzz/seeds/$(seeds_of "$name")" \
      "$dir/bin/fuzz_$name" -runs=0 "$dir/fuzz/seeds/$(seeds_of "$name")"
    echo "fuzz: fuzz_$name: every seed passes"
  done
  for name in "${names[@]}"; do
    rm -rf "$dir/fuzz/smoke/$name"
    # A fixed libFuzzer seed: CI explores the same inputs each time unless the code changes.
    fuzz "$name" "$seconds" "$dir/fuzz/smoke/$name" -seed="${TRUENOC_FUZZ_SEED:-1}"
  done
  exit 0
fi

case " ${names[*]} " in
  *" $mode "*) ;;
  *) echo "usage: fuzz/run.sh smoke [SECONDS] | fuzz/run.sh {${names[*]}} [SECONDS] [libFuzzer ARG..]" >&2; exit 2 ;;
esac
seconds=${2:-600}
shift $(( $# < 2 ? $# : 2 ))
fuzz "$mode" "$seconds" "$dir/fuzz/corpus/$mode" "$@"
