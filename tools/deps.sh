#!/usr/bin/env bash
# Installs the Debian packages truenoc needs, when run as root and when something is missing.
# Sourced by quickstart.sh and test.sh; safe to run repeatedly.
set -euo pipefail
pkgs=(cmake g++ make python3 libcli11-dev libtomlplusplus-dev doctest-dev libzstd-dev llvm-14-tools llvm-14-dev)
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
