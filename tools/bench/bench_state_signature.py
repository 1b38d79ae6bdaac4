"""Time and peak memory of lowbit.state_signature and audit_state on a DCP folder (issue 27 item 4,
docs/python.md).

    python tools/bench/bench_state_signature.py write FOLDER --states K --log2 N
        one process saves K torchao OptimState8bit states of 2^N elements each (random normal values,
        block 256) with dcp.save, in FOLDER
    python tools/bench/bench_state_signature.py sign FOLDER
        state_signature(FOLDER) in this process; prints the seconds and the peak resident memory
        (getrusage's ru_maxrss) above the memory after import lowbit and torch
    python tools/bench/bench_state_signature.py audit FOLDER
        the same for audit_state(FOLDER) through torchao.codebook8.signed at block 256
    python tools/bench/bench_state_signature.py state-case FOLDER
        the same for dequantized_state_case(FOLDER, out=FOLDER.safetensors) (what python -m lowbit
        state-case runs: the case streamed into the file), which it removes afterwards
    python tools/bench/bench_state_signature.py states FOLDER
        the same for iterating quantized_states(FOLDER) (a lazy sequence) and dequantizing each state

Run each measurement in a fresh process (ru_maxrss only grows).
"""
import argparse
import os
import resource
import time


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write(folder, states, log2):
    import torch
    import torch.distributed.checkpoint as dcp
    from torchao.optim.subclass_8bit import OptimState8bit

    rows = 1 << (log2 // 2)
    shape = (rows, (1 << log2) // rows)
    sd = {"state": {}}
    g = torch.Generator().manual_seed(0)
    for i in range(states):
        s = OptimState8bit.zeros(shape, signed=True, block_size=256)
        s.copy_(torch.randn(shape, generator=g))
        sd["state"][i] = {"exp_avg": s}
    dcp.save(sd, checkpoint_id=folder)
    print(f"{folder}: {states} state(s) of {shape[0]} x {shape[1]} ({1 << log2} elements)")


def measure(folder, command):
    import torch  # noqa: F401 (imported before the baseline, as state_signature imports it)
    import torchao.optim  # noqa: F401

    import lowbit

    base = rss_mb()
    start = time.perf_counter()
    if command == "audit":
        rows, _ = lowbit.audit_state(folder, formats=["torchao.codebook8.signed"], block_sizes=[256])
        what = f"audit, {len(rows)} rows"
    elif command == "state-case":
        out = folder.rstrip("/") + ".safetensors"
        shapes = lowbit.dequantized_state_case(folder, out=out, replace=False)
        what = f"state case, {len(shapes)} state(s), {os.path.getsize(out) >> 20} MB written"
        os.unlink(out)
    elif command == "states":
        n = sum(lowbit.dequantize(s.case).size for s in lowbit.quantized_states(folder))
        what = f"quantized_states, {n} values dequantized"
    else:
        sig = lowbit.state_signature(folder)
        what = f"signature, {len(sig.states)} state(s), digest {sig.digest[:16]}"
    took = time.perf_counter() - start
    print(f"{folder}: {what}, {took:.1f} s, peak RSS {rss_mb():.0f} MB ({rss_mb() - base:.0f} MB above "
          f"{base:.0f} MB after import)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["write", "sign", "audit", "state-case", "states"])
    p.add_argument("folder")
    p.add_argument("--states", type=int, default=1)
    p.add_argument("--log2", type=int, default=24)
    a = p.parse_args()
    write(a.folder, a.states, a.log2) if a.command == "write" else measure(a.folder, a.command)


if __name__ == "__main__":
    main()
