#!/usr/bin/env bash
# The Python package (python/, docs/python.md) in .venv (ignored by git): reuses an existing .venv
# and installs from PyPI only the pinned packages of
# python/requirements-ci.txt that it lacks (torch, torchao and bitsandbytes among them, for their tests), then builds and installs ./python
# (the engine compiled from this tree; build/python/ keeps the build between runs).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
missing=()
while read -r req; do
  case "$req" in "" | "#"*) continue ;; esac
  module=${req%%==*}
  module=${module//-/_}
  .venv/bin/python -c "import $module" 2>/dev/null || missing+=("$req")
done <python/requirements-ci.txt
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-python: installing ${missing[*]}" >&2
  .venv/bin/pip install -q "${missing[@]}"
fi
.venv/bin/pip install -q --no-build-isolation ./python
