#!/usr/bin/env bash
# Packs what device/gpu-checks.sh needs on a GPU machine that cannot build it (no -dev packages, no
# network): the binaries built here, the shared libraries they need beyond glibc, and the policies,
# in a folder laid out as an install tree (bin/, lib/, share/lowbit/). The golden cases are not
# copied: share/lowbit/golden links to the checkout's golden/, which travels with the working tree.
#   usage: device/pack-gpu-run.sh [BUILD_DIR] [DEST]     (defaults: build/release, .gpu-pack)
# Then carry DEST (git ignores it) and run there:  bash device/gpu-checks.sh --prefix DEST OUT_DIR
# docs/device/README.md says more.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
dest=${2:-.gpu-pack}
die() { echo "pack-gpu-run: error: $*" >&2; exit 2; }
[[ -x $build/bin/lowbit-gpu-checks ]] || die "$build/bin/lowbit-gpu-checks is missing: build with nvcc on PATH (LOWBIT_CUDA=AUTO or ON)"
[[ -x $build/tools/lowbit/lowbit ]] || die "$build/tools/lowbit/lowbit is missing: build the release preset first"

rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/plugins" "$dest/share/lowbit"
cp "$build/bin/lowbit-gpu-checks" "$build/tools/lowbit/lowbit" "$dest/bin/"
# The CUDA plugins of the suite (conformance/plugins: cuda_*.so); the host-only ones stay here.
find "$build/conformance" -maxdepth 2 -name 'cuda_*.so' -exec cp {} "$dest/plugins/" \;
# lowbit verify's CUDA runner, where lowbit looks for it: bin/../lib (device/harness/)
[[ -f $build/tools/lib/liblowbit_cuda_runner.so ]] || die "$build/tools/lib/liblowbit_cuda_runner.so is missing: build with nvcc"
cp "$build/tools/lib/liblowbit_cuda_runner.so" "$dest/lib/"
cp -r policies "$dest/share/lowbit/policies"
ln -s "$(realpath --relative-to="$dest/share/lowbit" golden)" "$dest/share/lowbit/golden"

# Every shared library the binaries and plugins load, except glibc's own (the GPU machine's glibc
# is at least as new as Debian 12's).
for f in "$dest"/bin/* "$dest"/plugins/*.so; do
  [[ -e $f ]] || continue
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|ld-linux*) ;;
    libcuda.so.*) ;;  # the driver: the GPU machine's own
    *) cp -L "$lib" "$dest/lib/" ;;
  esac
done
# bitsandbytes' CUDA library of the pinned wheel, when named (it is not in the repository):
#   pip download --no-deps bitsandbytes==0.50.2 && unzip -j bitsandbytes-*.whl '*/libbitsandbytes_cuda130.so'
if [[ -n ${LOWBIT_BNB_CUDA_LIB:-} ]]; then
  [[ -f $LOWBIT_BNB_CUDA_LIB ]] || die "LOWBIT_BNB_CUDA_LIB=$LOWBIT_BNB_CUDA_LIB: no such file"
  mkdir -p "$dest/lib/bnb"
  cp "$LOWBIT_BNB_CUDA_LIB" "$dest/lib/bnb/libbitsandbytes_cuda130.so"
fi
# COAT's optimizer kernels, when LOWBIT_COAT_SRC names a COAT checkout (commit 80ec99f; it is not
# in the repository): its kernel sources, and the input cases they run on, made here by the
# reference (device/gpu-checks.d/coat-optimizer.sh).
if [[ -n ${LOWBIT_COAT_SRC:-} ]]; then
  kernels=$LOWBIT_COAT_SRC/coat/optimizer/kernels
  [[ -d $kernels ]] || die "LOWBIT_COAT_SRC=$LOWBIT_COAT_SRC: no coat/optimizer/kernels/ there"
  mkdir -p "$dest/coat-src/coat/optimizer"
  cp -r "$kernels" "$dest/coat-src/coat/optimizer/"
  for format in coat.optim.origin.e4m3 coat.optim.expand.e4m3; do
    for spec in "normal:n=1000 3" "normal:n=40000,std=0.5 2" "lognormal:n=5000 2" "outliers:n=5000 2" "special 1"; do
      set -- $spec
      "$build/tools/lowbit/lowbit" golden generate --format "$format" --input "$1" --steps "$2" \
        --out "$dest/coat-inputs" >/dev/null || die "golden generate --format $format --input $1 failed"
    done
  done
fi
size=$(du -sbL --exclude=golden "$dest" | cut -f1)
echo "pack-gpu-run: $dest: $(ls "$dest/bin" | wc -l) programs, $(ls "$dest/plugins" | wc -l) plugins, $(ls "$dest/lib" | wc -l) libraries, $((size / 1048576)) MiB"
(( size < 40 * 1048576 )) || die "$dest is $((size / 1048576)) MiB: the working tree and what is carried must stay under 64 MiB"
