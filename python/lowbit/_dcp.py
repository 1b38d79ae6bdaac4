"""A torch distributed-checkpoint (DCP) folder read as hostile input: no code from it runs, no file
outside it is read.

torch's own reader (FileSystemReader.read_metadata, torch 2.15 torch/distributed/checkpoint/
filesystem.py) unpickles ``.metadata`` with plain pickle, which calls whatever the pickle names. Here
the pickle goes through an unpickler that admits only what DCP writes (torch 2.15's
torch/distributed/checkpoint/metadata.py and filesystem.py, checked against dcp.save of torchao's and
bitsandbytes' optimizer states) and builds inert stand-ins for it, never the classes themselves, so
that it needs no torch: any other global is refused with a CaseError naming it. Every path (the
metadata and each item's relative_path) is opened inside the folder, component by component, never
through a symbolic link, and an item's byte range is checked against the opened file's size before it
is read. docs/python.md ("Reading files you did not write") states the guarantees.
"""
from __future__ import annotations

import errno
import io
import os
import pickle
import reprlib
import stat
from dataclasses import dataclass

from . import _pickles
from ._sharded import _numel
from ._core import CaseError

METADATA_NAME = ".metadata"  # filesystem.py's _metadata_fn
# A .metadata larger than this is refused before it is read (30 000 items take 27 MB); its pickle is
# scanned within _pickles.LIMITS before it is unpickled, which bounds what it builds.
MAX_METADATA_BYTES = 1 << 28
# An item's bytes are read only up to what its metadata declares: a tensor's chunk (its elements times
# its dtype's size) twice over (a torchao state stores its codes, a scale a block and a 256-entry table:
# at most 1.2 bytes an element, at block 4 and up 2, within any declared dtype's twice), plus
# torch.save's zip and pickle around it; a non-tensor item (a step, a learning rate) a few kilobytes.
ITEM_OVERHEAD = 1 << 20
MAX_BYTE_ITEM = 1 << 24
_ITEMSIZES = {"bool": 1, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
              "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1, "bfloat16": 2, "float16": 2, "half": 2, "int16": 2,
              "short": 2, "uint16": 2, "float32": 4, "float": 4, "int32": 4, "int": 4, "uint32": 4}
_LARGEST_ITEMSIZE = 16  # complex128: a dtype not named above

_DCP = "torch.distributed.checkpoint.metadata"
_FS = "torch.distributed.checkpoint.filesystem"
# torch 2.15's dtypes and layouts (dir(torch)): names a DCP pickle may give as globals of "torch"
_DTYPES = frozenset(
    "bcomplex32 bfloat16 bit bits16 bits1x8 bits2x4 bits4x2 bits8 bool cdouble cfloat chalf complex128 complex32 "
    "complex64 double float float16 float32 float4_e2m1fn_x2 float64 float8_e4m3fn float8_e4m3fnuz float8_e5m2 "
    "float8_e5m2fnuz float8_e8m0fnu half int int1 int16 int2 int3 int32 int4 int5 int6 int64 int7 int8 long qint32 "
    "qint8 quint2x4 quint4x2 quint8 short uint1 uint16 uint2 uint3 uint32 uint4 uint5 uint6 uint64 uint7 uint8".split())
_LAYOUTS = frozenset("torch." + n for n in "_mkldnn jagged sparse_bsc sparse_bsr sparse_coo sparse_csc sparse_csr "
                                           "strided".split())


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 120
_REPR.maxlevel = 3


def _short(value) -> str:
    """A bounded repr for messages: a pickle's shared references can make a plain repr exponential."""
    try:
        return _REPR.repr(value)
    except Exception:
        return f"<a {type(value).__name__}>"


class _Record:
    """The stand-in of one DCP dataclass: its class name and the state its pickle carries."""
    kind = ""

    def __new__(cls, *args, **kwargs):  # NEWOBJ passes no arguments for a dataclass; REDUCE would
        if args or kwargs:
            raise CaseError(f"{cls.kind} given constructor arguments; DCP pickles it by its state")
        record = super().__new__(cls)
        record.fields = {}  # here, not in __init__: NEWOBJ without a BUILD calls neither __init__ nor __setstate__
        return record

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], (dict, type(None))):
            state = {**(state[0] or {}), **(state[1] if isinstance(state[1], dict) else {})}  # (dict, slots)
        if isinstance(state, dict):
            self.fields = state
        elif isinstance(state, tuple) and self.kind == "TensorProperties":  # its own __getstate__ tuple
            self.fields = {"state": state}
        else:
            raise CaseError(f"{self.kind} with a state of type {type(state).__name__}")


def _record_class(name):
    return type(name, (_Record,), {"kind": name})


_RECORDS = {(module, name): _record_class(name) for module, name in [
    (_DCP, "Metadata"), (_DCP, "MetadataIndex"), (_DCP, "TensorStorageMetadata"), (_DCP, "BytesStorageMetadata"),
    (_DCP, "ChunkStorageMetadata"), (_DCP, "TensorProperties"), (_DCP, "StorageMeta"), (_FS, "_StorageInfo")]}


class _Frozen:
    """No attribute of it can be set after construction, so that a pickle's BUILD opcode cannot change
    it (nor, through it, lowbit's own functions for later reads)."""
    __slots__ = ()

    def __setattr__(self, name, value):
        raise CaseError(f"the pickle sets {_short(name)} on {_short(self)}")


class _Inert(_Frozen):
    """A value a DCP pickle names (a dtype or a layout): a name, nothing to call."""
    __slots__ = ("name",)

    def __init__(self, name):
        object.__setattr__(self, "name", name)

    def __repr__(self):
        return self.name


class _Call(_Frozen):
    """One of the functions below as a global the pickle may call (torch.Size, ...)."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        object.__setattr__(self, "fn", fn)

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.fn.__name__


def _ints(what, values):
    if not isinstance(values, (tuple, list)) or not all(type(v) is int for v in values):
        raise CaseError(f"{what} of {type(values).__name__} {_short(values)}; DCP writes a sequence of ints")
    return tuple(values)


def _size(values=()):  # torch.Size(tuple) -> the tuple
    return _ints("torch.Size", values)


def _mem_format(value):  # metadata.py's _MEM_FORMAT_ENCODING(value)
    if type(value) is not int or value not in (0, 1, 2):
        raise CaseError(f"_MEM_FORMAT_ENCODING({_short(value)}); DCP writes 0, 1 or 2")
    return value


def _layout(name):  # torch.serialization._get_layout("torch.strided")
    if name not in _LAYOUTS:
        raise CaseError(f"torch.serialization._get_layout({_short(name)}): not a torch layout")
    return _Inert(name)


def _path(*parts):  # pathlib.PosixPath(*parts) (StorageMeta.checkpoint_id): its text, never a path object
    if not all(isinstance(p, str) for p in parts):
        raise CaseError("a path of non-string parts")
    return "/".join(parts)


_FUNCTIONS = {("torch", "Size"): _size, (_DCP, "_MEM_FORMAT_ENCODING"): _mem_format,
              ("torch.serialization", "_get_layout"): _layout, ("pathlib", "PosixPath"): _path,
              ("pathlib", "PurePosixPath"): _path, ("pathlib", "WindowsPath"): _path,
              ("pathlib", "PureWindowsPath"): _path}


class _ExactBytes(io.BytesIO):
    """The pickle's bytes for the pure-Python unpickler, which takes a short read for the whole (a
    string whose length runs past the end would come back cut): a short read is an error here."""

    def read(self, n=-1):
        data = super().read(n)
        if n is not None and n >= 0 and len(data) != n:
            raise pickle.UnpicklingError("pickle data was truncated")
        return data

    def readline(self, size=-1):
        line = super().readline(size)
        if not line.endswith(b"\n"):
            raise pickle.UnpicklingError("pickle data was truncated")
        return line


# pickle's pure-Python unpickler, not the C one: the C one sizes its memo by the largest index a PUT
# opcode names, so a 12-byte pickle (PUT 2^27) makes it allocate and clear 2 GB (measured), 2^32-1
# about 64 GB; the Python one keeps its memo in a dict.
class _MetadataUnpickler(pickle._Unpickler):
    def __init__(self, file, origin):
        super().__init__(file)
        self.origin = origin

    def find_class(self, module, name):
        if (module, name) in _RECORDS:
            return _RECORDS[(module, name)]
        if (module, name) in _FUNCTIONS:
            return _Call(_FUNCTIONS[(module, name)])
        if module == "torch" and name in _DTYPES:
            return _Inert("torch." + name)
        raise CaseError(f"{self.origin}: the pickle calls for {module}.{name}, which DCP metadata never holds; "
                        f"refused (lowbit unpickles only DCP's own classes; weights_only=False unpickles it "
                        f"with plain pickle, which runs code from the file: only for files you trust)")

    def persistent_load(self, pid):
        raise CaseError(f"{self.origin}: a persistent id in the pickle; DCP metadata has none")


@dataclass(frozen=True)
class Item:
    """One stored item of a DCP folder: its name (fqn), its chunk offset in the tensor (None for a
    non-tensor item) and where its bytes lie."""
    fqn: str
    chunk_offset: tuple
    relative_path: str
    offset: int
    length: int


def _field(obj, kind, name, origin, default=KeyError):
    """Field `name` of a DCP object (a stand-in, or with weights_only=False torch's own object)."""
    if isinstance(obj, _Record):
        if obj.kind != kind:
            raise CaseError(f"{origin}: a {obj.kind} where DCP writes a {kind}")
        if name in obj.fields:
            return obj.fields[name]
    elif type(obj).__name__ != kind:
        raise CaseError(f"{origin}: a {type(obj).__name__} where DCP writes a {kind}")
    elif hasattr(obj, name):
        return getattr(obj, name)
    if default is KeyError:
        raise CaseError(f"{origin}: a {kind} without {name}")
    return default


def _count(value, what, origin):
    if type(value) is not int or value < 0:
        raise CaseError(f"{origin}: {what} {_short(value)} is not a non-negative integer")
    return value


def items(metadata, origin) -> list:
    """The items of an unpickled Metadata, each field checked (types, ranges, no transforms)."""
    storage = _field(metadata, "Metadata", "storage_data", origin)
    if not isinstance(storage, dict):
        raise CaseError(f"{origin}: storage_data is a {type(storage).__name__}, not a dict")
    out = []
    for index, info in storage.items():
        fqn = _field(index, "MetadataIndex", "fqn", origin)
        if not isinstance(fqn, str):
            raise CaseError(f"{origin}: an item named by a {type(fqn).__name__}, not a string")
        where = f"{origin}: item {_short(fqn)}"
        chunk = _field(index, "MetadataIndex", "offset", where, None)
        chunk = None if chunk is None else _ints(f"{where}: offset", tuple(chunk) if type(chunk).__name__ == "Size"
                                                 else chunk)
        path = _field(info, "_StorageInfo", "relative_path", where)
        if not isinstance(path, str):
            raise CaseError(f"{where}: relative_path is a {type(path).__name__}, not a string")
        transforms = _field(info, "_StorageInfo", "transform_descriptors", where, None)
        if transforms:
            raise CaseError(f"{where}: stored with transforms {_short(transforms)}; lowbit reads plain DCP items only")
        offset = _count(_field(info, "_StorageInfo", "offset", where), "offset", where)
        length = _count(_field(info, "_StorageInfo", "length", where), "length", where)
        out.append(Item(fqn, chunk, path, offset, length))
    return out


def _shape(value, what, origin):
    """A torch.Size as DCP pickles it (our stand-in gives a tuple; torch's own is a tuple too)."""
    return tuple(_count(v, what, origin) for v in _ints(f"{origin}: {what}", tuple(value) if isinstance(value, tuple)
                                                                 else value))


def layouts(metadata, origin) -> dict:
    """fqn -> (global size, [(chunk offsets, chunk sizes)]) of every tensor the metadata declares
    (state_dict_metadata's TensorStorageMetadata), each field checked; byte items are left out."""
    declared = _field(metadata, "Metadata", "state_dict_metadata", origin)
    if not isinstance(declared, dict):
        raise CaseError(f"{origin}: state_dict_metadata is a {type(declared).__name__}, not a dict")
    out = {}
    for fqn, md in declared.items():
        if not isinstance(fqn, str):
            raise CaseError(f"{origin}: a tensor named by a {type(fqn).__name__}, not a string")
        where = f"{origin}: {_short(fqn)}"
        kind = md.kind if isinstance(md, _Record) else type(md).__name__
        if kind == "BytesStorageMetadata":
            continue
        size = _shape(_field(md, "TensorStorageMetadata", "size", where), "size", where)
        chunks = _field(md, "TensorStorageMetadata", "chunks", where)
        if not isinstance(chunks, list):
            raise CaseError(f"{where}: chunks is a {type(chunks).__name__}, not a list")
        boxes = []
        for c in chunks:
            offsets = _shape(_field(c, "ChunkStorageMetadata", "offsets", where), "chunk offsets", where)
            sizes = _shape(_field(c, "ChunkStorageMetadata", "sizes", where), "chunk sizes", where)
            if len(offsets) != len(size) or len(sizes) != len(size):
                raise CaseError(f"{where}: a chunk of {len(offsets)}/{len(sizes)} dimensions in a tensor of "
                                f"{len(size)}")
            boxes.append((offsets, sizes))
        out[fqn] = (size, boxes)
    return out


def _itemsize(md) -> int:
    """Bytes an element of a TensorStorageMetadata's dtype (its TensorProperties'), the largest any
    dtype takes where the metadata does not say."""
    props = md.fields.get("properties") if isinstance(md, _Record) else getattr(md, "properties", None)
    if isinstance(props, _Record):
        dtype = props.fields.get("dtype", (props.fields.get("state") or (None,))[0])
    else:
        dtype = getattr(props, "dtype", None)
    return _ITEMSIZES.get(str(dtype).removeprefix("torch."), _LARGEST_ITEMSIZE)


def item_bounds(metadata, layout, origin) -> dict:
    """fqn -> {chunk offsets: the most bytes its item may take} for every tensor the metadata declares
    (layout: its layouts(); the declared chunk's bytes, twice, and ITEM_OVERHEAD); an item of no
    declared tensor may take MAX_BYTE_ITEM."""
    declared = _field(metadata, "Metadata", "state_dict_metadata", origin)
    bounds = {}
    for fqn, (size, boxes) in layout.items():
        itemsize = _itemsize(declared[fqn])
        bounds[fqn] = {offsets: ITEM_OVERHEAD + 2 * itemsize * _numel(sizes) for offsets, sizes in boxes}
        bounds[fqn][None] = ITEM_OVERHEAD + 2 * itemsize * _numel(size)
    return bounds


def item_bound(bounds, it) -> int:
    chunks = bounds.get(it.fqn)
    if chunks is None:
        return MAX_BYTE_ITEM
    return chunks.get(it.chunk_offset, chunks[None])


def _open_inside(folder_fd, relative, origin):
    """A read-only descriptor of the regular file `relative` inside the folder: no absolute path, no
    empty, '.' or '..' component, no symbolic link anywhere (O_NOFOLLOW on each component, opened from
    the one before), so that nothing outside the folder is ever opened."""
    if not isinstance(relative, str) or not relative or "\0" in relative:
        raise CaseError(f"{origin}: path {_short(relative)} is empty or not a file name")
    parts = relative.split("/")
    if relative.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise CaseError(f"{origin}: path {_short(relative)} leaves the folder or is not a plain relative path "
                        f"(lowbit reads only files inside the checkpoint folder)")
    fd = os.dup(folder_fd)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as e:
                why = "a symbolic link" if e.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(part, fd) else e.strerror
                raise CaseError(f"{origin}: cannot open {_short(relative)} inside the folder ({why})") from None
            os.close(fd)
            fd = nxt
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CaseError(f"{origin}: {_short(relative)} is not a regular file")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_link(name, dir_fd):
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _pread_all(fd, length, offset):
    chunks, done = [], 0
    while done < length:
        b = os.pread(fd, min(length - done, 1 << 30), offset + done)
        if not b:
            break
        chunks.append(b)
        done += len(b)
    return b"".join(chunks)


class Folder:
    """An open DCP folder: its metadata's items and their bytes, every file opened inside it."""

    def __init__(self, path):
        self.path, self.bounds = os.fspath(path), {}
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise CaseError(f"{self.path}: cannot open the checkpoint folder ({e.strerror})") from None

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _file_bytes(self, relative, origin, limit=None):
        fd = _open_inside(self.fd, relative, origin)
        try:
            size = os.fstat(fd).st_size
            if limit is not None and size > limit:
                raise CaseError(f"{origin}: {size} bytes, more than the {limit} lowbit reads")
            return _pread_all(fd, size, 0)
        finally:
            os.close(fd)

    def metadata(self, weights_only=True):
        """The unpickled .metadata: inert stand-ins (weights_only=True), or with weights_only=False
        torch's own objects through plain pickle (code in the file runs)."""
        origin = os.path.join(self.path, METADATA_NAME)
        data = self._file_bytes(METADATA_NAME, origin, MAX_METADATA_BYTES)
        _pickles.scan(data, origin, _pickles.LIMITS)  # either way: plain pickle crashes on what it refuses
        if not weights_only:
            import torch.distributed.checkpoint  # noqa: F401 (the classes plain pickle imports)

            return pickle.loads(data)  # what torch's FileSystemReader.read_metadata does
        try:
            return _MetadataUnpickler(_ExactBytes(data), origin).load()
        except CaseError as e:  # a stand-in's refusal does not know the file
            raise CaseError(str(e) if str(e).startswith(origin) else f"{origin}: {e}") from None
        except Exception as e:  # a malformed pickle: any error its opcodes raise, nothing it ran
            raise CaseError(f"{origin}: not a DCP metadata pickle ({type(e).__name__}: {str(e):.200})") from None

    def items(self, weights_only=True) -> list:
        return items(self.metadata(weights_only), os.path.join(self.path, METADATA_NAME))

    def contents(self, weights_only=True):
        """(items, layouts) of one reading of the metadata (and the items' byte bounds, for read)."""
        metadata, origin = self.metadata(weights_only), os.path.join(self.path, METADATA_NAME)
        layout = layouts(metadata, origin)
        self.bounds = item_bounds(metadata, layout, origin)
        return items(metadata, origin), layout

    def read(self, item_list) -> list:
        """(item, its bytes) for each item, each file opened once, each range checked before it is read:
        against what the metadata declares of it (item_bound, once contents() has read the metadata)
        and against the opened file's size."""
        fds, out = {}, []
        try:
            for it in item_list:
                origin = f"{self.path}: item {_short(it.fqn)}"
                if it.relative_path not in fds:
                    fds[it.relative_path] = _open_inside(self.fd, it.relative_path, origin)
                fd = fds[it.relative_path]
                size = os.fstat(fd).st_size
                if it.offset + it.length > size:
                    raise CaseError(f"{origin}: bytes {it.offset}..{it.offset + it.length} lie past the end of "
                                    f"{it.relative_path} ({size} bytes)")
                bound = item_bound(self.bounds, it)
                if it.length > bound:
                    raise CaseError(f"{origin}: {it.length} bytes at {it.relative_path}:{it.offset}, more than the "
                                    f"{bound} lowbit reads of it (twice its declared chunk's bytes and "
                                    f"{ITEM_OVERHEAD}; {MAX_BYTE_ITEM} for a non-tensor item); refused before reading")
                data = _pread_all(fd, it.length, it.offset)
                if len(data) != it.length:
                    raise CaseError(f"{origin}: {it.relative_path} shrank while it was read")
                out.append((it, data))
        finally:
            for fd in fds.values():
                os.close(fd)
        return out
