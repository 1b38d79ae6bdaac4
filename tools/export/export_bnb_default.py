#!/usr/bin/env python3
"""Golden cases for bitsandbytes' default (pure-PyTorch) back end of quantize_blockwise /
dequantize_blockwise (bnb.blockwise8.dynamic and .linear with backend=default), CPU only.

bitsandbytes runs this back end on a CPU where its native library cannot be loaded (cextension.py:
"XPU/CPU can run without native library"; backends/cpu/ops.py registers its CPU kernels only when
the library loaded). This script makes that load fail, and nothing else: ctypes.cdll.LoadLibrary
refuses libbitsandbytes_* before bitsandbytes is imported, so bitsandbytes.functional dispatches to
backends/default/ops.py exactly as it does on such a machine. The script checks that the native
library is indeed absent and that the codes differ from the native library's where the back ends
are known to differ (a NaN block), so a case is never labelled default while made by the library.

    .venv/bin/python tools/export/export_bnb_default.py --out golden
    ATEN_CPU_CAPABILITY=default .venv/bin/python tools/export/export_bnb_default.py --out golden   # *.cpu-default
"""
import ctypes
import sys

_load = ctypes.cdll.LoadLibrary


def _refuse_bnb(name, *args, **kwargs):
    if "libbitsandbytes" in str(name):
        raise OSError(f"{name}: not loaded (export_bnb_default.py runs bitsandbytes without its native library)")
    return _load(name, *args, **kwargs)


ctypes.cdll.LoadLibrary = _refuse_bnb

import golden_io  # noqa: E402  (first: the run's own compile cache, before torch)

import bitsandbytes  # noqa: E402
import bitsandbytes.functional as bnbF  # noqa: E402
from bitsandbytes.backends.default import ops as default_ops  # noqa: E402
from bitsandbytes.cextension import ErrorHandlerMockBNBNativeLibrary, lib  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

GENERATOR = "tools/export/export_bnb_default.py (lowbit 0.1.0)"
TORCH = f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}"
CAPABILITY = torch.backends.cpu.get_cpu_capability().lower()  # the param: avx2, avx512 or default
SUFFIX = "" if CAPABILITY == "avx2" else f".cpu-{CAPABILITY}"  # cases of another capability beside AVX2's
N = 512


def versions():
    return {"bnb": f"bitsandbytes {bitsandbytes.__version__} default back end, no native library ({TORCH})"}


# backends/default/ops.py runs its dequantize under torch.compile (_try_torch_compile: inductor's C++
# kernels, vectorized for the capability ATEN_CPU_CAPABILITY names), falling back to the eager
# function when compiling fails. The cases hold what bnbF.dequantize_blockwise returns; each is
# checked bit for bit against the eager function (`__wrapped__`) and against the same function
# compiled here, which raises instead of falling back, so a case is never the fallback's alone
# (export_all prints golden_io.compile_cache(): each run compiles into a fresh cache of its own).
DEQUANT_EAGER = default_ops._dequantize_blockwise_compute.__wrapped__
DEQUANT_COMPILED = torch.compile(DEQUANT_EAGER, dynamic=False)


def dequantize(codes: torch.Tensor, state, name: str) -> torch.Tensor:
    dequant = bnbF.dequantize_blockwise(codes, state)
    args = (codes.reshape(-1), state.absmax, state.code, state.blocksize, state.dtype)
    eager = DEQUANT_EAGER(*args).reshape(codes.shape)
    golden_io.check_compiled(f"{name}: dequantize_blockwise (library) against eager", dequant, eager)
    golden_io.check_compiled(f"{name}: dequantize_blockwise compiled here against eager", DEQUANT_COMPILED(*args).reshape(codes.shape), eager)
    return dequant


def inputs(kind: str, block: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N + 37, generator=g)  # full blocks and a partial tail block of 37
    if kind == "nonfinite":  # a NaN, +Inf and -Inf in three different full blocks, and a NaN in the tail
        x[3] = float("nan")
        x[block + 5] = float("inf")
        x[2 * block + 9] = float("-inf")
        x[N + 11] = float("nan")
    elif kind == "nan-payloads":  # NaNs of other signs and payloads (bit patterns), and one in the tail
        nans = torch.from_numpy(np.array([0xFFC00000, 0x7FC00001, 0xFFFFFFFF, 0x7F800001, 0xFFC00001],
                                         dtype=np.uint32).view(np.float32))
        for k in range(4):
            x[k * (N // 4) + 7] = nans[k]  # blocks 0, 2, 4, 6 of 64; two in each of the two blocks of 256
        x[N + 2] = nans[4]
    elif kind == "special":  # a zero block, signed zeros, a subnormal
        x[:block] = 0.0
        x[block:2 * block:3] = -0.0
        x[block + 1] = 1e-45
    return x


# 16-bit NaNs of both signs, quiet and signalling, with payloads, as bit patterns
NANS_16BIT = {torch.bfloat16: [0xFFC0, 0x7FC1, 0xFFFF, 0x7F81, 0xFFC1],
              torch.float16: [0xFE00, 0x7E01, 0xFFFF, 0x7C01, 0xFE01]}


def inputs_16bit(kind: str, block: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """The float32 inputs rounded to the dtype; nan-payloads with 16-bit NaN patterns instead, the
    tail block's in the last 549 % 8 elements (torch's f16 -> float32 copy converts those in its
    scalar tail, which gives 0x7FFFFFFF for a NaN)."""
    if kind != "nan-payloads":
        return inputs(kind, block, seed).to(dtype)
    x = inputs("normal", block, seed).to(dtype)
    bits = x.view(torch.int16)
    nans = [v - 0x10000 if v >= 0x8000 else v for v in NANS_16BIT[dtype]]
    for k in range(4):
        bits[k * (N // 4) + 7] = nans[k]
    bits[N + 35] = nans[4]
    return x


def export_16bit(w: golden_io.Writer, variant: str, qmap: torch.Tensor, block: int):
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        for seed, kind in enumerate(("normal", "nonfinite", "nan-payloads"), start=11):
            x = inputs_16bit(kind, block, seed, dtype)
            codes, state = bnbF.quantize_blockwise(x, code=qmap, blocksize=block)
            dequant = dequantize(codes, state, f"{variant} {kind} block {block} {name}")
            assert dequant.dtype == dtype, f"dequantize_blockwise returned {dequant.dtype} for {name} input"
            w.add("bnb", f"bnb.blockwise8.{variant}", f"default.{kind}.block{block}.{name}{SUFFIX}",
                  {"input": x, "qmap": qmap, "codes": codes, "scale": state.absmax, "dequant": dequant},
                  {"block_size": block, "backend": "default", "cpu_capability": CAPABILITY},
                  f"bitsandbytes.functional.quantize_blockwise / dequantize_blockwise on a {name} tensor "
                  "(backends/default/ops.py: native library not loaded)", seed, kind)


def nan_tail_inputs(length: int, tail: dict) -> torch.Tensor:
    """Eight blocks of 64 of randn and a partial last block of `length` holding NaNs (tail index ->
    bit pattern)."""
    x = torch.randn(N + length, generator=torch.Generator().manual_seed(60 + length))
    for k, b in tail.items():
        x.view(torch.int32)[N + k] = b - (1 << 32) if b >= 1 << 31 else b
    return x


def export_nan_tails(w: golden_io.Writer, qmap: torch.Tensor):
    """The partial last block's absmax is A_flat[full:].abs().max(), a reduction of the whole tail
    (issue 30): of a one-element tail at AVX2 and AVX-512, |x| quieted, not the all-ones NaN of two
    elements or more (here a negative signalling NaN); of a tail holding two NaNs at `default`, where
    torch's scalar max keeps eight accumulators (element i in lane i mod 8) and the lowest lane's NaN
    wins: 0x7FC00001 at tail index 5 (lane 5) and 0x7FC00002 at index 8 (lane 0), in a tail of 11.
    Each is written where it differs from what was modelled before: the one-element tail at
    `default` gave the bits already modelled, and AVX2's and AVX-512's two-NaN tail 0xFFFFFFFF."""
    cases = [("nan-tail2", 11, {5: 0x7FC00001, 8: 0x7FC00002})] if CAPABILITY == "default" else \
        [("nan-tail1", 1, {0: 0xFF800001})]
    for kind, length, tail in cases:
        x = nan_tail_inputs(length, tail)
        codes, state = bnbF.quantize_blockwise(x, code=qmap, blocksize=64)
        dequant = dequantize(codes, state, f"dynamic {kind} block 64")
        w.add("bnb", "bnb.blockwise8.dynamic", f"default.{kind}.block64{SUFFIX}",
              {"input": x, "qmap": qmap, "codes": codes, "scale": state.absmax, "dequant": dequant},
              {"block_size": 64, "backend": "default", "cpu_capability": CAPABILITY},
              "bitsandbytes.functional.quantize_blockwise / dequantize_blockwise (backends/default/ops.py: "
              "native library not loaded)", 60 + length,
              f"randn [{x.numel()}]: 8 blocks of 64 and a tail of {length} holding NaNs "
              + ", ".join(f"{b:#x} at tail index {k}" for k, b in tail.items()))


def export_f16_lanes(w: golden_io.Writer, qmap: torch.Tensor):
    """12 f16 values, blocks of 4, NaNs with payloads (issue 30): A.reshape(-1).float() converts f16
    8 lanes wide at AVX-512 as at AVX2 (payload kept, 0x7E01 -> 0x7FC02000), the rest in the scalar
    tail (0x7FFFFFFF); written at AVX-512, where the reference assumed 16 lanes."""
    x = torch.linspace(-1.5, 2.0, 12).to(torch.float16)
    nans = {1: 0x7E01, 6: 0xFE00, 9: 0x7C01}  # two in the 8-lane body, one in the scalar tail
    for k, b in nans.items():
        x.view(torch.int16)[k] = b - 0x10000 if b >= 0x8000 else b
    codes, state = bnbF.quantize_blockwise(x, code=qmap, blocksize=4)
    dequant = dequantize(codes, state, "dynamic f16 lanes block 4")
    w.add("bnb", "bnb.blockwise8.dynamic", f"default.nan-payloads.n12.block4.f16{SUFFIX}",
          {"input": x, "qmap": qmap, "codes": codes, "scale": state.absmax, "dequant": dequant},
          {"block_size": 4, "backend": "default", "cpu_capability": CAPABILITY},
          "bitsandbytes.functional.quantize_blockwise / dequantize_blockwise on a f16 tensor "
          "(backends/default/ops.py: native library not loaded)", 0,
          "linspace(-1.5, 2, 12) in f16 with NaNs " + ", ".join(f"{b:#06x} at {k}" for k, b in nans.items()))


def export_all(w: golden_io.Writer):
    assert isinstance(lib, ErrorHandlerMockBNBNativeLibrary), "bitsandbytes loaded its native library"
    print(f"dequantize_blockwise: {golden_io.compile_cache()}; each result equal bit for bit to the eager function's",
          file=sys.stderr)
    maps = {"dynamic": bnbF.create_dynamic_map(signed=True).float(), "linear": bnbF.create_linear_map(signed=True).float()}
    for variant, qmap in maps.items():
        for block in (64, 256):
            for seed, kind in enumerate(("normal", "special", "nonfinite", "nan-payloads"), start=1):
                x = inputs(kind, block, seed)
                codes, state = bnbF.quantize_blockwise(x, code=qmap, blocksize=block)
                dequant = dequantize(codes, state, f"{variant} {kind} block {block}")
                if kind == "nonfinite":  # bucketize puts NaN last: the native library gives code 0 there
                    assert int(codes[0]) == 255, "a NaN block's codes are not 0xFF: not the default back end?"
                w.add("bnb", f"bnb.blockwise8.{variant}", f"default.{kind}.block{block}{SUFFIX}",
                      {"input": x, "qmap": qmap, "codes": codes, "scale": state.absmax, "dequant": dequant},
                      {"block_size": block, "backend": "default", "cpu_capability": CAPABILITY},
                      "bitsandbytes.functional.quantize_blockwise / dequantize_blockwise (backends/default/ops.py: "
                      "native library not loaded)", seed, kind)
        export_16bit(w, variant, qmap, 64)
    export_nan_tails(w, maps["dynamic"])
    if CAPABILITY == "avx512":
        export_f16_lanes(w, maps["dynamic"])


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, versions(), GENERATOR, export_all))
