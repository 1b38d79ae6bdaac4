"""The format registry as the engine declares it (conformance/engine/include/lowbit/formats.hpp)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache

from . import _core


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtypes: tuple  # the safetensors dtypes it may have; empty: any
    shape: str  # the shape rule in words
    scales: tuple  # the per-block tensors (scale, expand, centre) that its blocks are quantized with


@dataclass(frozen=True)
class FormatInfo:
    name: str
    description: str
    provenance: str
    default_params: dict
    default_tolerance: str
    inputs: tuple
    optional_inputs: tuple
    outputs: tuple
    takes_input: bool  # its cases are made from an input tensor (else: a table, made from params alone)
    optimizer: bool  # an optimizer step (param, grad and state in; the next state out)
    dequantize_reads: tuple = None  # the tensors its dequantizer reads; None: it has none
    round_trip_blocks: dict = None  # the audit's block sizes; None: not audited
    refuses_negative: str = ""
    _tensors: dict = field(default_factory=dict, repr=False, compare=False)

    def tensor(self, name: str):
        """The declaration of a tensor (input, optional input or output), or None."""
        return self._tensors.get(name)

    def declared_dtypes(self, name: str):
        t = self.tensor(name)
        return list(t.dtypes) if t else None


def _tensors(items):
    return tuple(TensorInfo(t["name"], tuple(t["dtypes"]), t["shape"], tuple(t["scales"])) for t in items)


@lru_cache(maxsize=None)
def registry() -> dict:
    out = {}
    for f in json.loads(_core.formats_json()):
        ins, opt, outs = _tensors(f["inputs"]), _tensors(f["optional_inputs"]), _tensors(f["outputs"])
        out[f["name"]] = FormatInfo(
            name=f["name"], description=f["description"], provenance=f["provenance"],
            default_params=f["default_params"], default_tolerance=f["default_tolerance"], inputs=ins,
            optional_inputs=opt, outputs=outs, takes_input=f["takes_input"], optimizer=f["optimizer"],
            dequantize_reads=tuple(f["dequantize_reads"]) if f["dequantize_reads"] is not None else None,
            round_trip_blocks=f["round_trip_blocks"], refuses_negative=f["refuses_negative"],
            _tensors={t.name: t for t in ins + opt + outs})
    return out


def format_info(name: str) -> FormatInfo:
    if not isinstance(name, str):
        raise TypeError(f"format: a {type(name).__name__}, not a format's name (lowbit.formats() lists them)")
    reg = registry()
    if name not in reg:
        raise ValueError(f"unknown format '{name}' (registered: {', '.join(reg)})")
    return reg[name]


def check_dtypes(where: str, fmt: str, dtypes: dict) -> None:
    """Each named tensor's dtype among those the format's schema declares for it: a state whose codes,
    scales or table a file gives in another dtype is a CaseError naming the tensor (where: the state)."""
    from ._core import CaseError

    info = format_info(fmt)
    for name, dtype in dtypes.items():
        allowed = info.declared_dtypes(name)
        if allowed and dtype not in allowed:
            raise CaseError(f"{where}: {name} of dtype {dtype}; {fmt} stores it as {' or '.join(allowed)}")
