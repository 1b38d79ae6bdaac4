"""Kernels under test, written in NumPy the way a kernel author ports torchao's code (torchao 0.18
optim/quant_utils.py: scale_tensor, quantize_8bit_with_qmap, dequant_with_qmap), float32 throughout:
the right one, and mutants with one known bug each (a reciprocal multiply for the division, the
search's ties rounded down)."""
import numpy as np

TORCH_CANONICAL_NAN = np.array([0x7FC00000], dtype=np.uint32).view(np.float32)[0]


def _scale(x, block_size):
    blocks = x.reshape(-1, block_size)
    amax = np.abs(blocks).max(axis=1)
    amax = np.where(np.isnan(amax), TORCH_CANONICAL_NAN, amax)  # torch's amax of a block holding a NaN
    scale = np.where(np.isnan(amax), amax, np.maximum(amax, np.float32(1e-12))).astype(np.float32)
    return blocks, scale


def _search(y, qmap, ties_up=True):
    codes = np.where(y >= qmap[128], 128, 0)
    for step in (64, 32, 16, 8, 4, 2, 1):
        codes += np.where(y >= qmap[codes + step], step, 0)
    codes_up = np.minimum(codes + 1, 255)
    lo, hi = qmap[codes], qmap[codes_up]
    residual = y - lo
    half = (hi - lo) * np.float32(0.5)
    up = residual >= half if ties_up else residual > half
    return np.where(up, codes_up, codes).astype(np.uint8)


def torchao_codebook8(x, qmap, block_size=256, reciprocal=False, ties_up=True):
    """{codes, scale, dequant} of torchao's 8-bit block-wise state; reciprocal / ties_up=False: the mutants."""
    x = np.asarray(x, dtype=np.float32)
    blocks, scale = _scale(x, block_size)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if reciprocal:
            y = blocks * (np.float32(1) / scale)[:, None]
        else:
            y = blocks / scale[:, None]
        codes = _search(y, qmap, ties_up).reshape(-1)
        dequant = (qmap[codes].reshape(-1, block_size) * scale[:, None]).reshape(-1)
    return {"codes": codes, "scale": scale, "dequant": dequant.astype(np.float32)}
