"""The quantized states of bitsandbytes' thirteen 8-bit optimizer classes (bitsandbytes 0.50.2,
bitsandbytes/optim/*.py), as their state_dict() holds them:

- two states, ``state1`` (signed map ``qmap1``) and ``state2`` (unsigned map ``qmap2``), each with a
  1-D ``absmax``: Adam8bit, AdamW8bit, PagedAdam8bit, PagedAdamW8bit, LAMB8bit (Optimizer2State);
- one state, ``state1`` (signed map): Lion8bit, PagedLion8bit, SGD8bit, RMSprop8bit, Adagrad8bit,
  LARS8bit (Optimizer1State);
- AdEMAMix8bit and PagedAdEMAMix8bit: ``state1`` of shape ``(2, *p.shape)`` holding both first moments
  (row 0 the fast EMA, beta1; row 1 the slow one, beta3) with a ``(2, blocks)`` ``absmax1``, each row
  quantized on its own (AdEMAMix.init_state, ``_get_state_double_buffer``), and ``state2`` as Adam's.

Each quantized tensor becomes one state of the block-wise format its dequantizer is
(``bnb.blockwise8.dynamic`` with the state's own qmap); AdEMAMix's ``state1`` becomes two,
``<key>.state1[0]`` and ``<key>.state1[1]``. The paged classes store the same tensors (paging moves
their memory, not their layout). A state of a parameter below ``min_8bit_size`` is float32, not
quantized, and is passed over. The caller (state.py) makes each found state a QuantizedState.
"""
from __future__ import annotations

import json

import numpy as np

from . import _arrays, _formats
from ._case import Case
from ._core import CaseError

FORMAT = "bnb.blockwise8.dynamic"  # the dequantizer reads the state's own qmap (signed state1, unsigned state2)
QMAP_ENTRIES = 256  # bitsandbytes' 8-bit maps (functional.py create_dynamic_map: 2^8 entries)
# what each tensor holds, for the case's source line (the state dict does not say which class wrote it)
_ROLES = {"state1": "first state: Adam's, AdEMAMix's and LAMB's first moment, Lion's and SGD's momentum, RMSprop's "
                    "and Adagrad's squared-gradient state",
          "state2": "second moment (Adam, AdEMAMix, LAMB)",
          "state1[0]": "AdEMAMix's fast first moment (beta1)", "state1[1]": "AdEMAMix's slow first moment (beta3)"}


def _flat(case: Case, name: str, array, dtype):
    case[name] = np.ascontiguousarray(array).reshape(-1)
    case.dtypes[name] = dtype


def _part(key: str, name: str, codes, codes_dtype, scale, scale_dtype, qmap, qmap_dtype, block_size: int, stored: dict):
    """One quantized tensor (name: state1, state2, state1[0], state1[1]) as (key, format, shape, case,
    stored), after checking it against bitsandbytes' layout and the format's schema: an absmax of one
    entry per block (the last block may be partial), a 1-D qmap of 256 entries, the dtypes declared."""
    n = codes.size
    if scale.ndim != 1 or scale.size != -(-n // block_size):
        absmax = f"{scale.size} absmax entries" if scale.ndim == 1 else f"an absmax of shape {list(scale.shape)}"
        raise CaseError(f"{key}.{name}: {n} codes and {absmax} do not make blocks of {block_size} (bnb_block_size=)")
    if qmap.ndim != 1 or qmap.size != QMAP_ENTRIES:
        raise CaseError(f"{key}.{name}: its qmap has shape {list(qmap.shape)}; bitsandbytes' 8-bit states read a table "
                        f"of {QMAP_ENTRIES} entries")
    _formats.check_dtypes(f"{key}.{name}", FORMAT, {"codes": codes_dtype, "scale": scale_dtype, "qmap": qmap_dtype})
    case = Case(origin=f"{key}.{name}")
    _flat(case, "codes", codes, codes_dtype)
    _flat(case, "scale", scale, scale_dtype)
    _flat(case, "qmap", qmap, qmap_dtype)
    case.metadata = {"format": FORMAT, "params": json.dumps({"block_size": block_size}),
                     "source": f"bitsandbytes 8-bit optimizer state ({key}.{name}: {_ROLES[name]})"}
    return f"{key}.{name}", FORMAT, tuple(codes.shape), case, stored


def _double_buffer(key: str, codes, codes_dtype, scale, scale_dtype, qmap, qmap_dtype, block_size: int) -> list:
    """AdEMAMix's state1 (2, *p.shape) with absmax1 (2, blocks): its two rows, each a state."""
    if codes.ndim < 2 or codes.shape[0] != 2 or scale.shape[0] != 2:
        raise CaseError(f"{key}.state1: a 2-D absmax1 of shape {list(scale.shape)} belongs to AdEMAMix's double "
                         f"buffer, but state1 has shape {list(codes.shape)} (expected (2, *p.shape) and (2, blocks))")
    out = []
    for row in (0, 1):
        name = f"state1[{row}]"
        stored = {name: (codes[row], codes_dtype), f"absmax1[{row}]": (scale[row], scale_dtype), "qmap1": (qmap, qmap_dtype)}
        out.append(_part(key, name, codes[row], codes_dtype, scale[row], scale_dtype, qmap, qmap_dtype, block_size, stored))
    return out


def bnb_states(key: str, d: dict, block_size: int) -> list:
    """The quantized states of one parameter's bitsandbytes state dict d (state1, state2 with their
    absmax and qmap) under key, as (key, format, shape, case, stored) tuples."""
    out = []
    for k in ("1", "2"):
        if f"state{k}" not in d:
            continue
        codes, codes_dtype = _arrays.as_array(f"{key}.state{k}", d[f"state{k}"])
        if codes_dtype != "U8":  # a 32-bit state (parameters below min_8bit_size): not quantized
            continue
        for part in (f"absmax{k}", f"qmap{k}"):
            if part not in d:
                raise CaseError(f"{key}: bitsandbytes state{k} without {part}")
        scale, scale_dtype = _arrays.as_array(f"{key}.absmax{k}", d[f"absmax{k}"])
        qmap, qmap_dtype = _arrays.as_array(f"{key}.qmap{k}", d[f"qmap{k}"])
        if scale.ndim == 2:
            if k != "1":
                raise CaseError(f"{key}.absmax2: shape {list(scale.shape)}; only AdEMAMix's absmax1 has two rows")
            out.extend(_double_buffer(key, codes, codes_dtype, scale, scale_dtype, qmap, qmap_dtype, block_size))
            continue
        if scale.ndim != 1:
            raise CaseError(f"{key}.absmax{k}: shape {list(scale.shape)}; bitsandbytes' absmax is 1-D (2-D: AdEMAMix)")
        stored = {f"state{k}": (codes, codes_dtype), f"absmax{k}": (scale, scale_dtype), f"qmap{k}": (qmap, qmap_dtype)}
        out.append(_part(key, f"state{k}", codes, codes_dtype, scale, scale_dtype, qmap, qmap_dtype, block_size, stored))
    return out
