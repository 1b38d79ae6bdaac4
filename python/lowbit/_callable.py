"""A Python function as the kernel lowbit.verify runs: the engine hands it each case's inputs and
takes back its outputs (python/src/core_module.cpp python_kernel). The function runs in this process,
so it is trusted code: the engine cannot time it out or limit its memory as it does a plugin's. What
it can do to the process it shares is undone after every call (the working directory, the environment
and the signal handlers), and whatever it returns is read as untrusted: an output that cannot be read
fails its case with the reason, never the run.

Only an Exception is the kernel's failure of a case. A BaseException that is not one
(KeyboardInterrupt, SystemExit, GeneratorExit) leaves the runner as itself: the engine stops the run
and lowbit.verify raises it (docs/python.md, "Verifying a kernel plugin or a Python function")."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Mapping

from . import _arrays
from ._text import message
from ._case import Case


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _described(e: Exception) -> str:
    """'TypeName: message' of an exception a kernel raised or caused, on one line."""
    return f"{type(e).__name__}: {_one_line(message(e))}"


def _current_directory() -> int:
    """A descriptor of the working directory: fchdir returns to it even if the kernel renamed it."""
    return os.open(".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)


def _handlers() -> dict:
    """Each signal's Python-level handler (signal.getsignal), where Python can set one."""
    return {s: signal.getsignal(s) for s in signal.valid_signals() if signal.getsignal(s) is not None}


@contextlib.contextmanager
def _process_state_kept():
    """The working directory, os.environ and (in the main thread, the only one that may change them)
    the signal handlers as they were before the block, whatever the block did or raised. A kernel that
    changes directory must not make the cases that follow read other files (golden paths, file:
    inputs), nor leave Ctrl-C handled by its own handler."""
    directory = _current_directory()
    environment = dict(os.environ)
    main_thread = threading.current_thread() is threading.main_thread()
    handlers = _handlers() if main_thread else {}
    try:
        yield
    finally:
        try:
            os.fchdir(directory)
        finally:
            os.close(directory)
        if dict(os.environ) != environment:
            os.environ.clear()
            os.environ.update(environment)
        for s, handler in handlers.items():
            if signal.getsignal(s) is not handler:
                signal.signal(s, handler)


def _packed_output(name, value, dtype, shape, format):
    """(the engine's form of one output, "") or (None, why it cannot be had). Its shape is read before
    any of its elements: a 2^40-element broadcast view is refused by its shape, never copied."""
    try:
        claimed = getattr(value, "shape", None)
        claimed = None if claimed is None else [int(e) for e in claimed]
        if claimed is not None and claimed != list(shape):
            return None, f"returned '{name}' of shape {claimed}; {format} makes {dtype} {list(shape)}"
        packed = _arrays.packed(name, value, [dtype])
    except Exception as e:  # not an array, a float64 one, a meta tensor, a __dlpack__ that raises
        return None, f"returned '{name}', which cannot be read: {_described(e)}"
    if packed[1] != dtype or list(packed[2]) != list(shape):
        return None, f"returned '{name}' as {packed[1]} {list(packed[2])}; {format} makes {dtype} {list(shape)}"
    return packed, ""


def _outputs(out, wanted, format: str):
    """(tensors, failure) of what the kernel returned: each wanted output packed for the engine, or the
    first reason it cannot be (a missing, extra, misshapen or unreadable output)."""
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
        packed, failure = _packed_output(name, out[name], dtype, shape, format)
        if failure:
            return [], failure
        tensors.append(packed)
    return tensors, ""


def runner(fn, format: str):
    """The engine's side of fn: run(form, wanted) -> (tensors, failure). `form` is the inputs' case in the
    engine's Python form, `wanted` the outputs to make as [(name, dtype, shape)]; fn(case) must return a
    mapping of each output's name to an array (NumPy, or torch on any device) of that dtype and shape.
    A BaseException that is not an Exception leaves it as itself (the engine then stops the run)."""

    def run(form, wanted):
        case = Case._from_engine(form)
        case.origin = f"lowbit.verify: a case of {format}"
        with _process_state_kept():  # reading the outputs runs the kernel's code too (__dlpack__, __getitem__)
            try:
                out = fn(case)
            except Exception as e:  # the kernel's own failure, reported as the case's, as a plugin's return code is
                return [], f"raised {_described(e)}"
            try:
                return _outputs(out, wanted, format)
            except Exception as e:  # a mapping whose __iter__ or __getitem__ raises
                return [], f"returned outputs that cannot be read: {_described(e)}"

    return run


def name_of(fn) -> str:
    """How reports name a function: module.qualname ("tests.test_kernel.my_quantize")."""
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{qualname}"
