#!/usr/bin/env python3
"""The reference (scalar definition and fast path) against the libraries it checks, in one run:
torchao eager and torch.compile'd (8-bit and 4-bit codebook quantize, FP8 state quantize, dequantize),
bitsandbytes CPU (block-wise quantize and dequantize), torch's and ml_dtypes' FP8 casts (torch's twice:
x.to(), a fresh tensor per call, and copy_ into one reused tensor, the reference's allocation), and
a streaming pass (fp8::streaming_floor: read float32, write a byte, by the cast's own loop with no
arithmetic) as the memory floor, and a widening pass (fp8::widening_floor: read a byte, write
float32) as the dequantizers' floor (their share column is against it: they write four bytes per
element). torchao's search tables are built before the reference's timed calls (as torch.compile
compiles before the peers' timed calls); each build is its own row. And seven optimizer steps on the
data as the parameter with a second array as its gradient, from the optimizers' fresh states:
torchao's AdamW8bit step (what `torchao.optim.AdamW8bit.step()` runs on the CPU: its
torch.compile'd `single_param_adam`, whose lerp rounds twice, so the reference's step runs with
AdamHyper::fused false) and bitsandbytes' 8-bit block-wise Adam CPU update
(`bitsandbytes.functional.optimizer_update_8bit_blockwise`), and the same update's other rules at
their classes' defaults ("lion": Lion8bit, "ademamix": AdEMAMix8bit, "momentum": SGD8bit with momentum
0.9, "rmsprop": RMSprop8bit, "adagrad": Adagrad8bit), each at 1 thread and at --threads
(each thread count in a worker process of its own: torch.compile bakes the thread count into its
kernels), against the reference's fast step at the same thread counts.

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
    # x.to() returns a fresh tensor per call, whose pages fault in as the cast writes them (4 096
    # minor faults per call at 2^24); the reference writes into outputs allocated and touched once.
    # The same allocation as the reference's: copy_ into one tensor reused by every call.
    ops[("cast_e4m3fn", "torch")] = lambda: x.to(torch.float8_e4m3fn)
    reused = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
    ops[("cast_e4m3fn", "torch copy_, reused output")] = lambda: reused.copy_(x)
    if "ml_dtypes" in env:
        xn = x.numpy()
        ops[("cast_e4m3fn", "ml_dtypes")] = lambda: xn.astype(env["ml_dtypes"].float8_e4m3fn)
    return ops


# a step's arrays in the order its state() gives them (one-state rules: the first three; slow:
# AdEMAMix's slow first moment, state1[1])
STEP_ARRAYS = ("param.f32", "m.u8", "m.scale.f32", "v.u8", "v.scale.f32", "slow.u8", "slow.scale.f32")
BNB_RULES = ("lion", "ademamix", "momentum", "rmsprop", "adagrad")
STEP_OPS = {"torchao8_adamw_step": "torchao compiled", "bnb_adam8bit_step": "bitsandbytes CPU",
            **{f"bnb_{rule}8bit_step": "bitsandbytes CPU" for rule in BNB_RULES}}
# bitsandbytes' one-state rules as their classes call the update (Optimizer1State: the betas tuple, eps,
# the signed map), at the classes' defaults (SGD8bit's momentum 0.9: it refuses none)
ONE_STATE_RULES = {"lion": (0.9, 0.99, 0.0, 1e-4), "momentum": (0.9, 0.0, 0.0, 1e-2),
                   "rmsprop": (0.99, 0.0, 1e-8, 1e-2), "adagrad": (0.0, 0.0, 1e-10, 1e-2)}  # beta1, beta2, eps, lr


def step_worker(args):
    """A worker process for the optimizer steps' peers at one thread count: two untimed steps (the
    first compiles torchao's), whose states it writes to --dump as the reference's bench does, then
    one timed step of each peer per line read from stdin, answered with one JSON line."""
    import numpy as np
    import torch
    torch.set_num_threads(args.step_worker)
    x = torch.from_numpy(np.fromfile(args.data, dtype=np.float32))
    g = torch.from_numpy(np.fromfile(args.grad, dtype=np.float32))
    n = x.numel()
    steps = {}
    try:
        from torchao.optim import AdamW8bit
        p = torch.nn.Parameter(x.clone())
        p.grad = g.clone()
        opt = AdamW8bit([p], lr=1e-3, weight_decay=0.01, block_size=256)  # AdamW8bit's defaults, spelled out

        def torchao_state():
            st = opt.state[p]
            return (p.detach(), st["exp_avg"].codes, st["exp_avg"].scale, st["exp_avg_sq"].codes, st["exp_avg_sq"].scale)
        steps["torchao8_adamw_step"] = (opt.step, torchao_state)
    except ImportError as e:
        log(f"bench worker: torchao skipped ({e})")
    try:
        import bitsandbytes.functional as bnbF
        pb = x.clone()
        s1, s2 = torch.zeros(n, dtype=torch.uint8), torch.zeros(n, dtype=torch.uint8)  # Adam8bit's fresh state
        a1, a2 = torch.zeros(n // 256), torch.zeros(n // 256)
        q1, q2 = bnbF.create_dynamic_map(signed=True).float(), bnbF.create_dynamic_map(signed=False).float()
        counter = [0]

        def bnb_step():
            counter[0] += 1
            bnbF.optimizer_update_8bit_blockwise("adam", g, pb, s1, s2, 0.9, 0.999, 0.0, 0.0, 1e-8, counter[0], 1e-3,
                                                 q1, q2, a1, a2, weight_decay=0.0, gnorm_scale=1.0)
        steps["bnb_adam8bit_step"] = (bnb_step, lambda: (pb, s1, a1, s2, a2))
        for rule, (beta1, beta2, eps, lr) in ONE_STATE_RULES.items():
            p1, r1, ra1 = x.clone(), torch.zeros(n, dtype=torch.uint8), torch.zeros(n // 256)
            rule_counter = [0]

            def rule_step(rule=rule, beta1=beta1, beta2=beta2, eps=eps, lr=lr, p1=p1, r1=r1, ra1=ra1, c=rule_counter):
                c[0] += 1
                bnbF.optimizer_update_8bit_blockwise(rule, g, p1, r1, None, beta1, beta2, 0.0, 0.0, eps, c[0], lr,
                                                     q1, None, ra1, None, weight_decay=0.0, gnorm_scale=1.0)
            steps[f"bnb_{rule}8bit_step"] = (rule_step, lambda p1=p1, r1=r1, ra1=ra1: (p1, r1, ra1))
        # AdEMAMix8bit at its defaults (lr 1e-3, betas 0.9 / 0.999 / 0.9999, alpha 5, eps 1e-8, weight
        # decay 0.01, no schedulers): both first moments in a 2-D state1, as AdEMAMix.init_state makes it
        pa, e1, e2 = x.clone(), torch.zeros((2, n), dtype=torch.uint8), torch.zeros(n, dtype=torch.uint8)
        ea1, ea2 = torch.zeros((2, n // 256)), torch.zeros(n // 256)
        ademamix_counter = [0]

        def ademamix_step():
            ademamix_counter[0] += 1
            bnbF.optimizer_update_8bit_blockwise("ademamix", g, pa, e1, e2, 0.9, 0.999, 0.9999, 5.0, 1e-8,
                                                 ademamix_counter[0], 1e-3, q1, q2, ea1, ea2, weight_decay=1e-2,
                                                 gnorm_scale=1.0)
        steps["bnb_ademamix8bit_step"] = (ademamix_step, lambda: (pa, e1[0], ea1[0], e2, ea2, e1[1], ea1[1]))
    except ImportError as e:
        log(f"bench worker: bitsandbytes skipped ({e})")
    for k in (1, 2):
        for op, (step, state) in steps.items():
            t0 = time.perf_counter()
            step()
            if k == 1:
                log(f"bench: {op} / {STEP_OPS[op]}, {args.step_worker} thread(s): first call {time.perf_counter() - t0:.1f} s")
            for name, t in zip(STEP_ARRAYS, state()):
                t.contiguous().numpy().tofile(os.path.join(args.dump, f"{op}.step{k}.{name}"))
    print(json.dumps(sorted(steps)), flush=True)
    for _ in sys.stdin:
        times = {}
        for op, (step, _) in steps.items():
            t0 = time.perf_counter()
            step()
            times[op] = time.perf_counter() - t0
        print(json.dumps(times), flush=True)
    return 0


def step_differences(np, ours, theirs, op, k):
    """Per array of a step's state: 'equal' or how many elements differ."""
    out = {}
    for name in STEP_ARRAYS:
        if not os.path.exists(os.path.join(ours, f"{op}.step{k}.{name}")):
            continue  # a one-state rule keeps one moment, only AdEMAMix a slow one
        dtype = np.uint32 if name.endswith(".f32") else np.uint8
        a = np.fromfile(os.path.join(ours, f"{op}.step{k}.{name}"), dtype=dtype)
        b = np.fromfile(os.path.join(theirs, f"{op}.step{k}.{name}"), dtype=dtype)
        out[name.split(".f32")[0].split(".u8")[0]] = "equal" if np.array_equal(a, b) else f"{int((a != b).sum())} of {a.size} differ"
    return out


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
    ap.add_argument("--no-steps", action="store_true", help="leave the optimizer steps out")
    ap.add_argument("--step-worker", type=int, help=argparse.SUPPRESS)  # internal: a worker at this thread count
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--grad", help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.step_worker:
        return step_worker(args)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # bitsandbytes' OpenMP and torch
    n = 1 << args.elements
    thread_counts = sorted({1, args.threads})  # the steps' thread counts

    peers, versions, skipped, env = load_peers(args.threads)
    for s in skipped:
        log(f"bench: peer skipped: {s}")
    info = {"elements": n, "threads": args.threads, "repeats": args.repeats, "machine": machine(), "versions": versions,
            "skipped": skipped, "data": "randn x 1e-3, float32, seed 0"}
    with tempfile.TemporaryDirectory() as tmp:
        path, grad_path = os.path.join(tmp, "x.f32"), os.path.join(tmp, "g.f32")
        if env:
            torch, np = env["torch"], env["np"]
            x = torch.randn(n, generator=torch.Generator().manual_seed(0)) * 1e-3
            x.numpy().tofile(path)
            (torch.randn(n, generator=torch.Generator().manual_seed(1)) * 1e-2).numpy().tofile(grad_path)
            peers = build_peers(env, x)
        else:
            import random
            import struct
            for file, seed, sigma in ((path, 0, 1e-3), (grad_path, 1, 1e-2)):
                rng = random.Random(seed)
                with open(file, "wb") as f:
                    for _ in range(n // 4096):
                        f.write(struct.pack("4096f", *(rng.gauss(0, sigma) for _ in range(4096))))
        steps = not args.no_steps
        step_args = ["--grad", grad_path, "--unfused-lerp"] if steps else []
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
        agree, step_agree, workers = {}, {}, {}
        if steps:
            # the reference's states after two steps (fast and scalar compared inside), then the peers'
            step_dump = os.path.join(tmp, "ref_steps")
            os.mkdir(step_dump)
            second = subprocess.run([args.bench, path, *step_args, "--only-steps", "--repeats", "2", "--threads",
                                     str(args.threads), "--dump", step_dump], capture_output=True, text=True)
            if second.returncode != 0:
                log(second.stderr)
                return 1
            info["fast_equals_scalar"] = info["fast_equals_scalar"] and json.loads(second.stdout)["fast_equals_scalar"]
            if env:
                for t in thread_counts:
                    wdump = os.path.join(tmp, f"worker{t}")
                    os.mkdir(wdump)
                    w = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--bench", args.bench, "--step-worker", str(t),
                                          "--data", path, "--grad", grad_path, "--dump", wdump],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         env={**os.environ, "OMP_NUM_THREADS": str(t)})
                    ready = w.stdout.readline()
                    if not ready:
                        log(f"bench: the step worker at {t} thread(s) failed")
                        return 1
                    workers[t] = w
                    for op in json.loads(ready):
                        for k in (1, 2):
                            step_agree[f"{op} / {STEP_OPS[op]}, {t} thread(s), step {k}"] = step_differences(np, step_dump, wdump, op, k)
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
        info["step_bytes"] = step_agree

        times = {}
        for r in range(args.repeats):
            log(f"bench: repetition {r + 1} of {args.repeats}")
            ref = json.loads(subprocess.run([args.bench, path, *step_args, "--threads", str(args.threads)], check=True,
                                            capture_output=True, text=True).stdout)
            for op, ts in ref["fast_s"].items():
                times.setdefault((op, "reference fast"), []).extend(ts)
            for op, ts in ref.get("scalar_s", {}).items():
                times.setdefault((op, "reference scalar, 1 thread"), []).extend(ts)
            if steps and args.threads != 1:
                one = json.loads(subprocess.run([args.bench, path, *step_args, "--only-steps", "--no-scalar", "--threads", "1"],
                                                check=True, capture_output=True, text=True).stdout)
                for op, ts in one["fast_s"].items():
                    times.setdefault((op, "reference fast, 1 thread"), []).extend(ts)
            for key, fn in peers.items():
                t0 = time.perf_counter()
                fn()
                times.setdefault(key, []).append(time.perf_counter() - t0)
            for t, w in workers.items():
                w.stdin.write("go\n")
                w.stdin.flush()
                for op, dt in json.loads(w.stdout.readline()).items():
                    label = STEP_OPS[op] + ("" if t == args.threads else f", {t} thread")
                    times.setdefault((op, label), []).append(dt)
        for w in workers.values():
            w.stdin.close()
            w.wait()
        info["load_average_end"] = os.getloadavg()

    med = {k: statistics.median(v) for k, v in times.items()}
    stream = med[("stream_copy", "reference fast")]
    widen = med.get(("stream_widen", "reference fast"))
    dequantizers = {"torchao8_dequantize", "torchao_fp8_dequantize", "bnb_dequantize", "stream_widen"}
    rows = []
    for op in ["torchao8_quantize", "torchao4_quantize", "torchao_fp8_quantize", "bnb_quantize", "cast_e4m3fn",
               "torchao8_dequantize", "torchao_fp8_dequantize", "bnb_dequantize", "stream_copy", "stream_widen",
               "torchao8_search_table", "torchao4_search_table", *STEP_OPS]:
        fast = med.get((op, "reference fast"))
        # the reference's rows first, then the peers by name
        for (o, label), t in sorted(med.items(), key=lambda kv: (not kv[0][1].startswith("reference"), kv[0][1])):
            if o != op:
                continue
            # a peer's 1-thread row against the reference's fast 1-thread row
            base = med.get((op, "reference fast, 1 thread"), fast) if label.endswith(", 1 thread") and \
                not label.startswith("reference") else fast
            rows.append({"operation": op, "who": label, "median_s": t, "all_s": times[(o, label)],
                         "ratio_to_fast": (t / base) if base else None,
                         "streaming_fraction": None if op.endswith("_search_table") else stream / t,
                         # the dequantizers' like-for-like floor: read a byte, write float32
                         "widening_fraction": (widen / t) if widen and op in dequantizers else None})
    info["rows"] = rows
    md = [f"{n} float32 elements (2^{args.elements}, randn x 1e-3), {args.threads} threads, median of {args.repeats}, "
          f"contenders alternating; reference {info['reference_simd']}; "
          + ", ".join(f"{k} {v}" for k, v in versions.items()) + f"; {info['machine']['cpu']}, {info['machine']['cores']} cores; "
          f"load average {info['machine']['load_average_start'][0]:.1f} at the start, {info['load_average_end'][0]:.1f} at the end.",
          "", "| operation | who | median | peer / reference fast | share of the streaming pass's speed (read f32, write a byte) "
          "| share of the widening pass's speed (read a byte, write f32; dequantizers) |", "|---|---|---:|---:|---:|---:|"]
    percent = lambda f: "" if f is None else f"{f * 100:.0f} %"
    for row in rows:
        ratio = "" if row["who"] == "reference fast" else f"{row['ratio_to_fast']:.2f}x"
        md.append(f"| {row['operation']} | {row['who']} | {row['median_s'] * 1e3:.1f} ms | {ratio} | "
                  f"{percent(row['streaming_fraction'])} | {percent(row['widening_fraction'])} |")
    md.append("")
    md.append(f"Fast path bytes equal the scalar definition's: {info['fast_equals_scalar']}. Bytes equal to the peer's: "
              + (", ".join(f"{k}: {v}" for k, v in agree.items()) or "no peer") + ".")
    if step_agree:
        md.append("")
        md.append("The steps' states against the reference's after the same steps from the same fresh state (param, "
                  "codes and scales of its moments): "
                  + "; ".join(f"{k}: " + ", ".join(f"{a} {v}" for a, v in d.items()) for k, d in step_agree.items()) + ".")
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
