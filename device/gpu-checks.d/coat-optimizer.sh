#!/usr/bin/env bash
# COAT's own CUDA optimizer kernels, built on the GPU machine from a COAT checkout the pack carries
# (coat-src/, never committed) with COAT's nvcc flags, run on the input cases the pack carries
# (coat-inputs/, made by lowbit golden generate), written as golden cases
# (tools/export/export_coat_optimizer.py) and conformed against the reference there and then.
#   usage: coat-optimizer.sh BIN_DIR OUT_DIR      (device/gpu-checks.sh calls it)
# Writes OUT_DIR/coat-golden/ (MANIFEST.json and the cases) and OUT_DIR/coat-conform.{json,md}.
# Not run (exit 0, said in one line) when the pack holds no COAT checkout.
set -uo pipefail
bin=$1 out=$2
prefix=$(dirname "$bin")
if [[ ! -d $prefix/coat-src/coat/optimizer/kernels || ! -d $prefix/coat-inputs ]]; then
  echo "coat-optimizer: not run: the pack holds no coat-src/ and coat-inputs/ (device/pack-gpu-run.sh, LOWBIT_COAT_SRC)"
  exit 0
fi
command -v python3 >/dev/null || { echo "coat-optimizer: error: no python3 (it needs a CUDA torch)" >&2; exit 2; }
rm -rf "$out/coat-golden"
PYTHONPATH=tools/export python3 tools/export/export_coat_optimizer.py --coat-src "$prefix/coat-src" \
  --inputs "$prefix/coat-inputs" --out "$out/coat-golden" || exit 2
"$bin/lowbit" conform --golden "$out/coat-golden" --report "$out/coat-conform.json"
