#!/usr/bin/env bash
# The CPU-testable parts of the GPU checks (docs/device/README.md): without a GPU,
# lowbit-gpu-checks and device/gpu-checks.sh exit 2 with one line saying why; the pack script
# makes a tree whose programs run from it alone and refuses a missing bitsandbytes library; the bnb
# group's entry points (the quantizer's and the six 8-bit optimizers') are looked up without a GPU.
#   usage: test_gpu_checks_cpu.sh SOURCE_DIR BUILD_DIR        (exit 77: skipped, a GPU is present)
set -uo pipefail
src=$1 build=$2
if nvidia-smi -L >/dev/null 2>&1; then
  echo "test_gpu_checks_cpu: skipped: a GPU is present (run device/gpu-checks.sh there)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
expect() {  # description, condition...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

"$build/bin/lowbit-gpu-checks" --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
expect "lowbit-gpu-checks without a GPU exits 2" test $? -eq 2
expect "... with one line naming the reason" test "$(wc -l <"$tmp/stderr")" -eq 1
expect "... that says there is no usable GPU" grep -q "^lowbit-gpu-checks: error: no usable GPU: " "$tmp/stderr"
"$build/bin/lowbit-gpu-checks" --help >/dev/null
expect "lowbit-gpu-checks --help exits 0" test $? -eq 0
"$build/bin/lowbit-gpu-checks" --out "$tmp/o" --only nope >/dev/null 2>"$tmp/stderr"
expect "an unknown --only group is refused: exit 2, one line" test $? -eq 2 -a "$(wc -l <"$tmp/stderr")" -eq 1
"$build/bin/lowbit-gpu-checks" --out "$tmp/o" --bnb-library "$tmp/none.so" >/dev/null 2>"$tmp/stderr"
expect "a missing --bnb-library file is refused: exit 2, one line naming it" test $? -eq 2 -a "$(wc -l <"$tmp/stderr")" -eq 1 -a -n "$(grep -F "$tmp/none.so" "$tmp/stderr")"

# The bnb group's entry points, looked up with dlopen and no GPU: a library that lacks them is told so
# (exit 1, one line each), not a crash; bitsandbytes' own (the project's .venv, when it has the wheel) has all.
entry_points="cquantize_blockwise_fp32 cdequantize_blockwise_fp32 cadam_8bit_blockwise_grad_fp32 clion_8bit_blockwise_grad_fp32
cmomentum_8bit_blockwise_grad_fp32 crmsprop_8bit_blockwise_grad_fp32 cadagrad_8bit_blockwise_grad_fp32 cademamix_8bit_blockwise_grad_fp32"
"$build/bin/lowbit-gpu-checks" --bnb-entry-points --bnb-library "$build/tools/lib/liblowbit_cuda_runner.so" >"$tmp/stdout" 2>"$tmp/stderr"
expect "--bnb-entry-points on a library without them exits 1" test $? -eq 1
expect "... with one 'lacks' line for each of the 8 entry points" test "$(grep -c '^lacks ' "$tmp/stdout")" -eq 8
for name in $entry_points; do
  expect "... naming $name" grep -q "^lacks $name\$" "$tmp/stdout"
done
"$build/bin/lowbit-gpu-checks" --bnb-entry-points --bnb-library "$tmp/none.so" >/dev/null 2>"$tmp/stderr"
expect "--bnb-entry-points on a missing file exits 2, naming it" test $? -eq 2 -a -n "$(grep -F "$tmp/none.so" "$tmp/stderr")"
echo "not a library" >"$tmp/fake.so"
"$build/bin/lowbit-gpu-checks" --bnb-entry-points --bnb-library "$tmp/fake.so" >/dev/null 2>"$tmp/stderr"
expect "--bnb-entry-points on a file that is no library exits 2 with one line naming it" test $? -eq 2 -a "$(wc -l <"$tmp/stderr")" -eq 1 -a -n "$(grep -F "$tmp/fake.so" "$tmp/stderr")"
"$build/bin/lowbit-gpu-checks" --bnb-entry-points >/dev/null 2>"$tmp/stderr"
expect "--bnb-entry-points without --bnb-library exits 2" test $? -eq 2
# the wheel's folder as the .venv's Python finds it (the pinned packages live outside the clone:
# scripts/setup-python.sh); find_spec locates the package without importing it (and torch)
wheel_dir=$("$src"/.venv/bin/python -c "import importlib.util as u; s = u.find_spec('bitsandbytes'); print(s.submodule_search_locations[0] if s else '')" 2>/dev/null || true)
wheel_lib=$(ls "${wheel_dir:-/nonexistent}"/libbitsandbytes_cuda130.so 2>/dev/null | head -1)
if [[ -n $wheel_lib ]]; then
  "$build/bin/lowbit-gpu-checks" --bnb-entry-points --bnb-library "$wheel_lib" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if ((rc == 2)) && grep -q "libcu[a-z]*\.so" "$tmp/stderr"; then
    echo "skipped: bitsandbytes' library does not load here: $(cat "$tmp/stderr")"
  else
    expect "bitsandbytes 0.50.2's libbitsandbytes_cuda130.so has every entry point the bnb group calls" test $rc -eq 0
    expect "... one 'has' line each" test "$(grep -c '^has ' "$tmp/stdout")" -eq 8
  fi
else
  echo "skipped: no bitsandbytes wheel for $src/.venv (its libbitsandbytes_cuda130.so; scripts/setup-python.sh installs it)"
fi

cd "$src"
LOWBIT_BNB_CUDA_LIB=/nonexistent/libbitsandbytes_cuda130.so bash device/pack-gpu-run.sh "$build" "$tmp/pack" \
  >/dev/null 2>"$tmp/stderr"
expect "the pack refuses a missing bitsandbytes library" test $? -eq 2
expect "... naming it" grep -q "/nonexistent/libbitsandbytes_cuda130.so" "$tmp/stderr"
bash device/pack-gpu-run.sh "$build" "$tmp/pack" >"$tmp/stdout"
expect "the pack is made" test $? -eq 0
expect "... with both programs" test -x "$tmp/pack/bin/lowbit" -a -x "$tmp/pack/bin/lowbit-gpu-checks"
expect "... and the block-wise CUDA plugin and its mutant" test -f "$tmp/pack/plugins/cuda_blockwise_plugin.so" -a -f "$tmp/pack/plugins/cuda_mutant_blockwise_ties_down.so"
expect "... and the COAT optimizer CUDA plugin" test -f "$tmp/pack/plugins/cuda_coat_plugin.so"
expect "... and the CUDA plugin of bitsandbytes' one-state rules" test -f "$tmp/pack/plugins/cuda_bnb_one_state_plugin.so"
expect "... and the bitsandbytes AdEMAMix CUDA plugin" test -f "$tmp/pack/plugins/cuda_bnb_ademamix_plugin.so"
expect "... and the fmt library they load" test -f "$tmp/pack/lib/libfmt.so.9"
expect "... and the policies" test -f "$tmp/pack/share/lowbit/policies/bnb-cuda.json"
expect "... and the golden cases through a link" test -f "$tmp/pack/share/lowbit/golden/MANIFEST.json"
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$tmp/pack/lib" "$tmp/pack/bin/lowbit" golden check >/dev/null 2>&1
expect "the packed lowbit runs from the pack and finds its golden cases" test $? -eq 0
bash device/gpu-checks.sh --prefix "$tmp/pack" "$tmp/run" >/dev/null 2>&1
expect "gpu-checks.sh without a GPU exits 2" test $? -eq 2
expect "... and its summary records why" grep -q "lowbit-gpu-checks: exit 2" "$tmp/run/summary.md"
expect "... and that the bitsandbytes quantizer and optimizer steps did not run" grep -q "^- bitsandbytes CUDA (quantizer, 8-bit optimizers): not run" "$tmp/run/summary.md"
expect "... its generate-and-audit step says it skipped for want of a GPU" grep -q "^skipped: no GPU (" "$tmp/run/kernel-generate-audit.md"
expect "... and exits 0 so" grep -q "kernel-generate-audit: exit 0" "$tmp/run/summary.md"
# golden generate and audit through a CUDA kernel without a GPU: one line, exit 2 (issue 14 item 3b)
for cmd in "golden generate --kernel $tmp/pack/plugins/cuda_blockwise_plugin.so:cuda.torchao.fp8 --input normal --out $tmp/g" \
           "audit --kernel $tmp/pack/plugins/cuda_blockwise_plugin.so --input normal:n=4096 --quiet --report $tmp/a.json"; do
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$tmp/pack/lib" "$tmp/pack/bin/lowbit" $cmd >"$tmp/stdout" 2>"$tmp/stderr"
  expect "lowbit ${cmd%% --kernel*} on a CUDA kernel without a GPU exits 2" test $? -eq 2
  expect "... with one line saying it needs a CUDA device" test "$(wc -l <"$tmp/stderr")" -eq 1 -a -n "$(grep "needs a CUDA device: " "$tmp/stderr")"
  expect "... and writes nothing" test ! -e "$tmp/g" -a ! -e "$tmp/a.json"
done
bash device/gpu-checks.sh --prefix "$tmp/nothing" "$tmp/run2" >/dev/null 2>"$tmp/stderr"
expect "gpu-checks.sh with no programs exits 2" test $? -eq 2
expect "... naming the missing program" grep -q "lowbit-gpu-checks is missing" "$tmp/stderr"
((failures == 0)) || { echo "test_gpu_checks_cpu: $failures failed"; exit 1; }
echo "test_gpu_checks_cpu: all passed"
