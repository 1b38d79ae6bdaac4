"""The dequantized half of a sharded signature (lowbit/_sharded.py) is a function of the global values
alone: the same for any cut of the tensor into chunks, in any order, equal to hashlib's sha256 of each
segment of the global values in C order (the independent source); and a cut that misses, overlaps or
disagrees is a ValueError naming the state and the chunk. No torch needed: the chunks are NumPy's."""
import hashlib
import itertools
import random

import numpy as np
import pytest

from lowbit import _sharded


@pytest.fixture(autouse=True)
def small_segments(monkeypatch):
    monkeypatch.setattr(_sharded, "SEGMENT", 16)  # pieces on every cut, with a few hundred elements


def expected(values):
    flat = np.ascontiguousarray(values, dtype="<f4").reshape(-1)
    segments = [hashlib.sha256(flat[i:i + 16].tobytes()).hexdigest() for i in range(0, flat.size, 16)]
    return hashlib.sha256("\n".join(segments).encode()).hexdigest()


def chunk(values, offsets, shape):
    box = tuple(slice(o, o + e) for o, e in zip(offsets, shape))
    part = values[box]
    return _sharded.Chunk("state.0.exp_avg", values.shape, tuple(offsets), tuple(shape), "torchao.fp8", {},
                          {"codes": f"sha {hashlib.sha256(part.tobytes()).hexdigest()}"}, part.reshape(-1))


def cuts(extent, pieces, rng):
    edges = sorted(rng.sample(range(1, extent), pieces - 1)) if pieces > 1 else []
    return list(zip([0] + edges, [b - a for a, b in zip([0] + edges, edges + [extent])]))


def signature(chunks, shuffle=None):
    parts = [_sharded.contribution(c) for c in chunks]
    if shuffle:
        shuffle.shuffle(parts)
    return _sharded.combine(parts)


@pytest.mark.parametrize("shape", [(37, 11), (5, 7, 9), (300,), (1, 1000)])
def test_any_cut_gives_the_segments_of_the_global_values(shape):
    rng = random.Random(sum(shape))
    values = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    whole = signature([chunk(values, (0,) * len(shape), shape)])
    assert whole[3]["state.0.exp_avg"]["dequantized"] == expected(values)
    for _ in range(5):  # boxes of a random grid (rows, columns, blocks of both), in a random order
        grid = [cuts(e, rng.randint(1, min(e, 4)), rng) for e in shape]
        chunks = [chunk(values, [o for o, _ in box], [e for _, e in box]) for box in itertools.product(*grid)]
        cut = signature(chunks, rng)
        assert cut[1] == whole[1], grid  # the dequantized half
        assert (cut[0] == whole[0]) == (len(chunks) == 1)  # the stored half names the chunks


def test_a_changed_value_changes_its_state_only():
    values = np.arange(600, dtype=np.float32).reshape(20, 30)
    other = values.copy()
    other[7, 3] = np.nextafter(other[7, 3], np.float32(1e9))
    halves = [[(0, 0), (10, 30)], [(10, 0), (10, 30)]]
    a = signature([chunk(values, o, s) for o, s in halves])
    b = signature([chunk(other, o, s) for o, s in halves])
    assert a[1] != b[1] and b[3]["state.0.exp_avg"]["dequantized"] == expected(other)


@pytest.mark.parametrize("boxes,message", [
    ([((0, 0), (10, 30))], r"state.0.exp_avg: its chunks cover 300 of its 600 elements .* a chunk is missing"),
    ([((0, 0), (12, 30)), ((10, 0), (10, 30))], r"state.0.exp_avg: chunk at offsets \[0, 0\] of shape \[12, 30\] "
                                                r"overlaps the chunk at offsets \[10, 0\]"),
    ([((0, 0), (10, 30)), ((10, 0), (11, 30))], r"state.0.exp_avg: chunk at offsets \[10, 0\] of shape \[11, 30\] "
                                                r"does not lie inside the state's shape \[20, 30\]"),
])
def test_a_bad_cut_is_a_value_error_naming_the_chunk(boxes, message):
    values = np.zeros((21, 30), dtype=np.float32)
    chunks = [chunk(values, o, s) for o, s in boxes]
    for c in chunks:
        c.global_shape = (20, 30)
    with pytest.raises(ValueError, match=message):
        signature(chunks)


def test_replicas_count_once_and_must_agree():
    values = np.arange(64, dtype=np.float32).reshape(8, 8)
    one = signature([chunk(values, (0, 0), (8, 8))])
    assert signature([chunk(values, (0, 0), (8, 8)), chunk(values, (0, 0), (8, 8))]) == one
    other = values + 1
    with pytest.raises(ValueError, match=r"state.0.exp_avg: the chunk at offsets \[0, 0\] of shape \[8, 8\] is held "
                                         r"twice with different contents"):
        signature([chunk(values, (0, 0), (8, 8)), chunk(other, (0, 0), (8, 8))])
