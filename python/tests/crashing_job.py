"""The job of test_torchrun_harness.py: `torchrun --nproc-per-node 2 crashing_job.py OUT MODE`.

Rank 1 aborts (SIGABRT, as libstdc++'s std::terminate does) on the first attempt only ("abort-once",
remembered by a file beside OUT) or on every attempt ("abort-always"), or exits with an error
("error"), or hangs deaf to SIGTERM ("hang", as a rank stuck in native code); every rank that goes on
writes OUT/rank<R>.
"""
import os
import signal
import sys
import time

import torch.distributed as dist


def main(out, mode):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    first = os.path.join(os.path.dirname(out), os.path.basename(out) + ".aborted-once")
    if rank == 1 and (mode == "abort-always" or (mode == "abort-once" and not os.path.exists(first))):
        open(first, "w").close()
        os.abort()
    if rank == 1 and mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    if rank == 1 and mode == "error":
        raise SystemExit("crashing_job: the error this mode asks for")
    with open(os.path.join(out, f"rank{rank}"), "w"):
        pass
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
