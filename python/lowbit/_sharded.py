"""The signature of quantized states held in chunks: the parts of a sharded tensor that the ranks of a
job hold (FSDP2's DTensors) or that a multi-rank DCP folder stores. It has two halves (docs/python.md,
"Sharded states"):

- ``stored``: every chunk's stored tensors (codes, scales, tables) with its place in the global tensor:
  it depends on the layout (how many ranks, where the cuts are), as the bytes do;
- ``dequantized``: every state's dequantized values in global element order, cut into segments of
  SEGMENT elements of the global flattened tensor whatever the chunks are, each segment hashed and the
  segments' hashes hashed: it depends on the values alone, so it is the same for 1, 2 or N ranks
  wherever the quantizer's blocks are the same.

A chunk contributes the hashes of the segments that lie wholly inside it and the bytes of the pieces it
holds of the others; whoever combines the chunks (every rank after a collective, or the folder's
reader) joins the pieces. Nothing depends on the order the chunks arrive in: they are sorted first.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from . import _core

SEGMENT = 1 << 16  # elements of the global flattened tensor per hashed segment
VERSION = "lowbit-state-signature 2"


def sha(data) -> str:
    if isinstance(data, str):
        data = data.encode()
    return _core.sha256(np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data)


def _numel(shape) -> int:
    n = 1
    for e in shape:
        n *= int(e)
    return n


@dataclass
class Chunk:
    """One chunk of a state: where it sits in the global tensor, what it stores and its values (float32,
    the chunk's own C order). ``kind`` is the registered format, or "plain" for an unquantized float
    part of a state that other chunks hold quantized (torchao leaves a rank's part unquantized when it
    has fewer than 4096 elements or not whole blocks)."""
    key: str
    global_shape: tuple
    offsets: tuple
    shape: tuple
    kind: str
    params: dict
    tensors: dict  # stored name -> "DTYPE [shape] sha256"
    values: np.ndarray = field(repr=False)

    def where(self) -> str:
        return f"{self.key}: chunk at offsets {list(self.offsets)} of shape {list(self.shape)}"


def runs(global_shape, offsets, shape):
    """(global flat start, length, local flat start) of each contiguous run of a box in C order."""
    nd = len(global_shape)
    if nd == 0:
        return [(0, 1, 0)]
    if _numel(shape) == 0:
        return []
    k = nd - 1
    while k > 0 and shape[k] == global_shape[k]:
        k -= 1
    strides = [_numel(global_shape[d + 1:]) for d in range(nd)]
    length = int(shape[k]) * strides[k]
    base = int(offsets[k]) * strides[k]
    if k == 0:
        return [(base, length, 0)]
    idx = np.indices(tuple(int(e) for e in shape[:k])).reshape(k, -1).astype(np.int64)
    starts = base + sum((int(offsets[d]) + idx[d]) * strides[d] for d in range(k))
    return [(int(s), length, i * length) for i, s in enumerate(starts)]


def _reader(values):
    """read(a, b): the chunk's values a..b in its C order, from an array or from a lazily dequantized
    state (lowbit/_values.py: a window of whole blocks at a time)."""
    if hasattr(values, "read"):
        return values.read
    flat = np.ascontiguousarray(values, dtype="<f4").reshape(-1)
    return lambda a, b: flat[a:b]


def parts(chunk: Chunk, values_hash=None):
    """What a chunk contributes to its state's segments: {segment: sha256} for the segments wholly inside
    it, and [(global start, float32 bytes)] for its pieces of the others. The values are read once, in
    the chunk's order (its runs and their segments in order), and fed to values_hash (a hashlib object)."""
    n = _numel(chunk.global_shape)
    read = _reader(chunk.values)
    full, pieces = {}, []
    for start, length, local in runs(chunk.global_shape, chunk.offsets, chunk.shape):
        end = start + length
        s = start // SEGMENT
        while s * SEGMENT < end:
            seg_start, seg_end = s * SEGMENT, min((s + 1) * SEGMENT, n)
            lo, hi = max(seg_start, start), min(seg_end, end)
            piece = read(local + lo - start, local + hi - start)
            if values_hash is not None:
                values_hash.update(piece)
            if lo == seg_start and hi == seg_end:
                full[s] = sha(piece.view(np.uint8))
            else:
                pieces.append((lo, piece.tobytes()))
            s += 1
    return full, pieces


def contribution(chunk: Chunk) -> dict:
    """A chunk as it travels between ranks (picklable, no arrays of the whole chunk)."""
    values = hashlib.sha256()  # the values' sha256, as sha() gives it of their bytes at once
    full, pieces = parts(chunk, values)
    return {"key": chunk.key, "global_shape": list(chunk.global_shape), "offsets": list(chunk.offsets),
            "shape": list(chunk.shape), "kind": chunk.kind, "params": chunk.params, "tensors": chunk.tensors,
            "values": values.hexdigest(), "full": full, "pieces": pieces}


def _box(c):
    return f"chunk at offsets {c['offsets']} of shape {c['shape']}"


def check_tiling(key, shape, chunks):
    """The chunks of one state cover its global shape exactly once: none outside it, no two overlapping,
    none missing. ValueError naming the state and the chunk."""
    nd = len(shape)
    for c in chunks:
        if len(c["offsets"]) != nd or len(c["shape"]) != nd or any(
                o < 0 or e < 0 or o + e > g for o, e, g in zip(c["offsets"], c["shape"], shape)):
            raise ValueError(f"{key}: {_box(c)} does not lie inside the state's shape {list(shape)}")
    boxes = [c for c in chunks if _numel(c["shape"]) > 0]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if all(ao < bo + be and bo < ao + ae for ao, ae, bo, be in zip(a["offsets"], a["shape"], b["offsets"],
                                                                           b["shape"])):
                raise ValueError(f"{key}: {_box(a)} overlaps the {_box(b)}")
    covered = sum(_numel(c["shape"]) for c in boxes)
    if covered != _numel(shape):
        raise ValueError(f"{key}: its chunks cover {covered} of its {_numel(shape)} elements (shape {list(shape)}): "
                         f"a chunk is missing")


def _state_values(key, n, chunks):
    """sha256 of the state's segment hashes in order, every segment whole (pieces joined)."""
    full, pieces = {}, {}
    for c in chunks:
        full.update(c["full"])
        for start, data in c["pieces"]:
            pieces.setdefault(start // SEGMENT, []).append((start, data))
    hashes = []
    for s in range(-(-n // SEGMENT)):
        if s in full:
            hashes.append(full[s])
            continue
        joined, at = [], s * SEGMENT
        for start, data in sorted(pieces.get(s, [])):
            if start != at:
                raise ValueError(f"{key}: elements {at}..{start} of segment {s} are held by no chunk")
            joined.append(data)
            at += len(data) // 4
        if at != min((s + 1) * SEGMENT, n):
            raise ValueError(f"{key}: segment {s} ends at element {at}, short of its end")
        hashes.append(sha(b"".join(joined)))
    return sha("\n".join(hashes))


def combine(contributions):
    """(stored, dequantized, digest, states) from every chunk's contribution, in any order. Chunks of the
    same place held by several ranks (a replicated placement) count once, and must agree."""
    by_key = {}
    for c in contributions:
        by_key.setdefault(c["key"], []).append(c)
    stored_lines, dequant_lines, states = [f"{VERSION} stored"], [f"{VERSION} dequantized"], {}
    for key in sorted(by_key):
        unique = {}
        for c in by_key[key]:
            place = (tuple(c["offsets"]), tuple(c["shape"]))
            other = unique.setdefault(place, c)
            if other is not c and (other["kind"], other["tensors"], other["values"]) != (c["kind"], c["tensors"],
                                                                                         c["values"]):
                raise ValueError(f"{key}: the {_box(c)} is held twice with different contents (a replicated "
                                 f"placement whose replicas disagree)")
        chunks = [unique[p] for p in sorted(unique)]
        shapes = {tuple(c["global_shape"]) for c in chunks}
        if len(shapes) != 1:
            raise ValueError(f"{key}: its chunks disagree on the state's shape ({sorted(map(list, shapes))})")
        shape = shapes.pop()
        check_tiling(key, shape, chunks)
        values = _state_values(key, _numel(shape), chunks)
        kinds = sorted({c["kind"] for c in chunks})
        for c in chunks:
            stored_lines.append(f"{key} {c['kind']} {json.dumps(c['params'], sort_keys=True)} global {list(shape)} "
                                f"offsets {c['offsets']} shape {c['shape']}")
            stored_lines += [f"  {name} {text}" for name, text in sorted(c["tensors"].items())]
        dequant_lines.append(f"{key} {list(shape)} {values}")
        states[key] = {"format": kinds[0] if len(kinds) == 1 else kinds, "global_shape": shape,
                       "chunks": [{"offsets": tuple(c["offsets"]), "shape": tuple(c["shape"]), "format": c["kind"],
                                   "params": c["params"], "tensors": c["tensors"]} for c in chunks],
                       "dequantized": values}
    stored, dequantized = sha("\n".join(stored_lines)), sha("\n".join(dequant_lines))
    return stored, dequantized, sha(f"{stored}\n{dequantized}"), states
