#!/usr/bin/env bash
# Every test: set up, build, run all CTest suites including the slow exhaustive float32 sweeps;
# then the fast suites again under AddressSanitizer + UndefinedBehaviorSanitizer, and a fuzz smoke
# run (clang + libFuzzer): the case reader (100 000 executions) and the pipeline fuzzers (inspect,
# compare, conform), and the Python DCP-folder reader's mutation loop (scripts/fuzz-smoke.sh); between them the Python package (docs/python.md): built
# into .venv by scripts/setup-python.sh, its pytest suite run. Ends with one line: "test-all: N passed,
# N failed" (CTest tests of both runs, the pytest tests, each fuzz target and the seed check), or the
# stage that failed.
set -euo pipefail
cd "$(dirname "$0")/.."

stage=setup
trap 'echo "test-all: FAILED in stage $stage"' ERR
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Runs one CTest preset and adds its counts ("100% tests passed, 0 tests failed out of 14").
count_ctest() {
  local line total fails
  line=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "$log" | tail -n 1)
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  fails=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
  passed=$((passed + total - fails))
  failed=$((failed + fails))
}

# Adds pytest's counts from its last line ("52 passed, 9 skipped in 41.2s"; failures and errors fail).
count_pytest() {
  local line n
  line=$(grep -E "^[0-9]+ (passed|failed|skipped|error)" "$log" | tail -n 1)
  for kind in passed failed error errors; do
    n=$(grep -oE "[0-9]+ $kind\b" <<<"$line" | grep -oE "^[0-9]+" || true)
    n=${n:-0}
    case $kind in passed) passed=$((passed + n)) ;; *) failed=$((failed + n)) ;; esac
  done
  echo "test-all: python: $line"
}

bash scripts/setup.sh
bash scripts/setup-crosscheck.sh || echo "test-all: no safetensors package; its cross-check will report itself skipped" >&2
bash scripts/setup-bnb-cpu.sh >/dev/null ||
  echo "test-all: no bitsandbytes CPU library; test_bnb_cpu_verify will report itself skipped" >&2
stage="release build"
bash scripts/build.sh release
stage="release tests"
ctest --preset release 2>&1 | tee "$log"
count_ctest
stage="python package"
bash scripts/setup-python.sh
stage="python tests"
# -rs lists each skipped test with its reason (torch, torchao or bitsandbytes missing); pytest exits
# 5 when it collected no test, which fails this stage like any other failure
.venv/bin/python -m pytest python/tests -q -rs -p no:cacheprovider 2>&1 | tee "$log"
count_pytest
stage="sanitizer build"
bash scripts/build.sh sanitize
stage="sanitizer tests"
# the sanitizer suites are single-threaded and keep their files apart (per-process names): run them side by side
ctest --preset sanitize -j "$(nproc)" 2>&1 | tee "$log"
count_ctest
stage="fuzz smoke"
bash scripts/fuzz-smoke.sh 100000 2>&1 | tee "$log"
passed=$((passed + $(grep -c '^fuzz-smoke: .*: ok' "$log")))
echo "test-all: $passed passed, $failed failed"
