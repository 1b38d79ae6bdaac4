#!/usr/bin/env bash
# GPU check: lowbit verify on our CUDA kernels: the per-block E4M3 kernel (device/kernels/
# cuda_perblock_plugin.cu) and its mutant (x times 1/scale); the block-wise kernels of device/kernels/
# (cuda_blockwise_plugin.so: torchao codebook 8/4-bit, torchao FP8, bitsandbytes block-wise with the CPU
# back end's table) and their mutant (torchao's search with ties down); the COAT optimizer kernels
# (cuda_coat_plugin.so: coat.optim.origin.e4m3 and coat.optim.expand.e4m3); bitsandbytes' one-state
# rules (cuda_bnb_one_state_plugin.so: bnb.lion8bit.cuda, bnb.momentum8bit.cuda, bnb.rmsprop8bit.cuda,
# bnb.adagrad8bit.cuda) and AdEMAMix (cuda_bnb_ademamix_plugin.so: bnb.ademamix8bit.cuda).
# Each kernel must be conformant
# (exit 0) and each mutant caught (exit 1); anything else (exit 2: no device, no runner, a plugin that
# does not load) is a failure.
#
# usage: verify-cuda.sh BIN_DIR OUT_DIR     (device/gpu-checks.sh calls it so)
#   BIN_DIR  the bin/ folder of a pack (device/pack-gpu-run.sh: lowbit in bin/, the CUDA runner in
#            lib/, the plugins in plugins/) or of a build tree built with nvcc (build/release/bin:
#            lowbit at ../tools/lowbit/lowbit, the runner at ../tools/lib/, the plugins at
#            ../conformance/plugins/); the environment may name them instead: LOWBIT (the command),
#            LOWBIT_PLUGIN_DIR, LOWBIT_CUDA_RUNNER.
#   OUT_DIR  gets, per plugin (and kernel, for a plugin of several), NAME.json and NAME.md (verify's reports: device, compute capability,
#            driver and runtime versions, the kernel time of every case) and NAME.log (its output).
# Exits 0 when both results are as expected, 1 otherwise, 2 on bad usage.
set -u
. "$(dirname "$0")/../gpu-checks-programs.sh" "$@"  # $bin, $out, $lowbit, $plugins
mkdir -p "$out" || exit 2

status=0
# check EXPECTED_EXIT PLUGIN [KERNEL [SUFFIX VERIFY_ARGS...]]: verify on plugins/PLUGIN.so (its kernel
# KERNEL; with SUFFIX, on VERIFY_ARGS' inputs instead of the default ones; VERIFY_ARGS after an empty
# SUFFIX are more options of the default run), reports into OUT_DIR
check() {
  local expected=$1 plugin=$2 kernel=${3:-} suffix=${4:-} code
  shift $(($# < 4 ? $# : 4))
  local name=$plugin${kernel:+.$kernel}${suffix:+.$suffix}
  "$lowbit" verify --kernel "$plugins/$plugin.so${kernel:+:$kernel}" --report "$out/$name.json" --markdown "$out/$name.md" \
    "$@" >"$out/$name.log" 2>&1
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
for format in torchao.codebook8.signed torchao.codebook8.unsigned torchao.codebook4.signed torchao.codebook4.unsigned \
              torchao.fp8 bnb.blockwise8.dynamic bnb.blockwise8.linear; do
  check 0 cuda_blockwise_plugin "cuda.$format" "" --f32-only  # the kernels take float32 inputs only
done
check 1 cuda_mutant_blockwise_ties_down cuda.ties-down.torchao.codebook8.signed
# COAT's FP8 AdamW step (device/kernels/coat_plugin.cu): optimizer formats, 3 steps of each default
# input, each step from the reference's state; then partial last groups (random and special values)
# and 2^18 elements
for format in coat.optim.origin.e4m3 coat.optim.expand.e4m3; do
  check 0 cuda_coat_plugin "cuda.$format"
  check 0 cuda_coat_plugin "cuda.$format" tails --input normal:n=1000,seed=7,std=0.5 --input special:n=300 --no-golden
  check 0 cuda_coat_plugin "cuda.$format" large --input normal:n=262144,seed=8,std=0.5 --input adam-v:n=262144,seed=9 \
    --steps 2 --no-golden
done
# bitsandbytes' one-state rules as its one-state CUDA kernel computes them (device/kernels/
# bnb_one_state_plugin.cu): 3 steps of each default input, then partial last blocks with special values
# (no NaN/Inf reset in this kernel) and 2^18 elements
for format in bnb.lion8bit.cuda bnb.momentum8bit.cuda bnb.rmsprop8bit.cuda bnb.adagrad8bit.cuda; do
  check 0 cuda_bnb_one_state_plugin "cuda.$format"
  check 0 cuda_bnb_one_state_plugin "cuda.$format" tails --input normal:n=1000,seed=7,std=0.5 --input special:n=300 --no-golden
  check 0 cuda_bnb_one_state_plugin "cuda.$format" large --input normal:n=262144,seed=8,std=0.5 --steps 2 --no-golden
done
# AdEMAMix as the two-state CUDA kernel computes it (device/kernels/bnb_ademamix_plugin.cu): whole blocks
# only (the format refuses other sizes: the real kernel's slow-moment absmax races there)
check 0 cuda_bnb_ademamix_plugin cuda.bnb.ademamix8bit.cuda
check 0 cuda_bnb_ademamix_plugin cuda.bnb.ademamix8bit.cuda tails --input normal:n=1024,seed=7,std=0.5 --input special:n=512 --no-golden
check 0 cuda_bnb_ademamix_plugin cuda.bnb.ademamix8bit.cuda large --input normal:n=262144,seed=8,std=0.5 --steps 2 --no-golden
exit $status
