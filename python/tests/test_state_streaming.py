"""Issue 27 item 4: a DCP folder's states read one at a time. quantized_states of a folder is a lazy
sequence (a first pass checks the folder and lists its states; each state is read again, alone, when it
is used), dequantized_state_case(out=...) streams the case into the file a state at a time (its bytes held
to the engine's serializer, lowbit.case_bytes, on the same values), audit_state tells its progress. The
folders are those the 2-rank torchrun job saved (conftest.py's job): joined, chunked and mixed states."""
import os

import numpy as np
import pytest

import lowbit
from lowbit import _dcp

pytest.importorskip("torch")
pytest.importorskip("torchao")

OPTIMIZERS = ["AdamW8bit", "AdamW4bit", "AdamWFp8"]
ORDER = [("state.0.exp_avg", (0, 0)), ("state.0.exp_avg_sq", (0, 0)), ("state.2.exp_avg", (0, 0)),
         ("state.2.exp_avg_sq", (0, 0)), ("state.4.exp_avg", (0, 0)), ("state.4.exp_avg_sq", (0, 0))]


def counting_reads(monkeypatch):
    """The items each Folder.read call reads, as (fqn, chunk offset) lists."""
    reads, original = [], _dcp.Folder.read

    def read(self, items):
        reads.append([(it.fqn, it.chunk_offset) for it in items])
        return original(self, items)

    monkeypatch.setattr(_dcp.Folder, "read", read)
    return reads


def test_quantized_states_of_a_folder_is_a_lazy_sequence_that_reads_one_state_when_used(job, monkeypatch):
    reads = counting_reads(monkeypatch)
    states = lowbit.quantized_states(job / "AdamW8bit")
    listed = sum(len(r) for r in reads)
    assert isinstance(states, lowbit.QuantizedStates) and len(states) == 6 and states
    assert "lazy" in repr(states)
    del reads[:]
    first = states[0]  # the joined state.0.exp_avg: its two chunks, and nothing else, are read
    assert (first.key, first.placements) == ("state.0.exp_avg", ("joined from 2 DCP chunks",))
    assert reads == [[("state.0.exp_avg", (0, 0))], [("state.0.exp_avg", (128, 0))]]
    del reads[:]
    last = states[-1]  # the mixed state's quantized chunk: its tensor's two chunks
    assert (last.key, last.offsets, last.placements) == ("state.4.exp_avg_sq", (0, 0), ("DCP chunk",))
    assert sorted(reads) == [[("state.4.exp_avg_sq", (0, 0))], [("state.4.exp_avg_sq", (64, 0))]]
    del reads[:]
    seen = [(s.key, tuple(s.offsets)) for s in states]
    # iteration reads each state's chunks once, one state after the other (not the steps, not the biases'
    # float32 states, which the listing read)
    assert [r for rs in reads for r in rs] == [(key, offsets) for key, _ in ORDER for offsets in ((0, 0), (128, 0) if
                                               key.startswith("state.0") else (32, 0) if key.startswith("state.2")
                                               else (64, 0))]
    assert len(reads) == 12 < listed
    assert seen == ORDER == [(s.key, tuple(s.offsets)) for s in states[0:6]]
    with pytest.raises(IndexError):
        states[6]
    assert len(lowbit.quantized_states({})) == 0 and not lowbit.quantized_states({})


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_the_state_case_streamed_into_a_file_has_the_engines_bytes(job, tmp_path, name):
    folder = job / name
    expected = lowbit.dequantized_state_case(folder)
    target = tmp_path / "states.safetensors"
    progress = []
    shapes = lowbit.dequantized_state_case(folder, out=target, progress=lambda d, t: progress.append((d, t)))
    assert target.read_bytes() == lowbit.case_bytes(expected)
    assert shapes == {key: value.shape for key, value in expected.items()} and len(shapes) == 6
    n = progress[0][1]  # two passes: the listing, then the values
    assert progress == [(i, n) for i in range(1, n + 1)] * 2
    with pytest.raises(FileExistsError, match="it exists"):
        lowbit.dequantized_state_case(folder, out=target, replace=False)
    os.unlink(target)
    os.symlink(tmp_path / "elsewhere", target)
    with pytest.raises(OSError, match="symbolic link"):
        lowbit.dequantized_state_case(folder, out=target)
    assert not (tmp_path / "elsewhere").exists() and sorted(os.listdir(tmp_path)) == ["states.safetensors"]


def test_the_audit_of_a_folder_tells_its_progress(job):
    progress = []
    rows, _ = lowbit.audit_state(job / "AdamW8bit", formats=["torchao.fp8"], block_sizes=[256],
                                 progress=lambda d, t: progress.append((d, t)))
    n = progress[0][1]
    assert progress == [(i, n) for i in range(1, n + 1)] and len(rows) == 6
    with pytest.raises(TypeError, match="progress: a str"):
        lowbit.audit_state(job / "AdamW8bit", progress="yes")
    assert np.isfinite([r["rel_l2"] for r in rows]).all()


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_states_dequantized_a_window_at_a_time_sign_audit_and_write_the_same(job, tmp_path, monkeypatch, name):
    # windows of 3 x 256 elements, segments of 1 000: segments and pieces cut across windows, blocks and runs
    from lowbit import _sharded, _values

    monkeypatch.setattr(_sharded, "SEGMENT", 1000)
    folder = job / name
    whole_sig, whole_case = lowbit.state_signature(folder), lowbit.case_bytes(lowbit.dequantized_state_case(folder))
    whole_rows, _ = lowbit.audit_state(folder, formats=["torchao.fp8"], block_sizes=[256])
    monkeypatch.setattr(_values, "WINDOW", 768)
    assert lowbit.state_signature(folder) == whole_sig
    lowbit.dequantized_state_case(folder, out=tmp_path / "windows.safetensors")
    assert (tmp_path / "windows.safetensors").read_bytes() == whole_case
    assert lowbit.audit_state(folder, formats=["torchao.fp8"], block_sizes=[256])[0] == whole_rows
