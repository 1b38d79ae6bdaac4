#!/usr/bin/env bash
# GPU check: lowbit verify on our CUDA per-block E4M3 kernel (conformance/plugins/cuda_perblock_plugin.cu)
# and on its mutant (x times 1/scale). The kernel must be conformant (exit 0) and the mutant caught
# (exit 1); anything else (exit 2: no device, no runner, a plugin that does not load) is a failure.
#
# usage: verify-cuda.sh BIN_DIR OUT_DIR     (device/gpu-checks.sh calls it so)
#   BIN_DIR  the bin/ folder of a pack (device/pack-gpu-run.sh: lowbit in bin/, the CUDA runner in
#            lib/, the plugins in plugins/) or of a build tree built with nvcc (build/release/bin:
#            lowbit at ../tools/lowbit/lowbit, the runner at ../tools/lib/, the plugins at
#            ../conformance/plugins/); the environment may name them instead: LOWBIT (the command),
#            LOWBIT_PLUGIN_DIR, LOWBIT_CUDA_RUNNER.
#   OUT_DIR  gets, per plugin, NAME.json and NAME.md (verify's reports: device, compute capability,
#            driver and runtime versions, the kernel time of every case) and NAME.log (its output).
# Exits 0 when both results are as expected, 1 otherwise, 2 on bad usage.
set -u
if [ $# -ne 2 ]; then
  echo "usage: verify-cuda.sh BIN_DIR OUT_DIR" >&2
  exit 2
fi
bin=$1
out=$2
lowbit=${LOWBIT:-}
if [ -z "$lowbit" ]; then
  lowbit=$bin/lowbit
  [ -x "$lowbit" ] || lowbit=$bin/../tools/lowbit/lowbit
fi
plugins=${LOWBIT_PLUGIN_DIR:-}
if [ -z "$plugins" ]; then
  plugins=$bin/../plugins
  [ -d "$plugins" ] || plugins=$bin/../conformance/plugins
fi
if [ ! -x "$lowbit" ]; then
  echo "verify-cuda: no lowbit command at $lowbit" >&2
  exit 2
fi
mkdir -p "$out" || exit 2

status=0
# check EXPECTED_EXIT NAME: verify on plugins/NAME.so, reports into OUT_DIR
check() {
  local expected=$1 name=$2 code
  "$lowbit" verify --kernel "$plugins/$name.so" --report "$out/$name.json" --markdown "$out/$name.md" \
    >"$out/$name.log" 2>&1
  code=$?
  if [ "$code" -eq "$expected" ]; then
    echo "verify-cuda: $name: exit $code as expected"
  else
    echo "verify-cuda: $name: exit $code, expected $expected (output in $out/$name.log):"
    tail -n 20 "$out/$name.log"
    status=1
  fi
  grep -E '^(device|verify):' "$out/$name.log" | sed "s/^/  /"
}
check 0 cuda_perblock_plugin
check 1 cuda_mutant_perblock_reciprocal
exit $status
