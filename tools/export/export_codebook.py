#!/usr/bin/env python3
"""Golden cases for the codebook and FP8 block-wise formats, from the official packages (CPU only).

Calls torchao's and bitsandbytes' own functions on deterministic inputs and writes one safetensors
case per (format, inputs, block size) under OUT/<source>/<format>/, with the MANIFEST entries
(sha256, size, provenance) in OUT/MANIFEST.json. Rerunning with the same package versions rewrites
the same bytes. With --diff-against, nothing is written: the new bytes are compared with an existing
golden folder, and every case whose tensors changed is listed (point the exporter at another
version of a package to see what that version changed).

    .venv/bin/python tools/export/export_codebook.py --out golden
    .venv/bin/python tools/export/export_codebook.py --out /tmp/g --diff-against golden
"""
import sys

import bitsandbytes
import bitsandbytes.functional as bnbF
import numpy as np
import torch
import torchao
from torchao.optim import quant_utils
from torchao.optim.subclass_4bit import OptimState4bit
from torchao.optim.subclass_8bit import OptimState8bit
from torchao.optim.subclass_fp8 import OptimStateFp8, quantize_fp8

import golden_io

GENERATOR = "tools/export/export_codebook.py (lowbit 0.1.0)"
N = 4096  # elements per case: a multiple of every block size below, as torchao requires
TORCH = f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}"
# Under another CPU capability than AVX2 only what the capability changes is written, named
# *.cpu-<capability>: the tables (torch.linspace fused or not, observed by golden_io.linspace_rule)
# and torchao.fp8's NaN blocks (whose NaN codes.float() * scale returns where both are NaN). The
# native bitsandbytes library does not run torch; torchao's codebook states (amax, division, search)
# and the FP8 casts gave bits the reference reproduces at both capabilities (docs/golden-files.md).
#     ATEN_CPU_CAPABILITY=default .venv/bin/python tools/export/export_codebook.py --out golden
CAPABILITY = torch.backends.cpu.get_cpu_capability().lower()
SUFFIX = "" if CAPABILITY == "avx2" else f".cpu-{CAPABILITY}"


def versions():
    return {"torchao": f"torchao {torchao.__version__} ({TORCH})",
            "bnb": f"bitsandbytes {bitsandbytes.__version__} ({TORCH})"}


# ---- inputs ------------------------------------------------------------------------------------

def boundary_inputs(qmap: torch.Tensor, block_size: int, n: int) -> torch.Tensor:
    """Blocks whose first element is 1.0 (absmax 1, so the normalized value equals the input, by
    division and by reciprocal alike) holding every code value, every midpoint and its float32
    neighbours, zeros and subnormals."""
    q = qmap.float()
    mids = (q[:-1] + q[1:]) * 0.5
    inf = torch.tensor(float("inf"))
    parts = [q, mids, torch.nextafter(mids, -inf), torch.nextafter(mids, inf),
             torch.tensor([0.0, -0.0, 1e-45, -1.1754944e-38, 1e-30])]
    values = torch.cat(parts)
    out = []
    for v in values.tolist():
        if len(out) % block_size == 0:
            out.append(1.0)
        out.append(v)
    out = torch.tensor(out, dtype=torch.float32)
    reps = -(-n // out.numel())
    return out.repeat(reps)[:n].clone()


def make_inputs(kind: str, block_size: int, seed: int, qmap: torch.Tensor | None) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == "normal":
        return torch.randn(N, generator=g)
    if kind == "uniform":
        return torch.rand(N, generator=g) * 2 - 1
    if kind == "lognormal":
        sign = torch.where(torch.rand(N, generator=g) < 0.5, -1.0, 1.0)
        return sign * torch.exp(3.0 * torch.randn(N, generator=g))
    if kind == "adam_m":  # first moments: small, signed, block-to-block scale changes
        return 1e-3 * torch.randn(N, generator=g) * torch.exp(torch.randn(N // block_size, generator=g)).repeat_interleave(block_size)
    if kind == "adam_v":  # second moments: squares of small gradients, non-negative, heavy range
        return (1e-3 * torch.randn(N, generator=g) * torch.exp(torch.randn(N, generator=g))) ** 2
    if kind == "outliers":  # one huge value per block
        x = torch.randn(N, generator=g)
        x[block_size // 2::block_size] *= 1e4
        return x
    if kind == "special":  # all-zero block, constant block, signed zeros, subnormals, tiny values
        x = torch.randn(N, generator=g)
        x[:block_size] = 0.0
        x[block_size:2 * block_size] = 0.375
        x[2 * block_size::7] = -0.0
        x[2 * block_size + 3::11] = 1e-45
        x[2 * block_size + 5::13] = -3e-39
        return x
    if kind == "nonfinite":  # a NaN and infinities, in different blocks where the blocks allow
        x = torch.randn(N, generator=g)
        x[3] = float("nan")
        x[N // 2 + 5] = float("inf")
        x[N - 9] = float("-inf")
        return x
    if kind == "boundaries":
        return boundary_inputs(qmap, block_size, N)
    raise ValueError(kind)


KINDS = ["normal", "uniform", "lognormal", "adam_m", "adam_v", "outliers", "special", "nonfinite", "boundaries"]

# ---- cases ---------------------------------------------------------------------------------------

def export_tables(w: golden_io.Writer):
    torchao_maps = {
        "signed8": torch.tensor(quant_utils.create_dynamic_map(True, 7, 8), dtype=torch.float32),
        "unsigned8": torch.tensor(quant_utils.create_dynamic_map(False, 7, 8), dtype=torch.float32),
        "signed4": torch.tensor(quant_utils.create_dynamic_map(True, 3, 4), dtype=torch.float32),
        "unsigned4": torch.linspace(0, 1, 17)[1:].clone(),
    }
    linspace = golden_io.linspace_rule()
    for name, q in torchao_maps.items():
        w.add("torchao", "torchao.qmap", name + SUFFIX, {"qmap": q}, {"map": name, "linspace": linspace},
              "torchao.optim.quant_utils.create_dynamic_map / subclass_4bit linspace(0, 1, 17)[1:]", 0, "none")
    bnb_maps = {
        "dynamic_signed": bnbF.create_dynamic_map(signed=True),
        "dynamic_unsigned": bnbF.create_dynamic_map(signed=False),
        "dynamic_signed4": bnbF.create_dynamic_map(True, 3, 4),
        "linear_signed": bnbF.create_linear_map(signed=True),
        "linear_unsigned": bnbF.create_linear_map(signed=False),
    }
    for name, q in bnb_maps.items():
        w.add("bnb", "bnb.qmap", name + SUFFIX, {"qmap": q.float().cpu()}, {"map": name, "linspace": linspace},
              "bitsandbytes.functional.create_dynamic_map / create_linear_map", 0, "none")
    return torchao_maps, bnb_maps


def export_torchao_codebook(w: golden_io.Writer, maps: dict):
    for bits, sizes in ((8, (32, 256, 4096)), (4, (32, 128, 4096))):
        for signed in (True, False):
            qmap = maps[("signed" if signed else "unsigned") + str(bits)]
            fmt = f"torchao.codebook{bits}.{'signed' if signed else 'unsigned'}"
            quantize = quant_utils.quantize_8bit_with_qmap if bits == 8 else quant_utils.quantize_4bit_with_qmap
            for block in sizes:
                for seed, kind in enumerate(KINDS, start=1):
                    x = make_inputs(kind, block, seed, qmap)
                    if not signed and kind not in ("boundaries", "nonfinite"):
                        x = x.abs()  # unsigned maps hold non-negative states (second moments)
                    y, scale = quant_utils.scale_tensor(x, block)
                    codes = quantize(y, qmap)
                    dequant = quant_utils.dequant_with_qmap(codes, qmap, scale)
                    tensors = {"input": x, "qmap": qmap, "codes": codes, "scale": scale, "dequant": dequant}
                    # the optimizer-state subclass must agree with the functions it is built from
                    state = (OptimState8bit if bits == 8 else OptimState4bit).zeros(N, signed, block)
                    state.copy_(x)
                    if bits == 8:
                        assert torch.equal(state.codes, codes), fmt
                        assert torch.equal(state.scale.view(torch.int32), scale.view(torch.int32)), fmt  # NaN-safe
                    else:
                        tensors["codes_packed"] = state.codes.clone()
                        assert torch.equal(torch.stack([state.codes >> 4, state.codes & 15], -1).view(-1), codes), fmt
                    w.add("torchao", fmt, f"{kind}.block{block}", tensors, {"block_size": block},
                          f"torchao.optim.quant_utils.scale_tensor + quantize_{bits}bit_with_qmap + dequant_with_qmap; "
                          f"OptimState{bits}bit.copy_", seed, kind)


def export_torchao_fp8(w: golden_io.Writer):
    params_rules = golden_io.fp8_rules(N)
    if SUFFIX:
        params_rules["cpu_capability"] = CAPABILITY
    for block in (32, 256, 4096):
        for seed, kind in enumerate(KINDS, start=1):
            if kind == "boundaries" or (SUFFIX and kind != "nonfinite"):
                continue  # the FP8 grid's boundaries are covered by the exhaustive sweeps
            x = make_inputs(kind, block, seed, None)
            codes, scale = quantize_fp8(x, block)
            state = OptimStateFp8.zeros(N, block)
            state.copy_(x)
            assert torch.equal(state.codes.view(torch.uint8), codes.view(torch.uint8))
            dequant = state.dequantize()
            w.add("torchao", "torchao.fp8", f"{kind}.block{block}{SUFFIX}",
                  {"input": x, "codes": codes, "scale": scale, "dequant": dequant},
                  {"block_size": block, **params_rules},
                  "torchao.optim.subclass_fp8.quantize_fp8; OptimStateFp8.dequantize", seed, kind)


def export_bnb_blockwise(w: golden_io.Writer, maps: dict):
    for variant, qname in (("dynamic", "dynamic_signed"), ("linear", "linear_signed")):
        qmap = maps[qname].float().cpu()
        for block in (64, 256, 4096):
            for seed, kind in enumerate(KINDS, start=1):
                x = make_inputs(kind, block, seed, qmap)
                if block != 4096:
                    x = torch.cat([x, x[:37] * 0.5])  # a partial tail block
                codes, state = bnbF.quantize_blockwise(x, code=qmap, blocksize=block)
                dequant = bnbF.dequantize_blockwise(codes, state)
                w.add("bnb", f"bnb.blockwise8.{variant}", f"{kind}.block{block}",
                      {"input": x, "qmap": qmap, "codes": codes, "scale": state.absmax, "dequant": dequant},
                      {"block_size": block, "backend": "cpu"},
                      "bitsandbytes.functional.quantize_blockwise / dequantize_blockwise (CPU native library)", seed, kind)
                if block == 256 and kind in KINDS_16BIT:
                    export_bnb_16bit(w, variant, qmap, x, block, seed, kind)


# bf16 and f16 inputs of the native library (cquantize_blockwise_cpu_bf16 / _fp16; dequantize back to
# the input's dtype): normal values, overflow to f16's Inf (lognormal), zeros and subnormals, NaN and Inf
KINDS_16BIT = ("normal", "lognormal", "special", "nonfinite")


def export_bnb_16bit(w: golden_io.Writer, variant: str, qmap: torch.Tensor, x: torch.Tensor, block: int, seed: int,
                     kind: str):
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        x16 = x.to(dtype)
        codes, state = bnbF.quantize_blockwise(x16, code=qmap, blocksize=block)
        dequant = bnbF.dequantize_blockwise(codes, state)
        assert dequant.dtype == dtype, f"dequantize_blockwise returned {dequant.dtype} for {name} input"
        w.add("bnb", f"bnb.blockwise8.{variant}", f"{kind}.block{block}.{name}",
              {"input": x16, "qmap": qmap, "codes": codes, "scale": state.absmax, "dequant": dequant},
              {"block_size": block, "backend": "cpu"},
              f"bitsandbytes.functional.quantize_blockwise / dequantize_blockwise on a {name} tensor "
              f"(CPU native library: cquantize_blockwise_cpu_{'bf16' if name == 'bf16' else 'fp16'})", seed, kind)


def nan_payload_inputs(block: int, seed: int) -> torch.Tensor:
    """Four blocks of randn: one NaN with another sign or payload in each of the first three (a
    signalling NaN among them; bit patterns, which Python floats would quiet), the last one clean."""
    x = torch.randn(4 * block, generator=torch.Generator().manual_seed(seed))
    nans = torch.from_numpy(np.array([0xFFFFFFFF, 0x7FC00001, 0x7F800001], dtype=np.uint32).view(np.float32))
    for k in range(3):
        x[k * block + 5 + k] = nans[k]
    return x


def export_nan_payloads(w: golden_io.Writer, maps: dict):
    """torch's amax of a block holding a NaN, whatever the NaN's sign and payload (the scales), and
    the codes and dequantized values that follow, for a codebook and the FP8 state."""
    block = 256
    x = nan_payload_inputs(block, 31)
    qmap = maps["signed8"]
    y, scale = quant_utils.scale_tensor(x, block)
    if SUFFIX:  # the codebook state's bits are the same at every capability seen: the FP8 state only
        return export_nan_payloads_fp8(w, x, block)
    codes = quant_utils.quantize_8bit_with_qmap(y, qmap)
    w.add("torchao", "torchao.codebook8.signed", f"nan-payloads.block{block}",
          {"input": x, "qmap": qmap, "codes": codes, "scale": scale, "dequant": quant_utils.dequant_with_qmap(codes, qmap, scale)},
          {"block_size": block},
          "torchao.optim.quant_utils.scale_tensor + quantize_8bit_with_qmap + dequant_with_qmap", 31, "nan-payloads")
    export_nan_payloads_fp8(w, x, block)


def export_nan_payloads_fp8(w: golden_io.Writer, x: torch.Tensor, block: int):
    codes, scale = quantize_fp8(x, block)
    state = OptimStateFp8.zeros(x.numel(), block)
    state.copy_(x)
    assert torch.equal(state.codes.view(torch.uint8), codes.view(torch.uint8))
    params = {"block_size": block, **golden_io.fp8_rules(N), **({"cpu_capability": CAPABILITY} if SUFFIX else {})}
    w.add("torchao", "torchao.fp8", f"nan-payloads.block{block}{SUFFIX}",
          {"input": x, "codes": codes, "scale": scale, "dequant": state.dequantize()}, params,
          "torchao.optim.subclass_fp8.quantize_fp8; OptimStateFp8.dequantize", 31, "nan-payloads")


def export_fp8_block1(w: golden_io.Writer):
    """torchao.fp8 with block_size 1 (issue 30): codes.float() * scale multiplies two tensors of the
    same shape, so torch runs its element-wise loop (vectorized body, scalar rest), not the broadcast
    loop of larger blocks, and a NaN code meets a NaN scale in that loop's operand order. 37 blocks:
    five of NaN 0xFFC00001 first, then randn with NaNs of other signs and payloads spread over the
    loop's vector body and its rest (32 + 5 at AVX2 and AVX-512), at every capability."""
    n, block = 37, 1
    x = torch.randn(n, generator=torch.Generator().manual_seed(41))
    nans = {0: 0xFFC00001, 1: 0xFFC00001, 2: 0xFFC00001, 3: 0xFFC00001, 4: 0xFFC00001, 9: 0x7FC00001,
            14: 0xFFFFFFFF, 20: 0x7F800001, 27: 0xFF800001, 31: 0x7FC00000, 32: 0xFFC00001, 33: 0x7FFFFFFF,
            35: 0xFFC00000, 36: 0x7FC00002}
    bits = torch.from_numpy(np.array(list(nans.values()), dtype=np.uint32).view(np.float32))
    x[list(nans)] = bits
    assert all(int(v) & 0xFFFFFFFF == b for v, b in zip(x.view(torch.int32)[list(nans)].tolist(), nans.values()))
    codes, scale = quantize_fp8(x, block)
    state = OptimStateFp8.zeros(n, block)
    state.copy_(x)
    assert torch.equal(state.codes.view(torch.uint8), codes.view(torch.uint8))
    params = {"block_size": block, **golden_io.fp8_rules(n), **({"cpu_capability": CAPABILITY} if SUFFIX else {})}
    w.add("torchao", "torchao.fp8", f"nan-payloads.block1{SUFFIX}",
          {"input": x, "codes": codes, "scale": scale, "dequant": state.dequantize()}, params,
          "torchao.optim.subclass_fp8.quantize_fp8; OptimStateFp8.dequantize", 41,
          f"randn [{n}] with NaNs {', '.join(f'{b:#x} at {k}' for k, b in nans.items())}")


def export_codebook4_odd_blocks(w: golden_io.Writer, maps: dict):
    """torchao's 4-bit state with odd block sizes (issue 30): OptimState4bit packs element pairs of
    the flattened tensor, so with an odd block size a byte holds the last element of one block and
    the first of the next; the scales stay per block. Block counts even, so the element count is."""
    for signed in (True, False):
        qmap = maps["signed4" if signed else "unsigned4"]
        fmt = f"torchao.codebook4.{'signed' if signed else 'unsigned'}"
        for block, blocks in ((5, 10), (33, 6)):
            n = block * blocks
            for seed, kind in ((51, "normal"), (52, "boundaries")):
                x = make_inputs(kind, block, seed, qmap)[:n].clone()
                if not signed and kind != "boundaries":
                    x = x.abs()
                y, scale = quant_utils.scale_tensor(x, block)
                codes = quant_utils.quantize_4bit_with_qmap(y, qmap)
                dequant = quant_utils.dequant_with_qmap(codes, qmap, scale)
                state = OptimState4bit.zeros(n, signed, block)
                state.copy_(x)
                assert torch.equal(torch.stack([state.codes >> 4, state.codes & 15], -1).view(-1), codes), fmt
                assert torch.equal(state.scale.view(torch.int32), scale.view(torch.int32)), fmt
                w.add("torchao", fmt, f"{kind}.block{block}.n{n}",
                      {"input": x, "qmap": qmap, "codes": codes, "scale": scale, "dequant": dequant,
                       "codes_packed": state.codes.clone()}, {"block_size": block},
                      "torchao.optim.quant_utils.scale_tensor + quantize_4bit_with_qmap + dequant_with_qmap; "
                      "OptimState4bit.copy_ (odd block size: packed pairs cross blocks)", seed, f"{kind}, first {n}")


def export_all(w: golden_io.Writer):
    torchao_maps, bnb_maps = export_tables(w)
    if SUFFIX:
        export_torchao_fp8(w)
        export_nan_payloads(w, torchao_maps)
        export_fp8_block1(w)
        return
    export_torchao_codebook(w, torchao_maps)
    export_torchao_fp8(w)
    export_bnb_blockwise(w, bnb_maps)
    export_nan_payloads(w, torchao_maps)
    export_fp8_block1(w)
    export_codebook4_odd_blocks(w, torchao_maps)


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, versions(), GENERATOR, export_all))
