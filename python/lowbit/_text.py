"""Text from a file on a terminal: names (checkpoint keys, paths, tensor names) printed so that a file
cannot forge a line, colour the terminal or make a suggested command run something else.

printable() is the engine's own escaping (conformance/engine/include/lowbit/printable.hpp), the form the
lowbit command prints names in: control characters as \\n, \\t, \\r or \\xHH, invalid UTF-8 as \\xHH,
valid UTF-8 and backslashes as they are. shell_word() quotes one word of a command line we suggest."""
from __future__ import annotations

import os
import shlex

from . import _core


def _bytes(text) -> bytes:
    """The bytes a str stands for: a path's undecodable bytes (os.fsdecode's surrogate escapes) as they
    were; any other lone surrogate as its UTF-8-like bytes, which printable() escapes as invalid."""
    if isinstance(text, bytes):
        return text
    text = str(text)
    try:
        return os.fsencode(text)
    except UnicodeError:
        return text.encode("utf-8", "surrogatepass")


def message(e: BaseException) -> str:
    """str(e); an exception whose __str__ itself raises (a kernel's, a file's object) is still described."""
    try:
        return str(e)
    except Exception as inner:
        return f"(a message that cannot be read: its __str__ raised {type(inner).__name__})"


def printable(text) -> str:
    """`text` (a str, or bytes) as one safe terminal line, as the lowbit command prints names."""
    return _core.printable(_bytes(text))


def shell_word(text) -> str:
    """`text` as one word of a POSIX shell command line that, pasted, is `text` again and runs nothing:
    shlex.quote's single quotes; where the text holds what printable() escapes (a newline, an escape
    sequence), bash's $'...' with those same escapes, so that the line printed stays one safe line."""
    text = str(text)
    if printable(text) == text:
        return shlex.quote(text)
    escaped = printable("".join("\\\\" if c == "\\" else "\\'" if c == "'" else c for c in text))
    return f"$'{escaped}'"
