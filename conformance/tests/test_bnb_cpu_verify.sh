#!/usr/bin/env bash
# bitsandbytes' own CPU library as an outside kernel (conformance/plugins/bnb_cpu_plugin.cpp):
# lowbit verify on its default inputs and golden cases must find it conformant for
# bnb.blockwise8.dynamic and bnb.blockwise8.linear. The library comes from scripts/setup-bnb-cpu.sh;
# without it (no network when it ran) the test reports itself skipped (77) with the reason.
#   usage: test_bnb_cpu_verify.sh SOURCE_DIR LOWBIT PLUGIN
set -uo pipefail
src=$1 lowbit=$2 plugin=$3
version=$(sed -n 's/^bitsandbytes==//p' "$src/tools/export/requirements.txt")
lib=${LOWBIT_BNB_CPU_LIB:-$src/build/.cache/bitsandbytes-$version/libbitsandbytes_cpu.so}
if [ ! -s "$lib" ]; then
  echo "test_bnb_cpu_verify: skipped: no $lib (scripts/setup-bnb-cpu.sh fetches it; it needs pip and network)"
  exit 77
fi
export LOWBIT_BNB_CPU_LIB=$lib
failures=0
for kernel in bnb_cpu.dynamic bnb_cpu.linear; do
  start=$(date +%s.%N)
  "$lowbit" verify --kernel "$plugin:$kernel" >"${TMPDIR:-/tmp}/bnb_cpu_verify.$$" 2>&1
  rc=$?
  grep -v '^ok ' "${TMPDIR:-/tmp}/bnb_cpu_verify.$$"
  printf 'test_bnb_cpu_verify: %s: exit %d, %d cases ok, %.1f s\n' "$kernel" "$rc" \
    "$(grep -c '^ok ' "${TMPDIR:-/tmp}/bnb_cpu_verify.$$")" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
  rm -f "${TMPDIR:-/tmp}/bnb_cpu_verify.$$"
  [ "$rc" -eq 0 ] || failures=$((failures + 1))
done
exit $((failures > 0))
