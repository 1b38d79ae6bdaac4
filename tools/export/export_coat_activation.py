#!/usr/bin/env python3
"""Golden cases for COAT's activation quantizers (coat.act.*), from COAT's own Triton kernels run on
the CPU under Triton's interpreter (TRITON_INTERPRET=1). No GPU is involved, so the cases record the
interpreter's arithmetic: exact IEEE fp32 division (numpy), and the interpreter's own fp32->fp8 and
fp32->bf16 converters, which are NOT the GPU's (docs/formats/coat-activation.md). Every case
therefore carries params casts="triton-interpreter", division="ieee".

COAT is read from a checkout (--coat-src) and imported module by module, without its package
__init__ files (they pull in unrelated dependencies); COAT's files are not modified. Triton 3.9
removed tl.make_block_ptr, which COAT uses: this exporter installs a small shim for it (pointer
tensor + bounds mask, out-of-bounds loads read 0), and an autotuner benchmark stand-in that runs
every config once (there is no GPU driver to time them).

    git clone https://github.com/NVlabs/COAT /tmp/coat-repo
    mkdir -p /tmp/coat && git -C /tmp/coat-repo archive 80ec99f coat | tar -x -C /tmp/coat
    .venv/bin/python tools/export/export_coat_activation.py --coat-src /tmp/coat --out golden
    .venv/bin/python tools/export/export_coat_activation.py --coat-src /tmp/coat --out /tmp/g --diff-against golden
"""
import sys

import coat_interpreter  # sets TRITON_INTERPRET=1 before triton is imported

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

import golden_io  # noqa: E402

GENERATOR = "tools/export/export_coat_activation.py (lowbit 0.1.0)"
COAT_COMMIT = coat_interpreter.COAT_COMMIT
# torch makes the inputs and reads the bits; the quantizers' arithmetic is the interpreter's (numpy).
# The CPU capability is recorded all the same, as in every golden case.
SOURCE = (f"NVlabs/COAT {COAT_COMMIT}, triton {triton.__version__}, torch {torch.__version__} "
          f"(CPU capability {torch.backends.cpu.get_cpu_capability()}), "
          "TRITON_INTERPRET=1 (CPU interpreter: divisions are exact IEEE, numpy float32; fp32->fp8 is the "
          "interpreter's bit-field converter: ties away, no saturation, carry OR-ed into the exponent; "
          "fp32->bf16 truncates)")


# torch only makes the inputs (torch.randn draws other values under another capability; the
# quantizers' arithmetic is the interpreter's numpy): the committed cases are AVX2's, and under
# another capability the names take .cpu-<capability>, so that such a run never relabels them.
SUFFIX = "" if torch.backends.cpu.get_cpu_capability() == "AVX2" else f".cpu-{torch.backends.cpu.get_cpu_capability().lower()}"


def versions():
    return {"coat": SOURCE}


# ---- loading COAT under the interpreter -------------------------------------------------------

def patch_triton():
    import triton.language as tl
    from triton.language import core
    from triton.runtime.interpreter import TensorHandle

    coat_interpreter.run_every_autotune_config_once()

    orig_load, orig_store = core.load, core.store

    class BlockPtr:
        def __init__(self, base, shape, strides, offsets, block_shape):
            self.base, self.shape, self.strides = base, shape, strides
            self.offsets, self.block_shape = offsets, block_shape

        def materialize(self, boundary_check):
            idx = np.ix_(*[np.arange(o, o + b, dtype=np.int64) for o, b in zip(self.offsets, self.block_shape)])
            off = sum(i * s for i, s in zip(idx, self.strides))
            mask = np.ones(self.block_shape, dtype=bool)
            for d in boundary_check or ():
                mask &= (idx[d] >= 0) & (idx[d] < self.shape[d])
            h = self.base.handle
            esize = max(1, h.get_element_ty().primitive_bitwidth // 8)
            off = np.where(mask, off, 0)
            ptrs = TensorHandle(h.data[0] + (esize * off).astype(np.uint64), h.dtype)
            shape = list(self.block_shape)
            return (core.tensor(ptrs, core.block_type(self.base.dtype, shape)),
                    core.tensor(TensorHandle(mask, tl.int1), core.block_type(tl.int1, shape)))

    def as_int(v):
        v = core._unwrap_if_constexpr(v)
        return int(v.handle.data.reshape(-1)[0]) if hasattr(v, "handle") else int(v)

    @core.builtin
    def make_block_ptr(base, shape, strides, offsets, block_shape, order, _semantic=None):
        return BlockPtr(base, [as_int(s) for s in shape], [as_int(s) for s in strides],
                        [as_int(o) for o in offsets], [as_int(b) for b in block_shape])

    @core.builtin
    def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", _semantic=None, **kw):
        if isinstance(pointer, BlockPtr):
            ptrs, m = pointer.materialize(core._unwrap_if_constexpr(boundary_check))
            return orig_load(ptrs, m, None, _semantic=_semantic)
        return orig_load(pointer, mask, other, _semantic=_semantic, **kw)

    @core.builtin
    def store(pointer, value, mask=None, boundary_check=(), _semantic=None, **kw):
        if isinstance(pointer, BlockPtr):
            ptrs, m = pointer.materialize(core._unwrap_if_constexpr(boundary_check))
            return orig_store(ptrs, value, m, _semantic=_semantic)
        return orig_store(pointer, value, mask, _semantic=_semantic, **kw)

    for mod in (tl, core):
        mod.make_block_ptr, mod.load, mod.store = make_block_ptr, load, store


def load_coat(src: str) -> dict:
    return coat_interpreter.import_coat_modules(src, "coat.activation.real_quantization",
                                                ["_quantize", "_quantize_pertensor", "_quantize_transpose",
                                                 "_quantize_perblock"])


# ---- inputs -----------------------------------------------------------------------------------

FP8 = {"e4m3": ("E4M3", torch.float8_e4m3fn, 448.0), "e5m2": ("E5M2", torch.float8_e5m2, 57344.0)}


def make_input(m, n, qb, fp8, seed, dtype=torch.float32, specials=True):
    """Random rows over many magnitudes; the first groups of row 0.. carry the edge cases."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g) * torch.exp2(torch.randint(-12, 12, (m, 1), generator=g).float())
    if specials:
        fmax = FP8[fp8][2]
        x[0, 0:qb] = 0.0  # all-zero group: S = 1e-10/fp8_max, codes +-0
        x[0, 1:qb:2] = -0.0
        # a group whose max is fp8_max: RN(max + 1e-10) = max, so S = 1 exactly and the code is the
        # plain fp8 cast of x: exact ties, 2^-10 and just above, subnormals
        ties = [1.0625, 17.0, -1.0625, 0.0009765625, 0.00097656256, 0.0029296875, -0.0048828125, 1.1875,
                fmax, -0.0, 2.0 ** -17, 3.0 * 2.0 ** -17, 5.0, 13.0, 0.5 + 2 ** -5, 240.0 + 8.0]
        row = torch.tensor((ties * ((qb + 15) // 16))[:qb], dtype=torch.float32)
        if fp8 == "e5m2":
            row = row * 4.0
            row[8] = fmax
        x[1, 0:qb] = row
        x[2, 3] = float("nan")  # ignored by the max, code of NaN
        x[3, qb + 2] = float("inf")  # S = inf: finite -> 0, inf/inf = NaN
        x[3, qb + 5] = -float("inf")
        x[4, 0:qb] = -torch.linspace(0.1, 1.0, qb) * 3.0  # group max is negative
    return x.to(dtype)


def bf16_bits(t):
    return t.view(torch.int16)


def params_of(qb, fp8, scale_dtype=None):
    p = {"group_size": qb, "fp8": fp8, "division": "ieee", "casts": "triton-interpreter"}
    if scale_dtype:
        p["scale_dtype"] = scale_dtype
    return p


SCALE = {"bf16": torch.bfloat16, "f32": torch.float32}


def export_all(w: golden_io.Writer, args):
    patch_triton()
    coat = load_coat(str(args.coat_src))
    desc = lambda x: f"randn rows x 2^[-12,12), specials in rows 0-4, {str(x.dtype)[6:]} {list(x.shape)}"

    # per-group 1 x QB
    pergroup = [(16, "e4m3", "bf16", torch.float32), (16, "e4m3", "f32", torch.float32),
                (16, "e5m2", "bf16", torch.float32), (16, "e5m2", "f32", torch.float32),
                (32, "e4m3", "bf16", torch.float32), (32, "e5m2", "f32", torch.float32),
                (64, "e4m3", "bf16", torch.bfloat16), (128, "e4m3", "bf16", torch.bfloat16)]
    for i, (qb, fp8, sd, dt) in enumerate(pergroup):
        seed = 100 + i
        x = make_input(2 * qb, 4 * qb, qb, fp8, seed, dt)
        y, s = coat["_quantize"].fp8_quantize(x, qb, FP8[fp8][0], scale_dtype=SCALE[sd])
        w.add("coat", "coat.act.pergroup", f"qb{qb}.{fp8}.{sd}scale.{str(dt)[6:]}{SUFFIX}",
              {"input": x, "codes": y, "scale": s}, params_of(qb, fp8, sd),
              "coat.activation.real_quantization._quantize.fp8_quantize", seed, desc(x))

    # per-tensor with group scaling (QB = 16 only)
    for i, (fp8, m, n) in enumerate([("e4m3", 32, 64), ("e5m2", 32, 64), ("e4m3", 64, 128)]):
        seed = 200 + i
        x = make_input(m, n, 16, fp8, seed, specials=(i == 1))
        if i != 1:  # no Inf (it would make s = inf): a group max whose bf16 scale rounds down
            x[5, 7] = 447.9 * 3.3
        y, s_max, s_g = coat["_quantize_pertensor"].fp8_quantize_pertensor(x, 16, FP8[fp8][0])
        w.add("coat", "coat.act.pertensor.groupscale", f"qb16.{fp8}.{m}x{n}{SUFFIX}",
              {"input": x, "codes": y, "scale": s_max.reshape(1), "group_scale": s_g}, params_of(16, fp8),
              "coat.activation.real_quantization._quantize_pertensor.fp8_quantize_pertensor", seed, desc(x))

    # transposed per-group
    for i, (qb, fp8, sd, m, n) in enumerate([(16, "e4m3", "bf16", 32, 64), (16, "e5m2", "f32", 16, 48),
                                             (32, "e4m3", "bf16", 64, 96)]):
        seed = 300 + i
        x = make_input(m, n, qb, fp8, seed)
        (y, s), (yt, st) = coat["_quantize_transpose"].fp8_quantize_transpose(x, qb, FP8[fp8][0], scale_dtype=SCALE[sd])
        w.add("coat", "coat.act.pergroup.transposed", f"qb{qb}.{fp8}.{sd}scale.{m}x{n}{SUFFIX}",
              {"input": x, "codes": y, "scale": s, "codes_t": yt, "scale_t": st}, params_of(qb, fp8, sd),
              "coat.activation.real_quantization._quantize_transpose.fp8_quantize_transpose", seed, desc(x))

    # per-block QB x QB
    for i, (qb, fp8, sd, m, n, dt) in enumerate([(16, "e4m3", "bf16", 32, 48, torch.float32),
                                                 (16, "e5m2", "f32", 48, 32, torch.float32),
                                                 (128, "e4m3", "f32", 256, 256, torch.bfloat16)]):
        seed = 400 + i
        x = make_input(m, n, qb, fp8, seed, dt)
        x[m - 1, n - 1] = 1e30 if dt == torch.float32 else 1e30  # one huge element in the last block
        y, s = coat["_quantize_perblock"].fp8_quantize_perblock(x, qb, FP8[fp8][0], scale_dtype=SCALE[sd])
        w.add("coat", "coat.act.perblock", f"qb{qb}.{fp8}.{sd}scale.{m}x{n}{SUFFIX}",
              {"input": x, "codes": y, "scale": s}, params_of(qb, fp8, sd),
              "coat.activation.real_quantization._quantize_perblock.fp8_quantize_perblock", seed, desc(x))


def add_arguments(ap):
    coat_interpreter.add_coat_src_argument(ap)


if __name__ == "__main__":
    sys.exit(golden_io.run(__doc__, versions(), GENERATOR, export_all, add_arguments))
