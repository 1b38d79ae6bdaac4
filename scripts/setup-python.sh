#!/usr/bin/env bash
# The Python package (python/, docs/python.md) in .venv (ignored by git), in two layers:
#  1. the pinned packages of python/requirements-ci.txt (torch, torchao and bitsandbytes among them:
#     5.4 GB) in a virtual environment OUTSIDE the clone, one per set of pins and interpreter:
#     $LOWBIT_CACHE/venvs/<hash> (LOWBIT_CACHE defaults to ~/.cache/lowbit). A fresh clone on the same
#     machine reuses it; changed pins get a new one, never a shared one. Built under a lock, marked
#     complete only once every pin is installed, rebuilt when it is not.
#  2. .venv in the clone: a small venv of its own (the package lowbit of THIS tree, built from it)
#     that sees layer 1 through a .pth file, so that two clones never overwrite each other's lowbit.
#   usage: scripts/setup-python.sh            both layers, then pip install ./python
#          scripts/setup-python.sh --env-only  both layers, no build of ./python
# The package's build reuses the compiler cache of the CMake builds (cmake/ccache.cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
requirements=python/requirements-ci.txt
cache=${LOWBIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lowbit}

# The key: the pins and the interpreter that runs them (its version and where it lives).
key=$( { cat "$requirements"; python3 -c 'import sys, platform; print(sys.version, sys.executable, platform.machine())'; } |
  sha256sum | cut -c1-16)
pinned=$cache/venvs/$key
mkdir -p "$cache/venvs"

# Layer 1, under a lock: a second clone waits for the first one's install instead of racing it.
exec 9>"$pinned.lock"
flock 9
if ! cmp -s "$requirements" "$pinned/.complete" 2>/dev/null; then
  echo "setup-python: installing the pinned environment into $pinned (once per machine and set of pins)" >&2
  rm -rf "$pinned"
  python3 -m venv "$pinned"
  "$pinned/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$pinned/.complete"  # written last: an interrupted install is redone, never reused
fi
flock -u 9

# Layer 2: .venv sees layer 1's site-packages (site.addsitedir also runs the .pth files found there).
pinned_site=$("$pinned/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -L .venv ] || { [ -e .venv ] && [ ! -x .venv/bin/python ]; }; then rm -rf .venv; fi
[ -x .venv/bin/python ] || python3 -m venv .venv
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
link="import site; site.addsitedir('$pinned_site')"
[ "$(cat "$site/_lowbit_pinned.pth" 2>/dev/null)" = "$link" ] || printf '%s\n' "$link" >"$site/_lowbit_pinned.pth"
# a .venv made before this layout holds its own copies of the pins: they would shadow layer 1's (the
# same versions, but 5 GB in the clone); a .venv that has any is rebuilt
if [ -n "$(ls -d "$site"/torch "$site"/numpy 2>/dev/null)" ]; then
  echo "setup-python: .venv holds its own packages (an older layout); rebuilding it" >&2
  rm -rf .venv && exec bash "$0" "$@"
fi

[ "${1:-}" = "--env-only" ] && exit 0
# CXX as CMake's presets pick it (c++ unless CXX is set): scikit-build-core would take the interpreter's
# own (sysconfig's g++), and ccache keys its objects by the compiler's name, so the release build's
# objects would not serve this build
CXX=${CXX:-c++} .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation ./python
echo "setup-python: .venv ready ($root/.venv, pinned packages from $pinned)" >&2
