#!/usr/bin/env bash
# Packs what tools/gpu-check.sh needs from a build into build-gpu/ (binaries stripped, about
# 25 MB), for a machine with a GPU that receives the repository and that folder but not the build
# (the lent H100 of docs/status.md). tools/gpu-device.sh runs the check there.
#   cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release && cmake --build build-rel -j2
#   tools/gpu-pack.sh [BUILD_DIR]      (default: build-rel)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build-rel}" && pwd)
pack=build-gpu
rm -rf "$pack"
mkdir -p "$pack"
(cd "$build" && find bin lib test -path '*/CMakeFiles' -prune -o -type f \
   \( -name '*.tnb' -o -name '*.so' -o -name truenoc_tests -o -path 'bin/*' \) -print) |
  while read -r f; do
    mkdir -p "$pack/$(dirname "$f")"
    cp -p "$build/$f" "$pack/$f"
  done
for f in "$pack"/bin/* "$pack"/lib/*.so "$pack"/test/*.so "$pack"/test/truenoc_tests; do
  case $f in *.tnb) continue ;; esac
  strip "$f"
done
# Shared libraries from this machine's packages (toml++, zstd) that the GPU machine may lack;
# tools/gpu-device.sh puts those it has no copy of on the loader's path.
mkdir -p "$pack/deps"
ldd "$pack"/test/truenoc_tests "$pack"/bin/truenoc "$pack"/bin/truenoc_bench_* | awk '/=> \// {print $3}' |
  grep -E 'libtomlplusplus|libzstd' | sort -u | xargs -r cp -L -t "$pack/deps"
# Stripping made the programs newer than the bundles, which gpu-check.sh would then rebuild.
find "$pack" -name '*.tnb' -exec touch {} +
# The binaries name the source and build folders by the absolute paths they were built with.
printf '%s\n%s\n' "$PWD" "$build" > "$pack/PATHS"
# The quant tests read ggml's test vectors beside the source tree (../shared/testdata/quant).
[ -d ../shared/testdata/quant ] && cp -r ../shared/testdata/quant "$pack/shared-quant"
du -sh "$pack"
