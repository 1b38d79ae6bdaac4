"""Files lowbit writes from Python: a complete temporary in the target's folder, renamed into place.

The temporary is created with O_CREAT | O_EXCL | O_NOFOLLOW under a name no one can predict (128
random bits), so that a link or file planted beside the target is never opened, let alone emptied:
the open fails on anything already at that name, and another name is drawn. The target itself is
replaced by the rename, never opened, and a target that exists and is not a regular file (a link, a
folder, a FIFO) is refused, as the engine's writer refuses it (conformance/engine/io/atomic_file.cpp).
"""
from __future__ import annotations

import contextlib
import os
import secrets
import stat

_TRIES = 16


def _temporary_name(path: str) -> str:
    folder, base = os.path.split(path)
    return os.path.join(folder, f".{base}.{secrets.token_hex(16)}.tmp")


def _refuse_unless_regular(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        return
    why = ("it is a folder" if stat.S_ISDIR(st.st_mode) else "it is a symbolic link; lowbit writes only regular files"
           if stat.S_ISLNK(st.st_mode) else "it is not a regular file (a device or FIFO); lowbit writes only regular files")
    raise OSError(f"cannot write '{path}': {why}")


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


@contextlib.contextmanager
def atomic_file(path, replace=True):
    """A descriptor of a new temporary beside `path`, renamed onto `path` when the block ends without an
    exception and removed when it raises: `path` is written whole or not at all (OSError naming it).
    For a file written piece by piece (pwrite at its offsets), so that it need not be in memory.
    replace=False: nothing at `path` is ever replaced (FileExistsError naming it, checked first and at
    the end, where the temporary is hard-linked to `path`, which fails on anything there, a link too)."""
    path = os.fspath(path)
    if not replace and os.path.lexists(path):
        raise FileExistsError(f"cannot write '{path}': it exists (lowbit does not replace it)")
    _refuse_unless_regular(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TRIES):
        tmp = _temporary_name(path)
        try:
            fd = os.open(tmp, flags, 0o666)  # the umask applies, as to the engine's fopen
            break
        except FileExistsError:  # something is at that name (planted, or drawn twice): another name
            continue
        except OSError as e:
            raise OSError(f"cannot write '{path}': {e.strerror}") from None
        except BaseException:  # a signal handled as the open returned (python -m lowbit's SIGTERM): the file,
            _remove(tmp)       # if it was made, is ours (no one else can know the name), and goes
            raise
    else:
        raise OSError(f"cannot write '{path}': {_TRIES} temporary names beside it were all taken")
    try:
        try:
            yield fd
            os.fsync(fd)  # on the disk before the rename makes it the file, as the engine's writer does
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path, follow_symlinks=False)
            except FileExistsError:
                raise FileExistsError(f"cannot write '{path}': it exists (lowbit does not replace it)") from None
            os.unlink(tmp)
    except BaseException as e:
        _remove(tmp)
        if isinstance(e, FileExistsError):
            raise
        if isinstance(e, OSError):
            raise OSError(f"cannot write '{path}': {e.strerror or e}") from None
        raise


def write_all(fd, data, offset=None) -> None:
    """All of `data` at `offset` (pwrite) or at the descriptor's position (write)."""
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        view = view[n:]
        if offset is not None:
            offset += n


def write_atomically(path, data: bytes) -> None:
    """`data` as the file `path`: whole or not at all (OSError naming the path)."""
    with atomic_file(path) as fd:
        write_all(fd, data)
