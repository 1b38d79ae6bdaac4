#!/usr/bin/env python3
"""The reference (scalar definition and fast path) against the libraries it checks, in one run:
torchao eager and torch.compile'd (8-bit and 4-bit codebook quantize, FP8 state quantize, dequantize),
bitsandbytes CPU (block-wise quantize and dequantize), torch's and ml_dtypes' FP8 casts, and a plain
streaming pass (read float32, write a byte) as the memory floor.

    .venv/bin/python tools/bench/bench_codebook.py --bench build/release/tools/bench/bench_blockwise \\
        --elements 26 --threads 2 --repeats 5 --json perf.json --markdown perf.md

Every repetition runs every contender once, in turn (the reference's bench_blockwise, then each
peer), so that a change in the machine's load touches all alike; the table gives medians and
ratios (peer time / reference time: above 1, the reference is faster). Checks that the reference's
bytes equal each library's where they must (codes and scales). A peer whose package is missing is
skipped with a message; without torch only the reference rows are measured.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "load_average_start": os.getloadavg()}


def load_peers(threads):
    """Peer operations by name: name -> (function, label). Missing packages: skipped with a message."""
    peers, versions, skipped = {}, {}, []
    try:
        import numpy as np
        import torch
    except ImportError as e:
        return peers, versions, [f"torch/numpy ({e}): every peer skipped"], None
    torch.set_num_threads(threads)
    versions["torch"] = torch.__version__
    versions["numpy"] = np.__version__
    versions["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    env = {"np": np, "torch": torch}
    try:
        import torchao
        from torchao.optim import quant_utils, subclass_fp8
        versions["torchao"] = torchao.__version__
        env.update(torchao=torchao, quant_utils=quant_utils, subclass_fp8=subclass_fp8)
    except ImportError as e:
        skipped.append(f"torchao ({e})")
    try:
        import bitsandbytes
        import bitsandbytes.functional as bnbF
        versions["bitsandbytes"] = bitsandbytes.__version__
        env.update(bnbF=bnbF)
    except ImportError as e:
        skipped.append(f"bitsandbytes ({e})")
    try:
        import ml_dtypes
        versions["ml_dtypes"] = ml_dtypes.__version__
        env.update(ml_dtypes=ml_dtypes)
    except ImportError as e:
        skipped.append(f"ml_dtypes ({e})")
    return peers, versions, skipped, env


def build_peers(env, x):
    """(operation, peer label) -> zero-argument callable returning its outputs (for the byte check)."""
    torch, np = env["torch"], env["np"]
    ops = {}
    if "quant_utils" in env:
        qu, sf8 = env["quant_utils"], env["subclass_fp8"]
        q8 = torch.tensor(qu.create_dynamic_map(True, 7, 8), dtype=torch.float32)
        q4 = torch.tensor(qu.create_dynamic_map(True, 3, 4), dtype=torch.float32)

        def t8(x):
            y, s = qu.scale_tensor(x, 256)
            return qu.quantize_8bit_with_qmap(y, q8), s

        def t4(x):
            y, s = qu.scale_tensor(x, 128)
            return qu.quantize_4bit_with_qmap(y, q4), s

        def tf8(x):
            return sf8.quantize_fp8(x, 256)

        def d8(codes, scale):
            return qu.dequant_with_qmap(codes, q8, scale)

        def df8(codes, scale):
            return (codes.float().view(-1, 256) * scale.view(-1, 1)).view(-1)

        c8, s8 = t8(x)
        cf8, sf = tf8(x)
        for label, wrap in (("torchao eager", lambda f: f), ("torchao compiled", lambda f: torch.compile(f, dynamic=False))):
            ops[("torchao8_quantize", label)] = (lambda f: lambda: f(x))(wrap(t8))
            ops[("torchao4_quantize", label)] = (lambda f: lambda: f(x))(wrap(t4))
            ops[("torchao_fp8_quantize", label)] = (lambda f: lambda: f(x))(wrap(tf8))
            ops[("torchao8_dequantize", label)] = (lambda f: lambda: f(c8, s8))(wrap(d8))
            ops[("torchao_fp8_dequantize", label)] = (lambda f: lambda: f(cf8, sf))(wrap(df8))
    if "bnbF" in env:
        bnbF = env["bnbF"]
        qmap = bnbF.create_dynamic_map(signed=True).float()
        cb, st = bnbF.quantize_blockwise(x, code=qmap, blocksize=256)
        ops[("bnb_quantize", "bitsandbytes CPU")] = lambda: bnbF.quantize_blockwise(x, code=qmap, blocksize=256)
        ops[("bnb_dequantize", "bitsandbytes CPU")] = lambda: bnbF.dequantize_blockwise(cb, st)
    ops[("cast_e4m3fn", "torch")] = lambda: x.to(torch.float8_e4m3fn)
    if "ml_dtypes" in env:
        xn = x.numpy()
        ops[("cast_e4m3fn", "ml_dtypes")] = lambda: xn.astype(env["ml_dtypes"].float8_e4m3fn)
    return ops


def as_bytes(np, torch, value):
    """The peer's codes (and scale) as numpy byte arrays, for the comparison with the reference."""
    if isinstance(value, tuple):
        first = value[0]
        if hasattr(value[1], "absmax"):  # bitsandbytes' QuantState
            return as_bytes(np, torch, first), value[1].absmax.numpy().view(np.uint8)
        return as_bytes(np, torch, first), value[1].contiguous().view(-1).numpy().view(np.uint8)
    if isinstance(value, torch.Tensor):
        return value.contiguous().view(torch.uint8).view(-1).numpy() if value.dtype != torch.float32 else value.numpy().view(np.uint8)
    return value.view(np.uint8).reshape(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path of the built bench_blockwise executable")
    ap.add_argument("--elements", type=int, default=26, help="log2 of the element count (default 26)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--markdown", help="write the table here")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # bitsandbytes' OpenMP and torch
    n = 1 << args.elements

    peers, versions, skipped, env = load_peers(args.threads)
    for s in skipped:
        log(f"bench: peer skipped: {s}")
    info = {"elements": n, "threads": args.threads, "repeats": args.repeats, "machine": machine(), "versions": versions,
            "skipped": skipped, "data": "randn x 1e-3, float32, seed 0"}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.f32")
        if env:
            torch, np = env["torch"], env["np"]
            x = torch.randn(n, generator=torch.Generator().manual_seed(0)) * 1e-3
            x.numpy().tofile(path)
            peers = build_peers(env, x)
        else:
            import random
            import struct
            rng = random.Random(0)
            with open(path, "wb") as f:
                for _ in range(n // 4096):
                    f.write(struct.pack("4096f", *(rng.gauss(0, 1e-3) for _ in range(4096))))
        # First, untimed: compile the compiled peers, dump the reference's bytes and compare
        dump = os.path.join(tmp, "ref")
        os.mkdir(dump)
        first = subprocess.run([args.bench, path, "--threads", str(args.threads), "--dump", dump],
                               capture_output=True, text=True)
        if first.returncode != 0:
            log(first.stderr)
            return 1
        ref0 = json.loads(first.stdout)
        info["reference_simd"] = ref0["simd"]
        info["fast_equals_scalar"] = ref0["fast_equals_scalar"]
        agree = {}
        for (op, label), fn in peers.items():
            t0 = time.perf_counter()
            out = fn()
            log(f"bench: {op} / {label}: first call {time.perf_counter() - t0:.1f} s")
            name = {"torchao8_quantize": "torchao8", "torchao4_quantize": "torchao4", "torchao_fp8_quantize": "torchao_fp8",
                    "bnb_quantize": "bnb", "cast_e4m3fn": "cast_e4m3fn"}.get(op)
            if name is None:
                continue
            ref_codes = np.fromfile(os.path.join(dump, name + ".u8"), dtype=np.uint8)
            got = as_bytes(np, torch, out)
            codes = got[0] if isinstance(got, tuple) else got
            same = bool(np.array_equal(codes, ref_codes))
            if isinstance(got, tuple) and os.path.exists(os.path.join(dump, name + ".scale.f32")):
                same = same and bool(np.array_equal(got[1], np.fromfile(os.path.join(dump, name + ".scale.f32"), dtype=np.uint8)))
            agree[f"{op} / {label}"] = same
        info["identical_bytes"] = agree

        times = {}
        for r in range(args.repeats):
            log(f"bench: repetition {r + 1} of {args.repeats}")
            ref = json.loads(subprocess.run([args.bench, path, "--threads", str(args.threads)], check=True,
                                            capture_output=True, text=True).stdout)
            for op, ts in ref["fast_s"].items():
                times.setdefault((op, "reference fast"), []).extend(ts)
            for op, ts in ref.get("scalar_s", {}).items():
                times.setdefault((op, "reference scalar, 1 thread"), []).extend(ts)
            for key, fn in peers.items():
                t0 = time.perf_counter()
                fn()
                times.setdefault(key, []).append(time.perf_counter() - t0)
        info["load_average_end"] = os.getloadavg()

    med = {k: statistics.median(v) for k, v in times.items()}
    stream = med[("stream_copy", "reference fast")]
    rows = []
    for op in ["torchao8_quantize", "torchao4_quantize", "torchao_fp8_quantize", "bnb_quantize", "cast_e4m3fn",
               "torchao8_dequantize", "torchao_fp8_dequantize", "bnb_dequantize", "stream_copy"]:
        fast = med.get((op, "reference fast"))
        # the reference's rows first, then the peers by name
        for (o, label), t in sorted(med.items(), key=lambda kv: (not kv[0][1].startswith("reference"), kv[0][1])):
            if o != op:
                continue
            rows.append({"operation": op, "who": label, "median_s": t, "all_s": times[(o, label)],
                         "ratio_to_fast": (t / fast) if fast else None,
                         "streaming_fraction": stream / t})
    info["rows"] = rows
    md = [f"{n} float32 elements (2^{args.elements}, randn x 1e-3), {args.threads} threads, median of {args.repeats}, "
          f"contenders alternating; reference {info['reference_simd']}; "
          + ", ".join(f"{k} {v}" for k, v in versions.items()) + f"; {info['machine']['cpu']}, {info['machine']['cores']} cores; "
          f"load average {info['machine']['load_average_start'][0]:.1f} at the start, {info['load_average_end'][0]:.1f} at the end.",
          "", "| operation | who | median | peer / reference fast | share of the streaming pass's speed |", "|---|---|---:|---:|---:|"]
    for row in rows:
        ratio = "" if row["who"] == "reference fast" else f"{row['ratio_to_fast']:.2f}x"
        md.append(f"| {row['operation']} | {row['who']} | {row['median_s'] * 1e3:.1f} ms | {ratio} | {row['streaming_fraction'] * 100:.0f} % |")
    md.append("")
    md.append(f"Fast path bytes equal the scalar definition's: {info['fast_equals_scalar']}. Bytes equal to the peer's: "
              + (", ".join(f"{k}: {v}" for k, v in agree.items()) or "no peer") + ".")
    if skipped:
        md.append("Skipped: " + "; ".join(skipped) + ".")
    text = "\n".join(md) + "\n"
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(info, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0 if info["fast_equals_scalar"] else 1


if __name__ == "__main__":
    sys.exit(main())
