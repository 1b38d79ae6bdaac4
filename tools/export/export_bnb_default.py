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


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, versions(), GENERATOR, export_all))
