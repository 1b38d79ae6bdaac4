#!/usr/bin/env python3
"""Block-wise 8-bit quantize and dequantize: the lowbit reference against torchao CPU eager and
bitsandbytes CPU, on the same data, in one run, one thread each (per-core figures), best of R runs.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench/bench_codebook.py --bench build/release/tools/bench/bench_blockwise

Prints a Markdown table of times and ratios (reference speed-up over each library) and checks that
the three agree where they must: the reference's torchao codes equal torchao's bit for bit, and its
bitsandbytes codes equal bitsandbytes' CPU codes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # bitsandbytes' CPU library and torch: one core

import bitsandbytes  # noqa: E402
import bitsandbytes.functional as bnbF  # noqa: E402
import torch  # noqa: E402
import torchao  # noqa: E402
from torchao.optim import quant_utils  # noqa: E402


def best(repeats, fn):
    t = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def codes_hash(codes: torch.Tensor) -> int:
    h = 0
    for c in codes.tolist():
        h = (h * 31 + c) % (1 << 64)
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path of the built bench_blockwise executable")
    ap.add_argument("--elements", type=int, default=1 << 22)
    ap.add_argument("--block-size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)

    x = torch.randn(args.elements, generator=torch.Generator().manual_seed(0)) * 1e-3
    qmap = torch.tensor(quant_utils.create_dynamic_map(True, 7, 8), dtype=torch.float32)
    bnb_qmap = bnbF.create_dynamic_map(signed=True).float()
    bs = args.block_size

    def torchao_quantize():
        y, scale = quant_utils.scale_tensor(x, bs)
        return quant_utils.quantize_8bit_with_qmap(y, qmap), scale

    ta_codes, ta_scale = torchao_quantize()
    bnb_codes, bnb_state = bnbF.quantize_blockwise(x, code=bnb_qmap, blocksize=bs)
    times = {
        "torchao_quantize_s": best(args.repeats, torchao_quantize),
        "torchao_dequantize_s": best(args.repeats, lambda: quant_utils.dequant_with_qmap(ta_codes, qmap, ta_scale)),
        "bnb_cpu_quantize_s": best(args.repeats, lambda: bnbF.quantize_blockwise(x, code=bnb_qmap, blocksize=bs)),
        "bnb_dequantize_s": best(args.repeats, lambda: bnbF.dequantize_blockwise(bnb_codes, bnb_state)),
    }
    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        f.write(x.numpy().tobytes())
        f.flush()
        ref = json.loads(subprocess.run([args.bench, f.name, str(bs), str(args.repeats)], check=True,
                                        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout)
    agree_torchao = ref["torchao_codes_hash"] == codes_hash(ta_codes)
    agree_bnb = ref["bnb_codes_hash"] == codes_hash(bnb_codes)

    print(f"Block-wise 8-bit, {args.elements} float32 elements (randn x 1e-3), block size {bs}, one thread, "
          f"best of {args.repeats}; torch {torch.__version__}, torchao {torchao.__version__}, "
          f"bitsandbytes {bitsandbytes.__version__}.\n")
    print("| operation | library | library time | lowbit reference | reference speed-up |")
    print("|---|---|---:|---:|---:|")
    rows = [("quantize", "torchao eager", "torchao_quantize_s"), ("dequantize", "torchao eager", "torchao_dequantize_s"),
            ("quantize", "bitsandbytes CPU", "bnb_cpu_quantize_s"), ("dequantize", "bitsandbytes CPU", "bnb_dequantize_s")]
    for op, lib, key in rows:
        print(f"| {op} | {lib} | {times[key] * 1e3:.1f} ms | {ref[key] * 1e3:.1f} ms | {times[key] / ref[key]:.2f}x |")
    print(f"\nCodes identical to torchao's: {agree_torchao}; to bitsandbytes CPU's: {agree_bnb}.")
    return 0 if agree_torchao and agree_bnb else 1


if __name__ == "__main__":
    sys.exit(main())
