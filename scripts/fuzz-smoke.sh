#!/usr/bin/env bash
# Fuzz smoke run: clang + libFuzzer + ASan/UBSan, each target a fixed number of executions with a fixed
# seed, from its committed seeds. The case reader (conformance/fuzz/seeds_reader/, default 100 000
# executions) and the pipeline behind it on well-formed cases (conformance/fuzz/seeds_pipeline/,
# default 6 000 executions each): inspect's dequantizers, compare with its explainers and reports,
# conform's reference run. The pipeline seeds are first checked to decode to complete, conformant
# cases. Then fuzz_dcp, the Python package's DCP-folder reader on mutated checkpoint folders
# (python/tests/fuzz_dcp.py, a seeded mutation loop from python/tests/fuzz_seeds_dcp/; default 500
# executions; torch's stages too where .venv has torch), in .venv (scripts/setup-python.sh builds it
# when it lacks lowbit). One line per target: "fuzz-smoke: TARGET: ok (...)" or "fuzz-smoke: TARGET:
# FAILED"; exits non-zero when any failed. Crash inputs go to build/fuzz/artifacts/. The plugin host
# (conformance/fuzz/seeds_plugin/, default 300 executions: each forks a sandboxed child per table
# and kernel) against a plugin whose table and misbehaving kernels the input decides
# (conformance/plugins/fuzz_plugin.cpp).
# Usage: fuzz-smoke.sh [READER_RUNS [PIPELINE_RUNS [DCP_RUNS [PLUGIN_RUNS]]]]
set -euo pipefail
cd "$(dirname "$0")/.."
reader_runs="${1:-100000}"
pipeline_runs="${2:-6000}"
dcp_runs="${3:-500}"
plugin_runs="${4:-300}"
bash scripts/build.sh fuzz
bin=build/fuzz/conformance
mkdir -p build/fuzz/artifacts
failed=0

if LSAN_OPTIONS=print_suppressions=0 "$bin"/fuzz_cases check-seeds conformance/fuzz/seeds_pipeline > build/fuzz/seed_check.log 2>&1; then
  echo "fuzz-smoke: fuzz_cases check-seeds: ok ($(grep -o "[0-9]* seeds, [0-9]* failed" build/fuzz/seed_check.log))"
else
  cat build/fuzz/seed_check.log
  echo "fuzz-smoke: fuzz_cases check-seeds: FAILED"
  failed=1
fi

# run_target TARGET SEED_DIR RUNS MAX_LEN [OPTION...]: one target's fixed executions; prints its summary
# lines and fails when the target did (side_by_side keeps both in build/fuzz/NAME.out and NAME.status)
run_target() {
  local target=$1 seeds=$2 runs=$3 max_len=$4 corpus=build/fuzz/corpus/$1 log=build/fuzz/$1.log start=$SECONDS
  shift 4
  rm -rf "$corpus" && mkdir -p "$corpus" && cp "$seeds"/* "$corpus"/
  if "$bin/$target" -runs="$runs" -seed=1 -max_len="$max_len" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix=build/fuzz/artifacts/"$target"- "$@" "$corpus" > "$log" 2>&1; then
    tail -n 12 "$log"
    echo "fuzz-smoke: $target: ok ($runs runs, $((SECONDS - start)) s)"
  else
    tail -n 80 "$log"
    echo "fuzz-smoke: $target: FAILED (log $log)"
    return 1
  fi
}

run_dcp() {
  local start=$SECONDS
  if .venv/bin/python python/tests/fuzz_dcp.py --runs "$dcp_runs" --seed 1 --artifacts build/fuzz/artifacts/fuzz_dcp \
       > build/fuzz/fuzz_dcp.log 2>&1; then
    tail -n 1 build/fuzz/fuzz_dcp.log
    echo "fuzz-smoke: fuzz_dcp: ok ($dcp_runs runs, $((SECONDS - start)) s)"
  else
    tail -n 80 build/fuzz/fuzz_dcp.log
    echo "fuzz-smoke: fuzz_dcp: FAILED (log build/fuzz/fuzz_dcp.log)"
    return 1
  fi
}

# The targets run side by side, one per core (each is one single-threaded process with its own seed
# and execution count, so each does exactly what it does alone); their output is printed in this order.
.venv/bin/python -c "import lowbit" 2>/dev/null || bash scripts/setup-python.sh
names=()
side_by_side() {  # side_by_side NAME COMMAND...: starts it once fewer than nproc are running
  local name=$1
  shift
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  names+=("$name")
  { if "$@" > "build/fuzz/$name.out" 2>&1; then echo 0; else echo 1; fi > "build/fuzz/$name.status"; } &
}
rm -f build/fuzz/*.status
side_by_side fuzz_case_reader run_target fuzz_case_reader conformance/fuzz/seeds_reader "$reader_runs" 4096
# The pipeline targets grow their inputs from one-byte seeds at once (-len_control=0). Entropic
# scheduling took a third of an execution's time (perf) and is off; ASan records no allocation stacks
# (rerun a finding's input for them).
run_pipeline_target() {  # runs in side_by_side's background subshell: the exports end with it
  export ASAN_OPTIONS=malloc_context_size=0 LSAN_OPTIONS=print_suppressions=0
  run_target "$1" conformance/fuzz/seeds_pipeline "$pipeline_runs" 4096 -len_control=0 -entropic=0
}
for target in fuzz_inspect fuzz_compare fuzz_conform; do
  side_by_side "$target" run_pipeline_target "$target"
done
# The plugin host: inputs are scripts of up to 512 bytes, the plugin's table and its kernels' behaviour.
side_by_side fuzz_plugin_host run_target fuzz_plugin_host conformance/fuzz/seeds_plugin "$plugin_runs" 512 -len_control=0
side_by_side fuzz_dcp run_dcp
wait
for name in "${names[@]}"; do
  cat "build/fuzz/$name.out"
  [ "$(cat "build/fuzz/$name.status" 2>/dev/null)" = 0 ] || failed=1
done
exit "$failed"
