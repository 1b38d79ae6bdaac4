"""A Python function as the kernel lowbit.verify runs: the engine hands it each case's inputs and
takes back its outputs (python/src/core_module.cpp python_kernel). The function runs in this process,
so it is trusted code: the engine cannot time it out or limit its memory as it does a plugin's."""
from __future__ import annotations

from collections.abc import Mapping

from . import _arrays
from ._case import Case


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def runner(fn, format: str):
    """The engine's side of fn: run(form, wanted) -> (tensors, failure). `form` is the inputs' case in the
    engine's Python form, `wanted` the outputs to make as [(name, dtype, shape)]; fn(case) must return a
    mapping of each output's name to an array (NumPy, or torch on any device) of that dtype and shape."""

    def run(form, wanted):
        case = Case._from_engine(form)
        case.origin = f"lowbit.verify: a case of {format}"
        try:
            out = fn(case)
        except Exception as e:  # the kernel's own failure, reported as the case's, as a plugin's return code is
            return [], f"raised {type(e).__name__}: {_one_line(e)}"
        if not isinstance(out, Mapping):
            return [], f"returned {type(out).__name__}, not a dict of its outputs ({', '.join(n for n, _, _ in wanted)})"
        names = {n for n, _, _ in wanted}
        extra = sorted(str(k) for k in out if k not in names)
        if extra:
            return [], f"returned '{_one_line(extra[0], 60)}', which {format} does not make (it makes {', '.join(sorted(names))})"
        tensors = []
        for name, dtype, shape in wanted:
            if name not in out:
                return [], f"returned no '{name}' ({dtype} {list(shape)})"
            try:
                packed = _arrays.packed(name, out[name], [dtype])
            except (TypeError, ValueError) as e:
                return [], _one_line(e)
            if packed[1] != dtype or list(packed[2]) != list(shape):
                return [], f"returned '{name}' as {packed[1]} {list(packed[2])}; {format} makes {dtype} {list(shape)}"
            tensors.append(packed)
        return tensors, ""

    return run


def name_of(fn) -> str:
    """How reports name a function: module.qualname ("tests.test_kernel.my_quantize")."""
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{qualname}"
