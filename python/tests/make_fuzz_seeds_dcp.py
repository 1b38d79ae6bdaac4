"""Writes the DCP fuzzer's seed folders (python/tests/fuzz_seeds_dcp/, committed so that the fuzzer
runs without torch): dcp.save of small torchao AdamW8bit / AdamW4bit / AdamWFp8 states and of a
bitsandbytes Adam8bit state, as the libraries make them (torch 2.15, torchao 0.18, bitsandbytes 0.50.2).
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


def main():
    warnings.simplefilter("ignore")
    for name, make in (("torchao", torchao_state), ("bitsandbytes", bnb_state_dict)):
        folder = os.path.join(HERE, name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(HERE, exist_ok=True)
        os.chdir(HERE)  # the metadata records checkpoint_id: the folder's name, not this machine's path
        dcp.save(make(), checkpoint_id=name)
        print(name, sorted(os.listdir(folder)), sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
