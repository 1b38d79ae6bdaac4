"""The job of test_torchrun_interrupted.py: `torchrun --nproc-per-node 2 interrupted_rank_job.py OUT MODE`.

Both ranks sign the same torchao AdamW8bit-like state with lowbit.state_signature over the world group
(a gloo group whose timeout is 30 s); rank 1 fails inside its own part of it, as MODE says:

- keys-interrupt: a KeyboardInterrupt while it looks for its states (before the first collective);
- chunk-exit: a SystemExit while it signs its chunks (before the second collective);
- gather-interrupt: a KeyboardInterrupt inside the first collective itself, after which it lives on for
  10 s (its connections open unless the group is aborted).

Each rank catches what state_signature raised and writes OUT/rank<R>.json (its type, its message, the
seconds the call took), then both meet at one more collective (a barrier): the job ends only when every
rank reached the same number of collectives. After gather-interrupt the group is aborted: no barrier.
"""
import json
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import lowbit
import lowbit._sharded
import lowbit.state


def fail_on_rank_1(mode):
    if mode == "keys-interrupt":
        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt("rank 1 interrupted while it looked for its states")
        lowbit.state._find = interrupted
    elif mode == "chunk-exit":
        def exiting(chunk):
            raise SystemExit(f"rank 1 exits while it signs {chunk.key}")
        lowbit._sharded.contribution = exiting
    elif mode == "gather-interrupt":
        def interrupted_inside(group, value):
            raise KeyboardInterrupt("rank 1 interrupted inside the gather")
        lowbit.state._gathered = interrupted_inside
    else:
        raise SystemExit(f"interrupted_rank_job: unknown mode {mode!r}")


def main(out, mode):
    from torchao.optim.subclass_8bit import OptimState8bit

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(5)
    m = OptimState8bit.zeros((32, 256), signed=True)
    m.copy_(torch.randn(32, 256, generator=g))
    state = {"state": {0: {"step": torch.tensor(1.0), "exp_avg": m}}}
    if rank == 1:
        fail_on_rank_1(mode)
    start = time.monotonic()
    try:
        lowbit.state_signature(state, group=dist.group.WORLD)
        raised = None
    except BaseException as e:  # KeyboardInterrupt and SystemExit included: this job goes on to the barrier
        raised = {"type": type(e).__name__, "message": str(e)}
    seen = {"raised": raised, "seconds": time.monotonic() - start}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)
    if mode == "gather-interrupt":
        if rank == 1:
            time.sleep(10)
        return
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
