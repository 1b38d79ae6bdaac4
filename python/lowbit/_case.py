"""Case: named tensors plus string metadata, the engine's unit of work (a safetensors case file)."""
from __future__ import annotations

import json

import numpy as np

from . import _arrays


class Case(dict):
    """A case: a dict of tensor name -> NumPy array, with

    - ``dtypes``: name -> safetensors dtype ("F32", "BF16", "F8_E4M3", ...) of the tensors the engine
      made or read; BF16 and FP8 arrays are their bit patterns (np.uint16 / np.uint8), so this is where
      their real dtype is kept;
    - ``metadata``: the case's ``__metadata__`` (strings: format, params as JSON, source, ...);
    - ``origin``: where it came from, for messages.

    Values may be NumPy arrays or DLPack producers (torch tensors); they are read when the case is
    handed to the engine.
    """

    def __init__(self, tensors=None, metadata=None, dtypes=None, origin="<python>"):
        super().__init__(tensors or {})
        self.metadata = {str(k): str(v) for k, v in (metadata or {}).items()}
        self.dtypes = dict(dtypes or {})
        self.origin = origin

    @property
    def format(self) -> str:
        return self.metadata.get("format", "")

    @property
    def params(self) -> dict:
        """The params the case records (not resolved against the format's defaults)."""
        return json.loads(self.metadata.get("params", "{}") or "{}")

    def torch(self, name: str):
        """Tensor `name` as a torch tensor of its real dtype (bf16 and FP8 included; shares memory)."""
        import torch

        a = self[name]
        dtype = self.dtypes.get(name)
        if dtype == "BF16":
            return torch.from_numpy(np.require(a, requirements="C").view(np.int16)).view(torch.bfloat16)
        if dtype in ("F8_E4M3", "F8_E5M2"):
            view = torch.float8_e4m3fn if dtype == "F8_E4M3" else torch.float8_e5m2
            return torch.from_numpy(np.require(a, requirements="C")).view(view)
        return torch.from_numpy(np.require(a, requirements="C"))

    def copy(self) -> "Case":
        return Case({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.items()}, self.metadata,
                    self.dtypes, self.origin)

    def __repr__(self) -> str:
        listed = ", ".join(f"{k}: {self.dtypes.get(k, getattr(v, 'dtype', '?'))}{list(getattr(v, 'shape', []))}"
                           for k, v in self.items())
        return f"Case({self.format or 'no format'}; {listed})"

    # The engine's form: (tensors, metadata, origin); declared(name) gives the dtypes a name may take.
    def _engine_form(self, declared=None):
        tensors = []
        for name, value in self.items():
            if not isinstance(name, str):
                raise TypeError(f"{self.origin}: tensor name {name!r:.60} is of type {type(name).__name__}, not a string")
            hint = [self.dtypes[name]] if name in self.dtypes else (declared(name) if declared else None)
            tensors.append(_arrays.packed(name, value, hint))
        return tensors, dict(self.metadata), self.origin

    @classmethod
    def _from_engine(cls, form) -> "Case":
        tensors, metadata, origin = form
        c = cls(metadata=metadata, origin=origin)
        for name, dtype, shape, data in tensors:
            c[name] = _arrays.unpacked(dtype, shape, data, f"{origin}: tensor '{name}'")
            c.dtypes[name] = dtype
        return c
