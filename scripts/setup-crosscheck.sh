#!/usr/bin/env bash
# Optional: a small virtual environment (.venv, ignored by git) with the official safetensors package,
# so the layout cross-check runs instead of reporting itself skipped. Never required by the C++ suite.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ] && .venv/bin/python -c "import safetensors, numpy" 2>/dev/null; then exit 0; fi
python3 -m venv .venv
.venv/bin/pip install -q -r conformance/python/requirements.txt
