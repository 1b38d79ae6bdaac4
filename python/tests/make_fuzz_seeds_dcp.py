"""Writes the DCP fuzzer's seed folders (python/tests/fuzz_seeds_dcp/, committed so that the fuzzer
runs without torch): dcp.save of small torchao AdamW8bit / AdamW4bit / AdamWFp8 states and of a
bitsandbytes Adam8bit state, as the libraries make them (torch 2.15, torchao 0.18, bitsandbytes 0.50.2),
and torchao_2ranks, an AdamW8bit state two ranks saved under FSDP2 (torchrun, gloo): a 128 x 64 weight
in two quantized chunks, and a 255 x 32 one whose rank 1 chunk torchao left in float32. Its two ranks'
files are joined into one (the second's items moved past the first's bytes), as the fuzzer takes one
chunk file a seed; DCP reads items by path and range, so the folder is the same checkpoint.
Run with torch, torchao and bitsandbytes installed: python python/tests/make_fuzz_seeds_dcp.py"""
import os
import shutil
import sys
import warnings

import torch
import torch.distributed.checkpoint as dcp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_state import bnb_state_dict  # noqa: E402 (a bitsandbytes Adam8bit state, a partial last block)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_seeds_dcp")


def torchao_state():
    from torchao.optim import AdamW4bit, AdamW8bit, AdamWFp8

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(32, 128)) for _ in range(3)]  # 4 096: torchao's min_quant_size
    opts = [AdamW8bit([params[0]], block_size=256), AdamW4bit([params[1]], block_size=128),
            AdamWFp8([params[2]], block_size=256)]
    for opt, p in zip(opts, params):
        for _ in range(2):
            p.grad = torch.randn_like(p)
            opt.step()
    sd = {"state": {}, "param_groups": []}
    for i, opt in enumerate(opts):
        sd["state"][i] = opt.state_dict()["state"][0]
    return sd


def two_ranks_job(folder):
    """Under torchrun: this rank's part of torchao_2ranks."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torchao.optim import AdamW8bit

    torch.compile = lambda fn=None, **kw: fn  # the same states, eagerly (test_dtensor_states.py)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    # 128 x 64: 4 096 elements a rank, quantized; 255 x 32: 128 rows (4 096) and 127 rows (4 064, float32)
    models = [fully_shard(torch.nn.Linear(64, 128, bias=False), mesh=mesh),
              fully_shard(torch.nn.Linear(32, 255, bias=False), mesh=mesh)]
    opt = AdamW8bit([p for m in models for p in m.parameters()])
    g = torch.Generator().manual_seed(1)
    for _ in range(2):
        sum(m(torch.randn(4, m.in_features, generator=g)).square().sum() for m in models).backward()
        opt.step()
        opt.zero_grad()
    dcp.save(opt.state_dict(), checkpoint_id=folder)
    dist.destroy_process_group()


def two_ranks_seed(name):
    """torchao_2ranks: saved by a torchrun job of two ranks, its two files joined into one."""
    import pickle
    import subprocess

    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                    os.path.abspath(__file__), "--two-ranks-job", name], check=True)
    first = os.path.join(name, "__0_0.distcp")
    size = os.path.getsize(first)
    meta = pickle.loads(open(os.path.join(name, ".metadata"), "rb").read())  # torch's own classes: ours
    for info in meta.storage_data.values():
        if info.relative_path == "__1_0.distcp":
            info.relative_path, info.offset = "__0_0.distcp", info.offset + size
    with open(first, "ab") as out, open(os.path.join(name, "__1_0.distcp"), "rb") as second:
        out.write(second.read())
    os.remove(os.path.join(name, "__1_0.distcp"))
    with open(os.path.join(name, ".metadata"), "wb") as f:
        pickle.dump(meta, f)


def main():
    if sys.argv[1:2] == ["--two-ranks-job"]:
        two_ranks_job(sys.argv[2])
        return 0
    warnings.simplefilter("ignore")
    for name, make in (("torchao", torchao_state), ("bitsandbytes", bnb_state_dict), ("torchao_2ranks", None)):
        folder = os.path.join(HERE, name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(HERE, exist_ok=True)
        os.chdir(HERE)  # the metadata records checkpoint_id: the folder's name, not this machine's path
        if make is None:
            two_ranks_seed(name)
        else:
            dcp.save(make(), checkpoint_id=name)
        print(name, sorted(os.listdir(folder)), sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
