#!/usr/bin/env python3
"""A real torchao optimizer state for `lowbit audit --state` (docs/audit.md, "A real torchao state").

Trains a small MLP (64-256-64, GELU) towards a random teacher with torchao's AdamW8bit (torchao 0.18,
its defaults: block 256, signed dynamic map for exp_avg, unsigned for exp_avg_sq) on the CPU for a
few steps, and saves every moment as float32 safetensors, `<param>.exp_avg` and `<param>.exp_avg_sq`:
the weights' moments are torchao's OptimState8bit, saved as their dequantized values (what the state
holds); the biases are below torchao's 4096-element threshold and stay dense float32 moments.

    .venv/bin/python tools/plots/torchao_state.py state.safetensors [--steps 20]
"""
import argparse

import torch
from safetensors.torch import save_file
import torchao
from torchao.optim import AdamW8bit
from torchao.optim.subclass_8bit import OptimState8bit


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the safetensors file to write")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()

    torch.manual_seed(0)
    teacher = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    opt = AdamW8bit(model.parameters(), lr=1e-3)
    for _ in range(args.steps):
        x = torch.randn(64, 64)
        loss = torch.nn.functional.mse_loss(model(x), teacher(x).detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    names = {id(p): n for n, p in model.named_parameters()}
    out, kinds = {}, []
    for group in opt.param_groups:
        for p in group["params"]:
            for moment in ("exp_avg", "exp_avg_sq"):
                s = opt.state[p][moment]
                quantized = isinstance(s, OptimState8bit)
                value = s.dequantize() if quantized else s
                out[f"{names[id(p)]}.{moment}"] = value.detach().float().reshape(-1).contiguous()
                kinds.append(f"{names[id(p)]}.{moment}={'OptimState8bit' if quantized else 'dense'}")
    save_file(out, args.out, metadata={"source": f"torchao {torchao.__version__}, torch {torch.__version__}",
                                       "optimizer": "AdamW8bit(lr=1e-3)", "steps": str(args.steps),
                                       "states": ";".join(kinds)})
    print(f"wrote {args.out}: " + ", ".join(kinds))


if __name__ == "__main__":
    main()
