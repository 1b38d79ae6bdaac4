#!/usr/bin/env bash
# Optional: bitsandbytes' own CPU library (libbitsandbytes_cpu.so, about 63 KB, no torch needed) from
# the pinned wheel, for the outside-kernel check test_bnb_cpu_verify (conformance/plugins/bnb_cpu_plugin.cpp).
# Downloads the wheel once with pip (no dependencies, nothing installed) into build/.cache (ignored by
# git) and keeps only the library. Without network the test reports itself skipped.
#   usage: scripts/setup-bnb-cpu.sh        (prints the library's path; exit 1 when it cannot be fetched)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^bitsandbytes==//p' tools/export/requirements.txt)
dir=build/.cache/bitsandbytes-$version
lib=$dir/libbitsandbytes_cpu.so
if [ -s "$lib" ]; then echo "$lib"; exit 0; fi
mkdir -p "$dir"
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
if ! timeout 300 python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_24_x86_64 \
    "bitsandbytes==$version" -d "$wheels" >"$wheels/log" 2>&1; then
  echo "setup-bnb-cpu: cannot download bitsandbytes==$version: $(tail -n 1 "$wheels/log")" >&2
  exit 1
fi
python3 - "$wheels"/bitsandbytes-*.whl "$lib" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z, open(out + ".part", "wb") as f:
    f.write(z.read("bitsandbytes/libbitsandbytes_cpu.so"))
PY
mv "$lib.part" "$lib"
echo "$lib"
