"""Quantized optimizer states as users have them: torchao AdamW8bit / AdamW4bit / AdamWFp8 and
bitsandbytes' thirteen 8-bit optimizers' state_dict()s (_bnb_states.py), in memory, in torch.save
files and in torch distributed-checkpoint (DCP) folders. Each quantized state becomes a case of its registered format (codes, scale, qmap) so
that the engine's dequantizer, signature and audit apply; nothing here computes a value itself.

State keys are dotted paths ("state.0.exp_avg", as DCP names them), the same for an in-memory
state_dict, a torch.save file and a DCP folder; bitsandbytes' FSDP wrapper key
(__bnb_optimizer_quant_state__) is dropped from them.
"""
from __future__ import annotations

import hashlib
import io
import json
import operator
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import _args, _arrays, _core, _dcp, _files, _formats, _pickles, _sharded, _values
from . import _bnb_states as _bnb_states_of
from ._case import Case
from ._core import CaseError
from ._text import message

_BNB_WRAPPER = "__bnb_optimizer_quant_state__"
_TORCHAO_CLASSES = {"OptimState8bit", "OptimState4bit", "OptimStateFp8"}
BNB_BLOCK_SIZE = 256  # bitsandbytes' 8-bit optimizers quantize blocks of 256 (optim/optimizer.py, init_state)


@dataclass
class QuantizedState:
    """One quantized state tensor: its key, the library that made it, its registered format and the
    case (codes, scale, qmap, with the format's params) that the engine dequantizes."""
    key: str
    library: str
    format: str
    shape: tuple
    case: Case
    stored: dict = field(default_factory=dict)  # name in the library -> the array as stored (for the digest)
    # where the state sits in a sharded tensor (a DTensor's local part, as FSDP2 holds torchao's states):
    # the whole tensor's shape, the DTensor's placements ("Shard(dim=0)", ...) and this rank's offset
    # of the local part in each dimension; for a state that is not sharded, its own shape, () and zeros
    global_shape: tuple = None
    placements: tuple = ()
    offsets: tuple = None

    def __post_init__(self):
        if self.global_shape is None:
            self.global_shape = tuple(self.shape)
        if self.offsets is None:
            self.offsets = (0,) * len(self.global_shape)


def _numpy(name, t):
    return _arrays.as_array(name, t)


def _flat(case: Case, name: str, array, dtype):
    case[name] = np.ascontiguousarray(array).reshape(-1)
    case.dtypes[name] = dtype


_MISSING = object()


def _attr(s, name: str, key: str):
    """A torchao state's attribute; one a file's object lacks (torch.load rebuilds what the pickle
    says) is a CaseError naming the state."""
    v = getattr(s, name, _MISSING)
    if v is _MISSING:
        raise CaseError(f"{key}: a {type(s).__name__} without {name}")
    return v


def _torchao_state(key: str, s) -> QuantizedState:
    """A torchao state as a case of its format, after checking that its parts agree (_check_torchao)."""
    cls = type(s).__name__
    shape = _shape_of(key, s)
    block_size = _attr(s, "block_size", key)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise CaseError(f"{key}: a {cls} of block_size {_dcp._short(block_size)}")
    codes, codes_dtype = _numpy(key + ".codes", _attr(s, "codes", key))
    scale, scale_dtype = _numpy(key + ".scale", _attr(s, "scale", key))
    case = Case(origin=key)
    stored = {"codes": (codes, codes_dtype), "scale": (scale, scale_dtype)}
    if cls == "OptimStateFp8":
        fmt = "torchao.fp8"
        _check_torchao(key, cls, fmt, shape, block_size, codes, scale, None)
        _formats.check_dtypes(key, fmt, {"codes": codes_dtype, "scale": scale_dtype})
        _flat(case, "codes", codes, codes_dtype)
    else:
        qmap, qmap_dtype = _numpy(key + ".qmap", _attr(s, "qmap", key))
        stored["qmap"] = (qmap, qmap_dtype)
        bits = 8 if cls == "OptimState8bit" else 4
        signed = _attr(s, "signed", key)
        if not isinstance(signed, bool):
            raise CaseError(f"{key}: a {cls} whose signed is {_dcp._short(signed)}")
        fmt = f"torchao.codebook{bits}.{'signed' if signed else 'unsigned'}"
        _check_torchao(key, cls, fmt, shape, block_size, codes, scale, qmap)
        _formats.check_dtypes(key, fmt, {"codes_packed" if bits == 4 else "codes": codes_dtype, "scale": scale_dtype,
                                         "qmap": qmap_dtype})
        if bits == 4:  # stored two a byte, first element high: the dequantizer reads one code an element
            packed = np.ascontiguousarray(codes).reshape(-1)
            _flat(case, "codes", _core.unpack_nibbles(packed, _sharded._numel(shape)), "U8")
            _flat(case, "codes_packed", packed, codes_dtype)
        else:
            _flat(case, "codes", codes, codes_dtype)
        _flat(case, "qmap", qmap, qmap_dtype)
    _flat(case, "scale", scale, scale_dtype)
    case.metadata = {"format": fmt, "params": json.dumps({"block_size": block_size}),
                     "source": f"torchao {cls} ({key})"}
    return QuantizedState(key, "torchao", fmt, shape, case, stored)


def _shape_of(key: str, s) -> tuple:
    """A state's shape as the wrapper tensor says it (what torch.load rebuilt from the file)."""
    try:
        shape = tuple(operator.index(e) for e in s.shape)
    except (AttributeError, TypeError):
        shape = _dcp._short(getattr(s, "shape", None))
        raise CaseError(f"{key}: a {type(s).__name__} whose shape is {shape}") from None
    if any(e < 0 for e in shape):
        raise CaseError(f"{key}: a {type(s).__name__} of shape {list(shape)}")
    return shape


# the entries of a torchao codebook state's qmap (torchao 0.18 optim/subclass_8bit.py, subclass_4bit.py)
_QMAP_ENTRIES = {8: 256, 4: 16}


def _check_torchao(key, cls, fmt, shape, block_size, codes, scale, qmap) -> None:
    """A torchao state's wrapper shape, block size, codes, scales and qmap against each other, as torchao
    makes them (torchao 0.18 optim/subclass_8bit.py, subclass_4bit.py, subclass_fp8.py: zeros() and
    __init__): torch.load rebuilds the wrapper's shape and its fields separately, and nothing else
    compares them. 8-bit and FP8: codes of the state's shape; 4-bit: a flat buffer of one byte per two
    elements (an even count); one scale per block of block_size elements, 1-D (torchao has no partial
    blocks: its block_size is codes.numel() // scale.numel()); a 1-D qmap of 256 entries (8-bit) or 16
    (4-bit)."""
    n = _sharded._numel(shape)
    where = f"{key}: a {cls} of shape {list(shape)} ({n} elements)"
    if cls == "OptimState4bit":
        if codes.ndim != 1 or 2 * codes.size != n:
            raise CaseError(f"{where} holds {list(codes.shape)} packed code bytes; torchao packs two 4-bit codes a "
                            f"byte in a flat buffer of {n / 2:g} bytes")
    elif tuple(codes.shape) != shape:
        raise CaseError(f"{where} holds codes of shape {list(codes.shape)}; torchao's codes have the state's shape")
    if scale.ndim != 1 or scale.size * block_size != n:
        raise CaseError(f"{where}, block_size {block_size}, holds scales of shape {list(scale.shape)}; {fmt} has one "
                        f"scale per block of {block_size} elements ({n / block_size:g}), in a flat buffer")
    if qmap is not None:
        entries = _QMAP_ENTRIES[4 if cls == "OptimState4bit" else 8]
        if qmap.ndim != 1 or qmap.size != entries:
            raise CaseError(f"{key}: a {cls} whose qmap has shape {list(qmap.shape)}; {fmt} reads a table of "
                            f"{entries} entries")


def _bnb_states(key: str, d: dict, block_size: int) -> list:
    """bitsandbytes' 8-bit states of one parameter (all thirteen classes: _bnb_states.py)."""
    return [QuantizedState(k, "bitsandbytes", fmt, shape, case, stored)
            for k, fmt, shape, case, stored in _bnb_states_of.bnb_states(key, d, block_size)]


def _is_torchao_state(obj) -> bool:
    return type(obj).__name__ in _TORCHAO_CLASSES and type(obj).__module__.startswith("torchao")


def _local_part(d):
    """A DTensor's local part, the tensor it holds: to_local() without autograd returns it as it is,
    where with autograd it makes a view of it through the tensor's own class (torchao's view of an
    8-bit or FP8 state reshapes its codes to the wrapper's shape, raising on a state whose parts
    disagree before lowbit can say which)."""
    import torch

    with torch.no_grad():
        return d.to_local()


def _sharded_torchao_state(key: str, d) -> QuantizedState:
    """A torchao state inside a DTensor (FSDP2's fully_shard): the local part is the state this rank
    quantized, recorded with the DTensor's global shape, placements and this rank's offsets (DCP's own
    computation of them, torch.distributed.tensor._utils, torch 2.15)."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    s = _torchao_state(key, _local_part(d))
    local_shape, offsets = compute_local_shape_and_global_offset(d.shape, d.device_mesh, d.placements)
    if tuple(local_shape) != s.shape:
        raise CaseError(f"{key}: the DTensor's local shape {list(local_shape)} is not its torchao state's "
                        f"{list(s.shape)}")
    s.global_shape = tuple(int(e) for e in d.shape)
    s.placements = tuple(repr(p) for p in d.placements)
    s.offsets = tuple(int(o) for o in offsets)
    return s


class _Chunks:
    """A tensor a multi-rank DCP folder stores in several chunks: its global shape and each chunk's
    offsets and object (a torchao state or a plain tensor), as the reader checked them against the
    metadata."""

    def __init__(self, fqn, shape, chunks):
        self.fqn, self.shape, self.chunks = fqn, shape, chunks


def _dcp_chunk_state(key, shape, offsets, obj) -> QuantizedState:
    s = _torchao_state(key, obj)
    s.global_shape, s.offsets, s.placements = tuple(shape), tuple(offsets), ("DCP chunk",)
    return s


MAX_WALK_DEPTH = 64  # containers a state dict nests (a DCP name's dotted parts are bounded alike: MAX_KEY_DEPTH)


def _child_key(key, k) -> str:
    """The dotted key of a container's entry: only the key types state dicts use (a parameter's
    index, a name); any other (a tuple, an object) would make the key's text unbounded or run code."""
    if type(k) not in (str, int):
        raise TypeError(f"{key or 'the state dict'}: a key of type {type(k).__name__} ({_dcp._short(k)}); state "
                        f"dicts are keyed by strings and ints")
    return f"{key}.{k}" if key else str(k)


def _named(e, key):
    """e with the state's key in front of its message (the engine's and NumPy's messages do not know it)."""
    return _values._with_origin(e, key) if key else e


def _walk(obj, key, found, plain, block_size):
    """Quantized states into found; plain tensors into plain as (key, tensor, global shape, offsets),
    the last two None outside a sharded tensor. Iterative (a list nested thousands deep in a file is an
    error, not a RecursionError), at most MAX_WALK_DEPTH containers deep; TypeError or ValueError name
    the state."""
    pending = [(obj, key, 0)]
    while pending:
        obj, key, depth = pending.pop()
        try:
            children = _visit(obj, key, found, plain, block_size)
        except (TypeError, ValueError) as e:
            raise _named(e, key) from None
        if children and depth >= MAX_WALK_DEPTH:
            raise TypeError(f"{key}: the state dict nests more than {MAX_WALK_DEPTH} containers deep")
        pending += [(v, _child_key(key, k), depth + 1) for k, v in reversed(children)]


_TORCHAO_TENSORS = ("codes", "scale", "qmap")


def _check_storages(obj, key) -> None:
    """Every tensor a value holds directly (a tensor, a torchao state's codes, scale and qmap, a dict's
    tensors: bitsandbytes' state1, absmax1 ...) fits in its storage, before any is copied."""
    if isinstance(obj, _Chunks):
        for offsets, piece in obj.chunks:
            _check_storages(piece, f"{key} chunk at offsets {list(offsets or ())}")
        return
    inner = _local_part(obj) if type(obj).__name__ == "DTensor" else obj
    if _is_torchao_state(inner):
        tensors = [(f"{key}.{n}", getattr(inner, n, None)) for n in _TORCHAO_TENSORS]
    elif isinstance(inner, dict):
        tensors = [(_child_key(key, k), v) for k, v in inner.items()]
    else:
        tensors = [(key, inner)]
    for name, t in tensors:
        _arrays.check_storage(name, t)


def _visit(obj, key, found, plain, block_size) -> list:
    """One value of a state dict: a state or a tensor into found or plain; a container's (key, value)
    entries returned for the walk."""
    _check_storages(obj, key)
    if _is_torchao_state(obj):
        found.append(_torchao_state(key, obj))
        return []
    if type(obj).__name__ == "DTensor" and type(obj).__module__.startswith("torch.distributed"):
        if _is_torchao_state(_local_part(obj)):
            found.append(_sharded_torchao_state(key, obj))
        else:
            from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

            _, offsets = compute_local_shape_and_global_offset(obj.shape, obj.device_mesh, obj.placements)
            plain.append((key, _local_part(obj), tuple(int(e) for e in obj.shape), tuple(int(o) for o in offsets)))
        return []
    if isinstance(obj, _Chunks):
        for offsets, piece in obj.chunks:
            if _is_torchao_state(piece):
                found.append(_dcp_chunk_state(key, obj.shape, offsets, piece))
            else:
                plain.append((key, piece, obj.shape, offsets))
        return []
    if isinstance(obj, dict):
        inner = dict(obj)
        if isinstance(inner.get(_BNB_WRAPPER), dict):  # bitsandbytes' FSDP-friendly wrapping of its quant state
            inner.update(inner.pop(_BNB_WRAPPER))
        if "state1" in inner and any(k in inner for k in ("absmax1", "qmap1")):
            if any(isinstance(v, _Chunks) for v in inner.values()):
                raise CaseError(f"{key}: a bitsandbytes state stored in several chunks; lowbit reads bitsandbytes' "
                                f"states whole (bitsandbytes 0.50.2 does not step under FSDP2)")
            found.extend(_bnb_states(key, inner, block_size))
            inner = {k: v for k, v in inner.items() if not (isinstance(k, str) and k.startswith(
                ("state1", "state2", "absmax", "qmap")))}
        return list(inner.items())
    if isinstance(obj, (list, tuple)):
        return list(enumerate(obj))
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        plain.append((key, obj, None, None))
    return []


def _torch_load(source, weights_only=True, origin=None):
    """torch.load of a file or of one DCP item's bytes, after _pickles.check_torch_save (a zip of stored
    records whose pickle is scanned before torch unpickles it: no nesting that crashes CPython, no
    object bomb, nothing inflated); whatever a hostile file makes it raise comes back as a CaseError
    naming the file (with weights_only=True torch's own unpickler admits only tensors, plain containers
    and the classes allowlisted, torchao's states among them). A path is opened once: what was checked
    is what torch reads."""
    import torch

    try:  # torchao's state classes are allowlisted for weights_only loading when torchao is imported
        import torchao.optim  # noqa: F401
    except ImportError:
        pass
    origin = origin or os.fspath(source)
    try:
        file = open(source, "rb") if isinstance(source, (str, os.PathLike)) else source
    except OSError as e:
        raise CaseError(f"{origin}: cannot open it ({e.strerror})") from None
    try:
        _pickles.check_torch_save(file, origin)
        return torch.load(file, map_location="cpu", weights_only=weights_only)
    except CaseError:
        raise
    except Exception as e:
        raise CaseError(f"{origin}: torch.load failed ({type(e).__name__}: {str(e)[:300]})") from None
    finally:
        if file is not source:
            file.close()


MAX_KEY_DEPTH = 64  # dotted components of one DCP item name


def _is_sharded(fqn, items, layout) -> bool:
    """Whether a DCP tensor is stored as chunks of a larger tensor (a multi-rank save)."""
    if len(items) > 1:
        return True
    if layout is None:
        return False
    size, boxes = layout
    return len(boxes) != 1 or boxes[0][1] != size or items[0].chunk_offset not in (None, boxes[0][0])


def _check_chunks(path, fqn, items, layout):
    """A sharded tensor's stored chunks against the metadata's: every declared chunk stored once, none
    undeclared, and the declared chunks tiling the tensor (no overlap, none missing)."""
    if layout is None:
        raise CaseError(f"{path}: {fqn} is stored in {len(items)} chunks but the metadata declares no tensor of "
                        f"that name")
    size, boxes = layout
    declared = {}
    for offsets, sizes in boxes:
        if offsets in declared:
            raise CaseError(f"{path}: {fqn}: the metadata declares the chunk at offsets {list(offsets)} twice")
        declared[offsets] = sizes
    stored = set()
    for it in items:
        offsets = it.chunk_offset
        if offsets not in declared:
            raise CaseError(f"{path}: {fqn}: the chunk stored at offsets {list(offsets or ())} is not among the "
                            f"metadata's chunks")
        if offsets in stored:
            raise CaseError(f"{path}: {fqn}: the chunk at offsets {list(offsets)} is stored twice")
        stored.add(offsets)
    for offsets, sizes in declared.items():
        if offsets not in stored:
            raise CaseError(f"{path}: {fqn}: the chunk at offsets {list(offsets)} of shape {list(sizes)} is declared "
                            f"but not stored (a missing chunk)")
    try:
        _sharded.check_tiling(fqn, size, [{"offsets": list(o), "shape": list(e)} for o, e in boxes])
    except ValueError as e:
        raise CaseError(f"{path}: {e}") from None


def _name(fqn: str) -> str:
    """A DCP name for a message: as it is where it is short and printable, else bounded and quoted."""
    return fqn if fqn.isprintable() and len(fqn) <= 200 else _dcp._short(fqn)


def _object_shape(obj):
    shape = getattr(obj, "shape", None)
    try:
        return tuple(int(e) for e in shape)
    except (TypeError, ValueError):
        return None


def _nest(flat: dict, path) -> dict:
    """DCP's flat names nested again by their dots, so that a state's parts (bitsandbytes' state1,
    absmax1, qmap1) meet in one dict and keys read as in memory."""
    nested = {}
    for fqn, value in flat.items():
        node = nested
        *parents, leaf = fqn.split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise CaseError(f"{path}: {fqn} lies under another item")
        if leaf in node:
            raise CaseError(f"{path}: {fqn} names an item and the items under it")
        node[leaf] = value
    return nested


def _part_of(it, sharded):
    """The part of a folder an item is read with: a sharded tensor's chunk alone; any other item with
    the other items of its parameter (the same parent name, bitsandbytes' wrapper folded in)."""
    if it.fqn in sharded:
        return ("chunk", it.fqn, it.chunk_offset)
    parent = it.fqn.rsplit(".", 1)[0] if "." in it.fqn else ""
    if parent == _BNB_WRAPPER or parent.endswith("." + _BNB_WRAPPER):
        parent = parent[:-len(_BNB_WRAPPER)].rstrip(".")
    return ("parent", parent)


def _dcp_parts(path, weights_only=True, whole=True, only=None, progress=None):
    """A torch distributed checkpoint folder, item by item as DCP stored it: a torchao state object is
    read back whole (its codes), which loading into a plain tensor template would dequantize. A tensor
    that several ranks saved in chunks becomes a _Chunks of its chunks, each checked against the
    metadata (declared once, stored once, tiling the tensor, of the declared shape) before a byte is
    read. Yields (part, nested dict): one part of every item (whole), or one per chunk of a sharded
    tensor and one per parameter's other items, read one after the other so that memory holds one
    part (only: the parts to read; progress(parts read, parts to read) after each). The metadata and
    the item files are read as hostile input (_dcp.py: no code from the pickle runs, no file outside
    the folder is opened); each item's bytes go through torch.load(weights_only=...)."""
    with _dcp.Folder(path) as folder:
        items, layouts = folder.contents(weights_only)
        by_fqn = {}
        for it in items:
            if it.fqn.count(".") >= MAX_KEY_DEPTH:
                raise CaseError(f"{path}: item {_dcp._short(it.fqn)} has more than {MAX_KEY_DEPTH} dotted parts")
            by_fqn.setdefault(it.fqn, []).append(it)
        sharded = {fqn for fqn, its in by_fqn.items() if _is_sharded(fqn, its, layouts.get(fqn))}
        for fqn in sorted(sharded):
            _check_chunks(path, _name(fqn), by_fqn[fqn], layouts.get(fqn))
        _nest(dict.fromkeys(by_fqn), path)  # the names' structure, before any bytes
        parts = {}
        for it in items:
            parts.setdefault(None if whole else _part_of(it, sharded), []).append(it)
        # by name: a sharded tensor's chunks one after the other (its offsets in the order of the items)
        chosen = [p for p in sorted(parts.items(), key=lambda p: p[0][1] if p[0] else "")
                  if only is None or p[0] in only]
        for done, (part, part_items) in enumerate(chosen, 1):
            yield part, _nest(_loaded(path, folder.read(part_items), layouts, sharded, weights_only), path)
            if progress is not None:
                progress(done, len(chosen))


def _loaded(path, stored, layouts, sharded, weights_only) -> dict:
    """fqn -> the object torch.load makes of its bytes (a _Chunks for a sharded tensor's chunks), each
    of the shape the metadata declares."""
    flat = {}
    for it, data in stored:
        where = f"{path}: item {_dcp._short(it.fqn)}"
        if it.fqn in sharded:
            where += f" chunk at offsets {list(it.chunk_offset or ())}"
        obj = _torch_load(io.BytesIO(data), weights_only, where)
        if it.fqn in layouts:
            size, boxes = layouts[it.fqn]
            expected = dict(boxes).get(it.chunk_offset, size) if it.fqn in sharded else size
            if _object_shape(obj) != tuple(expected):
                raise CaseError(f"{path}: {_name(it.fqn)}: the chunk at offsets {list(it.chunk_offset or ())} "
                                f"holds a {type(obj).__name__} of shape {_dcp._short(_object_shape(obj))}; the "
                                f"metadata declares {list(expected)}")
        if it.fqn in sharded:
            flat.setdefault(it.fqn, _Chunks(it.fqn, layouts[it.fqn][0], [])).chunks.append((it.chunk_offset, obj))
        else:
            flat[it.fqn] = obj
    return flat


def _read_dcp(path, weights_only=True) -> dict:
    """The whole folder as one nested dict (_dcp_parts)."""
    parts = _dcp_parts(path, weights_only)
    try:
        return next(parts, (None, {}))[1]
    finally:
        parts.close()


def load_state(source, weights_only=True):
    """A state dict from memory (returned as is), a torch.save file or a DCP folder. Files are read
    as hostile input unless weights_only=False: torch.load(weights_only=True), and a DCP folder's
    metadata through an unpickler that admits only DCP's own classes (lowbit/_dcp.py)."""
    if isinstance(source, (str, os.PathLike)):
        if os.path.isdir(source):
            return _read_dcp(source, weights_only)
        return _torch_load(os.fspath(source), weights_only)
    if isinstance(source, bytes):
        raise TypeError("state_dict: bytes; give a state dict, a torch.save file's path or a DCP folder's path")
    return source


def _find(state_dict, bnb_block_size, weights_only):
    """(quantized states, plain tensors, whether the source was a DCP folder) as _walk finds them."""
    bnb_block_size = _args.whole("bnb_block_size", bnb_block_size, 1, 1 << 31)
    weights_only = _args.flag("weights_only", weights_only)
    found, plain = [], []
    state = load_state(state_dict, weights_only)
    try:
        _walk(state, "", found, plain, bnb_block_size)
    except (TypeError, ValueError) as e:  # an object of a file where a tensor belongs: the file's fault
        if state is state_dict:
            raise
        raise _in_file(e, state_dict) from None
    if state is not state_dict:
        _name_the_file(found, state_dict)
    folder = isinstance(state_dict, (str, os.PathLike)) and os.path.isdir(state_dict)
    try:
        if not folder:  # (a DCP folder's names are unique: its metadata keys them, _nest nests them apart)
            _refuse_colliding_names(state, found, plain)
    except ValueError as e:
        raise (e if state is state_dict else _in_file(e, state_dict)) from None
    return sorted(found, key=lambda s: (s.key, s.offsets)), plain, folder


def _refuse_colliding_names(state, found, plain) -> None:
    """ValueError when two tensors of a state dict get one dotted name (keys 0 and "0" of one dict, or
    "a.b" beside "a" holding "b"): the one read later would replace the other, so both keys are named."""
    seen = set()
    for name in [s.key for s in found] + [p[0] for p in plain]:
        if name in seen:
            paths = _paths_named(state, name)
            both = " and ".join(repr(list(p)) for p in paths[:2]) if len(paths) > 1 else "two of its keys"
            raise ValueError(f"{_name(name)}: {both} both name it (a state's name is its keys joined with dots); "
                             f"lowbit refuses two tensors of one name")
        seen.add(name)


_SEARCH_LIMIT = 10_000  # containers _paths_named looks into, at most


def _paths_named(state, name: str) -> list:
    """The key paths (at most two) that _walk names `name`: at each dict or list, the keys whose text
    begins the rest of the name (bitsandbytes' wrapper looked into as its parent, as _walk folds it in;
    AdEMAMix's "state1[0]" under the key state1). For the message of a collision: a bounded search."""
    out, stack, looked = [], [(state, name, ())], 0
    while stack and len(out) < 2 and looked < _SEARCH_LIMIT:
        node, rest, path = stack.pop()
        looked += 1
        if isinstance(node, dict):
            keys = list(node.items())
            if isinstance(node.get(_BNB_WRAPPER), dict):
                keys += [((_BNB_WRAPPER, k), v) for k, v in node[_BNB_WRAPPER].items()]
        elif isinstance(node, (list, tuple)):
            keys = list(enumerate(node))
        else:
            continue
        for k, v in reversed(keys):
            text = str(k[1] if isinstance(k, tuple) else k)
            steps = k if isinstance(k, tuple) else (k,)
            if rest == text or rest.startswith(text + "[") and rest.endswith("]"):
                out.append(path + steps)
            elif rest.startswith(text + "."):
                stack.append((v, rest[len(text) + 1:], path + steps))
    return out


def _joined(key, chunks):
    """One QuantizedState of a DCP tensor's chunks where they join into the state one process would
    hold: each chunk one run of the global element order, the runs in a row, the same format, params
    and table, every chunk but the last made of whole blocks (4-bit: whole bytes). None otherwise (the
    layout cut the quantizer's blocks: the chunks stay apart)."""
    first = chunks[0]
    shape = first.global_shape
    placed = []
    for c in chunks:
        r = _sharded.runs(shape, c.offsets, c.shape)
        if len(r) != 1 or c.format != first.format or c.case.params != first.case.params:
            return None
        placed.append((r[0][0], r[0][1], c))
    placed.sort(key=lambda p: p[0])
    block = int(first.case.params["block_size"])
    at = 0
    for i, (start, length, c) in enumerate(placed):
        last = i == len(placed) - 1
        if start != at or (not last and (length % block or length % 2)):
            return None
        if "qmap" in c.case and not np.array_equal(c.case["qmap"], first.case["qmap"]):
            return None
        at += length
    case = Case(origin=key)
    for name in first.case:
        parts = [p[2].case[name] for p in placed]
        case[name] = parts[0] if name == "qmap" else np.concatenate(parts)
        case.dtypes[name] = first.case.dtypes[name]
    case.metadata = dict(first.case.metadata)
    stored = {n: (np.concatenate([p[2].stored[n][0].reshape(-1) for p in placed]) if n != "qmap" else a, d)
              for n, (a, d) in first.stored.items()}
    return QuantizedState(key, first.library, first.format, tuple(shape), case, stored,
                          placements=(f"joined from {len(chunks)} DCP chunks",))


def _is_folder(source) -> bool:
    return isinstance(source, (str, os.PathLike)) and os.path.isdir(source)


def _folder_groups(path, bnb_block_size, weights_only, only=None, progress=None):
    """A DCP folder's quantized states, one group at a time, in the folder's order: (parts, states,
    plain) for each part that is not a sharded tensor's chunk (its states; plain empty), and for each
    sharded tensor, its chunks read one after the other (parts: those chunks' parts; states: the joined
    state where the chunks join (_joined), else one per quantized chunk; plain: its unquantized chunks,
    as _walk gives them). Memory holds one group: one part, or one sharded tensor's chunks (only: the
    parts to read, progress as _dcp_parts)."""
    key, parts, chunks, plain_chunks = None, set(), [], []

    def sharded_group():
        joined = None if plain_chunks or not chunks else _joined(key, chunks)
        return parts, sorted([joined] if joined else chunks, key=lambda s: s.offsets), plain_chunks

    for part, nested in _dcp_parts(path, weights_only, whole=False, only=only, progress=progress):
        found, plain = _walk_part(nested, path, bnb_block_size)
        del nested
        if part[0] == "chunk" and part[1] == key:
            parts.add(part)
            chunks += found
            plain_chunks += [p for p in plain if p[2] is not None]
            continue
        if key is not None:
            yield sharded_group()
        key, parts, chunks, plain_chunks = None, set(), [], []
        if part[0] == "chunk":
            key, parts, chunks, plain_chunks = part[1], {part}, found, [p for p in plain if p[2] is not None]
        else:
            yield {part}, sorted(found, key=lambda s: s.key), []
        found = plain = None  # not held while the next part is read
    if key is not None:
        yield sharded_group()


def _states_one_by_one(source, bnb_block_size, weights_only, progress=None):
    """quantized_states's states one at a time, where the source is a DCP folder in the folder's order
    (one part, or one sharded tensor's chunks, in memory at a time); the in-memory ones in key order."""
    if not _is_folder(source):
        yield from quantized_states(source, bnb_block_size, weights_only)
        return
    bnb_block_size = _args.whole("bnb_block_size", bnb_block_size, 1, 1 << 31)
    weights_only = _args.flag("weights_only", weights_only)
    listed = _folder_record(source)  # the states given must all come from one folder, as it was
    for _, states, _ in _folder_groups(source, bnb_block_size, weights_only, progress=progress):
        yield from states
        del states  # not held while the next group is read
    _check_unchanged(source, listed, "it began to be read")


def _folder_record(path) -> dict:
    """What a DCP folder holds, to tell later whether another writer changed it: the sha256 of its
    .metadata (read inside the folder, never through a link, 1 MiB at a time) and, for every entry under
    the folder (links not followed), its type, size, mtime, ctime and inode."""
    path = os.fspath(path)
    record = {}
    for folder, dirs, files in os.walk(path, followlinks=False):
        for name in dirs + files:
            full = os.path.join(folder, name)
            try:
                st = os.lstat(full)
            except FileNotFoundError:  # removed while the folder was walked: a change, recorded as such
                st = None
            record[os.path.relpath(full, path)] = None if st is None else (
                stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    digest = hashlib.sha256()
    with _dcp.Folder(path) as folder:
        fd = _dcp._open_inside(folder.fd, _dcp.METADATA_NAME, os.path.join(path, _dcp.METADATA_NAME))
        try:
            while block := os.read(fd, 1 << 20):
                digest.update(block)
        finally:
            os.close(fd)
    record[None] = digest.hexdigest()  # None: no entry's name
    return record


def _changes(before: dict, after: dict) -> str:
    """The entries of a folder that differ between two records, for a message (at most three named)."""
    def change(name) -> str:
        if name is None:
            return f"{_dcp.METADATA_NAME}'s contents"
        return f"{_name(name)} {'added' if name not in before else 'removed' if after.get(name) is None else 'changed'}"

    names = sorted((n for n in before.keys() | after.keys() if before.get(n, ()) != after.get(n, ())),
                   key=lambda n: (n is not None, n or ""))
    return ", ".join(map(change, names[:3])) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _check_unchanged(path, listed: dict, since: str) -> None:
    """CaseError when the folder no longer holds what was listed (since: when it was listed)."""
    now = _folder_record(path)
    if now != listed:
        raise CaseError(f"{path}: the checkpoint folder changed since {since} ({_changes(listed, now)}); lowbit "
                        f"serves no state from a changed folder: read it again once its writer is done")


class QuantizedStates(Sequence):
    """quantized_states's result: a sequence of QuantizedState sorted by key and offsets (len, indexing,
    slicing, iteration). From a DCP folder it is lazy: the call reads the whole folder once, one part at a
    time, to check it and list its states (any fault is raised by the call, before a state is returned),
    and keeps only that list; each state is read again from the folder when it is indexed or reached by
    iteration (its part alone, or its sharded tensor's chunks), so that memory holds one state, never
    the checkpoint; only while the folder is as listed (_folder_record: CaseError once it changed). A
    state dict in memory or a torch.save file gives its states as a plain list does."""

    def __init__(self, states=None, folder=None, bnb_block_size=BNB_BLOCK_SIZE, weights_only=True, progress=None):
        self._folder, self._block, self._weights_only = folder, bnb_block_size, weights_only
        self._cached = (None, {})  # the parts last read and their states by (key, offsets)
        if folder is None:
            self._states, self._index = list(states), None
            return
        index = []
        self._record = _folder_record(folder)  # what is listed: each state is served only while it holds
        for parts, states, _ in _folder_groups(folder, bnb_block_size, weights_only, progress=progress):
            index += [((s.key, tuple(s.offsets)), frozenset(parts)) for s in states]
            del states  # not held while the next group is read
        _check_unchanged(folder, self._record, "quantized_states began to list it")
        self._index = sorted(index, key=lambda e: e[0])

    def __len__(self) -> int:
        return len(self._states if self._index is None else self._index)

    def _read(self, i):
        """State i, read from the folder (or kept from the last read of its parts), served only when the
        folder is as listed before and after the read."""
        (place, parts) = self._index[i]
        since = "quantized_states listed it"
        _check_unchanged(self._folder, self._record, since)
        if self._cached[0] != parts:
            self._cached = (None, {})  # the states read before are let go before these are read
            read = {}
            for _, states, _ in _folder_groups(self._folder, self._block, self._weights_only, only=parts):
                read.update(((s.key, tuple(s.offsets)), s) for s in states)
            _check_unchanged(self._folder, self._record, since)
            self._cached = (parts, read)
        s = self._cached[1].get(place)
        if s is None:  # the folder changed since the call listed it
            raise CaseError(f"{self._folder}: {place[0]} at offsets {list(place[1])} is no longer in the folder "
                            f"(it changed since quantized_states read it)")
        return s

    def __getitem__(self, i):
        if self._index is None:
            return self._states[i]
        if isinstance(i, slice):
            return [self._read(j) for j in range(*i.indices(len(self)))]
        i = operator.index(i)
        if not -len(self) <= i < len(self):
            raise IndexError(f"quantized state {i} of {len(self)}")
        return self._read(i % len(self))

    def __iter__(self):
        if self._index is None:
            yield from self._states
            return
        for i in range(len(self)):
            yield self._read(i)
        self._cached = (None, {})

    def __repr__(self) -> str:
        where = f" of {self._folder} (lazy: each read from the folder when used)" if self._folder is not None else ""
        return f"QuantizedStates({len(self)} states{where})"


def quantized_states(state_dict, bnb_block_size: int = BNB_BLOCK_SIZE, weights_only=True,
                     progress=None) -> QuantizedStates:
    """Every quantized state in a state dict (or a torch.save file, or a DCP folder), sorted by key, as
    QuantizedState: torchao OptimState8bit / OptimState4bit / OptimStateFp8 and bitsandbytes 8-bit
    state1 / state2 (with their absmax and qmap), each as a case of its registered format. A state a
    multi-rank DCP folder stores in chunks comes back joined into the whole state where the chunks hold
    whole blocks of it; where the layout cut its blocks, or a chunk is unquantized, as one QuantizedState
    per chunk (placements "DCP chunk", with its offsets and the global shape).

    The result is a QuantizedStates sequence; from a DCP folder a lazy one (each state read from the
    folder when it is used: memory holds one state, not the checkpoint), after a first pass over the
    folder that raises any fault of it (progress(parts read, parts to read) after each part); a state
    is served only while the folder is as that pass found it (CaseError saying what changed)."""
    if _is_folder(state_dict):
        if progress is not None and not callable(progress):
            raise TypeError(f"progress: a {type(progress).__name__}, not a callable(done, total)")
        return QuantizedStates(folder=os.fspath(state_dict),
                               bnb_block_size=_args.whole("bnb_block_size", bnb_block_size, 1, 1 << 31),
                               weights_only=_args.flag("weights_only", weights_only), progress=progress)
    found, _, _ = _find(state_dict, bnb_block_size, weights_only)
    return QuantizedStates(sorted(found, key=lambda s: (s.key, s.offsets)))


@dataclass
class StateSignature:
    """state_signature's result. ``digest`` covers everything below; compare two signatures with ==.

    - ``stored``: sha256 over every chunk of every quantized state (a state held whole is one chunk):
      its key, format, params, global shape, offsets and shape, and the sha256 of each stored tensor's
      element bytes in C order (codes, scales, tables as stored: a 4-bit state's packed codes), whatever
      the storage's strides, device or container. It depends on the shard layout.
    - ``dequantized``: sha256 over every state's key, global shape and the hash of its dequantized values
      in global element order (segments of 65 536 elements, lowbit/_sharded.py): the same for any
      number of ranks wherever the quantizer's blocks are the same.
    - ``states``: per state key, its format, global shape, chunks (offsets, shape, format, params,
      stored tensors' sha256) and dequantized hash, to see which state differs.
    - ``scope``: "whole" (states held whole), "local shard" (without a group, DTensor parts: this rank's
      own, as if whole), "N ranks" (with a group) or "DCP folder of N chunks".
    """
    digest: str
    stored: str
    dequantized: str
    states: dict
    scope: str = "whole"

    def __str__(self) -> str:
        return self.digest

    def __eq__(self, other) -> bool:
        return isinstance(other, StateSignature) and self.digest == other.digest


def _tensor_lines(s: QuantizedState) -> dict:
    out = {}
    for name, (array, dtype) in sorted(s.stored.items()):
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        out[name] = f"{dtype} {list(array.shape)} {_core.sha256(flat)}"
    return out


def _chunk(s: QuantizedState, layout: bool, lazy: bool = False) -> _sharded.Chunk:
    """The state as a chunk of its global state (layout) or as a whole; its values dequantized (a window
    of whole blocks at a time, _values.py), or with lazy=True to be dequantized as they are read."""
    g, o = (s.global_shape, s.offsets) if layout else (s.shape, (0,) * len(s.shape))
    values = _values.Values(s.case, _sharded._numel(s.shape))
    return _sharded.Chunk(s.key, tuple(g), tuple(o), tuple(s.shape), s.format, s.case.params, _tensor_lines(s),
                          values if lazy else values.whole())


def _plain_chunks(plain, keys, path=None) -> list:
    """The unquantized parts of states that other chunks hold quantized (a rank whose part torchao left
    in float32: fewer than 4096 elements, or not whole blocks): their values are the state's."""
    out = []
    for key, t, shape, offsets in plain:
        if key not in keys or shape is None:
            continue
        fault = ValueError if path is None else CaseError  # a file's chunk: the file's fault, named
        where = f"{key}: chunk at offsets {list(offsets)}" if path is None else \
            f"{os.fspath(path)}: {key}: chunk at offsets {list(offsets)}"
        try:
            a, dtype = _arrays.as_array(key, t)
        except TypeError as e:
            raise (e if path is None else fault(f"{where}: {e}")) from None
        where += f" of shape {list(a.shape)}"
        if dtype != "F32":
            raise fault(f"{where} is an unquantized {dtype} tensor; lowbit reads float32 parts of quantized states")
        flat = np.ascontiguousarray(a).reshape(-1)
        out.append(_sharded.Chunk(key, tuple(shape), tuple(offsets), tuple(a.shape), "plain", {},
                                  {"values": f"F32 {list(a.shape)} {_core.sha256(flat.view(np.uint8))}"}, flat))
    return out


_NONE_FOUND = ("no quantized optimizer state found (torchao OptimState8bit/4bit/Fp8 or bitsandbytes state1/state2 "
               "with absmax and qmap)")


def _signature(contributions, scope) -> StateSignature:
    stored, dequantized, digest, states = _sharded.combine(contributions)
    return StateSignature(digest, stored, dequantized, states, scope)


def _gathered(group, value):
    """every rank's value, in rank order (torch.distributed.all_gather_object on the group)."""
    import torch.distributed as dist

    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, value, group=group)
    return out


def _reason(e: BaseException) -> str:
    """'TypeName: message' of what a rank raised, on one line, as the other ranks are told it."""
    return f"{type(e).__name__}: {' '.join(message(e).split())[:2000]}"


def _abandoned_key(group) -> str:
    return f"lowbit/collective-abandoned/{group.group_name}"


def _abandon(group, reason: str) -> None:
    """This rank leaves a gather it entered, half done (interrupted inside it, or its transport failed):
    the reason goes to the job's store, where the other ranks read it when their gather fails, and the
    group is aborted (torch's _abort_process_group; with gloo it closes the connections), so that their
    gather fails now rather than at the group's timeout."""
    import torch.distributed as dist

    try:
        dist.distributed_c10d._get_default_store().set(_abandoned_key(group), reason)
    except Exception:  # no store to tell: the abort alone ends the others' wait
        pass
    try:
        dist.distributed_c10d._abort_process_group(group)
    except Exception:  # a backend without abort: the others' gather ends when this process does
        pass


def _why_abandoned(group):
    """The reason a rank that abandoned the group's gather left in the store, or None."""
    import torch.distributed as dist

    try:
        store = dist.distributed_c10d._get_default_store()
        key = _abandoned_key(group)
        return store.get(key).decode(errors="replace") if store.check([key]) else None
    except Exception:
        return None


def _collective(group, compute):
    """compute() on every rank, gathered. Whatever compute raises on a rank, an Exception or any other
    BaseException (a KeyboardInterrupt, SystemExit), is carried to the other ranks by the same gather:
    every rank reaches the same number of collectives, then every rank raises (one ValueError naming the
    rank and its fault; the failing rank its own exception), so that no rank waits for a collective
    another never reaches and none returns a partial signature. A rank stopped inside the gather itself
    aborts the group with its reason (_abandon) and raises what stopped it; the others' gather then fails
    at once, and they raise a ValueError with that reason."""
    import pickle

    import torch.distributed as dist

    mine = None
    try:  # pickled here, so that a value that cannot be is this rank's fault, carried like any other
        value = pickle.dumps(compute(), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as e:  # carried to the other ranks, raised below
        value, mine = None, e
    try:
        everyone = _gathered(group, (value, None if mine is None else _reason(mine)))
    except BaseException as e:
        why = _why_abandoned(group) if isinstance(e, Exception) else None
        if why is not None:  # another rank left the gather: its reason, not the transport's error
            raise ValueError(f"{why} (it left the collective; the process group is aborted)") from e
        _abandon(group, f"rank {dist.get_rank()}: {_reason(e)}")
        if mine is not None:
            raise mine from e
        raise
    if mine is not None:
        raise mine
    for rank, (_, e) in enumerate(everyone):
        if e is not None:
            raise ValueError(f"rank {dist.get_global_rank(group, rank) if group is not None else rank}: {e}")
    return [pickle.loads(v) for v, _ in everyone]  # the job's own ranks' values, as all_gather_object unpickles them


def _walk_part(part, path, bnb_block_size):
    found, plain = [], []
    try:
        _walk(part, "", found, plain, bnb_block_size)
    except (TypeError, ValueError) as e:  # an object of a file where a tensor belongs: the file's fault
        raise _in_file(e, path) from None
    _name_the_file(found, path)
    return found, plain


def _name_the_file(found, path) -> None:
    """Each state's case names the file before its key, so that the engine's messages (and Values') on
    dequantizing it name both."""
    for s in found:
        s.case.origin = f"{os.fspath(path)}: {s.case.origin}"


def _in_file(e, path) -> CaseError:
    """A fault of a file's state (TypeError, ValueError, CaseError) as a CaseError naming the file."""
    return CaseError(str(_values._with_origin(e, os.fspath(path))))


def _folder_contributions(path, bnb_block_size, weights_only, progress=None) -> list:
    """Every chunk's contribution to a DCP folder's signature, read one part at a time (a sharded
    tensor's chunk, or a parameter's items): memory holds one part and the contributions (segment
    hashes and the pieces of segments a chunk cuts), never the checkpoint. The unquantized chunks of
    states that other chunks hold quantized are read in a second pass, once those states are known."""
    bnb_block_size = _args.whole("bnb_block_size", bnb_block_size, 1, 1 << 31)
    weights_only = _args.flag("weights_only", weights_only)
    out, quantized, plain_parts = [], set(), set()
    listed = _folder_record(path)  # both passes must read one folder, as it was
    for part, nested in _dcp_parts(path, weights_only, whole=False, progress=progress):
        found, plain = _walk_part(nested, path, bnb_block_size)
        for s in found:
            out.append(_sharded.contribution(_chunk(s, True, lazy=True)))
            quantized.add(s.key)
        if any(shape is not None for _, _, shape, _ in plain):
            plain_parts.add(part)
        nested = found = plain = s = None  # not held while the next part is read
    if not quantized:
        raise ValueError(_NONE_FOUND)
    mixed = {p for p in plain_parts if p[1] in quantized}
    for _, nested in (_dcp_parts(path, weights_only, whole=False, only=mixed, progress=progress) if mixed else ()):
        _, plain = _walk_part(nested, path, bnb_block_size)
        out += [_sharded.contribution(c) for c in _plain_chunks(plain, quantized, path)]
    _check_unchanged(path, listed, "state_signature began to read it")
    return out


def state_signature(state_dict, bnb_block_size: int = BNB_BLOCK_SIZE, weights_only=True,
                    group=None, progress=None) -> StateSignature:
    """The signature of every quantized state in a state dict (or a torch.save file, or a DCP folder):
    equal before and after a save/load round trip (torch.save, DCP), different when one code, scale or
    table entry differs. ValueError when there is no quantized state.

    group: a torch.distributed process group (torch.distributed.group.WORLD in a torchrun job): every
    rank of it calls state_signature with its own state dict, the ranks' parts of each DTensor state
    are combined by a collective, and every rank returns the same signature of the global states, the
    one state_signature gives for a DCP folder they save. Without a group, a DTensor's local part is
    signed as if it were the whole state (scope "local shard").

    progress: for a DCP folder, a callable(parts read, parts to read) called after each part it reads
    (python -m lowbit shows it as a progress line); a second pass, over the unquantized chunks of partly
    quantized states, counts from 1 again."""
    if group is None:
        if isinstance(state_dict, (str, os.PathLike)) and os.path.isdir(state_dict):
            if progress is not None and not callable(progress):
                raise TypeError(f"progress: a {type(progress).__name__}, not a callable(done, total)")
            contributions = _folder_contributions(state_dict, bnb_block_size, weights_only, progress)
            whole = all(c["shape"] == c["global_shape"] for c in contributions)
            return _signature(contributions, "whole" if whole else f"DCP folder of {len(contributions)} chunks")
        found, _, _ = _find(state_dict, bnb_block_size, weights_only)
        if not found:
            raise ValueError(_NONE_FOUND)
        scope = "whole" if all(s.shape == s.global_shape for s in found) else "local shard"
        return _signature([_sharded.contribution(_chunk(s, False, lazy=True)) for s in found], scope)
    state = {}

    def local_keys():
        state["found"], state["plain"], _ = _find(state_dict, bnb_block_size, weights_only)
        return sorted({s.key for s in state["found"]})

    keys = {k for ks in _collective(group, local_keys) for k in ks}
    if not keys:
        raise ValueError(_NONE_FOUND)

    def contributions():
        chunks = [_chunk(s, True, lazy=True) for s in state["found"]] + _plain_chunks(state["plain"], keys)
        return [_sharded.contribution(c) for c in chunks]

    everyone = _collective(group, contributions)
    return _signature([c for cs in everyone for c in cs], f"{len(everyone)} ranks")


def _folder_value_chunks(path, bnb_block_size, weights_only, only=None, progress=None, lazy=False):
    """A DCP folder's _sharded.Chunks of dequantized values, one group (a part, or a sharded tensor's
    chunks) at a time: every quantized state's values, and the unquantized chunks of the states other
    chunks hold quantized, each with its place in the state's global shape."""
    for _, states, plain in _folder_groups(path, bnb_block_size, weights_only, only=only, progress=progress):
        chunks = [_chunk(s, True, lazy) for s in states] + (_plain_chunks(plain, {s.key for s in states}, path) if
                                                             states else [])
        states = plain = None
        yield chunks
        del chunks  # not held while the next group is read


def _place(out, c) -> None:
    if c.key not in out:
        out[c.key] = np.zeros(c.global_shape, dtype=np.float32)
        out.dtypes[c.key] = "F32"
    out[c.key][tuple(slice(o, o + e) for o, e in zip(c.offsets, c.shape))] = c.values.reshape(c.shape)


_STATE_CASE_METADATA = {"source": "lowbit.dequantized_state_case"}


def _case_header(shapes: dict) -> tuple:
    """(header bytes, {key: data offset}) of a case of float32 tensors of these shapes, as the engine's
    serialize_case lays it out (conformance/engine/cases/case.cpp: tensors in name order, nlohmann's
    compact JSON with sorted keys, padded with spaces to 8 bytes); test_torchrun_states.py holds the
    bytes of a file written so to the engine's for the same values."""
    header, at, offsets = {"__metadata__": _STATE_CASE_METADATA}, 0, {}
    for key in sorted(shapes):
        if key == "__metadata__":
            raise CaseError("'__metadata__' cannot name a tensor")
        n = 4 * _sharded._numel(shapes[key])
        header[key] = {"dtype": "F32", "shape": [int(e) for e in shapes[key]], "data_offsets": [at, at + n]}
        offsets[key] = at
        at += n
    try:
        text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError as e:
        raise CaseError(f"a state key that is not valid UTF-8 ({e.reason})") from None
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text, offsets


def _write_state_case(path, out, bnb_block_size, weights_only, progress, replace) -> dict:
    """dequantized_state_case of a DCP folder streamed into the case file `out`: a first pass lists the
    states and their global shapes (and raises any fault of the folder), a second writes each group's
    values at their place in the file (pwrite of each contiguous run), so memory holds one group."""
    shapes = {}
    listed = _folder_record(path)  # the folder as the first pass reads it: the second must read the same
    for _, states, _ in _folder_groups(path, bnb_block_size, weights_only, progress=progress):
        for s in states:
            if shapes.setdefault(s.key, tuple(s.global_shape)) != tuple(s.global_shape):
                raise CaseError(f"{path}: {s.key}: chunks of shapes {list(shapes[s.key])} and {list(s.global_shape)}")
    states = s = None  # the listing's last state, not held through the writing pass
    header, offsets = _case_header(shapes)
    written = dict.fromkeys(shapes, 0)  # elements of each state written by the second pass
    with _files.atomic_file(out, replace) as fd:  # an exception below: the temporary is removed, out untouched
        _files.write_all(fd, header)
        os.ftruncate(fd, len(header) + 4 * sum(_sharded._numel(e) for e in shapes.values()))
        for chunks in _folder_value_chunks(path, bnb_block_size, weights_only, progress=progress, lazy=True):
            for c in chunks:
                if shapes.get(c.key) != tuple(c.global_shape):
                    raise CaseError(f"{path}: {c.key} changed while it was read")
                _write_chunk(fd, len(header) + offsets[c.key], c)
                written[c.key] += _sharded._numel(c.shape)
            chunks = c = None  # not held while the next group is read
        _check_unchanged(path, listed, "dequantized_state_case began to read it")
        for key, shape in shapes.items():  # the file was made of zeros: a state not written again is lost
            if written[key] != _sharded._numel(shape):
                raise CaseError(f"{path}: {key} vanished or changed between the two passes (the first listed "
                                f"{list(shape)}: {_sharded._numel(shape)} elements; the second read {written[key]})")
    return shapes


def _write_chunk(fd, at, c) -> None:
    """A chunk's values at their place in the case file's tensor that starts at byte `at`: each run of the
    chunk (a contiguous range of the global tensor) a window of values at a time."""
    rs = _sharded.runs(c.global_shape, c.offsets, c.shape)
    windows = c.values.windows() if hasattr(c.values, "windows") else [(0, np.ascontiguousarray(
        c.values, dtype="<f4").reshape(-1))]
    i = 0
    for wstart, w in windows:  # the runs' local ranges and the windows both in the chunk's order
        wend = wstart + w.size
        while i < len(rs) and rs[i][2] < wend:
            start, length, local = rs[i]
            a, b = max(local, wstart), min(local + length, wend)
            if a < b:
                _files.write_all(fd, w[a - wstart:b - wstart], at + 4 * (start + a - local))
            if local + length > wend:
                break
            i += 1


def _refuse_out_on_input(source: str, out: str) -> None:
    """ValueError when out names what the call reads: the torch.save file itself (the same file however
    it is reached: a link to it, another name of it), or, for a DCP folder, the folder or anything inside
    it, existing or not (the folder's files are compared by where they are, links resolved)."""
    def same(a, b) -> bool:
        try:
            return os.path.samefile(a, b)
        except OSError:  # one of them does not exist (or cannot be reached): not the same file
            return False

    if not os.path.isdir(source):
        if same(out, source):
            raise ValueError(f"out: '{out}' is the checkpoint it reads ('{source}'); lowbit never writes over its "
                             f"input")
        return
    # the folder out would be written in, and each folder above it, links resolved
    at = os.path.realpath(out)
    while True:
        if same(at, source):
            raise ValueError(f"out: '{out}' lies inside the checkpoint folder it reads ('{source}'); lowbit never "
                             f"writes into its input")
        parent = os.path.dirname(at)
        if parent == at:
            return
        at = parent


def dequantized_state_case(state_dict, bnb_block_size: int = BNB_BLOCK_SIZE, weights_only=True, out=None,
                           progress=None, replace=True):
    """A case of every quantized state's dequantized float32 values (the engine's dequantizers), one
    tensor per state key in the state's shape: save it with lowbit.save_case and hand it to
    ``lowbit audit --state FILE`` (``--tensors`` names the keys that do not contain exp_avg, such as
    bitsandbytes' state.0.state1). A DCP folder is read one state (or one sharded tensor's chunks) at
    a time, its chunks placed in their state's global shape; in memory each state is what this process
    holds (a DTensor's local part).

    out: a path; the case is written there instead (as save_case writes it: the same bytes, whole or
    not at all) and the call returns {key: global shape}. ValueError when out is the torch.save file
    read (however reached) or lies in the DCP folder read. From a DCP folder it is streamed into the file
    a state at a time, so that memory holds one state's values, not the case (progress as
    state_signature's: two passes, the second counted from 1 again; a folder changed between them, or
    a state the second does not give again, is a CaseError and leaves no file). replace=False: an existing out (a
    file, a link, anything) is never replaced (FileExistsError naming it)."""
    if out is not None:
        out = _args.path("out", out)
        replace = _args.flag("replace", replace)
        if isinstance(state_dict, (str, os.PathLike)):
            _refuse_out_on_input(os.fspath(state_dict), out)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: a {type(progress).__name__}, not a callable(done, total)")
    if _is_folder(state_dict):
        bnb_block_size = _args.whole("bnb_block_size", bnb_block_size, 1, 1 << 31)
        weights_only = _args.flag("weights_only", weights_only)
        if out is not None:
            return _write_state_case(os.fspath(state_dict), out, bnb_block_size, weights_only, progress, replace)
        case = Case(metadata=_STATE_CASE_METADATA, origin="dequantized optimizer states")
        for chunks in _folder_value_chunks(state_dict, bnb_block_size, weights_only, progress=progress):
            for c in chunks:
                _place(case, c)
            chunks = c = None  # not held while the next group is read
        return case
    case = Case(metadata=_STATE_CASE_METADATA, origin="dequantized optimizer states")
    found, _, _ = _find(state_dict, bnb_block_size, weights_only)
    for s in found:
        _place(case, _chunk(s, False))
    if out is None:
        return case
    from . import case_bytes

    with _files.atomic_file(out, replace) as fd:
        _files.write_all(fd, case_bytes(case))
    return {key: tuple(a.shape) for key, a in case.items()}


def audit_state(state_dict, formats=None, block_sizes=(32, 64, 128, 256, 512, 1024, 2048, 4096), moments=None,
                bnb_block_size: int = BNB_BLOCK_SIZE, threads: int = 1, weights_only=True, progress=None):
    """The audit (lowbit audit's round-trip measures, docs/audit.md) of every quantized state's
    dequantized values, and of the unquantized moments given as moments={name: array}, through each
    format (names or globs; default: every audited format) at each block size. Returns (rows, warnings):
    one dict per tensor, format and block size with the engine's measures and bits_per_element (or
    "not_applicable" saying why; looks_already_quantized where the tensor comes back from that
    configuration unchanged), for lowbit.choose; and the engine's warning (lowbit audit's) for every
    tensor that looks already quantized, with the format and block the optimizer stored a state in.

    A DCP folder is read one state (or one sharded tensor's chunks) at a time; progress(parts read, parts
    to read) after each part, as state_signature's."""
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: a {type(progress).__name__}, not a callable(done, total)")
    threads = _args.whole("threads", threads, 1, 1024)
    if isinstance(formats, str):
        formats = [formats]
    formats = [_args.string("formats", f) for f in (formats or [])]
    if isinstance(block_sizes, (str, bytes)) or not hasattr(block_sizes, "__iter__"):
        raise TypeError(f"block_sizes: a {type(block_sizes).__name__}, not a list of block sizes")
    block_sizes = [_args.whole("block_sizes", b, 1, 1 << 31) for b in block_sizes]
    if moments is not None and not hasattr(moments, "items"):
        raise TypeError(f"moments: a {type(moments).__name__}, not a dict of name -> array")
    names = _core.audit_formats(formats)
    moment_sources = []
    for name, value in (moments or {}).items():
        a, dtype = _arrays.as_array(name, value)
        if dtype != "F32":
            raise TypeError(f"moments['{name}']: {dtype}; the audit reads float32 moments")
        moment_sources.append((name, "unquantized", np.ascontiguousarray(a).reshape(-1), None))

    def audited(key, source, x, stored_as):
        """(key, rows, warning or None) of one tensor."""
        if not np.isfinite(x).all():
            raise ValueError(f"{key}: the audit needs finite values")
        exact, warning = _core.exact_round_trips(x, key)
        if stored_as:  # a fact the values alone do not tell: what the optimizer stored
            stored = f"the optimizer stored it as {stored_as[0]} at block {stored_as[1]}"
            warning = f"{warning}; {stored}" if warning else (
                f"{key}: {stored}; the audit reads its dequantized values, not the moments, though no configuration "
                f"gives a quarter of its nonzero blocks back unchanged")
        exact_configs = {(fmt, int(block)) for fmt, block, _, _ in exact}
        negative = bool((x < 0).any())
        rows = []
        for fmt in names:
            for bs in block_sizes:
                row = {"tensor": key, "source": source, "format": fmt, "block_size": int(bs)}
                why = _core.audit_not_applicable(fmt, int(bs), negative)
                if why:
                    row["not_applicable"] = why
                else:
                    row.update(_core.audit(fmt, x, int(bs), threads))
                    row["looks_already_quantized"] = (fmt, int(bs)) in exact_configs
                rows.append(row)
        return key, rows, warning

    def state_sources():  # one state's values at a time (a DCP folder is read a state at a time)
        for s in _states_one_by_one(state_dict, bnb_block_size, weights_only, progress):
            values = _values.Values(s.case, _sharded._numel(s.shape)).whole()
            key = f"{s.key}@{list(s.offsets)}" if s.placements == ("DCP chunk",) else s.key  # a chunk the layout cut
            yield (s.key, s.offsets), (key, f"dequantized {s.format} state", values,
                                       (s.format, int(s.case.params["block_size"])))
            del s, values  # neither held while the next state is read

    audited_states = []
    for order, source in state_sources():
        audited_states.append((order, audited(*source)))
        del source  # its values are not held while the next state is read
    results = [r for _, r in sorted(audited_states, key=lambda r: r[0])]
    results += [audited(*source) for source in moment_sources]
    return [row for _, rs, _ in results for row in rs], [w for _, _, w in results if w]


def choose(rows, budget: str) -> list:
    """The fewest bits per element within an error budget ("rel_l2=0.01"; mean_abs, mean_rel, rel_l2,
    max_abs at most, sqnr_db at least), as lowbit audit --budget chooses (the engine's audit::choose): one
    dict per tensor of the rows (audit_state's), then one for all of them together (input None: one
    configuration for every tensor, its bits the tensors' stored bits over their elements, its error the
    worst). Each names format, block_size, bits_per_element and the budget's measure, or None for all
    three when no configuration meets the budget; text is the CLI's line. ValueError on a bad budget."""
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows: a {type(rows).__name__}, not audit_state's list of rows")
    rows = list(rows)
    for r in rows:
        if not isinstance(r, dict):
            raise TypeError(f"rows: a {type(r).__name__} among them, not audit_state's row dict")
    return _core.choose(rows, _args.string("budget", budget))


def _plain_part(t):
    """(dtype, local shape, sha256 of the element bytes, global shape, offsets) of a plain tensor or of
    a plain DTensor's local part."""
    shape, offsets = None, None
    if type(t).__name__ == "DTensor" and type(t).__module__.startswith("torch.distributed"):
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

        _, offsets = compute_local_shape_and_global_offset(t.shape, t.device_mesh, t.placements)
        shape, t = tuple(int(e) for e in t.shape), _local_part(t)
    a, dtype = _arrays.as_array("tensor", t)
    digest = _core.sha256(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    local = tuple(int(e) for e in a.shape)
    offsets = (0,) * len(local) if offsets is None else tuple(int(o) for o in offsets)
    return dtype, local, digest, shape or local, offsets


def tensor_signature(t, group=None) -> str:
    """A hex digest of any tensor an optimizer's state_dict holds: a torchao state (OptimState8bit, 4bit,
    Fp8) or a DTensor of one, its state_signature's digest (under the key "tensor"); a plain tensor (a
    DTensor's local part, a bitsandbytes state1, a step), the sha256 of its dtype, shape and element
    bytes in C order. With a process group (every rank calls it), a DTensor's parts are combined into
    the global tensor's digest that every rank returns; without one, this rank's part is signed."""
    inner = _local_part(t) if type(t).__name__ == "DTensor" and type(t).__module__.startswith("torch.distributed") else t
    if _is_torchao_state(inner):
        return state_signature({"tensor": t}, group=group).digest
    if group is None:
        dtype, local, digest, _, _ = _plain_part(t)
        return _sharded.sha(f"{_sharded.VERSION} tensor\n{dtype} {list(local)} {digest}")
    parts = _collective(group, lambda: _plain_part(t))
    unique = {}
    for dtype, local, digest, shape, offsets in parts:
        if unique.setdefault((offsets, local), (dtype, digest, shape)) != (dtype, digest, shape):
            raise ValueError(f"tensor: the chunk at offsets {list(offsets)} of shape {list(local)} is held twice with "
                             f"different contents (a replicated placement whose replicas disagree)")
    shapes = {s for _, _, s in unique.values()}
    if len(shapes) != 1:
        raise ValueError(f"tensor: its chunks disagree on its shape ({sorted(map(list, shapes))})")
    shape = shapes.pop()
    _sharded.check_tiling("tensor", shape, [{"offsets": list(o), "shape": list(e)} for o, e in unique])
    lines = [f"{_sharded.VERSION} tensor {list(shape)}"] + [
        f"{d} offsets {list(o)} shape {list(e)} {h}" for (o, e), (d, h, _) in sorted(unique.items())]
    return _sharded.sha("\n".join(lines))


def optimizer_signature(optimizer, group=None) -> StateSignature:
    """state_signature of an optimizer's state_dict() (torchao's AdamW8bit / 4bit / Fp8, bitsandbytes'
    8-bit optimizers), with the same group argument: in a torchrun job, every rank returns the same
    signature of the global states."""
    if not hasattr(optimizer, "state_dict"):
        raise TypeError(f"optimizer: a {type(optimizer).__name__}, not an optimizer (no state_dict())")
    return state_signature(optimizer.state_dict(), group=group)
