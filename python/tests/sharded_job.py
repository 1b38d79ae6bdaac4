"""One torchrun job (gloo, CPU) for test_torchrun_states.py: `torchrun --nproc-per-node N sharded_job.py OUT`.

Every rank trains the same two models under FSDP2's fully_shard with each of torchao's AdamW8bit,
AdamW4bit and AdamWFp8 (3 steps; every rank sees the same batches, so the gradients are those of one
process and the states differ only by their layout), signs the optimizer's states in the job
(lowbit.optimizer_signature with the world group, lowbit.tensor_signature of one state, and the local
shard's signature without a group), saves them with DCP into OUT/<optimizer>, and writes what it saw
to OUT/<optimizer>.rank<R>.json. The second model has a layer of 127 x 64, whose rows two ranks split
64 + 63: torchao quantizes rank 0's part (4096 elements) and leaves rank 1's (4032) in float32.
With bitsandbytes installed, its Adam8bit under DistributedDataParallel (each rank holds whole states)
is signed too. torch.compile is replaced by the plain function, as test_dtensor_states.py does.
"""
import json
import os
import sys

import torch
import torch.distributed as dist

import lowbit


def train(model_list, optimizer, steps=3):
    """Independent losses: one model's states never change another's gradients."""
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(4, 64, generator=g)
        sum(m(x).square().sum() for m in model_list).backward()
        optimizer.step()
        optimizer.zero_grad()


def models(mesh):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    even = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Linear(256, 64))
    odd = torch.nn.Sequential(torch.nn.Linear(64, 127, bias=False), torch.nn.Linear(127, 64, bias=False))
    return fully_shard(even, mesh=mesh), fully_shard(odd, mesh=mesh)


def signed(sig):
    states = {k: {"format": v["format"], "global_shape": list(v["global_shape"]), "dequantized": v["dequantized"],
                  "chunks": [[list(c["offsets"]), list(c["shape"]), c["format"]] for c in v["chunks"]]}
              for k, v in sig.states.items()}
    return {"digest": sig.digest, "stored": sig.stored, "dequantized": sig.dequantized, "scope": sig.scope,
            "states": states}


def failure(call):
    try:
        call()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def main(out):
    torch.compile = lambda fn=None, **kw: fn
    import torch.distributed.checkpoint as dcp
    import torchao.optim
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    group = dist.group.WORLD
    for name in ("AdamW8bit", "AdamW4bit", "AdamWFp8"):
        even, odd = models(mesh)
        optimizer = getattr(torchao.optim, name)(list(even.parameters()) + list(odd.parameters()))
        train([even, odd], optimizer)
        sd, step = optimizer.state_dict(), 3
        # --- example: docs/python.md (torchrun) ---
        sig = lowbit.optimizer_signature(optimizer, group=dist.group.WORLD)  # every rank: the same signature
        if dist.get_rank() == 0:
            print(f"step {step}: optimizer states {sig.digest[:16]} (values {sig.dequantized[:16]})")
        # --- end of example ---
        result = {"example": sig.digest,"signature": signed(lowbit.optimizer_signature(optimizer, group=group)),
                  "local": signed(lowbit.state_signature(sd)),
                  "tensor": lowbit.tensor_signature(sd["state"][0]["exp_avg"], group=group),
                  "plain_tensor": lowbit.tensor_signature(sd["state"][1]["exp_avg"], group=group),
                  "states": [[s.key, list(s.shape), list(s.global_shape), list(s.offsets)]
                             for s in lowbit.quantized_states(sd)]}
        if name == "AdamW8bit":  # a rank that holds none of the states, and a rank whose call is wrong
            nothing = {"state": {}} if rank == 1 else sd
            result["errors"] = [failure(lambda: lowbit.state_signature(nothing, group=group)),
                                failure(lambda: lowbit.state_signature(sd, bnb_block_size=0 if rank else 256,
                                                                       group=group))]
        dcp.save(sd, checkpoint_id=os.path.join(out, name))  # the optimizer's own keys (state.0.exp_avg)
        torch.save({k: v.to_local().dequantize() for k, v in sd["state"][0].items() if k != "step"},
                   os.path.join(out, f"{name}.rank{rank}.dequantized.pt"))  # torchao's own values
        with open(os.path.join(out, f"{name}.rank{rank}.json"), "w") as f:
            json.dump(result, f)
    try:
        import bitsandbytes as bnb
    except ImportError:
        bnb = None
    if bnb is not None:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 128),
                                                                              torch.nn.Linear(128, 64)))
        optimizer = bnb.optim.Adam8bit(model.parameters())
        train([model], optimizer)
        with open(os.path.join(out, f"Adam8bit.rank{rank}.json"), "w") as f:
            json.dump({"signature": signed(lowbit.optimizer_signature(optimizer, group=group))}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
