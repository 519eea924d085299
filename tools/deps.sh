#!/usr/bin/env bash
# Installs the Debian packages truenoc needs, when run as root and when something is missing.
# Sourced by quickstart.sh and test.sh; safe to run repeatedly.
set -euo pipefail
pkgs=(cmake g++ make python3 python3-dev python3-venv libcli11-dev libtomlplusplus-dev doctest-dev libzstd-dev llvm-14-tools
      clang-14 libclang-rt-14-dev)  # the last two: the fuzzers (fuzz/run.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "truenoc: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "truenoc: missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi
if ! command -v ptxas >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/ptxas ] && [ -z "${CUDA_HOME:-}" ]; then
  echo "truenoc: note: ptxas (CUDA toolkit) not found; PTX will not be assembled" >&2
fi
# nvdisasm reads the cubins in the lit tests that check machine code; not every CUDA toolkit has
# it, so when none is found it comes from PyPI (nvidia-cuda-nvdisasm) into a folder of its own,
# the one lit-tests/lit.cfg.py looks in.
tools_dir="${XDG_CACHE_HOME:-$HOME/.cache}/truenoc/tools"
if ! command -v nvdisasm >/dev/null 2>&1 && [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvdisasm" ] &&
  [ ! -x "$tools_dir/bin/nvdisasm" ]; then
  echo "truenoc: installing nvdisasm (PyPI nvidia-cuda-nvdisasm) into $tools_dir" >&2
  if PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
    --target "$tools_dir/pip" nvidia-cuda-nvdisasm; then
    mkdir -p "$tools_dir/bin"
    ln -sf "$(ls "$tools_dir"/pip/nvidia/*/bin/nvdisasm | head -n 1)" "$tools_dir/bin/nvdisasm"
  else
    echo "truenoc: note: nvdisasm could not be installed; the machine-code lit tests will not run" >&2
  fi
fi
