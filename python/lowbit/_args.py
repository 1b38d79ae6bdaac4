"""Checks of the public functions' arguments: each bad one is a TypeError (wrong type) or ValueError
(out of range, not finite) naming the argument, before anything reaches the engine (whose errors
would name no argument: a JSON parse error for a NaN param, std::bad_cast for a non-string name)."""
from __future__ import annotations

import math
import numbers
import os


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def path(name: str, value) -> str:
    if isinstance(value, (str, os.PathLike)):
        p = os.fspath(value)
        if isinstance(p, str):
            if not p or "\0" in p:
                raise ValueError(f"{name}: {_shown(p)} is not a file name")
            return p
    raise TypeError(f"{name}: a {type(value).__name__} is not a path (give a str or os.PathLike)")


def string(name: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: a {type(value).__name__} ({_shown(value)}), not a string")
    return value


def flag(name: str, value) -> bool:
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # NumPy's bool too
        return bool(value)
    raise TypeError(f"{name}: a {type(value).__name__} ({_shown(value)}), not True or False")


def whole(name: str, value, lo: int, hi: int) -> int:
    """An integer in lo..hi (a bool or a float, even a whole one, is a TypeError)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: a {type(value).__name__} ({_shown(value)}), not an integer")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name}={v}: out of range {lo}..{hi}")
    return v


def params(given: dict) -> dict:
    """A format's params as given: every name a string, every number finite."""
    for k, v in given.items():
        string("param name", k)
        if isinstance(v, numbers.Real) and not isinstance(v, bool) and not math.isfinite(float(v)):
            raise ValueError(f"{k}={v}: not a finite number")
    return given
