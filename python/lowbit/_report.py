"""The comparison report and the verify report: the engine's JSON and Markdown (compare.hpp, verify.hpp),
as objects."""
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


class _Rendered:
    """The engine's two renderings of a report and its verdict, as both reports give them."""

    def markdown(self) -> str:
        return self._markdown

    def json(self) -> str:
        return self._json

    def __bool__(self) -> bool:
        return self.conformant


class Report(_Rendered):
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

    def __repr__(self) -> str:
        return f"Report({self.verdict}: {self.mismatches} mismatches, classes {self.classes})"


class VerifyCase:
    """One case of a verify run: its label (an input spec and step, or ``golden PATH``), whether it is
    conformant, the kernel's failure when it crashed, hung or returned an error, and its comparison
    (a Report of the case, None after a failure)."""

    def __init__(self, d: dict):
        self.label = d["label"]
        self.conformant = bool(d["conformant"])
        self.failure = d.get("failure", "")
        comparison = d.get("comparison")
        self.report = Report(json.dumps(comparison), "", self.conformant) if comparison is not None else None

    def __repr__(self) -> str:
        return f"VerifyCase({self.label}: {'conformant' if self.conformant else 'NOT conformant'})"


class Diagnosis:
    """What explains a failing kernel (lowbit verify's diagnosis, docs/verifying-a-kernel.md): the known
    variants of the format's arithmetic that reproduce its outputs bit for bit on every failing case.
    ``variant`` is the first of them (None when none does), ``reproducing`` all of them in the order they
    were tried, ``description`` the first one's in words; ``line`` the verdict line's text. Where none
    reproduces every bit, ``nan_aside`` lists those that reproduce all but the bits of ``nan_elements``
    NaNs, and ``closest`` (a dict: variant, description, reproduced) the one that reproduces the most
    mismatching elements. ``reference`` is True where the reference itself reproduces the kernel (the
    failing expected outputs are a golden case's, where its library differs from the reference)."""

    def __init__(self, d: dict):
        self.data = d
        self.line = d["line"]
        self.cases = d["cases"]
        self.mismatches = d["mismatches"]
        self.variants_tried = d["variants_tried"]
        self.reproducing = list(d.get("reproducing", []))
        self.variant = self.reproducing[0] if self.reproducing else None
        self.reference = bool(d.get("reference", False))
        but_nan = d.get("reproducing_but_nan", {})
        self.nan_aside = list(but_nan.get("variants", []))
        self.nan_elements = but_nan.get("nan_elements", 0)
        self.description = d.get("description", but_nan.get("description", ""))
        self.closest = dict(d["closest"]) if "closest" in d else None

    def __repr__(self) -> str:
        if self.variant:
            return f"Diagnosis({self.variant})"
        if self.nan_aside:
            return f"Diagnosis({self.nan_aside[0]}, but for {self.nan_elements} NaNs)"
        return "Diagnosis(reference)" if self.reference else "Diagnosis(no known variant)"


class VerifyReport(_Rendered):
    """lowbit.verify's result, the engine's verify run as ``lowbit verify`` makes it: ``conformant``
    (every case), ``cases`` (a VerifyCase each, in order), ``lines`` (what ``lowbit verify`` prints for
    each case and each skipped input or golden case, in order), ``summary`` (its verdict line), and
    ``json()`` and ``markdown()``, the texts of ``lowbit verify --report`` and ``--markdown``;
    ``diagnosis``, a Diagnosis of a failing kernel (None when it conforms, or when no case it failed
    has outputs to read: it crashed on each)."""

    def __init__(self, json_text: str, markdown_text: str, conformant: bool, summary: str, lines: list):
        self._json = json_text
        self._markdown = markdown_text
        self.data = json.loads(json_text)
        self.conformant = bool(conformant)
        self.summary = summary
        self.lines = list(lines)
        self.kernel = self.data["kernel"]
        self.format = self.data["format"]
        self.policy = self.data["policy"]
        self.strict = self.data["strict"]
        self.cases = [VerifyCase(c) for c in self.data["cases"]]
        self.diagnosis = Diagnosis(self.data["diagnosis"]) if "diagnosis" in self.data else None

    def __repr__(self) -> str:
        bad = sum(not c.conformant for c in self.cases)
        return f"VerifyReport({self.kernel}, {self.format}: {len(self.cases) - bad} of {len(self.cases)} cases conformant)"
