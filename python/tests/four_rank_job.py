"""The 4-rank torchrun job of test_torchrun_four_ranks.py: `torchrun --nproc-per-node 4 four_rank_job.py OUT`.

Every rank trains sharded_job.py's first model (Linear(64, 256), Linear(256, 64)) under FSDP2's
fully_shard, 3 steps on the same batches as one process would (sharded_job.train): with torchao's
AdamW8bit, AdamW4bit and AdamWFp8 under the default row sharding (Shard(0): 64 x 64 and 16 x 256 a rank),
and with AdamW8bit under column sharding of the weights (Shard(1) through shard_placement_fn: 256 x 16
and 64 x 64 a rank). Each run signs the states in the job (lowbit.optimizer_signature with the world
group) and writes, per rank, the signature (OUT/<run>.rank<R>.json) and torchao's own codes and
dequantized values of the rank's local parts with their offsets (OUT/<run>.rank<R>.pt).
"""
import json
import os
import sys

import torch
import torch.distributed as dist

import lowbit
from sharded_job import signed, train

RUNS = {"AdamW8bit": 0, "AdamW4bit": 0, "AdamWFp8": 0, "AdamW8bit.columns": 1}  # run -> the weights' shard dim


def model(mesh, dim):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Linear(256, 64))
    return fully_shard(m, mesh=mesh, shard_placement_fn=lambda p: Shard(dim if p.ndim == 2 else 0))


def local_parts(sd):
    """key -> (offsets, codes, dequantized) of this rank's torchao parts (torchao's own dequantize)."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    out = {}
    for pid, state in sd["state"].items():
        for name, d in state.items():
            if name == "step":
                continue
            local = d.to_local()
            if not hasattr(local, "codes"):  # a bias's part: fewer than 4096 elements, float32
                continue
            _, offsets = compute_local_shape_and_global_offset(d.shape, d.device_mesh, d.placements)
            out[f"state.{pid}.{name}"] = (list(offsets), local.codes.clone(), local.dequantize())
    return out


def main(out):
    torch.compile = lambda fn=None, **kw: fn
    import torchao.optim
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for run, dim in RUNS.items():
        m = model(mesh, dim)
        optimizer = getattr(torchao.optim, run.split(".")[0])(m.parameters())
        train([m], optimizer)
        sig = lowbit.optimizer_signature(optimizer, group=dist.group.WORLD)
        with open(os.path.join(out, f"{run}.rank{rank}.json"), "w") as f:
            json.dump(signed(sig), f)
        torch.save(local_parts(optimizer.state_dict()), os.path.join(out, f"{run}.rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
