"""Quantized optimizer states as users have them: torchao AdamW8bit / AdamW4bit / AdamWFp8 and
bitsandbytes' thirteen 8-bit optimizers' state_dict()s (_bnb_states.py), in memory, in torch.save
files and in torch distributed-checkpoint (DCP) folders. Each quantized state becomes a case of its registered format (codes, scale, qmap) so
that the engine's dequantizer, signature and audit apply; nothing here computes a value itself.

State keys are dotted paths ("state.0.exp_avg", as DCP names them), the same for an in-memory
state_dict, a torch.save file and a DCP folder; bitsandbytes' FSDP wrapper key
(__bnb_optimizer_quant_state__) is dropped from them.
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field

import numpy as np

from . import _args, _arrays, _core, _dcp
from . import _bnb_states as _bnb_states_of
from ._case import Case
from ._core import CaseError

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
    cls = type(s).__name__
    shape = tuple(int(e) for e in s.shape)
    n = int(np.prod(shape)) if shape else 1
    block_size = _attr(s, "block_size", key)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise CaseError(f"{key}: a {cls} of block_size {_dcp._short(block_size)}")
    codes, codes_dtype = _numpy(key + ".codes", _attr(s, "codes", key))
    scale, scale_dtype = _numpy(key + ".scale", _attr(s, "scale", key))
    case = Case(origin=key)
    stored = {"codes": (codes, codes_dtype), "scale": (scale, scale_dtype)}
    if cls == "OptimStateFp8":
        fmt = "torchao.fp8"
        _flat(case, "codes", codes, codes_dtype)
    else:
        qmap, qmap_dtype = _numpy(key + ".qmap", _attr(s, "qmap", key))
        stored["qmap"] = (qmap, qmap_dtype)
        bits = 8 if cls == "OptimState8bit" else 4
        signed = _attr(s, "signed", key)
        if not isinstance(signed, bool):
            raise CaseError(f"{key}: a {cls} whose signed is {_dcp._short(signed)}")
        fmt = f"torchao.codebook{bits}.{'signed' if signed else 'unsigned'}"
        if bits == 4:  # stored two a byte, first element high: the dequantizer reads one code an element
            packed = np.ascontiguousarray(codes).reshape(-1)
            _flat(case, "codes", _core.unpack_nibbles(packed, n), "U8")
            _flat(case, "codes_packed", packed, codes_dtype)
        else:
            _flat(case, "codes", codes, codes_dtype)
        _flat(case, "qmap", qmap, qmap_dtype)
    _flat(case, "scale", scale, scale_dtype)
    case.metadata = {"format": fmt, "params": json.dumps({"block_size": block_size}),
                     "source": f"torchao {cls} ({key})"}
    return QuantizedState(key, "torchao", fmt, shape, case, stored)


def _bnb_states(key: str, d: dict, block_size: int) -> list:
    """bitsandbytes' 8-bit states of one parameter (all thirteen classes: _bnb_states.py)."""
    return [QuantizedState(k, "bitsandbytes", fmt, shape, case, stored)
            for k, fmt, shape, case, stored in _bnb_states_of.bnb_states(key, d, block_size)]


def _is_torchao_state(obj) -> bool:
    return type(obj).__name__ in _TORCHAO_CLASSES and type(obj).__module__.startswith("torchao")


def _sharded_torchao_state(key: str, d) -> QuantizedState:
    """A torchao state inside a DTensor (FSDP2's fully_shard): the local part is the state this rank
    quantized, recorded with the DTensor's global shape, placements and this rank's offsets (DCP's own
    computation of them, torch.distributed.tensor._utils, torch 2.15)."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    s = _torchao_state(key, d.to_local())
    local_shape, offsets = compute_local_shape_and_global_offset(d.shape, d.device_mesh, d.placements)
    if tuple(local_shape) != s.shape:
        raise ValueError(f"{key}: the DTensor's local shape {list(local_shape)} is not its torchao state's "
                         f"{list(s.shape)}")
    s.global_shape = tuple(int(e) for e in d.shape)
    s.placements = tuple(repr(p) for p in d.placements)
    s.offsets = tuple(int(o) for o in offsets)
    return s


def _walk(obj, key, found, plain, block_size):
    if _is_torchao_state(obj):
        found.append(_torchao_state(key, obj))
        return
    if type(obj).__name__ == "DTensor" and type(obj).__module__.startswith("torch.distributed"):
        if _is_torchao_state(obj.to_local()):
            found.append(_sharded_torchao_state(key, obj))
        else:
            plain.append(key)
        return
    if isinstance(obj, dict):
        inner = dict(obj)
        if isinstance(inner.get(_BNB_WRAPPER), dict):  # bitsandbytes' FSDP-friendly wrapping of its quant state
            inner.update(inner.pop(_BNB_WRAPPER))
        if "state1" in inner and any(k in inner for k in ("absmax1", "qmap1")):
            found.extend(_bnb_states(key, inner, block_size))
            inner = {k: v for k, v in inner.items() if not any(k.startswith(p) for p in ("state1", "state2", "absmax",
                                                                                        "qmap"))}
        for k, v in inner.items():
            _walk(v, f"{key}.{k}" if key else str(k), found, plain, block_size)
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _walk(v, f"{key}.{i}" if key else str(i), found, plain, block_size)
        return
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        plain.append(key)


def _torch_load(source, weights_only=True, origin=None):
    """torch.load of a file or of one DCP item's bytes; whatever a hostile file makes it raise comes
    back as a CaseError naming the file (with weights_only=True torch's own unpickler admits only
    tensors, plain containers and the classes allowlisted, torchao's states among them)."""
    import torch

    try:  # torchao's state classes are allowlisted for weights_only loading when torchao is imported
        import torchao.optim  # noqa: F401
    except ImportError:
        pass
    try:
        return torch.load(source, map_location="cpu", weights_only=weights_only)
    except Exception as e:
        raise CaseError(f"{origin or source}: torch.load failed ({type(e).__name__}: {str(e)[:300]})") from None


MAX_KEY_DEPTH = 64  # dotted components of one DCP item name


def _read_dcp(path, weights_only=True) -> dict:
    """A torch distributed checkpoint folder, item by item as DCP stored it: a torchao state object is
    read back whole (its codes), which loading into a plain tensor template would dequantize. Single-
    process checkpoints (one chunk per tensor), as DCP saves without a process group. The metadata
    and the item files are read as hostile input (_dcp.py: no code from the pickle runs, no file
    outside the folder is opened); each item's bytes go through torch.load(weights_only=...)."""
    with _dcp.Folder(path) as folder:
        items = folder.items(weights_only)
        seen = set()
        for it in items:
            if it.fqn in seen:
                raise CaseError(f"{path}: {it.fqn} is stored in several chunks (a sharded save); lowbit reads "
                                f"single-process checkpoints")
            seen.add(it.fqn)
            if it.fqn.count(".") >= MAX_KEY_DEPTH:
                raise CaseError(f"{path}: item {_dcp._short(it.fqn)} has more than {MAX_KEY_DEPTH} dotted parts")
        stored = folder.read(items)
    flat = {it.fqn: _torch_load(io.BytesIO(data), weights_only, f"{path}: item {_dcp._short(it.fqn)}") for it, data in stored}
    # nested again by the dots of DCP's names, so that a state's parts (bitsandbytes' state1, absmax1,
    # qmap1) meet in one dict and keys read as in memory
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


def quantized_states(state_dict, bnb_block_size: int = BNB_BLOCK_SIZE, weights_only=True) -> list:
    """Every quantized state in a state dict (or a torch.save file, or a DCP folder), sorted by key, as
    QuantizedState: torchao OptimState8bit / OptimState4bit / OptimStateFp8 and bitsandbytes 8-bit
    state1 / state2 (with their absmax and qmap), each as a case of its registered format."""
    bnb_block_size = _args.whole("bnb_block_size", bnb_block_size, 1, 1 << 31)
    weights_only = _args.flag("weights_only", weights_only)
    found, plain = [], []
    state = load_state(state_dict, weights_only)
    try:
        _walk(state, "", found, plain, bnb_block_size)
    except TypeError as e:  # an object of a file where a tensor belongs: the file's fault, not the caller's
        if state is state_dict:
            raise
        raise CaseError(f"{os.fspath(state_dict)}: {e}") from None
    return sorted(found, key=lambda s: s.key)


@dataclass
class StateSignature:
    """state_signature's result. ``digest`` covers everything below; compare two signatures with ==.

    - ``stored``: sha256 over every quantized state's key, format, params and the sha256 of each stored
      tensor's element bytes in C order (codes, scales, tables as stored: a 4-bit state's packed codes),
      whatever the storage's strides, device or container;
    - ``dequantized``: sha256 over every state's key and the signature of its dequantized values
      (``lowbit inspect``'s: the engine's dequantized_signature);
    - ``states``: per state key, its format, the sha256 of each stored tensor and its dequantized
      signature, to see which state differs.
    """
    digest: str
    stored: str
    dequantized: str
    states: dict

    def __str__(self) -> str:
        return self.digest

    def __eq__(self, other) -> bool:
        return isinstance(other, StateSignature) and self.digest == other.digest


def _hex(text: str) -> str:
    return _core.sha256(np.frombuffer(text.encode(), dtype=np.uint8))


def state_signature(state_dict, bnb_block_size: int = BNB_BLOCK_SIZE, weights_only=True) -> StateSignature:
    """The signature of every quantized state in a state dict (or a torch.save file, or a DCP folder):
    equal before and after a save/load round trip (torch.save, DCP), different when one code, scale or
    table entry differs. ValueError when there is no quantized state."""
    from . import dequantize

    states = quantized_states(state_dict, bnb_block_size, weights_only)
    if not states:
        raise ValueError("no quantized optimizer state found (torchao OptimState8bit/4bit/Fp8 or bitsandbytes "
                         "state1/state2 with absmax and qmap)")
    stored_lines, dequant_lines, per_state = ["lowbit-state-signature 1 stored"], ["lowbit-state-signature 1 dequantized"], {}
    for s in states:
        tensors = {}
        for name, (array, dtype) in sorted(s.stored.items()):
            flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            tensors[name] = f"{dtype} {list(array.shape)} {_core.sha256(flat)}"
        dq = _core.dequantized_signature(dequantize(s.case))
        per_state[s.key] = {"format": s.format, "params": s.case.params, "tensors": tensors, "dequantized": dq}
        stored_lines.append(f"{s.key} {s.format} {json.dumps(s.case.params, sort_keys=True)} shape {list(s.shape)}")
        stored_lines += [f"  {name} {text}" for name, text in tensors.items()]
        dequant_lines.append(f"{s.key} {dq}")
    stored, dequantized = _hex("\n".join(stored_lines)), _hex("\n".join(dequant_lines))
    return StateSignature(_hex(f"{stored}\n{dequantized}"), stored, dequantized, per_state)


def dequantized_state_case(state_dict, bnb_block_size: int = BNB_BLOCK_SIZE, weights_only=True) -> Case:
    """A case of every quantized state's dequantized float32 values (the engine's dequantizers), one
    tensor per state key in the state's shape: save it with lowbit.save_case and hand it to
    ``lowbit audit --state FILE`` (``--tensors`` names the keys that do not contain exp_avg, such as
    bitsandbytes' state.0.state1)."""
    from . import dequantize

    out = Case(metadata={"source": "lowbit.dequantized_state_case"}, origin="dequantized optimizer states")
    for s in quantized_states(state_dict, bnb_block_size, weights_only):
        out[s.key] = np.asarray(dequantize(s.case), dtype=np.float32).reshape(s.shape)
        out.dtypes[s.key] = "F32"
    return out


def audit_state(state_dict, formats=None, block_sizes=(32, 64, 128, 256, 512, 1024, 2048, 4096), moments=None,
                bnb_block_size: int = BNB_BLOCK_SIZE, threads: int = 1, weights_only=True):
    """The audit (lowbit audit's round-trip measures, docs/audit.md) of every quantized state's
    dequantized values, and of the unquantized moments given as moments={name: array}, through each
    format (names or globs; default: every audited format) at each block size. Returns (rows, warnings):
    one dict per tensor, format and block size with the engine's measures and bits_per_element (or
    "not_applicable" saying why; looks_already_quantized where the tensor comes back from that
    configuration unchanged), for lowbit.choose; and the engine's warning (lowbit audit's) for every
    tensor that looks already quantized, with the format and block the optimizer stored a state in."""
    from . import dequantize

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
    sources = []  # (key, source, values, the optimizer's own format and block or None)
    for s in quantized_states(state_dict, bnb_block_size, weights_only):
        values = np.asarray(dequantize(s.case), dtype=np.float32)
        sources.append((s.key, f"dequantized {s.format} state", values, (s.format, int(s.case.params["block_size"]))))
    for name, value in (moments or {}).items():
        a, dtype = _arrays.as_array(name, value)
        if dtype != "F32":
            raise TypeError(f"moments['{name}']: {dtype}; the audit reads float32 moments")
        sources.append((name, "unquantized", np.ascontiguousarray(a).reshape(-1), None))
    rows, warnings = [], []
    for key, source, x, stored_as in sources:
        if not np.isfinite(x).all():
            raise ValueError(f"{key}: the audit needs finite values")
        exact, warning = _core.exact_round_trips(x, key)
        if stored_as:  # a fact the values alone do not tell: what the optimizer stored
            stored = f"the optimizer stored it as {stored_as[0]} at block {stored_as[1]}"
            warning = f"{warning}; {stored}" if warning else (
                f"{key}: {stored}; the audit reads its dequantized values, not the moments, though no configuration "
                f"gives a quarter of its nonzero blocks back unchanged")
        if warning:
            warnings.append(warning)
        exact_configs = {(fmt, int(block)) for fmt, block, _, _ in exact}
        negative = bool((x < 0).any())
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
    return rows, warnings


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
