#!/usr/bin/env python3
"""Golden cases for bitsandbytes' 8-bit block-wise Adam/AdamW step on the CPU.

Calls the registered CPU kernel `torch.ops.bitsandbytes.optimizer_update_8bit_blockwise` (what
`bnb.optim.Adam8bit` / `AdamW8bit` run for a CPU tensor of at least 4096 elements) on explicit
states, for several consecutive steps. Each step is one case: the state before (inputs) and after
(outputs, suffixed `.next`).

    .venv/bin/python tools/export/export_bnb_adam.py --out golden
    .venv/bin/python tools/export/export_bnb_adam.py --out /tmp/g --diff-against golden
"""
import sys

import bitsandbytes
import bitsandbytes.functional as bnbF
import torch

import golden_io

GENERATOR = "tools/export/export_bnb_adam.py (lowbit 0.1.0)"
STEPS = 4
TORCH = f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}"
# torch's CPU capability decides whether add(alpha) and addcmul round once (avx2, avx512) or twice
# (default): under another capability than AVX2, a few small cases named *.cpu-<capability> with the
# capability as a param (ATEN_CPU_CAPABILITY=default .venv/bin/python tools/export/export_bnb_adam.py --out golden)
CAPABILITY = torch.backends.cpu.get_cpu_capability().lower()


def export(w: golden_io.Writer):
    qmap1 = bnbF.create_dynamic_map(signed=True).float()
    qmap2 = bnbF.create_dynamic_map(signed=False).float()
    f32, bf16 = torch.float32, torch.bfloat16
    settings = [  # (name, elements, weight decay, lr, seed, param dtype); 4096 + 37 has a partial tail block
        ("adamw", 4096, 1e-2, 1e-3, 21, f32),
        ("adam-wd0-tail", 4096 + 37, 0.0, 1e-3, 22, f32),
        ("adamw-lr1e-1", 4096, 1e-2, 1e-1, 23, f32),
        # a bf16 parameter and its bf16 gradient (as the optimizer passes p.grad): the kernel widens
        # both, steps in float32 and copies back (round to nearest even); NaN gradients from step 2
        ("adamw-tail.bf16", 4096 + 37, 1e-2, 1e-3, 25, bf16),
    ]
    steps, extra = STEPS, {}
    if CAPABILITY != "avx2":  # the bf16 copy's NaN depends on it too (0xFFFF vectorized, 0x7FC0 scalar)
        settings = [(f"adamw-tail.cpu-{CAPABILITY}", 512 + 37, 1e-2, 1e-3, 24, f32),
                    (f"adamw-tail.bf16.cpu-{CAPABILITY}", 512 + 37, 1e-2, 1e-3, 26, bf16)]
        steps, extra = 2, {"cpu_capability": CAPABILITY}
    for name, n, wd, lr, seed, dtype in settings:
        g = torch.Generator().manual_seed(seed)
        p = torch.randn(n, generator=g).to(dtype)
        state1 = torch.zeros(n, dtype=torch.uint8)  # as Optimizer8bit.init_state creates them
        state2 = torch.zeros(n, dtype=torch.uint8)
        blocks = -(-n // 256)
        absmax1 = torch.zeros(blocks)
        absmax2 = torch.zeros(blocks)
        for step in range(1, steps + 1):
            grad = torch.randn(n, generator=g) * (10.0 ** -torch.randint(0, 4, (1,), generator=g).item())
            grad[:5] = 0.0
            grad[5] = -0.0
            grad = grad.to(dtype)
            if dtype == bf16 and step >= 2:
                grad[7 + step] = float("nan")  # the parameter becomes NaN: the bf16 copy's NaN rule
            before = {"param": p.clone(), "grad": grad.clone(), "step": torch.tensor(step, dtype=torch.int64),
                      "exp_avg.codes": state1.clone(), "exp_avg.scale": absmax1.clone(), "exp_avg.qmap": qmap1,
                      "exp_avg_sq.codes": state2.clone(), "exp_avg_sq.scale": absmax2.clone(), "exp_avg_sq.qmap": qmap2}
            torch.ops.bitsandbytes.optimizer_update_8bit_blockwise(
                "adam", grad, p, state1, state2, 0.9, 0.999, 0.0, 0.0, 1e-8, step, lr, qmap1, qmap2,
                absmax1, absmax2, wd, 1.0, False)
            after = {"param.next": p.clone(), "exp_avg.codes.next": state1.clone(), "exp_avg.scale.next": absmax1.clone(),
                     "exp_avg_sq.codes.next": state2.clone(), "exp_avg_sq.scale.next": absmax2.clone()}
            params = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": wd, "lr": lr, "block_size": 256, **extra}
            w.add("bnb", "bnb.adam8bit.cpu", f"{name}.step{step}", {**before, **after}, params,
                  "bitsandbytes backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer 'adam')",
                  seed, f"randn, step {step}")


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, {"bnb": f"bitsandbytes {bitsandbytes.__version__} ({TORCH})"}, GENERATOR, export))
