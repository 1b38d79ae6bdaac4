"""Issue 27 item 2's measurements at 4 ranks, pinned (docs/python.md, "What torchao does to blocks when a
tensor is sharded"): one `torchrun --nproc-per-node 4` job (gloo, CPU; four_rank_job.py) trains a model
under FSDP2 with torchao's AdamW8bit, AdamW4bit and AdamWFp8 under row sharding, and AdamW8bit under
column sharding. The independent sources: torchao's own codes and dequantize of each rank's part, against
those of the same training in one process (every rank saw the same batches), and hashlib's sha256 of the
values in global order for the signature's dequantized half."""
import hashlib
import json

import numpy as np
import pytest

import lowbit

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from conftest import torchrun  # noqa: E402

OPTIMIZERS = ["AdamW8bit", "AdamW4bit", "AdamWFp8"]
KEYS = ["state.0.exp_avg", "state.0.exp_avg_sq", "state.2.exp_avg", "state.2.exp_avg_sq"]  # 256 x 64, 64 x 256
ROWS = {"state.0": 64, "state.2": 16}  # rows a rank holds under Shard(0)
COLUMNS = {"state.0": 16, "state.2": 64}  # columns a rank holds under Shard(1)


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    return torchrun(tmp_path_factory.mktemp("torchrun4"), 4, "four_rank_job.py")


def signatures(four, run):
    return [json.loads((four / f"{run}.rank{r}.json").read_text()) for r in range(4)]


def parts(four, run):
    return [torch.load(four / f"{run}.rank{r}.pt") for r in range(4)]


def one_process(mesh, name, monkeypatch):
    """The same training in this process (one rank), and torchao's own parts of it (whole states)."""
    import four_rank_job
    import torchao.optim

    monkeypatch.setattr(torch, "compile", lambda fn=None, **kw: fn)
    m = four_rank_job.model(mesh, 0)
    optimizer = getattr(torchao.optim, name)(m.parameters())
    four_rank_job.train([m], optimizer)
    return lowbit.optimizer_signature(optimizer, group=dist.group.WORLD), four_rank_job.local_parts(
        optimizer.state_dict())


def bits(t):
    return t.reshape(-1).view(torch.uint8 if t.element_size() == 1 else torch.int32)


def dequantized_hash(values):
    """The signature's dequantized half of one state (docs/python.md), from hashlib: sha256 of each
    65 536-element segment of the values in global C order, then of the segments' hashes."""
    flat = np.ascontiguousarray(values.numpy(), dtype="<f4").reshape(-1)
    segments = [hashlib.sha256(flat[i:i + 65536].tobytes()).hexdigest() for i in range(0, flat.size, 65536)]
    return hashlib.sha256("\n".join(segments).encode()).hexdigest()


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_row_sharding_at_four_ranks_is_bit_identical_to_one_process(four, name, one_rank_gloo, monkeypatch):
    sigs = signatures(four, name)
    assert all(s == sigs[0] for s in sigs) and sigs[0]["scope"] == "4 ranks"
    one, theirs = one_process(one_rank_gloo, name, monkeypatch)
    ranks = parts(four, name)
    for key in KEYS:
        rows = ROWS[key[:7]]
        assert [c[0] for c in sigs[0]["states"][key]["chunks"]] == [[r * rows, 0] for r in range(4)]
        assert [p[key][0] for p in ranks] == [[r * rows, 0] for r in range(4)]
        # torchao's own codes and values of the four parts, in rank order, are one process's, bit for bit
        codes, values = (torch.cat([bits(p[key][i]) for p in ranks]) for i in (1, 2))
        assert torch.equal(codes, bits(theirs[key][1])), key
        assert torch.equal(values, bits(theirs[key][2])), key
        assert sigs[0]["states"][key]["dequantized"] == one.states[key]["dequantized"] == dequantized_hash(
            theirs[key][2]), key
    assert sigs[0]["dequantized"] == one.dequantized and sigs[0]["stored"] != one.stored  # 4 chunks a state, not 1


def test_column_sharding_cuts_the_blocks_and_every_value_of_the_weights_first_moment_differs(four, one_rank_gloo,
                                                                                           monkeypatch):
    sigs = signatures(four, "AdamW8bit.columns")
    assert all(s == sigs[0] for s in sigs)
    one, theirs = one_process(one_rank_gloo, "AdamW8bit", monkeypatch)
    ranks = parts(four, "AdamW8bit.columns")
    for key in KEYS:
        cols = COLUMNS[key[:7]]
        assert [c[0] for c in sigs[0]["states"][key]["chunks"]] == [[0, r * cols] for r in range(4)]
        values = torch.cat([p[key][2] for p in ranks], dim=1)  # torchao's own, placed by column
        # lowbit's dequantized half of the columns is the hash of torchao's values in global order
        assert sigs[0]["states"][key]["dequantized"] == dequantized_hash(values), key
        assert sigs[0]["states"][key]["dequantized"] != one.states[key]["dequantized"], key
        if key.endswith("exp_avg"):  # blocks along a rank's columns, not the rows: every value differs
            assert int((bits(values) != bits(theirs[key][2])).sum()) == values.numel() == 16384, key
