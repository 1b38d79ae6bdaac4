#!/usr/bin/env bash
# Runs the safetensors cross-check with the project's .venv when it exists (scripts/setup-crosscheck.sh
# makes it), else with python3; chosen at run time, so a venv made after configuring still counts.
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="$root/.venv/bin/python"
[ -x "$python" ] || python="$(command -v python3 || true)"
if [ -z "$python" ]; then
  echo "skipped: no python3"
  exit 77
fi
exec "$python" "$root/conformance/python/safetensors_crosscheck.py" "$1"
