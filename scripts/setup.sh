#!/usr/bin/env bash
# Installs what a fresh machine of this project's kind lacks, from Debian packages only.
# Idempotent: when everything is present it prints nothing and changes nothing.
set -euo pipefail

# No xtensor: nothing needs it. Block layouts (conformance/engine/cases/layout.cpp) are one line of integer
# arithmetic per mismatch; xtensor's lazy index map measured no faster, its unravel_index 18x slower,
# a materialized map 8 bytes per element, and case data (bytes of eight dtypes) does not adapt cleanly.
# ccache: the compiler cache every build compiles through (cmake/ccache.cmake, docs/testing.md).
packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev python3-venv python3-dev ccache
  libeigen3-dev libboost-dev doctest-dev libxsimd-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libomp-dev libssl-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
