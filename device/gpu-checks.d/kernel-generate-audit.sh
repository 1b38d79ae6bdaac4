#!/usr/bin/env bash
# GPU check: `lowbit golden generate --kernel` and `lowbit audit --kernel` on GPU-sized inputs (2^28
# elements) through our block-wise CUDA kernels (cuda_blockwise_plugin.so, device/kernels/), with the
# wall time of each command. Each case and each audit configuration is first held to the reference on
# its head and tail blocks (docs/golden-files.md#outputs-from-a-kernel): every command must exit 0.
#
# usage: kernel-generate-audit.sh BIN_DIR OUT_DIR     (device/gpu-checks.sh calls it so)
#   BIN_DIR, and the environment LOWBIT and LOWBIT_PLUGIN_DIR, as verify-cuda.sh takes them.
#   OUT_DIR gets kernel-generate-audit.md (commands, exits, seconds, the checked lines), the manifests
#   of the generated cases (kernel-golden-*.json; the case files themselves, 2.3 GiB each, are
#   written to a scratch folder and removed), the audit's reports (kernel-audit.{json,md,csv}) and
#   each command's log.
# The environment may change what runs, for a dry run on a CPU with the host twin:
#   LOWBIT_KERNEL_PLUGIN  the plugin (default: cuda_blockwise_plugin.so of the plugin folder)
#   LOWBIT_KERNEL_PREFIX  its kernels' prefix before the format name (default "cuda.")
#   LOWBIT_KERNEL_N       elements (default 268435456 = 2^28; bitsandbytes' case has 1000 fewer, so
#                         that its last block is partial)
#   LOWBIT_KERNEL_CHECK_ELEMENTS  --check-elements of both commands (default 1048576: at 2^28, the
#                         head and tail blocks; the dry run sets it below its size to take that path)
#   TMPDIR                the scratch folder's parent
# Without a GPU (the CUDA runner finds no device) it says "skipped: no GPU" with the reason, exit 0.
# Exits 0 when every command exited 0, 1 when one did not, 2 on bad usage or a missing program.
set -u
. "$(dirname "$0")/../gpu-checks-programs.sh" "$@"  # $bin, $out, $lowbit, $plugins
plugin=${LOWBIT_KERNEL_PLUGIN:-$plugins/cuda_blockwise_plugin.so}
prefix=${LOWBIT_KERNEL_PREFIX:-cuda.}
n=${LOWBIT_KERNEL_N:-268435456}
check=${LOWBIT_KERNEL_CHECK_ELEMENTS:-1048576}
[ -f "$plugin" ] || { echo "kernel-generate-audit: no plugin at $plugin" >&2; exit 2; }
mkdir -p "$out" || exit 2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kernel-generate-audit.XXXXXX") || exit 2
trap 'rm -rf "$scratch"' EXIT
md=$out/kernel-generate-audit.md

# No GPU: one small case through a CUDA kernel says why (the CUDA runner's probe), nothing else runs.
probe=$("$lowbit" golden generate --kernel "$plugin:${prefix}torchao.fp8" --input normal:n=256 --out "$scratch/probe" 2>&1)
if [ $? -eq 2 ] && [[ $probe == *"needs a CUDA device: "* ]]; then
  echo "kernel-generate-audit: skipped: no GPU (${probe##*needs a CUDA device: })"
  printf '# generate and audit through the CUDA kernels\n\nskipped: no GPU (%s)\n' "${probe##*needs a CUDA device: }" >"$md"
  exit 0
fi

status=0
printf '# generate and audit through the CUDA kernels, %s elements\n\nplugin `%s`\n\n| command | exit | wall s |\n|---|---:|---:|\n' \
  "$n" "$(basename "$plugin")" >"$md"
details=""
# run NAME COMMAND...: runs it, logs to OUT_DIR/NAME.log, records exit and wall seconds
run() {
  local name=$1 t0 t1 code
  shift
  t0=$(date +%s.%N)
  "$@" >"$out/$name.log" 2>&1
  code=$?
  t1=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  printf '| %s | %s | %s |\n' "$name" "$code" "$secs" >>"$md"
  echo "kernel-generate-audit: $name: exit $code, $secs s"
  grep -E '^(device:|checked |REFUSED |audit:)' "$out/$name.log" | sed "s/^/  /"
  details+=$'\n'"### $name"$'\n\n```\n'"$(grep -E '^(device:|checked |REFUSED |golden generate:|audit:|  ran on)' "$out/$name.log")"$'\n```\n'
  if [ "$code" -ne 0 ]; then
    tail -n 5 "$out/$name.log"
    status=1
  fi
}

# golden generate: the codebook search and the FP8 cast on 2^28 whole blocks, bitsandbytes with a partial last block
for spec in "torchao.codebook8.signed $n" "torchao.fp8 $n" "bnb.blockwise8.dynamic $((n - 1000))"; do
  set -- $spec
  run "kernel-golden-$1" "$lowbit" golden generate --kernel "$plugin:$prefix$1" --input "normal:n=$2,seed=1" \
    --check-elements "$check" --out "$scratch/golden-$1"
  [ -f "$scratch/golden-$1/MANIFEST.json" ] && cp "$scratch/golden-$1/MANIFEST.json" "$out/kernel-golden-$1.json"
  rm -rf "$scratch/golden-$1"
done
# audit: every block-wise format of the plugin at two block sizes, on the kernels (none on the reference): signed
# values, and non-negative ones for the unsigned maps (n/a on signed data)
run kernel-audit "$lowbit" audit --kernel "$plugin" --input "normal:n=$n,seed=2" --input "uniform:n=$n,seed=3,lo=0,hi=1" \
  --block-sizes 256,4096 --check-elements "$check" \
  --formats 'torchao.*,bnb.blockwise8.*' --report "$out/kernel-audit.json" --markdown "$out/kernel-audit.md" \
  --csv "$out/kernel-audit.csv" --quiet
printf '%s' "$details" >>"$md"
exit $status
