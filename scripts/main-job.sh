#!/usr/bin/env bash
# The main job: set up, build, run the fast self-checks, check the reference against every golden
# case exported from the official packages (lowbit conform), then prove the FP8 reference on every
# input: each (format, overflow policy) pair swept over all 2^32 float32 and all bf16 / f16 inputs
# against the independent checker. Reports land in reports/ as JSON and Markdown. Exit 0 only if
# everything conforms.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
mkdir -p reports
ctest --preset fast
lowbit=build/release/tools/lowbit/lowbit
"$lowbit" conform --report reports/conform.json
"$lowbit" sweep fp8 --format e4m3fn e5m2 --policy satfinite nan inf --from bf16 --report reports/sweep-fp8-bf16.json
"$lowbit" sweep fp8 --format e4m3fn e5m2 --policy satfinite nan inf --from f16 --report reports/sweep-fp8-f16.json
"$lowbit" sweep fp8 --format e4m3fn e5m2 --policy satfinite nan inf --from f32 --report reports/sweep-fp8-f32.json
echo "main job: all conformant; reports in reports/ (sweep-fp8-*, conform; JSON and Markdown)"
