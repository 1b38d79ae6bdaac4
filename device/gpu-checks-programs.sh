# Sourced by the steps of device/gpu-checks.d/ (not a step itself), with the step's arguments
# BIN_DIR OUT_DIR: checks them, sets $bin and $out, and finds the lowbit command ($lowbit) and the
# plugin folder ($plugins) from BIN_DIR as gpu-checks.sh passes it: the bin/ folder of a pack
# (device/pack-gpu-run.sh: lowbit in bin/, the plugins in plugins/) or of a build tree built with nvcc
# (build/release/bin: lowbit at ../tools/lowbit/lowbit, the plugins at ../conformance/plugins/); the
# environment may name them instead: LOWBIT (the command), LOWBIT_PLUGIN_DIR. Bad usage or no lowbit:
# one line, exit 2.
#   usage: . "$(dirname "$0")/../gpu-checks-programs.sh" "$@"
step=$(basename "$0" .sh)
if [ $# -ne 2 ]; then
  echo "usage: $step.sh BIN_DIR OUT_DIR" >&2
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
  echo "$step: no lowbit command at $lowbit" >&2
  exit 2
fi
