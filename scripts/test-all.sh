#!/usr/bin/env bash
# Every test: set up, build, run all CTest suites including the slow exhaustive float32 sweeps;
# the Python package (docs/python.md) built into .venv by scripts/setup-python.sh and its pytest suite;
# then the fast suites again under AddressSanitizer + UndefinedBehaviorSanitizer, and a fuzz smoke run
# (clang + libFuzzer): the case reader (100 000 executions), the pipeline fuzzers (inspect, compare,
# conform), the plugin host and the Python DCP-folder reader's mutation loop (scripts/fuzz-smoke.sh).
# Ends with each stage's time, the total, and one line: "test-all: N passed, N failed" (CTest tests of
# both runs, the pytest tests, each fuzz target and the seed check), or the stage that failed.
#
# What makes a second run fast (docs/testing.md, "How long every test takes"): every compilation goes
# through ccache (cmake/ccache.cmake), the pinned Python packages live outside the clone, one venv per
# set of pins (scripts/setup-python.sh), and independent work runs side by side: the pinned packages
# download while the release build compiles, CTest and pytest run two at a time (-j, -n), and so do the
# fuzz targets. Nothing is dropped or sampled: the same tests, sweeps and fuzz executions as run alone.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

passed=0
failed=0
log=$(mktemp)
env_log=$(mktemp)
trap 'rm -f "$log" "$env_log"' EXIT

# Stage timing: begin NAME ends the stage before it; times() prints them all with the total.
stage=""
stage_start=$SECONDS
stage_lines=()
end_stage() {
  [ -n "$stage" ] && stage_lines+=("$(printf '%6d s  %s' $((SECONDS - stage_start)) "$stage")")
  stage=""
}
begin() {
  end_stage
  stage=$1
  stage_start=$SECONDS
  echo "test-all: [$(date -u +%H:%M:%S)] $stage"
}
times() {
  end_stage
  echo "test-all: stage times"
  printf 'test-all: %s\n' "${stage_lines[@]}"
  printf 'test-all: %6d s  total\n' "$SECONDS"
}
trap 'failed_stage=$stage; times; echo "test-all: FAILED in stage $failed_stage"' ERR

# Adds one CTest run's counts ("100% tests passed, 0 tests failed out of 14").
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

begin setup
bash scripts/setup.sh
# The pinned Python packages (5.4 GB on a cold machine, a check on a warm one) download while the
# release build compiles: the one is the network's work, the other the cores'.
bash scripts/setup-python.sh --env-only >"$env_log" 2>&1 &
env_job=$!
bash scripts/setup-bnb-cpu.sh >/dev/null ||
  echo "test-all: no bitsandbytes CPU library; test_bnb_cpu_verify will report itself skipped" >&2

begin "release build"
bash scripts/build.sh release

begin "python environment (the rest of its install, if any)"
if ! wait "$env_job"; then
  cat "$env_log" >&2
  false
fi
cat "$env_log"
bash scripts/setup-crosscheck.sh || echo "test-all: no safetensors package; its cross-check will report itself skipped" >&2

begin "release tests"
# side by side: every test keeps its files apart (per-process names, or its own folder under the build
# tree); the ones that must not share the machine are RUN_SERIAL (conformance/CMakeLists.txt)
ctest --preset release -j "$jobs" 2>&1 | tee "$log"
count_ctest

begin "python package"
bash scripts/setup-python.sh

begin "python tests"
# -n: pytest-xdist workers, one per core; --dist loadgroup with conftest.py's groups keeps each file's
# tests (and its module-scoped fixtures, such as the torchrun jobs) on one worker, and the tests of the
# session's 2-rank job together, so that no job is run twice. -rs lists each skipped test with its
# reason, --durations the slowest (where CI time goes); pytest exits 5 when it collected no test, which
# fails this stage.
.venv/bin/python -m pytest python/tests -q -rs -p no:cacheprovider -n "$jobs" --dist loadgroup --durations=15 2>&1 |
  tee "$log"
count_pytest

begin "sanitizer build"
bash scripts/build.sh sanitize

begin "sanitizer tests"
# the sanitizer suites are single-threaded and keep their files apart (per-process names)
ctest --preset sanitize -j "$jobs" 2>&1 | tee "$log"
count_ctest

begin "fuzz smoke"
bash scripts/fuzz-smoke.sh 100000 2>&1 | tee "$log"
passed=$((passed + $(grep -c '^fuzz-smoke: .*: ok' "$log")))

times
echo "test-all: $passed passed, $failed failed"
