#!/usr/bin/env python3
"""Golden cases for the element-wise FP8 casts (fp8.e4m3fn.*, fp8.e5m2.*), from torch and ml_dtypes
themselves (CPU only).

Each case holds one input tensor (float32: every finite value of the format, every midpoint and its
float32 neighbours, both signs, and the non-finite inputs, NaNs with payloads and signs included),
the library's codes (`x.to(float8)` in torch, `x.astype(float8)` in ml_dtypes) and `dequant`, the
library's own decoding of those codes back to float32 (`codes.float()`, `codes.astype(float32)`).
`dequant` is where the libraries differ in NaN bits: the params record the NaN rules observed here
(`nan_encoding` for a NaN input's code, `nan_widening` for a NaN code's float32), checked by this
script on the library's output before a case is written; a library that changes them makes the
script stop instead of writing a case under the old label.

    .venv/bin/python tools/export/export_fp8_cast.py --out golden
    ATEN_CPU_CAPABILITY=default .venv/bin/python tools/export/export_fp8_cast.py --out /tmp/g   # edges.cpu-default
"""
import struct
import sys

import ml_dtypes
import numpy as np
import torch

import golden_io

GENERATOR = "tools/export/export_fp8_cast.py (lowbit 0.1.0)"
CAPABILITY = torch.backends.cpu.get_cpu_capability()
# The casts gave the same bits at AVX2, AVX-512 and default (docs/golden-files.md): the committed
# cases are AVX2's. Under another capability the names take .cpu-<capability>, so that a run there
# never relabels AVX2's cases (compare its tensors with them by hand, or conform the folder it wrote).
SUFFIX = "" if CAPABILITY == "AVX2" else f".cpu-{CAPABILITY.lower()}"


def versions():
    return {"torch": f"torch {torch.__version__} (CPU capability {CAPABILITY})",
            # torch makes the inputs, ml_dtypes casts them; the capability is torch's report of this CPU
            "ml_dtypes": f"ml_dtypes {ml_dtypes.__version__} (numpy {np.__version__}, CPU capability {CAPABILITY})"}


def f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


# NaN inputs: quiet and signalling, both signs, payloads low and high.
NAN_BITS = [0x7FC00000, 0xFFC00000, 0x7FC00001, 0xFFFFFFFF, 0x7F800001, 0xFF800001, 0x7FA00000, 0x7FFFE000]


def edge_inputs(dtype: torch.dtype) -> torch.Tensor:
    """Every finite value of the format, each midpoint with its float32 neighbours (both signs),
    then +-0, extremes, +-Inf and NaNs with payloads (as bit patterns: Python floats would quiet them)."""
    codes = torch.arange(256, dtype=torch.uint8).view(dtype).float()
    values = torch.unique(codes[torch.isfinite(codes) & (codes >= 0)])  # sorted, +0 first
    step_over = values[-1] + (values[-1] - values[-2])
    mids = (torch.cat([values[1:], step_over.view(1)]) + values) / 2  # exact in float32 here
    inf = torch.tensor(float("inf"))
    pos = torch.cat([values, mids, torch.nextafter(mids, -inf), torch.nextafter(mids, inf)])
    tail = torch.tensor([-0.0, 1e-45, 1.1754944e-38, 1e-30, 1e30, 3.4028235e38, float("inf"), float("-inf")])
    nans = torch.from_numpy(np.array(NAN_BITS, dtype=np.uint32).view(np.float32))
    return torch.cat([pos, -pos, tail, nans]).contiguous()


def bits(t: torch.Tensor) -> list:
    return [v & 0xFFFFFFFF for v in t.contiguous().view(torch.int32).tolist()]


def observed_widening(codes_u8: list, dequant_bits: list, mantissa_bits: int) -> str:
    """The NaN widening the library applied, by name (fp8.hpp NanWidening): every NaN code's
    float32 must follow one rule, else the script stops."""
    rules = {"quiet": lambda c: 0x7FC00000 | ((c & 0x80) << 24),
             "c10": lambda c: 0x7FC00000 | ((c & 0x80) << 24) | ((c & ((1 << mantissa_bits) - 1)) << (23 - mantissa_bits))}
    nan_pairs = [(c, d) for c, d in zip(codes_u8, dequant_bits) if (d & 0x7F800000) == 0x7F800000 and d & 0x7FFFFF]
    assert nan_pairs, "no NaN code in the case"
    fits = [name for name, rule in rules.items() if all(rule(c) == d for c, d in nan_pairs)]
    assert len(fits) >= 1, f"NaN widening matches no known rule: {[(hex(c), hex(d)) for c, d in nan_pairs][:8]}"
    return fits[0]


def observed_nan_encoding(x_bits: list, codes_u8: list, own: str, quiet_nan: int) -> str:
    """The NaN encoding of the NaN inputs, by name (fp8.hpp NanEncoding): torch 0x7F | sign, cuda 0x7F,
    ml_dtypes quiet_NaN | sign (E5M2 0x7E). The library's own name when its rule fits (E4M3FN's
    torch and ml_dtypes rules are the same codes)."""
    rules = {"torch": {(0, 0x7F), (1, 0xFF)}, "cuda": {(0, 0x7F), (1, 0x7F)},
             "ml_dtypes": {(0, quiet_nan), (1, quiet_nan | 0x80)}}
    got = {(xb >> 31, c) for xb, c in zip(x_bits, codes_u8) if (xb & 0x7F800000) == 0x7F800000 and xb & 0x7FFFFF}
    fits = [name for name, rule in rules.items() if got == rule]
    assert fits, f"NaN inputs encode to no known rule: {sorted(got)}"
    return own if own in fits else fits[0]


def observed_overflow(x_bits: list, codes_u8: list, max_finite: int, inf_code: int | None) -> str:
    """The overflow policy, from the code of 1e30: the largest finite code (satfinite), the Inf code
    (inf), or NaN (nan); the format page's names."""
    code = codes_u8[x_bits.index(0x7149F2CA)] & 0x7F  # f32(1e30)
    if code == max_finite:
        return "satfinite"
    if inf_code is not None and code == inf_code:
        return "inf"
    assert code == 0x7F or (inf_code is not None and code > inf_code), f"1e30 gives {code:#x}"
    return "nan"


def export_torch(w: golden_io.Writer):
    for name, dtype, m, max_finite, inf_code in (("e4m3fn", torch.float8_e4m3fn, 3, 0x7E, None),
                                                 ("e5m2", torch.float8_e5m2, 2, 0x7B, 0x7C)):
        x = edge_inputs(dtype)
        codes = x.to(dtype)
        overflow = observed_overflow(bits(x), codes.view(torch.uint8).tolist(), max_finite, inf_code)
        dequant = codes.float()
        u8 = codes.view(torch.uint8).tolist()
        params = {"nan_encoding": observed_nan_encoding(bits(x), u8, "torch", 0x7F),
                  "nan_widening": observed_widening(u8, bits(dequant), m)}
        w.add("torch", f"fp8.{name}.{overflow}", "edges" + SUFFIX, {"input": x, "codes": codes, "dequant": dequant}, params,
              f"torch Tensor.to(torch.float8_{name}); Tensor.float() of the codes", 0, "edges")


def export_ml_dtypes(w: golden_io.Writer):
    for name, dtype, tdtype, m, max_finite, inf_code in (
            ("e4m3fn", ml_dtypes.float8_e4m3fn, torch.float8_e4m3fn, 3, 0x7E, None),
            ("e5m2", ml_dtypes.float8_e5m2, torch.float8_e5m2, 2, 0x7B, 0x7C)):
        x = edge_inputs(tdtype)
        xn = x.numpy()
        codes_np = xn.astype(dtype)
        dequant_np = codes_np.astype(np.float32)
        u8 = codes_np.view(np.uint8).tolist()
        overflow = observed_overflow(bits(x), u8, max_finite, inf_code)
        quiet_nan = int(np.array([np.nan], dtype=dtype).view(np.uint8)[0])
        params = {"nan_encoding": observed_nan_encoding(bits(x), u8, "ml_dtypes", quiet_nan),
                  "nan_widening": observed_widening(u8, [int(b) for b in dequant_np.view(np.uint32)], m)}
        codes = torch.from_numpy(codes_np.view(np.uint8).copy()).view(tdtype)
        w.add("ml_dtypes", f"fp8.{name}.{overflow}", "edges" + SUFFIX,
              {"input": x, "codes": codes, "dequant": torch.from_numpy(dequant_np.copy())}, params,
              f"ml_dtypes: numpy astype(ml_dtypes.float8_{name}); astype(float32) of the codes", 0, "edges")


def export_all(w: golden_io.Writer):
    export_torch(w)
    export_ml_dtypes(w)


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, versions(), GENERATOR, export_all))
