#!/usr/bin/env python3
"""Golden cases for torchao's low-bit Adam/AdamW steps (8-bit, 4-bit and FP8 states), CPU, eager.

torchao's optimizers run `single_param_adam` under torch.compile; this exporter calls the same
function eagerly (the arithmetic the suite pins: lerp as one fused multiply-add, IEEE division,
glibc powf for the bias corrections) on torchao's own state subclasses, for several consecutive
steps. Each step is one case: the state before (inputs) and after (outputs, suffixed `.next`).

    .venv/bin/python tools/export/export_torchao_adam.py --out golden
    .venv/bin/python tools/export/export_torchao_adam.py --out /tmp/g --diff-against golden
"""
import sys

import torch
import torchao
from torchao.optim.adam import single_param_adam
from torchao.optim.subclass_4bit import OptimState4bit
from torchao.optim.subclass_8bit import OptimState8bit
from torchao.optim.subclass_fp8 import OptimStateFp8

import golden_io

GENERATOR = "tools/export/export_torchao_adam.py (lowbit 0.1.0)"
N = 4096  # torchao quantizes only tensors of at least 4096 elements
STEPS = 4
TORCH = f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}"
KINDS = {  # format -> (state class, block size)
    "torchao.adam.codebook8": (OptimState8bit, 256),
    "torchao.adam.codebook4": (OptimState4bit, 128),
    "torchao.adam.fp8": (OptimStateFp8, 256),
}


def state_tensors(prefix: str, state) -> dict:
    """A moment as case tensors: codes one per element (4-bit unpacked), scale, qmap (codebooks)."""
    if isinstance(state, OptimStateFp8):
        return {f"{prefix}.codes": state.codes.clone(), f"{prefix}.scale": state.scale.clone()}
    codes = state.codes
    if isinstance(state, OptimState4bit):
        codes = torch.stack([codes >> 4, codes & 15], dim=-1).view(-1)
    return {f"{prefix}.codes": codes.clone(), f"{prefix}.scale": state.scale.clone(), f"{prefix}.qmap": state.qmap.clone()}


def new_state(cls, signed: bool, block: int):
    """A fresh state as torchao's optimizer creates it (signed map for the first moment)."""
    return cls.zeros(N, block) if cls is OptimStateFp8 else cls.zeros(N, signed, block)


def fp8_rules() -> dict:
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    widening = "avx512" if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else "c10"
    return {"overflow": "satfinite" if (major, minor) >= (2, 13) else "nan", "nan_encoding": "torch",
            "nan_widening": widening}


def export(w: golden_io.Writer):
    settings = [  # (name, adamw, weight decay, lr, seed)
        ("adamw", True, 1e-2, 1e-3, 11),
        ("adam-l2", False, 1e-2, 1e-3, 12),
        ("adamw-wd0-lr1e-1", True, 0.0, 1e-1, 13),
    ]
    for fmt, (cls, block) in KINDS.items():
        for name, adamw, wd, lr_value, seed in settings:
            g = torch.Generator().manual_seed(seed)
            p = torch.randn(N, generator=g)
            exp_avg, exp_avg_sq = new_state(cls, True, block), new_state(cls, False, block)
            step = torch.tensor(0.0)
            lr = torch.tensor(lr_value)
            for k in range(1, STEPS + 1):
                grad = torch.randn(N, generator=g) * (10.0 ** -torch.randint(0, 4, (1,), generator=g).item())
                grad[:7] = 0.0  # zero gradients, and below, the signed zero of a fresh state
                grad[7] = -0.0
                before = {"param": p.clone(), "grad": grad.clone(), "step": step.clone(), "lr": lr.clone(),
                          **state_tensors("exp_avg", exp_avg), **state_tensors("exp_avg_sq", exp_avg_sq)}
                step += 1  # as _AdamBase.step does before calling single_param_adam
                single_param_adam(p, grad, step, exp_avg, exp_avg_sq, None, lr, 0.9, 0.999, wd, 1e-8, adamw, False)
                after = {"param.next": p.clone(), "step.next": step.clone(),
                         **{k2 + ".next": v for k2, v in state_tensors("exp_avg", exp_avg).items() if not k2.endswith("qmap")},
                         **{k2 + ".next": v for k2, v in state_tensors("exp_avg_sq", exp_avg_sq).items() if not k2.endswith("qmap")}}
                params = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": wd, "adamw": adamw,
                          "block_size": block}
                if cls is OptimStateFp8:
                    params.update(fp8_rules())
                w.add("torchao", fmt, f"{name}.step{k}", {**before, **after}, params,
                      "torchao.optim.adam.single_param_adam (eager) on " + cls.__name__, seed, f"randn, step {k}")


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, {"torchao": f"torchao {torchao.__version__} ({TORCH})"}, GENERATOR, export))
