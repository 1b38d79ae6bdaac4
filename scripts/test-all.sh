#!/usr/bin/env bash
# Every test: set up, build, run all CTest suites including the slow exhaustive float32 sweeps;
# then the fast suites again under AddressSanitizer + UndefinedBehaviorSanitizer, and a fuzz smoke
# run of the case reader (100 000 executions, clang + libFuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-crosscheck.sh || echo "test-all: no safetensors package; its cross-check will report itself skipped" >&2
bash scripts/build.sh release
ctest --preset release
bash scripts/build.sh sanitize
ctest --preset sanitize
bash scripts/fuzz-smoke.sh 100000
