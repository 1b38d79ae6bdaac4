#!/usr/bin/env python3
"""Golden cases for COAT's fake quantization (coat.fake.*), from COAT's own code run on the CPU:
floatExMy_quantize_triton under Triton's interpreter (TRITON_INTERPRET=1), floatExMy_quantize_torch
and SymmQuantizer.forward (block_cut / block_reshape) with CPU torch. No GPU is involved: every case
carries params model="interpreter" (docs/formats/coat-fake.md says what differs on a GPU).

Triton 3.9's interpreter cannot run libdevice calls: it only patches triton.language, tl.core and
tl.math, so `libdevice.signbit(x)` / `libdevice.round(x)` inside the kernel raise "Did you forget to
add @triton.jit ?" (and InterpreterBuilder.create_extern_elementwise raises NotImplementedError).
This exporter therefore installs two numpy stand-ins with libdevice's contracts:
  signbit(x) = np.signbit(x) as int32 (__nv_signbitf: 0 or 1),
  round(x)   = trunc(x) + copysign(1, x) when |x - trunc(x)| >= 0.5, else trunc(x)
               (__nv_roundf: half AWAY from zero; numpy's np.round would be half to even).
Everything else in the kernel is the interpreter's own numpy float32 arithmetic (tl.log2 = np.log2,
tl.floor = np.floor, tl.exp2 = np.exp2, tl.clamp = np.fmax/np.fmin, `/` = IEEE division). Also an
autotuner benchmark stand-in that runs each config once (no GPU driver to time them).

COAT is read from a checkout (--coat-src) and imported module by module, without its package
__init__ files; COAT's files are not modified.

    git clone https://github.com/NVlabs/COAT /tmp/coat-repo
    mkdir -p /tmp/coat && git -C /tmp/coat-repo archive 80ec99f coat | tar -x -C /tmp/coat
    .venv/bin/python tools/export/export_coat_fake.py --coat-src /tmp/coat --out golden
    .venv/bin/python tools/export/export_coat_fake.py --coat-src /tmp/coat --out /tmp/g --diff-against golden
"""
import sys

import coat_interpreter  # sets TRITON_INTERPRET=1 before triton is imported

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

import golden_io  # noqa: E402

GENERATOR = "tools/export/export_coat_fake.py (lowbit 0.1.0)"
COAT_COMMIT = coat_interpreter.COAT_COMMIT
CAPABILITY = torch.backends.cpu.get_cpu_capability()
SOURCE = (f"NVlabs/COAT {COAT_COMMIT}, triton {triton.__version__} under TRITON_INTERPRET=1 on the CPU "
          f"(libdevice.round/signbit by numpy stand-ins: round half away from zero, signbit 0/1), "
          f"torch {torch.__version__} CPU (CPU capability {CAPABILITY}) for the torch path and SymmQuantizer")
# torch's CPU capability decides one thing here: whose NaN SymmQuantizer's Q * scale returns when
# both are NaN (vectorized: the scale's; scalar, capability default: Q's). The interpreter's numpy
# arithmetic and torch's amax, division and casts gave the same bits at AVX2 and default. Under
# another capability than AVX2 only the nan-payloads cases of coat.fake.symm are written, named
# *.cpu-<capability> (ATEN_CPU_CAPABILITY=default .venv/bin/python tools/export/export_coat_fake.py ...).
SUFFIX = "" if CAPABILITY == "AVX2" else f".cpu-{CAPABILITY.lower()}"


def versions():
    return {"coat": SOURCE}


# ---- loading COAT under the interpreter -------------------------------------------------------

def patch_triton():
    import triton.language as tl
    from triton.language import core
    from triton.language.extra.cuda import libdevice
    from triton.runtime.interpreter import TensorHandle

    coat_interpreter.run_every_autotune_config_once()

    def round_half_away(arg0, _semantic=None):  # __nv_roundf
        d = arg0.handle.data
        t = np.trunc(d)
        with np.errstate(invalid="ignore"):
            away = np.abs(d - t) >= np.float32(0.5)
        out = np.where(away, t + np.copysign(np.float32(1), d), t).astype(d.dtype)
        return core.tensor(TensorHandle(out, arg0.handle.dtype), arg0.type)

    def signbit(arg0, _semantic=None):  # __nv_signbitf
        out = np.signbit(arg0.handle.data).astype(np.int32)
        ty = core.block_type(tl.int32, arg0.type.shape) if arg0.type.is_block() else tl.int32
        return core.tensor(TensorHandle(out, tl.int32), ty)

    libdevice.round, libdevice.signbit = round_half_away, signbit


def load_coat(src: str):
    return coat_interpreter.import_coat_modules(src, "coat.activation.fake_quantization",
                                                ["quantize_function"])["quantize_function"]


# ---- inputs -----------------------------------------------------------------------------------

FP8 = {"e4m3": (4, 3, "E4M3"), "e5m2": (5, 2, "E5M2")}


def f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def grid_points(e, m):
    """Every non-negative value of the kernel's grid (exponents Elow..Ehigh, no saturation)."""
    lo, hi = 2 - 2 ** (e - 1), 2 ** (e - 1)
    vals = [k * 2.0 ** (lo - m) for k in range(2 ** m)]  # subnormal range
    for ex in range(lo, hi + 1):
        vals += [(1 + k / 2 ** m) * 2.0 ** ex for k in range(2 ** m)]
    vals.append(2.0 ** (hi + 1))
    return np.array(sorted(set(vals)), dtype=np.float64)


def edge_input(fp8, seed):
    """Grid points, every midpoint (an exact tie), the float32 neighbours of each midpoint, signed
    copies, signed zeros, subnormals of the grid and of float32, values beyond the top, Inf, NaN."""
    e, m, _ = FP8[fp8]
    g = grid_points(e, m)
    mids = (g[:-1] + g[1:]) / 2
    v = [g, mids, np.nextafter(mids.astype(np.float32), np.float32(0)).astype(np.float64),
         np.nextafter(mids.astype(np.float32), np.float32(np.inf)).astype(np.float64)]
    x = np.concatenate(v).astype(np.float32)
    x = np.concatenate([x, -x])
    top = 448.0 if fp8 == "e4m3" else 57344.0
    extra = np.array([0.0, -0.0, top, 449.0, 464.0, 465.0, 480.0, 500.0, 511.0, 512.0, 1000.0, 1e6, 3e38,
                      -500.0, -1e6, 57344.0, 61440.0, 65536.0, 1e9, 2.0 ** -10, 2.0 ** -11, 2.0 ** -17,
                      2.0 ** -24, 1e-30, 1e-45, -1e-45, 1.0625001, 0.9999999, 1.0 - 2.0 ** -24, 2.0 ** -6 * (1 - 2.0 ** -24),
                      # np.log2 rounds the next two up to an integer exponent
                      256.0 * (1 - 2.0 ** -24), 2.0 ** -100 * (1 - 2.0 ** -24),
                      np.inf, -np.inf], dtype=np.float32)
    nans = f32([0x7FC00000, 0xFFC00000])
    rng = np.random.default_rng(seed)
    rand = (rng.standard_normal(512) * np.exp2(rng.integers(-20, 20, 512))).astype(np.float32)
    return torch.from_numpy(np.concatenate([x, extra, nans, rand]).astype(np.float32))


# NaNs of both signs, quiet and signalling, with payloads low and high (bit patterns), and +-Inf
NAN_PAYLOADS = [0x7FC00000, 0xFFC00000, 0x7FC00001, 0xFFC00001, 0xFFFFFFFF, 0x7FFFFFFF, 0x7F800001, 0xFF800001,
                0x7FA00000, 0xFFFF0000, 0x7FFF0000]


def nan_input():
    """Every NaN of NAN_PAYLOADS, then +-Inf, +-0 and a few finite values around them."""
    return torch.from_numpy(np.concatenate([f32(NAN_PAYLOADS), np.array([np.inf, -np.inf, 0.0, -0.0, 1.5, -3.0, 1e-40],
                                                                         dtype=np.float32)]))


def symm_nan_input(m, n):
    """An M x N tensor of small values holding every NaN of NAN_PAYLOADS, one per row, at column
    3 * row (so in blocks of 1 x 16 each NaN has a block of its own), and a NaN-free last row."""
    x = (torch.arange(m * n, dtype=torch.float32).reshape(m, n) % 13 - 6) / 8
    nans = torch.from_numpy(f32(NAN_PAYLOADS))
    for r in range(min(m - 1, len(NAN_PAYLOADS))):
        x[r, (3 * r) % n] = nans[r]
    return x


def symm_nan_input_1x1(m, n):
    """An M x N tensor (4 x 5) for 1 x 1 tiles, where Q * scale is an element-wise product of two
    tensors of the same shape: every NaN of NAN_PAYLOADS, seven among the first 16 elements and the
    last four on elements 16-19, which torch's element-wise loop multiplies in another operand order
    than the elements before them (AVX2 and AVX-512: 16 in vectors, then a group of four)."""
    x = (torch.arange(m * n, dtype=torch.float32) % 13 - 6) / 8
    at = [0, 2, 4, 6, 8, 10, 12] + list(range(m * n - 4, m * n))
    x[at] = torch.from_numpy(f32(NAN_PAYLOADS))
    return x.reshape(m, n)


def symm_input(m, n, rb, cb, fp8, seed, specials=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g) * torch.exp2(torch.randint(-10, 10, (m, 1), generator=g).float())
    if specials:
        cb_ = n if cb == -1 else cb
        x[0, 0:cb_] = 0.0  # an all-zero block (if rb == 1): absmax = epsilon
        x[0, 1:cb_:2] = -0.0
        x[1, 0] = -7.0
        x[1, 1:4] = torch.tensor([-7.0 / 448 * 1.0625, 7.0 / 448 * 17, 7.0 / 448 * 0.0009765625])  # near-ties after /scale
        x[2, 0] = float("inf")
        x[3, 5] = float("nan")
        x[4, 2] = 2.0 ** -140  # a float32 subnormal next to normal values
    return x


def export_all(w: golden_io.Writer, args):
    patch_triton()
    qf = load_coat(str(args.coat_src))

    for i, fp8 in enumerate(["e4m3", "e5m2"] if not SUFFIX else []):
        e, m, _ = FP8[fp8]
        seed = 500 + i
        x = edge_input(fp8, seed)
        desc = f"{fp8} grid points, all midpoints (ties) and their float32 neighbours, +-, +-0, +-Inf, +-NaN, beyond-top, 512 randn*2^[-20,20); float32 [{x.numel()}]"
        y = qf.floatExMy_quantize_triton(x.clone(), e, m, False)
        w.add("coat", "coat.fake.floatexmy.triton", f"{fp8}.edges", {"input": x, "output": y},
              {"fp8": fp8, "model": "interpreter"},
              "coat.activation.fake_quantization.FloatPointQuantizeTriton.floatExMy_quantize_triton", seed, desc)
        yt = qf.floatExMy_quantize_torch(x.clone(), e, m, False)
        w.add("coat", "coat.fake.floatexmy.torch", f"{fp8}.edges", {"input": x, "output": yt}, {"fp8": fp8},
              "coat.activation.fake_quantization.FloatPointQuantizeTorch.floatExMy_quantize_torch", seed, desc)

        # NaN payloads and signs: what each path does with a NaN's bits
        xn = nan_input()
        desc = f"NaNs {', '.join(hex(b) for b in NAN_PAYLOADS)}, +-Inf, +-0, 1.5, -3, 1e-40; float32 [{xn.numel()}]"
        w.add("coat", "coat.fake.floatexmy.triton", f"{fp8}.nan-payloads",
              {"input": xn, "output": qf.floatExMy_quantize_triton(xn.clone(), e, m, False)},
              {"fp8": fp8, "model": "interpreter"},
              "coat.activation.fake_quantization.FloatPointQuantizeTriton.floatExMy_quantize_triton", 0, desc)
        w.add("coat", "coat.fake.floatexmy.torch", f"{fp8}.nan-payloads",
              {"input": xn, "output": qf.floatExMy_quantize_torch(xn.clone(), e, m, False)}, {"fp8": fp8},
              "coat.activation.fake_quantization.FloatPointQuantizeTorch.floatExMy_quantize_torch", 0, desc)

    # SymmQuantizer with NaN payloads: the scale's NaN (torch amax) against each element's own NaN
    # (blocks of 1 x 16: one chunk of torch's multiply loop each; 4 x 5: 16 and a rest of 4, where
    # the loop's lanes order the two NaNs of Q * scale differently: docs/formats/coat-fake.md; 1 x 1:
    # Q and scale have the same shape, so torch runs its element-wise loop, not the broadcast one:
    # symm_nan_input_1x1, issue 30)
    for fp8, mm, n, rb, cb in (("e4m3", 12, 32, 1, 16), ("e5m2", 12, 32, 1, 16), ("e4m3", 12, 20, 4, 5),
                               ("e4m3", 4, 5, 1, 1)):
        eps = 1e-8
        x = symm_nan_input(mm, n) if rb * cb > 1 else symm_nan_input_1x1(mm, n)
        blocks = qf.block_cut(x, rb, cb)
        rq, q, s = qf.SymmQuantizer.forward(None, blocks, True, FP8[fp8][2], False, eps)
        w.add("coat", "coat.fake.symm", f"{fp8}.{mm}x{n}.b{rb}x{cb}.nan-payloads{SUFFIX}",
              {"input": x, "rq": qf.block_reshape(rq, x, rb, cb).contiguous(), "q": qf.block_reshape(q, x, rb, cb).contiguous(),
               "scale": s.reshape(-1).contiguous()},
              {"fp8": fp8, "model": "interpreter", "row_block": rb, "col_block": cb, "epsilon": eps,
               "cpu_capability": CAPABILITY.lower()},
              "coat.activation.fake_quantization.quantize_function.SymmQuantizer.forward (block_cut, block_reshape)", 0,
              f"(k mod 13 - 6) / 8 with {'one NaN per row' if rb * cb > 1 else 'NaNs at 0-12 (even) and the last four'} "
              f"({', '.join(hex(b) for b in NAN_PAYLOADS)}); float32 [{mm}, {n}], "
              f"blocks {rb}x{cb}, epsilon {eps}")

    if SUFFIX:
        return
    # SymmQuantizer on block_cut blocks, then block_reshape back to M x N
    for i, (fp8, mm, n, rb, cb, eps, specials) in enumerate([
            ("e4m3", 8, 64, 1, 16, 1e-8, True), ("e4m3", 16, 32, 4, 8, 1e-10, True),
            ("e5m2", 8, 64, 1, 16, 1e-8, True), ("e4m3", 32, 64, -1, 32, 1e-8, False),
            ("e5m2", 16, 48, 16, -1, 1e-10, False)]):
        seed = 600 + i
        x = symm_input(mm, n, rb, cb, fp8, seed, specials)
        blocks = qf.block_cut(x, rb, cb)
        rq, q, s = qf.SymmQuantizer.forward(None, blocks, True, FP8[fp8][2], False, eps)
        rq = qf.block_reshape(rq, x, rb, cb)
        q = qf.block_reshape(q, x, rb, cb)
        desc = (f"randn rows x 2^[-10,10){', zero block, ties, Inf, NaN, subnormal in rows 0-4' if specials else ''}; "
                f"float32 [{mm}, {n}], blocks {rb}x{cb}, epsilon {eps}")
        w.add("coat", "coat.fake.symm", f"{fp8}.{mm}x{n}.b{rb}x{cb}",
              {"input": x, "rq": rq.contiguous(), "q": q.contiguous(), "scale": s.reshape(-1).contiguous()},
              {"fp8": fp8, "model": "interpreter", "row_block": rb, "col_block": cb, "epsilon": eps,
               "cpu_capability": CAPABILITY.lower()},
              "coat.activation.fake_quantization.quantize_function.SymmQuantizer.forward (block_cut, block_reshape)",
              seed, desc)


def add_arguments(ap):
    coat_interpreter.add_coat_src_argument(ap)


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, versions(), GENERATOR, export_all, add_arguments))
