"""A quantized state's dequantized values a window of whole blocks at a time, so that a reader that
hashes or writes them (the signature, the streamed state case) never holds them all: the engine's
dequantizer runs on the window's codes and scales (and the whole table), which gives the same bits as on
the whole state, since every registered state format dequantizes an element from its code, its
block's scale and the table alone (docs/formats/). Memory: the state's codes plus one window, where
the whole state's dequantization holds its float32 values and the engine's copies of its codes.
"""
from __future__ import annotations

import numpy as np

from ._case import Case
from ._core import CaseError

WINDOW = 1 << 22  # elements dequantized at once (16 MB of float32)
_PER_ELEMENT, _PER_BLOCK, _PER_PAIR, _WHOLE = {"codes"}, {"scale"}, {"codes_packed"}, {"qmap"}


def _with_origin(e, origin):
    """e (TypeError, ValueError, CaseError) with origin in front of its message, where it is not."""
    text = str(e)
    if text.startswith(origin):
        return e
    try:
        return type(e)(f"{origin}: {text}")
    except Exception:  # an exception class that takes other arguments (UnicodeDecodeError ...)
        return ValueError(f"{origin}: {text}")


class Values:
    """The dequantized float32 values of a state's case of n elements, by window."""

    def __init__(self, case: Case, n: int):
        self.case, self.n = case, int(n)
        block = int(case.params.get("block_size", 0) or 0)
        step = (WINDOW // block) * block if block else 0
        sliceable = (block > 0 and step > 0 and step % 2 == 0 and set(case) <= _PER_ELEMENT | _PER_BLOCK | _PER_PAIR |
                     _WHOLE and "codes" in case and case["codes"].size == self.n and
                     "scale" in case and case["scale"].size == -(-self.n // block))
        # a case that is not whole blocks of the layout above is dequantized whole, as before
        self.block, self.step = block, (step if sliceable and self.n > step else max(self.n, 1))
        self.window = (None, None)  # (start, values) of the last window

    def _dequantized(self, start: int, end: int) -> np.ndarray:
        try:
            return self._dequantize(start, end)
        except (TypeError, ValueError) as e:  # the engine's or NumPy's message, with the state's origin in front
            raise _with_origin(e, self.case.origin) from None

    def _dequantize(self, start: int, end: int) -> np.ndarray:
        from . import dequantize

        if start == 0 and end == self.n:
            return np.asarray(dequantize(self.case), dtype=np.float32).reshape(-1)
        piece = Case(metadata=self.case.metadata, dtypes=self.case.dtypes, origin=self.case.origin)
        for name, a in self.case.items():
            flat = a.reshape(-1)
            piece[name] = (flat if name in _WHOLE else flat[start:end] if name in _PER_ELEMENT else
                           flat[start // self.block:-(-end // self.block)] if name in _PER_BLOCK else
                           flat[start // 2:-(-end // 2)])
        return np.asarray(dequantize(piece), dtype=np.float32).reshape(-1)

    def windows(self):
        """(start, values) of each window, in order, covering the n elements."""
        for start in range(0, self.n, self.step):
            yield start, self._window_at(start)

    def _window_at(self, start: int) -> np.ndarray:
        """The values of the window that begins at `start`, kept until another window is asked for."""
        if self.window[0] != start:
            self.window = (None, None)  # the last window is let go before the next is made
            end = min(self.n, start + self.step)
            values = self._dequantized(start, end)
            if values.size != end - start:  # codes that are not the shape's elements: never a short window
                raise CaseError(f"{self.case.origin}: {values.size} values dequantized from its codes where its "
                                f"shape holds {self.n}" if (start, end) == (0, self.n) else
                                f"{self.case.origin}: {values.size} values dequantized for its elements "
                                f"{start}..{end}")
            self.window = (start, values)
        return self.window[1]

    def read(self, start: int, end: int) -> np.ndarray:
        """The values of elements start..end (a view of the current window where they lie inside it):
        one pass over the windows they span, each of exactly its elements (_dequantized)."""
        if not 0 <= start <= end <= self.n:
            raise IndexError(f"{self.case.origin}: elements {start}..{end} of {self.n}")
        out = []
        for w in range(start - start % self.step, end, self.step):
            values = self._window_at(w)
            out.append(values[max(start, w) - w:min(end, w + self.step) - w])
        return out[0] if len(out) == 1 else np.concatenate(out) if out else np.zeros(0, np.float32)

    def whole(self) -> np.ndarray:
        """Every value, filled in window by window (the values and one window in memory)."""
        if self.step >= self.n:
            return next(self.windows())[1] if self.n else np.zeros(0, np.float32)
        out = np.empty(self.n, dtype=np.float32)
        for start, values in self.windows():
            out[start:start + values.size] = values
        self.window = (None, None)
        return out
