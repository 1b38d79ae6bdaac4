#!/usr/bin/env bash
# Every test: set up, build, run all CTest suites including the slow exhaustive float32 sweeps,
# then rebuild with AddressSanitizer + UndefinedBehaviorSanitizer and run the fast suites again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
ctest --preset release
bash scripts/build.sh sanitize
ctest --preset sanitize
