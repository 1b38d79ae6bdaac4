#!/usr/bin/env python3
"""Golden cases for torchao's low-bit Adam/AdamW steps (8-bit, 4-bit, FP8 and dense states), CPU, eager.

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
# torch's CPU capability decides whether lerp rounds once (avx2, avx512) or twice (default): under
# another capability than AVX2, a few cases named *.cpu-<capability> with the capability as a param
# (ATEN_CPU_CAPABILITY=default .venv/bin/python tools/export/export_torchao_adam.py --out golden)
CAPABILITY = torch.backends.cpu.get_cpu_capability().lower()
KINDS = {  # format -> (state class, block size)
    "torchao.adam.codebook8": (OptimState8bit, 256),
    "torchao.adam.codebook4": (OptimState4bit, 128),
    "torchao.adam.fp8": (OptimStateFp8, 256),
}


def state_tensors(prefix: str, state) -> dict:
    """A moment as case tensors: codes one per element (4-bit unpacked), scale, qmap (codebooks);
    a dense state (torchao's fallback for small tensors) as itself."""
    if isinstance(state, OptimStateFp8):
        return {f"{prefix}.codes": state.codes.clone(), f"{prefix}.scale": state.scale.clone()}
    if not isinstance(state, (OptimState8bit, OptimState4bit)):
        return {prefix: state.clone()}
    codes = state.codes
    if isinstance(state, OptimState4bit):
        codes = torch.stack([codes >> 4, codes & 15], dim=-1).view(-1)
    return {f"{prefix}.codes": codes.clone(), f"{prefix}.scale": state.scale.clone(), f"{prefix}.qmap": state.qmap.clone()}


def new_state(cls, signed: bool, block: int, p: torch.Tensor):
    """A fresh state as torchao's _new_buffer creates it: quantized when numel >= 4096 and a
    multiple of the block size, else zeros_like(p) in the parameter's dtype."""
    if cls is None:
        return torch.zeros_like(p)
    return cls.zeros(p.numel(), block) if cls is OptimStateFp8 else cls.zeros(p.numel(), signed, block)


def next_of(tensors: dict) -> dict:
    return {k + ".next": v for k, v in tensors.items() if not k.endswith("qmap")}


def export_steps(w: golden_io.Writer, fmt: str, name: str, cls, block: int, n: int, steps: int, seed: int, *,
                 adamw=True, wd=0.0, lr_value=1e-3, amsgrad=False, dtype=torch.float32, stochastic=False,
                 nan_grad=False, extra_params=None):
    """`steps` consecutive steps of single_param_adam from a fresh state, one case per step."""
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(n, generator=g).to(dtype)
    moments = {"exp_avg": new_state(cls, True, block, p), "exp_avg_sq": new_state(cls, False, block, p)}
    if amsgrad:
        moments["max_exp_avg_sq"] = new_state(cls, False, block, p)
    step = torch.tensor(0.0)
    lr = torch.tensor(lr_value)
    for k in range(1, steps + 1):
        grad = torch.randn(n, generator=g) * (10.0 ** -torch.randint(0, 4, (1,), generator=g).item())
        grad[:7] = 0.0  # zero gradients, and below, the signed zero of a fresh state
        grad[7] = -0.0
        grad = grad.to(dtype)
        if nan_grad:  # a diverged step: a negative NaN with a payload in the second block of each moment
            grad.view(torch.int16 if dtype is torch.bfloat16 else torch.int32)[300] = -63 if dtype is torch.bfloat16 else -4128767
        states = {}
        for prefix, state in moments.items():
            states.update(state_tensors(prefix, state))
        before = {"param": p.clone(), "grad": grad.clone(), "step": step.clone(), "lr": lr.clone(), **states}
        if stochastic:
            # _fp32_to_bf16_sr draws torch.randint(0, 2**16, shape, int32) from the global generator:
            # draw the same numbers here first, then rewind so the step draws them again
            torch.manual_seed(seed * 1000 + k)
            rng = torch.get_rng_state()
            before["sr_random"] = torch.randint(0, 1 << 16, p.shape, dtype=torch.int32)
            torch.set_rng_state(rng)
        step += 1  # as _AdamBase.step does before calling single_param_adam
        single_param_adam(p, grad, step, moments["exp_avg"], moments["exp_avg_sq"], moments.get("max_exp_avg_sq"),
                          lr, 0.9, 0.999, wd, 1e-8, adamw, stochastic)
        after = {"param.next": p.clone(), "step.next": step.clone()}
        for prefix, state in moments.items():
            after.update(next_of(state_tensors(prefix, state)))
        params = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": wd, "adamw": adamw}
        if cls is not None:
            params["block_size"] = block
        if amsgrad:
            params["amsgrad"] = True
        if stochastic:
            params["bf16_stochastic_round"] = True
        if cls is OptimStateFp8:
            params.update(golden_io.fp8_rules(N))
        params.update(extra_params or {})
        state_name = cls.__name__ if cls is not None else f"dense {str(dtype).removeprefix('torch.')} states"
        w.add("torchao", fmt, f"{name}.step{k}", {**before, **after}, params,
              "torchao.optim.adam.single_param_adam (eager) on " + state_name, seed,
              "randn" + (f", {n} elements" if n != N else "") + (", bfloat16 param" if dtype is torch.bfloat16 else "")
              + (", a NaN gradient with a payload" if nan_grad else "") + f", step {k}")


def export(w: golden_io.Writer):
    if CAPABILITY != "avx2":
        extra, tag = {"cpu_capability": CAPABILITY}, f".cpu-{CAPABILITY}"
        export_steps(w, "torchao.adam.codebook8", "adamw" + tag, OptimState8bit, 256, N, 2, 11, wd=1e-2, extra_params=extra)
        export_steps(w, "torchao.adam.dense", "n512" + tag, None, 0, 512, 2, 17, wd=1e-2, extra_params=extra)
        if CAPABILITY == "default":  # p.copy_ of a NaN into bf16: c10's scalar conversion, 0x7FC0 (issue 30)
            export_steps(w, "torchao.adam.codebook8", "bf16-nan-grad" + tag, OptimState8bit, 256, N, 2, 21, wd=1e-2,
                         dtype=torch.bfloat16, nan_grad=True, extra_params=extra)
        return
    settings = [  # (name, adamw, weight decay, lr, seed)
        ("adamw", True, 1e-2, 1e-3, 11),
        ("adam-l2", False, 1e-2, 1e-3, 12),
        ("adamw-wd0-lr1e-1", True, 0.0, 1e-1, 13),
    ]
    for fmt, (cls, block) in KINDS.items():
        for name, adamw, wd, lr_value, seed in settings:
            export_steps(w, fmt, name, cls, block, N, STEPS, seed, adamw=adamw, wd=wd, lr_value=lr_value)
        # no AMSGrad here: torchao 0.18 raises NotImplementedError (aten.maximum on its state
        # subclasses), eager and compiled alike; only dense states run it
        export_steps(w, fmt, "bf16-sr", cls, block, N, 3, 15, wd=1e-2, dtype=torch.bfloat16, stochastic=True)
    export_steps(w, "torchao.adam.codebook8", "bf16", OptimState8bit, 256, N, 3, 16, wd=1e-2, dtype=torch.bfloat16)
    # torch's amax of a block holding the NaN is the canonical 0x7FC00000 (exp_avg.scale.next)
    export_steps(w, "torchao.adam.codebook8", "bf16-nan-grad", OptimState8bit, 256, N, 1, 21, wd=1e-2,
                 dtype=torch.bfloat16, nan_grad=True)
    # the dense fallback: fewer than 4096 elements, or not a multiple of the block size
    export_steps(w, "torchao.adam.dense", "n4095", None, 0, 4095, 3, 17, wd=1e-2)
    export_steps(w, "torchao.adam.dense", "n4097-amsgrad", None, 0, 4097, 3, 18, wd=1e-2, amsgrad=True)
    export_steps(w, "torchao.adam.dense", "n4100-bf16", None, 0, 4100, 3, 19, wd=1e-2, dtype=torch.bfloat16)
    export_steps(w, "torchao.adam.dense", "n4100-bf16-sr", None, 0, 4100, 3, 20, wd=1e-2, dtype=torch.bfloat16,
                 stochastic=True)


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, {"torchao": f"torchao {torchao.__version__} ({TORCH})"}, GENERATOR, export))
