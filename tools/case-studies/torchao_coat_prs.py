#!/usr/bin/env python3
"""Case study: hold the two open pytorch/ao COAT FP8 pull requests (#4522, #4692) to the
`coat.optim.expand.e4m3` reference cases (docs/case-studies/torchao-coat-prs.md).

For every expected case in --cases (made by `lowbit golden generate --format coat.optim.expand.e4m3
... --steps N`) this script

1. loads the state *before* the step (param, grad, step, and per moment codes / scale / expand /
   centre, groups of 128),
2. maps it into the PR's tensor subclass (the mapping is the identity, see MAPPING below),
3. runs the PR's code on the CPU, in one of two modes:
   * `step`: one optimizer step of the PR's AdamW class (AdamWFp8Coat for #4522, CoatAdamW for
     #4692) with block_size=128 and lr / betas / eps / weight_decay from the case's `params`; the
     class's own `step()` (which wraps the shared `single_param_adam` in torch.compile) is tried
     first and, if that fails on this machine, `single_param_adam` is called eagerly (recorded in the
     summary as `runner`). `--eager` forces the eager call.
   * `quant`: the PR's state quantizer alone (`quantize_coat_fp8` / `quantize_fp8_coat`) applied to
     the reference kernel's *unquantized* new moments. For step-1 cases (fresh state, m0 = v0 = 0)
     these are exact: m = RN((1 - b1) * g), v = RN(g * RN((1 - b2) * g)) in float32, the kernel's
     own expressions. For later steps they are rebuilt from the stored state with a float64
     dequantization rounded to float32 (correctly rounded pow instead of CUDA's powf, which is
     not correctly rounded: docs/formats/coat-optimizer.md#libdevice-log2f-and-powf-cuda-130), so
     those are marked `approx` in the summary.
     `param.next` is copied from the expected case in this mode (not part of the comparison).
4. writes an "actual" case with the expected case's inputs and metadata and the PR's outputs, and
5. runs `lowbit compare EXPECTED ACTUAL --report OUT/<mode>/<case>.json` and collects the result.

MAPPING (reference state -> PR state; both PRs use the same conventions as the COAT kernel):
* codes: float8_e4m3fn, one per element, same order -> `codes` (identical).
* scale: float32 per group -> `scale` (identical meaning: dequant d = float(code) * scale).
* expand (k, not 1/k) -> #4522 `k`, #4692 `expansion` (both store k, dequantize with |d|**(1/k)).
* centre (c) -> `sqrt_minmax` (both multiply by it after the inverse power).
* group size 128 -> block_size=128 (the PRs' default is 256; 128 is passed explicitly).
* fresh state: reference scale 0, k 1, c 1, codes 0 == both PRs' `zeros()` (scale 0, k 1, c 1).
* step: the reference's int step n -> the PR's float32 `state["step"] = n - 1` (its step() adds 1)
  or `n` directly for the eager call.
Outputs map back the same way: codes -> X.codes.next, scale -> X.scale.next, k -> X.expand.next,
sqrt_minmax -> X.centre.next, p -> param.next.
"""
import argparse
import importlib
import importlib.util
import json
import subprocess
import sys
import traceback
from pathlib import Path

import torch
from safetensors import safe_open

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "export"))
from golden_io import serialize  # noqa: E402

LOWBIT = REPO / "build" / "release" / "tools" / "lowbit" / "lowbit"
GROUP = 128
MOMENTS = ("exp_avg", "exp_avg_sq")
PRS = {
    "4522": dict(subclass_module="subclass_coat_fp8", subclass="OptimStateCoatFp8", quantize="quantize_coat_fp8",
                 adamw="AdamWFp8Coat", attrs=("codes", "scale", "k", "sqrt_minmax")),
    "4692": dict(subclass_module="subclass_fp8_coat", subclass="OptimStateFp8Coat", quantize="quantize_fp8_coat",
                 adamw="CoatAdamW", attrs=("codes", "scale", "expansion", "sqrt_minmax")),
}


def load_pr(pr_src: Path, pr: str):
    """Import the PR's code. If pr_src holds torchao/optim/, that whole package is imported (the PR's
    adam.py with its own single_param_adam); otherwise pr_src must hold the PR's subclass file, which
    is loaded next to the installed torchao's adam.py (same single_param_adam at both PR bases)."""
    info = PRS[pr]
    if (pr_src / "torchao" / "optim").is_dir():
        sys.path.insert(0, str(pr_src))
        for name in [m for m in sys.modules if m == "torchao" or m.startswith("torchao.")]:
            del sys.modules[name]
        sub = importlib.import_module(f"torchao.optim.{info['subclass_module']}")
        adam = importlib.import_module("torchao.optim.adam")
        where = str(Path(sub.__file__).resolve())
    else:
        path = next(pr_src.rglob(info["subclass_module"] + ".py"))
        spec = importlib.util.spec_from_file_location(f"torchao.optim.{info['subclass_module']}", path)
        sub = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = sub
        spec.loader.exec_module(sub)
        adam = importlib.import_module("torchao.optim.adam")
        where = str(path.resolve())
    return sub, adam, where


def read_case(path: Path):
    tensors, meta = {}, {}
    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata() or {})
        for k in f.keys():
            tensors[k] = f.get_tensor(k)
    return tensors, meta


def make_state(sub, info, t, name):
    cls = getattr(sub, info["subclass"])
    return cls(t[f"{name}.codes"].clone(), t[f"{name}.scale"].clone(), t[f"{name}.expand"].clone(),
               t[f"{name}.centre"].clone(), dtype=torch.float32)


def state_outputs(state, info, name):
    codes, scale, k, c = (getattr(state, a) for a in info["attrs"])
    return {f"{name}.codes.next": codes.clone(), f"{name}.scale.next": scale.clone().float(),
            f"{name}.expand.next": k.clone().float(), f"{name}.centre.next": c.clone().float()}


def run_step(sub, adam, info, t, hp, eager: bool):
    """One optimizer step of the PR's AdamW class (or its eager single_param_adam)."""
    p = t["param"].clone()
    grad = t["grad"].clone()
    n = int(t["step"].item())
    exp_avg = make_state(sub, info, t, "exp_avg")
    exp_avg_sq = make_state(sub, info, t, "exp_avg_sq")
    runner = None
    if not eager and not hasattr(adam, info["adamw"]):
        # --pr-src held only the subclass module: the installed torchao has no PR optimizer class
        runner = f"{info['adamw']} not in {adam.__file__} (module-only --pr-src); its single_param_adam, eager"
        eager = True
    if not eager:
        try:
            param = torch.nn.Parameter(p.clone())
            param.grad = grad.clone()
            opt = getattr(adam, info["adamw"])([param], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                                               weight_decay=hp["weight_decay"], block_size=GROUP)
            st = opt.state[param]
            st["step"] = torch.tensor(float(n - 1))
            st["exp_avg"], st["exp_avg_sq"] = exp_avg, exp_avg_sq
            opt.step()
            out = {"param.next": param.detach().clone()}
            out.update(state_outputs(st["exp_avg"], info, "exp_avg"))
            out.update(state_outputs(st["exp_avg_sq"], info, "exp_avg_sq"))
            return out, f"{info['adamw']}.step (torch.compile, CPU inductor)"
        except Exception as e:  # noqa: BLE001 - record and fall back to eager
            runner = f"torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0][:200]}); eager fallback"
            exp_avg = make_state(sub, info, t, "exp_avg")
            exp_avg_sq = make_state(sub, info, t, "exp_avg_sq")
    adam.single_param_adam(p, grad, torch.tensor(float(n)), exp_avg, exp_avg_sq, None,
                           torch.tensor(hp["lr"], dtype=torch.float32), hp["beta1"], hp["beta2"], hp["weight_decay"],
                           hp["eps"], True, False)
    out = {"param.next": p}
    out.update(state_outputs(exp_avg, info, "exp_avg"))
    out.update(state_outputs(exp_avg_sq, info, "exp_avg_sq"))
    return out, runner or "single_param_adam eager (is_adamw=True)"


def f32(x):
    return torch.tensor(x, dtype=torch.float32).item()


def ref_moments(t, hp):
    """The reference kernel's unquantized new moments (docs/formats/coat-optimizer.md, arithmetic
    step 2: m = fma(m0, b1, RN(w1 g)), v = fma(v0, b2, RN(g RN(w2 g)))). Exact when the old state is
    the fresh one (m0 = v0 = 0); otherwise m0, v0 come from a float64 dequantization (approximate)."""
    g = t["grad"].float()
    b1, b2 = f32(hp["beta1"]), f32(hp["beta2"])
    w1 = torch.tensor(1.0, dtype=torch.float32) - torch.tensor(b1, dtype=torch.float32)
    w2 = torch.tensor(1.0, dtype=torch.float32) - torch.tensor(b2, dtype=torch.float32)
    exact = True
    m0s = []
    for name in MOMENTS:
        codes = t[f"{name}.codes"].float().view(-1, GROUP).double()
        s = t[f"{name}.scale"].double().view(-1, 1)
        k = t[f"{name}.expand"].double().view(-1, 1)
        c = t[f"{name}.centre"].double().view(-1, 1)
        d = (codes * s).float().double()  # RN(float(code) * s)
        # exact only for a fresh-like state: every d = 0 and 1/k > 0 (a k = +inf group dequantizes
        # to +-c, docs/formats/coat-optimizer.md#groups-with-one-magnitude, so it must take the
        # general path)
        if bool((d == 0).all()) and bool((torch.isfinite(k) & (k > 0)).all()):
            m0s.append(torch.zeros_like(g))
            continue
        exact = False
        ik = (1.0 / k.float()).double()  # rcp.rn in float32
        if name == "exp_avg":
            sg = torch.where(torch.signbit(d), -1.0, 1.0).double()
            mag = d.abs().pow(ik).float().double()  # powf(|d|, 1/k), correctly rounded here
            m0 = (sg * mag * c).float()
        else:
            m0 = (d.pow(ik).float().double() * c).float()
        m0s.append(m0.view(-1))
    # fma(m0, b1, RN(w1 g)) and fma(v0, b2, RN(g RN(w2 g))): product exact in double, one rounding to
    # float32 after a double add (double rounding possible only in the approximate case)
    wg = (w1 * g)
    m = (m0s[0].double() * b1 + wg.double()).float()
    gw = g * (w2 * g)
    v = (m0s[1].double() * b2 + gw.double()).float()
    return m, v, exact


def run_quant(sub, info, t, hp):
    m, v, exact = ref_moments(t, hp)
    q = getattr(sub, info["quantize"])
    out = {"param.next": t["param.next"].clone()}
    for name, x in zip(MOMENTS, (m, v)):
        codes, scale, k, c = q(x.clone(), GROUP)
        out.update({f"{name}.codes.next": codes.clone(), f"{name}.scale.next": scale.float().clone(),
                    f"{name}.expand.next": k.float().clone(), f"{name}.centre.next": c.float().clone()})
    return out, "exact unquantized moments" if exact else "approx (float64 dequantization of the old state)"


def summarize(report_path: Path):
    """Per tensor with mismatches: elements, mismatches, worst code / ulp distance (lowbit's JSON)."""
    rep = json.loads(report_path.read_text())
    return {t["name"]: dict(elements=t["elements"], mismatches=t["mismatches"], max_code=t["max_code_distance"],
                            max_ulp=t["max_ulp_distance"])
            for t in rep["tensors"] if t["mismatches"]}


def dequant64(codes, scale, k, c, signed):
    """COAT's dequantization evaluated in float64 (for error statistics only, not bit-exact)."""
    d = codes.float().view(-1, GROUP).double() * scale.double().view(-1, 1)
    ik = 1.0 / k.double().view(-1, 1)
    mag = d.abs().pow(ik)
    val = torch.where(torch.signbit(d), -mag, mag) if signed else d.pow(ik)
    return (val * c.double().view(-1, 1)).view(-1)


def dequant_stats(t, out, hp):
    """Dequantized next states, expected vs actual: how many elements differ, and each one's error
    against the reference's unquantized moments (exact only for step-1 cases)."""
    m, v, exact = ref_moments(t, hp)
    res = {}
    for name, x, signed in (("exp_avg", m, True), ("exp_avg_sq", v, False)):
        e = dequant64(t[f"{name}.codes.next"], t[f"{name}.scale.next"], t[f"{name}.expand.next"],
                      t[f"{name}.centre.next"], signed)
        a = dequant64(out[f"{name}.codes.next"].reshape(-1), out[f"{name}.scale.next"], out[f"{name}.expand.next"],
                      out[f"{name}.centre.next"], signed)
        x = x.double().view(-1)
        ok = torch.isfinite(e) & torch.isfinite(a) & (x != 0)
        rel = lambda y: ((y - x).abs() / x.abs())[ok]  # noqa: E731
        res[name] = dict(differ=int((e != a).sum()), nonfinite_expected=int((~torch.isfinite(e)).sum()),
                         nonfinite_actual=int((~torch.isfinite(a)).sum()),
                         mean_rel_err_expected=float(rel(e).mean()) if ok.any() else None,
                         mean_rel_err_actual=float(rel(a).mean()) if ok.any() else None,
                         max_rel_err_expected=float(rel(e).max()) if ok.any() else None,
                         max_rel_err_actual=float(rel(a).max()) if ok.any() else None,
                         moments_exact=exact)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pr-src", required=True, type=Path, help="PR checkout (holding torchao/optim/) or the folder with its module")
    ap.add_argument("--pr", required=True, choices=sorted(PRS))
    ap.add_argument("--cases", required=True, type=Path, help="folder of expected cases (searched recursively)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--mode", choices=("step", "quant", "both"), default="both")
    ap.add_argument("--eager", action="store_true", help="call single_param_adam eagerly instead of the compiled step()")
    ap.add_argument("--lowbit", type=Path, default=LOWBIT)
    args = ap.parse_args()

    torch.set_num_threads(1)
    info = PRS[args.pr]
    sub, adam, where = load_pr(args.pr_src, args.pr)
    cases = sorted(p for p in args.cases.rglob("*.safetensors"))
    modes = ("step", "quant") if args.mode == "both" else (args.mode,)
    summary = {"pr": args.pr, "module": where, "cases": []}
    for case in cases:
        t, meta = read_case(case)
        if meta.get("format") != "coat.optim.expand.e4m3":
            continue
        hp = json.loads(meta["params"])
        if int(hp.get("expand_min", 16)) != 16:
            print(f"skip {case.name}: expand_min {hp['expand_min']} (both PRs hard-code 16 or none)", file=sys.stderr)
            continue
        if t["param"].numel() % GROUP:
            # the PRs' quantizers view the state as (-1, block_size): a partial last group cannot be
            # expressed (their optimizers keep such tensors, and any with numel < 4096, in plain fp32)
            summary["cases"].append({"case": case.name, "mode": "-", "expected": str(case),
                                     "error": f"numel {t['param'].numel()} is not a multiple of {GROUP}: not expressible"})
            print(f"skip {case.name}: numel {t['param'].numel()} not a multiple of {GROUP}", file=sys.stderr)
            continue
        for mode in modes:
            entry = {"case": case.name, "mode": mode, "expected": str(case)}
            try:
                out, runner = run_step(sub, adam, info, t, hp, args.eager) if mode == "step" else run_quant(sub, info, t, hp)
            except Exception as e:  # noqa: BLE001
                entry.update(error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-2000:])
                summary["cases"].append(entry)
                print(f"{case.name} [{mode}]: PR code failed: {e}", file=sys.stderr)
                continue
            actual = {k: v for k, v in t.items() if not k.endswith(".next")}
            for k in [k for k in t if k.endswith(".next")]:
                actual[k] = out[k].reshape(t[k].shape).to(t[k].dtype).contiguous()
            ameta = dict(meta)
            ameta["source"] = f"pytorch/ao PR #{args.pr} ({where}); {runner}"
            ameta["generator"] = "tools/case-studies/torchao_coat_prs.py"
            (args.out / mode / "actual").mkdir(parents=True, exist_ok=True)
            apath = args.out / mode / "actual" / case.name
            apath.write_bytes(serialize(actual, ameta))
            rpath = args.out / mode / (case.name.removesuffix(".safetensors") + ".json")
            r = subprocess.run([str(args.lowbit), "compare", str(case), str(apath), "--report", str(rpath)],
                               capture_output=True, text=True)
            entry.update(runner=runner, actual=str(apath), report=str(rpath), exit=r.returncode,
                         stderr=r.stderr[-1000:])
            if r.returncode in (0, 1):
                entry["tensors"] = summarize(rpath)
                try:
                    entry["dequantized"] = dequant_stats(t, out, hp)
                except Exception as e:  # noqa: BLE001
                    entry["dequantized"] = f"{type(e).__name__}: {e}"
            summary["cases"].append(entry)
            print(f"{case.name} [{mode}] exit {r.returncode} ({runner})", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    bad = sum(1 for c in summary["cases"] if c.get("exit") != 0)
    print(f"{len(summary['cases'])} comparisons, {bad} not conformant or failed; summary in {args.out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
