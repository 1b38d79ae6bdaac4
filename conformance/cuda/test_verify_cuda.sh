#!/usr/bin/env bash
# lowbit verify on the CUDA plugin, as CTest runs it (conformance/CMakeLists.txt).
# usage: test_verify_cuda.sh MODE LOWBIT PLUGIN_DIR SOURCE_DIR
#   PLUGIN_DIR is empty when lowbit was built without nvcc: every mode reports itself skipped (77).
# Modes:
#   no-device        no GPU here: verify refuses the CUDA kernel before any case, one line, exit 2
#   missing-runner   LOWBIT_CUDA_RUNNER=/nonexistent: exit 2, one line naming that path
#   no-runner-built  a lowbit with no runner beside it: exit 2, one line saying so
#   gpu              with a GPU: device/gpu-checks.d/verify-cuda.sh (kernel conformant, mutant caught)
set -u
mode=$1 lowbit=$2 plugins=$3 source=$4
skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*"
  exit 1
}
[ -n "$plugins" ] || skip "lowbit was built without a CUDA compiler: no CUDA plugin to run"
plugin=$plugins/cuda_perblock_plugin.so
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# one_line_refusal OUTPUT CODE WORDS...: exit 2, one line, every WORDS in it
one_line_refusal() {
  local output=$1 code=$2
  shift 2
  echo "$output"
  [ "$code" -eq 2 ] || fail "exit $code, expected 2"
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ] || fail "more than one line"
  for words in "$@"; do
    case "$output" in *"$words"*) ;; *) fail "the line does not say: $words" ;; esac
  done
}

# Is there a usable device? The runner's own answer (verify on the plugin, no case run).
probe=$("$lowbit" verify --kernel "$plugin" --input normal:n=1 --no-golden 2>&1)
probe_code=$?
has_device=0
case "$probe" in device:*) has_device=1 ;; esac

case "$mode" in
  no-device)
    [ "$has_device" -eq 0 ] || skip "a CUDA device is present (${probe%%$'\n'*}); the gpu test runs the kernel"
    one_line_refusal "$probe" "$probe_code" "lowbit: error: kernel 'cuda.fp8.perblock.e4m3' in '$plugin' needs a CUDA device: "
    ;;
  missing-runner)
    out=$(LOWBIT_CUDA_RUNNER=/nonexistent/liblowbit_cuda_runner.so "$lowbit" verify --kernel "$plugin" 2>&1)
    one_line_refusal "$out" $? "kernel 'cuda.fp8.perblock.e4m3' in '$plugin' needs a CUDA device: " \
      "cannot load the CUDA runner '/nonexistent/liblowbit_cuda_runner.so'"
    ;;
  no-runner-built)
    # the same lowbit with nothing beside it: no ../lib/liblowbit_cuda_runner.so
    mkdir -p "$scratch/bin"
    cp "$lowbit" "$scratch/bin/lowbit"
    out=$(env -u LOWBIT_CUDA_RUNNER "$scratch/bin/lowbit" verify --kernel "$plugin" 2>&1)
    one_line_refusal "$out" $? "needs a CUDA device: this lowbit was built without the CUDA runner (no $scratch/lib/liblowbit_cuda_runner.so"
    ;;
  gpu)
    [ "$has_device" -eq 1 ] || skip "no usable CUDA device: $probe"
    LOWBIT=$lowbit LOWBIT_PLUGIN_DIR=$plugins bash "$source/device/gpu-checks.d/verify-cuda.sh" "$(dirname "$lowbit")" "$scratch/out" ||
      fail "verify-cuda.sh"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "ok: $mode"
