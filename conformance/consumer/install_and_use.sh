#!/usr/bin/env bash
# CTest install_consumer: `cmake --install` this build into a temporary prefix, build the consumer
# project beside this script against it (find_package(lowbit)) and run it, then run the installed
# lowbit from another working directory, holding files named like shipped policies that must not
# replace them, with policies given by name and the default golden folder.
# Usage: install_and_use.sh CMAKE BUILD_DIR CONSUMER_SOURCE GENERATOR CXX [COMPILER_LAUNCHER]
set -euo pipefail
cmake=$1 build=$2 consumer=$3 generator=$4 cxx=$5 launcher=${6:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

quietly() {  # run a step, showing its output only when it fails
  "$@" >"$tmp/step.log" 2>&1 || { cat "$tmp/step.log"; echo "install_consumer: failed: $*" >&2; return 1; }
}

quietly "$cmake" --install "$build" --prefix "$prefix"
quietly "$cmake" -S "$consumer" -B "$tmp/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"}
quietly "$cmake" --build "$tmp/build"
"$tmp/build/lowbit_consumer"

mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
echo 'not a policy' >bnb-cuda
echo 'not a policy' >torch-cpu-eager
lowbit=$prefix/bin/lowbit
# sed reads to the end: head would exit early and sort, still writing, would die of SIGPIPE (pipefail)
golden=$(find "$prefix/share/lowbit/golden/bnb" -name '*.safetensors' | sort | sed -n 1p)
"$lowbit" compare "$golden" "$golden" --policy bnb-cuda | tee "$tmp/compare.out"
grep -q '^conformant: .*, policy bnb-cuda$' "$tmp/compare.out"
# The default golden folder (shipped) and the format's default policy (torch-cpu-eager, shipped).
"$lowbit" conform --format bnb.adam8bit.cpu | tee "$tmp/conform.out"
grep -q 'torch-cpu-eager' "$tmp/conform.out"
echo "install_consumer: the installed libraries, headers, package config, policies and golden cases work"
