"""The comparison report: the engine's JSON and Markdown (compare.hpp), as an object."""
from __future__ import annotations

import json


class TensorReport:
    """One tensor of a comparison: counts, mismatch classes and the first mismatches (dicts with index,
    block, expected/actual bits in hex and values, code and ulp distance, class, allowed, and what the
    quantizer saw where the format knows it)."""

    def __init__(self, d: dict):
        self.data = d
        self.name = d["name"]
        self.dtype = d["dtype"]
        self.shape = tuple(d["shape"])
        self.elements = d["elements"]
        self.fault = d.get("fault", "")  # non-empty: not compared (missing, other dtype or shape)
        self.identical = d.get("identical", 0)
        self.mismatches = d.get("mismatches", 0)
        self.allowed = d.get("allowed", 0)
        self.max_code_distance = d.get("max_code_distance", 0)
        self.max_ulp_distance = d.get("max_ulp_distance", 0)
        self.classes = dict(d.get("classes", {}))  # class name -> count
        self.first_mismatches = list(d.get("first_mismatches", []))

    def __repr__(self) -> str:
        if self.fault:
            return f"TensorReport({self.name}: {self.fault})"
        return f"TensorReport({self.name}: {self.mismatches} of {self.elements} differ)"


class Report:
    """lowbit.compare's result. ``conformant`` and ``verdict`` say whether the actual case conforms under
    the policy; ``tensors`` holds a TensorReport per expected tensor; ``markdown()`` and ``json()`` are
    the engine's renderings (the same as ``lowbit compare --report``); ``summary`` is the Markdown's
    verdict and totals paragraph."""

    def __init__(self, json_text: str, markdown_text: str, conformant: bool):
        self._json = json_text
        self._markdown = markdown_text
        self.data = json.loads(json_text)
        self.conformant = bool(conformant)
        self.verdict = "conformant" if self.conformant else "not conformant"
        self.format = self.data.get("format", "")
        self.policy = self.data["policy"]["name"]
        self.strict = self.data.get("strict", False)
        self.tensors = [TensorReport(t) for t in self.data["tensors"]]
        self.extra_in_actual = list(self.data.get("extra_in_actual", []))

    def tensor(self, name: str) -> TensorReport:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def classes(self) -> dict:
        """Mismatches per class over every tensor (only the classes that occur)."""
        out = {}
        for t in self.tensors:
            for k, v in t.classes.items():
                if v:
                    out[k] = out.get(k, 0) + v
        return out

    @property
    def mismatches(self) -> int:
        return sum(t.mismatches for t in self.tensors)

    @property
    def summary(self) -> str:
        """The Markdown's heading and totals paragraph: verdict, counts, format and policy."""
        return "\n\n".join(self._markdown.split("\n\n")[:2])

    def markdown(self) -> str:
        return self._markdown

    def json(self) -> str:
        return self._json

    def __bool__(self) -> bool:
        return self.conformant

    def __repr__(self) -> str:
        return f"Report({self.verdict}: {self.mismatches} mismatches, classes {self.classes})"
