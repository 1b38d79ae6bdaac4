#!/usr/bin/env python3
"""Golden cases for COAT's FP8 AdamW optimizer kernels (coat.optim.origin.e4m3, coat.optim.expand.e4m3),
from COAT's own CUDA kernels on a GPU. Needs an NVIDIA GPU, a CUDA build of torch, nvcc and ninja.

COAT's kernels are compiled from a checkout (--coat-src) with torch.utils.cpp_extension, with the
nvcc flags of COAT's own coat/optimizer/kernels/setup.py, for the GPU at hand; COAT's files are not
modified or copied into this repository. Each input case (--inputs: cases of those formats made by
`lowbit golden generate`, whose inputs are kept and whose outputs, the reference's, are replaced)
runs through one kernel launch: the state tensors are updated in place, as COAT does, and written
as the case's `*.next` tensors. docs/device/README.md says how this runs on the GPU machine.

    lowbit golden generate --format coat.optim.expand.e4m3 --input normal:n=1000 --steps 3 --out /tmp/in
    git -C COAT-CHECKOUT archive 80ec99f coat | tar -x -C /tmp/coat
    python3 tools/export/export_coat_optimizer.py --coat-src /tmp/coat --inputs /tmp/in --out golden
"""
import json
import os
import sys
from pathlib import Path

import torch
from safetensors import safe_open

import golden_io

COAT_COMMIT = "80ec99f"
GENERATOR = "tools/export/export_coat_optimizer.py (lowbit 0.1.0)"
# coat/optimizer/kernels/setup.py, extra_compile_args["nvcc"]
COAT_NVCC_FLAGS = ["-O3", "-std=c++17", "-DTORCH_USE_CUDA_DSA", "-U__CUDA_NO_HALF_OPERATORS__",
                   "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
                   "-U__CUDA_NO_HALF2_OPERATORS__"]
COAT_SOURCES = ["fp8_adamw_cuda.cpp", "fp8_adamw_cuda_kernel.cu", "fp8_adamw_expand_cuda.cpp",
                "fp8_adamw_expand_cuda_kernel.cu", "bindings.cpp"]
QGROUP_SIZE = 128  # the only group size COAT's kernels accept
FUNCTIONS = {
    "coat.optim.origin.e4m3": "coat/optimizer/kernels/fp8_adamw_cuda_kernel.cu fp8_adamw_step",
    "coat.optim.expand.e4m3": "coat/optimizer/kernels/fp8_adamw_expand_cuda_kernel.cu fp8_adamw_expand_step",
}
STATES = {
    "coat.optim.origin.e4m3": ["exp_avg.codes", "exp_avg.scale", "exp_avg_sq.codes", "exp_avg_sq.scale"],
    "coat.optim.expand.e4m3": ["exp_avg.codes", "exp_avg.scale", "exp_avg.expand", "exp_avg.centre",
                               "exp_avg_sq.codes", "exp_avg_sq.scale", "exp_avg_sq.expand", "exp_avg_sq.centre"],
}


def source_text():
    props = torch.cuda.get_device_properties(0)
    return (f"NVlabs/COAT {COAT_COMMIT} CUDA kernels (torch.utils.cpp_extension, COAT's nvcc flags, "
            f"sm_{props.major}{props.minor}) on {props.name}, torch {torch.__version__}, CUDA {torch.version.cuda}")


def build_kernels(coat_src: Path):
    from torch.utils.cpp_extension import load
    kernels = coat_src / "coat" / "optimizer" / "kernels"
    missing = [s for s in COAT_SOURCES if not (kernels / s).is_file()]
    if missing:
        sys.exit(f"export_coat_optimizer: error: --coat-src {coat_src}: missing {', '.join(missing)} in {kernels}")
    props = torch.cuda.get_device_properties(0)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{props.major}.{props.minor}")
    build = Path(os.environ.get("LOWBIT_COAT_BUILD", "/tmp/lowbit-coat-build"))
    build.mkdir(parents=True, exist_ok=True)
    return load(name="qoptim_cuda", sources=[str(kernels / s) for s in COAT_SOURCES],
                extra_cuda_cflags=COAT_NVCC_FLAGS, build_directory=str(build), verbose=False)


def read_case(path: Path):
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def run_case(ext, fmt: str, tensors: dict, params: dict) -> dict:
    """One kernel launch on copies of the case's inputs; returns the inputs and the `*.next` outputs."""
    dev = torch.device("cuda")
    param = tensors["param"].clone().to(dev)
    grad = tensors["grad"].clone().to(dev)
    state = {k: tensors[k].clone().to(dev) for k in STATES[fmt]}
    step = int(tensors["step"].item())
    hyper = (float(params["beta1"]), float(params["beta2"]), float(params["lr"]), float(params["weight_decay"]),
             float(params["eps"]), step, QGROUP_SIZE)
    if fmt == "coat.optim.expand.e4m3":
        ext.fp8_adamw_expand_step(param, grad, *(state[k] for k in STATES[fmt]), *hyper, int(params["expand_min"]))
    else:
        ext.fp8_adamw_step(param, grad, *(state[k] for k in STATES[fmt]), *hyper)
    torch.cuda.synchronize()
    out = {k: v for k, v in tensors.items() if not k.endswith(".next")}
    out["param.next"] = param.cpu()
    for k, v in state.items():
        out[f"{k}.next"] = v.cpu()
    return out


def export(w: golden_io.Writer, args):
    if not torch.cuda.is_available():
        sys.exit("export_coat_optimizer: error: no CUDA device (COAT's optimizer kernels are CUDA only)")
    cases = sorted(p for p in args.inputs.rglob("*.safetensors"))
    if not cases:
        sys.exit(f"export_coat_optimizer: error: --inputs {args.inputs}: no .safetensors cases")
    ext = build_kernels(args.coat_src)
    for path in cases:
        tensors, meta = read_case(path)
        fmt = meta.get("format", "")
        if fmt not in FUNCTIONS:
            sys.exit(f"export_coat_optimizer: error: {path}: format '{fmt}' is not a COAT optimizer format")
        params = json.loads(meta["params"])
        out = run_case(ext, fmt, tensors, params)
        w.add("coat", fmt, path.stem, out, params, f"NVlabs/COAT {COAT_COMMIT} {FUNCTIONS[fmt]}",
              int(meta.get("seed", "0")), meta.get("input", ""))
        print(f"{fmt} {path.stem}: {tensors['param'].numel()} elements", file=sys.stderr)


def add_arguments(ap):
    ap.add_argument("--coat-src", required=True, type=Path, help=f"COAT checkout (commit {COAT_COMMIT}) holding coat/optimizer/kernels/")
    ap.add_argument("--inputs", required=True, type=Path, help="cases of coat.optim.* made by lowbit golden generate")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("export_coat_optimizer: error: no CUDA device (COAT's optimizer kernels are CUDA only)")
    sys.exit(golden_io.run(__doc__, {"coat": source_text()}, GENERATOR, export, add_arguments))
