#!/usr/bin/env bash
# Fuzz smoke run of the case reader: clang + libFuzzer + ASan/UBSan, from the committed seeds,
# a fixed number of executions (default 100000) with a fixed seed. Exit non-zero on any crash.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-100000}"
bash scripts/build.sh fuzz
corpus=build/fuzz/corpus
rm -rf "$corpus" && mkdir -p "$corpus" && cp conformance/fuzz_seeds/* "$corpus"/
build/fuzz/conformance/fuzz_case_reader -runs="$runs" -seed=1 -max_len=4096 -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
