"""Arrays across the boundary: NumPy arrays and DLPack producers (torch tensors) in, NumPy out.

NumPy has no bf16 or FP8 dtype, so those tensors travel as their bit patterns: lowbit returns BF16 as
np.uint16 and F8_E4M3 / F8_E5M2 as np.uint8, always (whatever else is installed), and records the real
dtype in Case.dtypes. On the way in, a torch bfloat16 / float8 tensor or an ml_dtypes array says its
dtype itself; a bit-pattern array (uint16, or uint8 where the format declares an FP8 tensor) takes the
dtype the case or the format declares for that name. No value is ever converted: float64 and other
dtypes a case cannot hold are refused, not rounded.
"""
from __future__ import annotations

import sys

import numpy as np

# safetensors dtype -> the NumPy dtype lowbit returns (bit patterns where NumPy has none)
NUMPY_OF = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
    "F8_E4M3": np.dtype("u1"),
    "F8_E5M2": np.dtype("u1"),
}
BIT_VIEWS = {"BF16", "F8_E4M3", "F8_E5M2"}

# NumPy dtype names (including ml_dtypes') that name their case dtype themselves
_CASE_DTYPE_OF_NUMPY = {
    "float32": "F32",
    "float16": "F16",
    "uint8": "U8",
    "int32": "I32",
    "int64": "I64",
    "uint16": "BF16",  # the bit patterns of bf16: the case dtypes have no U16
    "bfloat16": "BF16",  # ml_dtypes
    "float8_e4m3fn": "F8_E4M3",  # ml_dtypes
    "float8_e5m2": "F8_E5M2",  # ml_dtypes
}

_TORCH = {
    "torch.float32": ("F32", None),
    "torch.float16": ("F16", None),
    "torch.bfloat16": ("BF16", "int16"),
    "torch.uint8": ("U8", None),
    "torch.int32": ("I32", None),
    "torch.int64": ("I64", None),
    "torch.float8_e4m3fn": ("F8_E4M3", "uint8"),
    "torch.float8_e5m2": ("F8_E5M2", "uint8"),
}

ACCEPTED = "float32, float16, bfloat16 (or its uint16 bits), uint8, int32, int64, float8_e4m3fn, float8_e5m2"


def _is_torch_tensor(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach") and hasattr(x, "dtype")


def check_storage(name: str, t) -> None:
    """ValueError naming the tensor unless a torch tensor's elements fit in the bytes of its storage
    from its offset on, checked before anything copies it: a view that repeats its elements (stride 0,
    overlapping strides) can claim 2^33 elements over 3 KB, and .contiguous() would allocate them all.
    A checkpoint's tensors (torch.save and DCP keep a view's storage) hold their own elements."""
    if not _is_torch_tensor(t) or type(t).__name__ not in ("Tensor", "Parameter"):
        return  # a wrapper subclass (a torchao state) has no storage of its own: its inner tensors are checked
    size = t.element_size()
    available = t.untyped_storage().nbytes() - t.storage_offset() * size
    if t.numel() * size > available:
        raise ValueError(f"{name}: a view of {t.numel()} elements (shape {list(t.shape)}, strides {list(t.stride())}, "
                         f"offset {t.storage_offset()}) over a storage of {t.untyped_storage().nbytes()} bytes: it repeats "
                         f"its elements; a checkpoint's tensors hold their own")


def _from_torch(name: str, t):
    """(array, dtype) of a torch tensor, through DLPack; a tensor on another device is copied to the CPU."""
    # the conjugate and negative bits are lazy: the storage holds the unconjugated, unnegated values,
    # and DLPack hands out the storage (x.conj().imag of -2 would read 2)
    t = t.detach().resolve_conj().resolve_neg()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    key = str(t.dtype)
    if key not in _TORCH:
        raise TypeError(f"tensor '{name}': torch dtype {key} is not a case dtype ({ACCEPTED})")
    dtype, view = _TORCH[key]
    if view is not None:  # bf16 and FP8 have no NumPy dtype: their bits, as an integer view
        import torch

        t = t.view(getattr(torch, view))
    a = np.from_dlpack(t)
    if dtype == "BF16":
        a = a.view(np.uint16)
    return a, dtype


def as_array(name: str, value, declared=None):
    """(C-contiguous little-endian NumPy array, case dtype) of one tensor.

    declared: the case dtypes this name may have (an explicit dtype, or the format's schema): a uint8
    array takes the FP8 dtype declared for it when U8 is not among them.
    """
    if _is_torch_tensor(value):
        a, dtype = _from_torch(name, value)
    else:
        if isinstance(value, np.ndarray):
            a = value
        elif hasattr(value, "__dlpack__"):
            a = np.from_dlpack(value)
        else:
            raise TypeError(f"tensor '{name}': {type(value).__name__} is not an array (give a NumPy array or a "
                            f"DLPack producer such as a torch tensor)")
        if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and sys.byteorder == "big"):
            # the values, swapped to this machine's (little-endian) order before any bit view: a
            # big-endian >u2 of bf16 bits is those bits, not their bytes reversed
            a = a.astype(a.dtype.newbyteorder("<"))
        dtype = _CASE_DTYPE_OF_NUMPY.get(a.dtype.name)
        if dtype is None:
            raise TypeError(f"tensor '{name}': dtype {a.dtype} is not a case dtype ({ACCEPTED}); lowbit never "
                            f"converts values: cast it yourself if that is what you mean")
        if dtype in ("BF16", "F8_E4M3", "F8_E5M2") or a.dtype.name == "uint16":
            a = a.view(NUMPY_OF[dtype]) if a.dtype.itemsize == NUMPY_OF[dtype].itemsize else a
    if dtype == "U8" and declared:
        fp8 = [d for d in declared if d in ("F8_E4M3", "F8_E5M2")]
        if "U8" not in declared and len(fp8) == 1:
            dtype = fp8[0]
    return np.require(a, requirements="C"), dtype  # (np.ascontiguousarray would make a 0-d array 1-d)


def packed(name: str, value, declared=None):
    """The engine's form of one tensor: (name, dtype, shape, bytes as a flat uint8 array)."""
    a, dtype = as_array(name, value, declared)
    return (name, dtype, [int(e) for e in a.shape], a.reshape(-1).view(np.uint8))


def unpacked(dtype: str, shape, data: np.ndarray, where: str = "tensor") -> np.ndarray:
    """A NumPy array of the engine's bytes: the dtype's own, or its bit patterns (BIT_VIEWS). A shape
    NumPy cannot hold (an extent of 2^62 beside a 0) is a CaseError naming the tensor."""
    try:
        return data.view(NUMPY_OF[dtype]).reshape(shape)
    except ValueError as e:
        from ._core import CaseError

        raise CaseError(f"{where}: shape {list(shape)} cannot be a NumPy array ({e})") from None
