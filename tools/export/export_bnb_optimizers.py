#!/usr/bin/env python3
"""Golden cases for bitsandbytes' other 8-bit block-wise optimizers on the CPU: Lion, AdEMAMix, SGD
with momentum (and LARS, the same rule), RMSprop and Adagrad (LAMB passes Adam's rule:
export_bnb_adam.py).

Calls the registered CPU kernel `torch.ops.bitsandbytes.optimizer_update_8bit_blockwise` with the
arguments each optimizer class passes (bitsandbytes/optim/*.py: Optimizer1State's signed map for a
single state; AdEMAMix's two first moments in a 2-D state1 with a (2, blocks) absmax, its second
moment with the unsigned map; its schedulers computed as AdEMAMix.update_step does), for several
consecutive steps. Each step is one case: the state before (inputs) and after (outputs, `.next`).

    ATEN_CPU_CAPABILITY=avx2 .venv/bin/python tools/export/export_bnb_optimizers.py --out golden
    ATEN_CPU_CAPABILITY=default .venv/bin/python tools/export/export_bnb_optimizers.py --out golden
    .venv/bin/python tools/export/export_bnb_optimizers.py --out golden   # on an AVX-512 machine: *.cpu-avx512
    ATEN_CPU_CAPABILITY=avx2 .venv/bin/python tools/export/export_bnb_optimizers.py --out /tmp/g --diff-against golden
"""
import math
import sys

import golden_io  # first: it isolates torch's compile cache

import bitsandbytes  # noqa: E402
import bitsandbytes.functional as bnbF  # noqa: E402
import torch  # noqa: E402

GENERATOR = "tools/export/export_bnb_optimizers.py (lowbit 0.1.0)"
TORCH = f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}"
# torch's CPU capability decides whether add(alpha) and addcmul round once (avx2, avx512) or twice
# (default; avx512 as avx2, pinned by its own cases); avx2 gives the unsuffixed cases, another
# capability small cases named *.cpu-<capability>
CAPABILITY = torch.backends.cpu.get_cpu_capability().lower()
FUNCTION = "bitsandbytes backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer '{}')"

# (format, optimizer name, state names, case settings); a setting: (name, elements, seed, non-finite
# gradients from step 2, params). 4096 + 37 elements end in a partial block.
ONE_STATE = {
    "bnb.lion8bit.cpu": ("lion", "exp_avg", [
        ("lion", 4096, 31, False, {"lr": 1e-4, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.0}),
        ("lion-wd-tail", 4096 + 37, 32, True, {"lr": 1e-3, "beta1": 0.9, "beta2": 0.99, "weight_decay": 1e-2}),
        ("lion-betas", 4096, 33, False, {"lr": 3e-4, "beta1": 0.95, "beta2": 0.98, "weight_decay": 0.1}),
    ]),
    "bnb.momentum8bit.cpu": ("momentum", "momentum_buffer", [
        ("sgd", 4096, 41, False, {"lr": 1e-2, "momentum": 0.9, "weight_decay": 0.0}),
        ("sgd-wd-tail", 4096 + 37, 42, True, {"lr": 1e-2, "momentum": 0.5, "weight_decay": 1e-2}),
        # LARS8bit passes "lars" and (momentum, dampening) as the betas: the CPU kernel runs the
        # momentum rule and reads neither the dampening nor max_unorm
        ("lars", 4096, 43, False, {"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4}),
    ]),
    "bnb.rmsprop8bit.cpu": ("rmsprop", "square_avg", [
        ("rmsprop", 4096, 51, False, {"lr": 1e-2, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0}),
        ("rmsprop-wd-tail", 4096 + 37, 52, True, {"lr": 1e-3, "alpha": 0.9, "eps": 1e-6, "weight_decay": 1e-2}),
    ]),
    "bnb.adagrad8bit.cpu": ("adagrad", "sum", [
        ("adagrad", 4096, 61, False, {"lr": 1e-2, "eps": 1e-10, "weight_decay": 0.0}),
        ("adagrad-wd-tail", 4096 + 37, 62, True, {"lr": 1e-1, "eps": 1e-6, "weight_decay": 1e-2}),
    ]),
}
ADEMAMIX = [
    ("ademamix", 4096, 71, False, {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "beta3": 0.9999, "alpha": 5.0,
                                   "t_alpha": 0, "t_beta3": 0, "eps": 1e-8, "weight_decay": 1e-2}),
    ("ademamix-wd0-tail", 4096 + 37, 72, True, {"lr": 1e-2, "beta1": 0.8, "beta2": 0.99, "beta3": 0.999,
                                                "alpha": 8.0, "t_alpha": 0, "t_beta3": 0, "eps": 1e-6,
                                                "weight_decay": 0.0}),
    # both schedulers, ending inside the exported steps (step 4 > t_alpha = t_beta3 = 3)
    ("ademamix-sched", 4096, 73, False, {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "beta3": 0.9999, "alpha": 5.0,
                                         "t_alpha": 3, "t_beta3": 3, "eps": 1e-8, "weight_decay": 1e-2}),
]


def kernel_betas(fmt: str, p: dict) -> tuple:
    """beta1 and beta2 as the optimizer class passes them (Optimizer1State: its betas tuple)."""
    if fmt == "bnb.lion8bit.cpu":
        return p["beta1"], p["beta2"]
    if fmt == "bnb.momentum8bit.cpu":
        return p["momentum"], 0.0  # (momentum, dampening): dampening 0, unread by the CPU kernel
    if fmt == "bnb.rmsprop8bit.cpu":
        return p["alpha"], 0.0  # (alpha, momentum): momentum 0, unread by the CPU kernel
    return 0.0, 0.0  # Adagrad8bit: (0.0, 0.0)


def ademamix_schedule(p: dict, step: int) -> tuple:
    """alpha_t and beta3_t as bitsandbytes 0.50 optim/ademamix.py AdEMAMix.update_step computes them."""
    alpha_t = min(step * p["alpha"] / p["t_alpha"], p["alpha"]) if p["t_alpha"] else p["alpha"]
    if p["t_beta3"]:
        ln_beta1, ln_beta3 = math.log(p["beta1"]), math.log(p["beta3"])
        step_scale = step / p["t_beta3"]
        beta3_t = min(math.exp((ln_beta1 * ln_beta3) / (((1 - step_scale) * ln_beta3) + (step_scale * ln_beta1))),
                      p["beta3"])
    else:
        beta3_t = p["beta3"]
    return alpha_t, beta3_t


def gradient(g: torch.Generator, n: int, step: int, non_finite: bool) -> torch.Tensor:
    grad = torch.randn(n, generator=g) * (10.0 ** -torch.randint(0, 4, (1,), generator=g).item())
    grad[:5] = 0.0
    grad[5] = -0.0
    if non_finite and step >= 2:  # NaN and Inf reach the CPU kernel unmasked
        grad[7 + step] = float("nan")
        grad[n // 2 + step] = float("inf")
        grad[n - 3 - step] = float("-inf")
    return grad


def settings_for(settings: list) -> tuple:
    """The settings and steps this capability exports: avx2 all of them, 4 steps; another capability
    the first tail setting (or the first) on 512 + 37 elements, 2 steps, its name suffixed."""
    if CAPABILITY == "avx2":
        return settings, 4, {}
    name, _, seed, non_finite, p = next((s for s in settings if "tail" in s[0]), settings[0])
    return [(f"{name}.cpu-{CAPABILITY}", 512 + 37, seed + 100, non_finite, p)], 2, {"cpu_capability": CAPABILITY}


def export_one_state(w: golden_io.Writer, qmap1: torch.Tensor):
    for fmt, (opt, state, all_settings) in ONE_STATE.items():
        settings, steps, extra = settings_for(all_settings)
        for name, n, seed, non_finite, p in settings:
            g = torch.Generator().manual_seed(seed)
            param = torch.randn(n, generator=g)
            state1 = torch.zeros(n, dtype=torch.uint8)  # as Optimizer1State.init_state creates them
            absmax1 = torch.zeros(-(-n // 256))
            beta1, beta2 = kernel_betas(fmt, p)
            for step in range(1, steps + 1):
                grad = gradient(g, n, step, non_finite)
                before = {"param": param.clone(), "grad": grad.clone(), "step": torch.tensor(step, dtype=torch.int64),
                          f"{state}.codes": state1.clone(), f"{state}.scale": absmax1.clone(), f"{state}.qmap": qmap1}
                torch.ops.bitsandbytes.optimizer_update_8bit_blockwise(
                    opt, grad, param, state1, None, beta1, beta2, 0.0, 0.0, p.get("eps", 0.0), step, p["lr"], qmap1,
                    None, absmax1, None, p["weight_decay"], 1.0, False)
                after = {"param.next": param.clone(), f"{state}.codes.next": state1.clone(),
                         f"{state}.scale.next": absmax1.clone()}
                w.add("bnb", fmt, f"{name}.step{step}", {**before, **after}, {**p, "block_size": 256, **extra},
                      FUNCTION.format(opt), seed, f"randn, step {step}")


def export_ademamix(w: golden_io.Writer, qmap1: torch.Tensor, qmap2: torch.Tensor):
    settings, steps, extra = settings_for(ADEMAMIX)
    for name, n, seed, non_finite, p in settings:
        g = torch.Generator().manual_seed(seed)
        param = torch.randn(n, generator=g)
        blocks = -(-n // 256)
        state1 = torch.zeros((2, n), dtype=torch.uint8)  # AdEMAMix.init_state: the double buffer
        state2 = torch.zeros(n, dtype=torch.uint8)
        absmax1 = torch.zeros((2, blocks))
        absmax2 = torch.zeros(blocks)
        for step in range(1, steps + 1):
            grad = gradient(g, n, step, non_finite)
            alpha_t, beta3_t = ademamix_schedule(p, step)
            before = {"param": param.clone(), "grad": grad.clone(), "step": torch.tensor(step, dtype=torch.int64),
                      "exp_avg.codes": state1[0].clone(), "exp_avg.scale": absmax1[0].clone(), "exp_avg.qmap": qmap1,
                      "exp_avg_slow.codes": state1[1].clone(), "exp_avg_slow.scale": absmax1[1].clone(),
                      "exp_avg_slow.qmap": qmap1,
                      "exp_avg_sq.codes": state2.clone(), "exp_avg_sq.scale": absmax2.clone(), "exp_avg_sq.qmap": qmap2}
            torch.ops.bitsandbytes.optimizer_update_8bit_blockwise(
                "ademamix", grad, param, state1, state2, p["beta1"], p["beta2"], beta3_t, alpha_t, p["eps"], step,
                p["lr"], qmap1, qmap2, absmax1, absmax2, p["weight_decay"], 1.0, False)
            after = {"param.next": param.clone(),
                     "exp_avg.codes.next": state1[0].clone(), "exp_avg.scale.next": absmax1[0].clone(),
                     "exp_avg_slow.codes.next": state1[1].clone(), "exp_avg_slow.scale.next": absmax1[1].clone(),
                     "exp_avg_sq.codes.next": state2.clone(), "exp_avg_sq.scale.next": absmax2.clone()}
            w.add("bnb", "bnb.ademamix8bit.cpu", f"{name}.step{step}", {**before, **after},
                  {**p, "block_size": 256, **extra},
                  FUNCTION.format("ademamix") + " with optim/ademamix.py AdEMAMix.update_step's schedulers", seed,
                  f"randn, step {step}")


def export(w: golden_io.Writer):
    qmap1 = bnbF.create_dynamic_map(signed=True).float()
    qmap2 = bnbF.create_dynamic_map(signed=False).float()
    export_ademamix(w, qmap1, qmap2)
    export_one_state(w, qmap1)


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, {"bnb": f"bitsandbytes {bitsandbytes.__version__} ({TORCH})"}, GENERATOR, export))
