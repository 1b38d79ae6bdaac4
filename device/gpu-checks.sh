#!/usr/bin/env bash
# Everything of the suite that needs a GPU, in one run (under 8 minutes on an H200):
#   1. lowbit-gpu-checks: the FP8 conversions of cuda_fp8.h on every input, the rcp.approx.ftz table
#      and its scaling rule, div.full against its model, CUDA's powf against the reference, bitsandbytes'
#      CUDA library (its block-wise quantizer, and its 8-bit block-wise Adam, Lion, momentum, RMSprop,
#      Adagrad and AdEMAMix kernels against our bnb.*8bit.cuda models), and our block-wise kernels'
#      bandwidth against a copy kernel;
#   2. each device/gpu-checks.d/*.sh (lowbit verify on the CUDA plugins, ...), given BIN_DIR and OUT_DIR.
# Writes JSON and Markdown results into OUT_DIR, and summary.md there; exits 1 if anything was not
# as expected, 2 if it could not run.
#   usage: device/gpu-checks.sh [--prefix DIR] OUT_DIR
# --prefix: an install-like tree with bin/ and lib/ (device/pack-gpu-run.sh makes one; default
# build/release, as built here). docs/device/README.md says how to build, carry and run.
set -uo pipefail
cd "$(dirname "$0")/.."
prefix=build/release
if [[ ${1:-} == --prefix ]]; then prefix=${2:?--prefix needs a folder}; shift 2; fi
out=${1:?usage: device/gpu-checks.sh [--prefix DIR] OUT_DIR}
bin=$prefix/bin
[[ -x $bin/lowbit-gpu-checks ]] || { echo "gpu-checks: error: $bin/lowbit-gpu-checks is missing (device/pack-gpu-run.sh)" >&2; exit 2; }
[[ -d $prefix/lib ]] && export LD_LIBRARY_PATH="$(realpath "$prefix/lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"
start=$SECONDS
status=0
{
  echo "# GPU check run"
  echo
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
} >"$out/summary.md"

run_step() {  # name, command...
  local name=$1 t0=$SECONDS rc
  shift
  echo "gpu-checks: $name" >&2
  "$@"
  rc=$?
  echo "- $name: exit $rc, $((SECONDS - t0)) s" >>"$out/summary.md"
  if ((rc != 0)); then status=$(( rc == 1 && status != 2 ? 1 : 2 )); fi
}

# bitsandbytes' CUDA library, when the pack holds one (device/pack-gpu-run.sh, LOWBIT_BNB_CUDA_LIB): it
# loads libcudart.so.13 and the cuBLAS libraries, which a CUDA torch install or the toolkit provides.
checks_args=(--out "$out" --policies policies)
bnb=$prefix/lib/bnb/libbitsandbytes_cuda130.so
if [[ -f $bnb ]]; then
  for lib in libcublas.so.13 libcublasLt.so.13 libcudart.so.13; do
    dir=$(find /usr/local/cuda/lib64/ /usr/local/cuda/targets/x86_64-linux/lib/ /usr/lib/python3*/ /usr/local/lib/python3*/ /opt/ \
          -name "$lib" -print -quit 2>/dev/null | xargs -r dirname)
    [[ -n $dir ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"
  done
  checks_args+=(--bnb-library "$bnb")
else
  echo "- bitsandbytes CUDA (quantizer, 8-bit optimizers): not run (no $bnb)" >>"$out/summary.md"
fi
# Our CUDA kernels' bandwidth against a copy kernel (the bandwidth group): the block-wise plugin and the
# per-block E4M3 one, from the pack's plugins/ or the build tree's conformance/plugins/.
plugin_dir=$bin/../plugins
[[ -f $plugin_dir/cuda_blockwise_plugin.so ]] || plugin_dir=$bin/../conformance/plugins
if [[ -f $plugin_dir/cuda_blockwise_plugin.so ]]; then
  checks_args+=(--kernels-plugin "$plugin_dir/cuda_blockwise_plugin.so")
  [[ -f $plugin_dir/cuda_perblock_plugin.so ]] && checks_args+=(--kernels-plugin "$plugin_dir/cuda_perblock_plugin.so")
else
  echo "- block-wise kernels' bandwidth: not run (no cuda_blockwise_plugin.so in $bin/../plugins or $bin/../conformance/plugins)" >>"$out/summary.md"
fi
run_step lowbit-gpu-checks "$bin/lowbit-gpu-checks" "${checks_args[@]}"
for step in device/gpu-checks.d/*.sh; do
  [[ -e $step ]] || continue
  run_step "$(basename "$step" .sh)" bash "$step" "$bin" "$out"
done
echo "- total: $((SECONDS - start)) s, status $status" >>"$out/summary.md"
cat "$out/summary.md"
exit $status
