"""Issue 27 items 2, 3, 5 and 6: quantized states signed inside a real torchrun job (2 ranks, gloo, CPU)
and read back from the DCP folder the job saved. One job (sharded_job.py) trains torchao's AdamW8bit,
AdamW4bit and AdamWFp8 under FSDP2 (and bitsandbytes' Adam8bit under DDP); the tests read what each rank
wrote. The independent sources: torchao's own dequantize of each rank's part, and a one-rank training of
the same models in this process (every rank of the job saw the same batches, so the states differ only
by their layout)."""
import json
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

import lowbit

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIMIZERS = ["AdamW8bit", "AdamW4bit", "AdamWFp8"]
EVEN = ["state.0.exp_avg", "state.0.exp_avg_sq", "state.2.exp_avg", "state.2.exp_avg_sq"]  # 256x64, 64x256
MIXED = ["state.4.exp_avg", "state.4.exp_avg_sq"]  # 127x64: rank 0's 64 rows quantized, rank 1's 63 in float32


def ranks(job, name):
    return [json.loads((job / f"{name}.rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_rank_returns_the_same_signature_of_the_global_states(job, name):
    r0, r1 = ranks(job, name)
    assert r0["signature"] == r1["signature"] and r0["signature"]["scope"] == "2 ranks"
    assert r0["tensor"] == r1["tensor"] and r0["plain_tensor"] == r1["plain_tensor"]
    assert r0["local"] != r1["local"] and r0["local"]["scope"] == "local shard"  # each rank's own part
    states = r0["signature"]["states"]
    assert sorted(states) == sorted(EVEN + MIXED)
    assert states["state.0.exp_avg"]["global_shape"] == [256, 64]
    assert [c[:2] for c in states["state.0.exp_avg"]["chunks"]] == [[[0, 0], [128, 64]], [[128, 0], [128, 64]]]
    assert [c[:2] for c in states["state.2.exp_avg"]["chunks"]] == [[[0, 0], [32, 256]], [[32, 0], [32, 256]]]
    # torchao quantizes a rank's part only with 4096 elements or more in whole blocks: 64x64 yes, 63x64 no
    fmt = states["state.0.exp_avg"]["format"]
    assert [c[2] for c in states["state.4.exp_avg"]["chunks"]] == [fmt, "plain"]
    assert [s[:4] for s in r1["states"] if s[0] == "state.0.exp_avg"] == [["state.0.exp_avg", [128, 64], [256, 64],
                                                                          [128, 0]]]


def test_docs_show_the_jobs_example(job):
    # the lines docs/python.md shows for a torchrun job are the job's own, and signed what it signed
    here = open(os.path.join(HERE, "sharded_job.py")).read()
    example = here.split("# --- example: docs/python.md (torchrun) ---\n")[1].split("        # --- end of example")[0]
    example = "\n".join(line[8:] for line in example.splitlines())
    docs = open(os.path.join(HERE, "..", "..", "docs", "python.md")).read()
    assert example in docs, "docs/python.md must show sharded_job.py's example verbatim"
    for name in OPTIMIZERS:
        assert ranks(job, name)[0]["example"] == ranks(job, name)[1]["signature"]["digest"]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_the_saved_folder_has_the_in_job_signature(job, name):
    r0, _ = ranks(job, name)
    folder = lowbit.state_signature(job / name)
    assert (folder.digest, folder.stored, folder.dequantized) == (
        r0["signature"]["digest"], r0["signature"]["stored"], r0["signature"]["dequantized"])
    assert folder.scope == "DCP folder of 12 chunks"
    # the chunks are joined into whole states where they hold whole blocks; torchao's own dequantize of
    # each rank's part, in row order, is the joined state's dequantized values
    states = {s.key: s for s in lowbit.quantized_states(job / name)}
    theirs = [torch.load(job / f"{name}.rank{r}.dequantized.pt") for r in (0, 1)]
    for key in ("exp_avg", "exp_avg_sq"):
        s = states[f"state.0.{key}"]
        assert (s.shape, s.placements) == ((256, 64), ("joined from 2 DCP chunks",))
        expected = torch.cat([t[key] for t in theirs]).reshape(-1).numpy()
        assert np.array_equal(lowbit.dequantize(s.case).view(np.uint32), expected.view(np.uint32))
    # the mixed state: its quantized chunk alone, with its place; its dequantized case is the whole tensor
    mixed = states["state.4.exp_avg"]
    assert (mixed.shape, mixed.global_shape, mixed.offsets, mixed.placements) == ((64, 64), (127, 64), (0, 0),
                                                                                  ("DCP chunk",))
    assert lowbit.dequantized_state_case(job / name)["state.4.exp_avg"].shape == (127, 64)


def test_progress_is_told_after_each_part_of_the_folder(job):
    seen = []
    sig = lowbit.state_signature(job / "AdamW8bit", progress=lambda done, total: seen.append((done, total)))
    # each chunk and each parameter's other items (steps, the biases' float32 states) one at a time, then the
    # float32 chunks of the two mixed states in a second pass
    n = seen[0][1]
    assert n > 12 and seen == [(i, n) for i in range(1, n + 1)] + [(1, 2), (2, 2)]
    assert sig == lowbit.state_signature(job / "AdamW8bit")
    with pytest.raises(TypeError, match="progress: a int"):
        lowbit.state_signature(job / "AdamW8bit", progress=1)


def test_the_audit_reads_the_folder_a_state_at_a_time_and_measures_the_joined_states(job):
    folder = job / "AdamW8bit"
    rows, warnings = lowbit.audit_state(folder, formats=["bnb.blockwise8.dynamic"], block_sizes=[64, 256])
    case = lowbit.dequantized_state_case(folder)
    assert [r["tensor"] for r in rows[::2]] == EVEN + ["state.4.exp_avg@[0, 0]", "state.4.exp_avg_sq@[0, 0]"]
    assert len(warnings) == 6
    # the joined states' measures are those of their values, audited as moments (the same engine call)
    from lowbit import _core

    for row in rows:
        if row["tensor"] in EVEN:
            expected = _core.audit(row["format"], case[row["tensor"]].reshape(-1), row["block_size"], 1)
            assert {k: row[k] for k in expected} == expected, row["tensor"]


def test_a_failure_on_one_rank_is_raised_on_every_rank(job):
    r0, r1 = ranks(job, "AdamW8bit")
    # rank 1 holds no state: every rank finds rank 0's chunks short of the state and raises the same error
    assert r0["errors"][0] == r1["errors"][0]
    assert r0["errors"][0].startswith("ValueError: state.0.exp_avg: its chunks cover 8192 of its 16384 elements")
    # rank 1's call is wrong: rank 1 raises its own error, rank 0 one naming rank 1 (no rank waits)
    assert r1["errors"][1].startswith("ValueError: bnb_block_size")
    assert r0["errors"][1].startswith("ValueError: rank 1: ValueError: bnb_block_size")


def test_bitsandbytes_under_ddp_signs_its_whole_states_once(job):
    pytest.importorskip("bitsandbytes")
    r0, r1 = ranks(job, "Adam8bit")
    assert r0 == r1 and r0["signature"]["scope"] == "2 ranks"
    assert r0["signature"]["states"]["state.0.state1"]["chunks"] == [[[0, 0], [128, 64], "bnb.blockwise8.dynamic"]]


def one_rank_training(mesh, name, monkeypatch, steps):
    import sharded_job  # beside the tests (conftest.py)
    import torchao.optim

    monkeypatch.setattr(torch, "compile", lambda fn=None, **kw: fn)
    even, odd = sharded_job.models(mesh)
    optimizer = getattr(torchao.optim, name)(list(even.parameters()) + list(odd.parameters()))
    sharded_job.train([even, odd], optimizer, steps=steps)
    return optimizer


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_the_dequantized_half_does_not_depend_on_the_number_of_ranks(job, name, one_rank_gloo, monkeypatch):
    optimizer = one_rank_training(one_rank_gloo, name, monkeypatch, steps=3)
    one = lowbit.optimizer_signature(optimizer, group=dist.group.WORLD)
    two = ranks(job, name)[0]["signature"]
    assert one.scope == "1 ranks"
    # the same blocks (each rank's part is whole blocks): the same dequantized values, other stored chunks
    for key in EVEN:
        assert one.states[key]["dequantized"] == two["states"][key]["dequantized"], key
        assert len(one.states[key]["chunks"]) == 1
    # 127x64 in one piece is not whole blocks of 256 (or 128): torchao leaves it in float32 at one rank
    assert not set(MIXED) & set(one.states)
    assert one.stored != two["stored"] and one.dequantized != two["dequantized"]
    # without a group, one rank's signature is the same as with its one-rank group
    assert lowbit.optimizer_signature(optimizer) == one


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_resharding_two_ranks_to_one_restores_every_quantized_state_bit_for_bit(job, name, one_rank_gloo, monkeypatch):
    import torch.distributed.checkpoint as dcp

    optimizer = one_rank_training(one_rank_gloo, name, monkeypatch, steps=1)  # its states exist, to be loaded into
    sd = optimizer.state_dict()
    dcp.load(sd, checkpoint_id=str(job / name))
    optimizer.load_state_dict(sd)
    restored = lowbit.optimizer_signature(optimizer, group=dist.group.WORLD)
    saved = lowbit.state_signature(job / name)
    joined = {s.key: s for s in lowbit.quantized_states(job / name)}
    for key in EVEN:
        assert restored.states[key]["dequantized"] == saved.states[key]["dequantized"], key
        pid, part = key.split(".")[1:]
        local = optimizer.state_dict()["state"][int(pid)][part].to_local()
        assert np.array_equal(lowbit.quantized_states({"s": local})[0].case["codes"], joined[key].case["codes"])
    # the mixed state is a float32 tensor at one rank: DCP gives it rank 0's dequantized values and rank 1's
    # float32 values, exactly the saved folder's dequantized case
    case = lowbit.dequantized_state_case(job / name)
    for key in MIXED:
        pid, part = key.split(".")[1:]
        value = optimizer.state_dict()["state"][int(pid)][part].to_local()
        assert type(value) is torch.Tensor and value.dtype == torch.float32
        assert np.array_equal(value.numpy().view(np.uint32), case[key].view(np.uint32)), key
    assert restored != saved  # the layout (stored) and the mixed state differ


# Bad folders: a copy of the job's AdamW8bit folder with its metadata changed (torch's own classes: a file
# we wrote); each gives one CaseError naming the state and the chunk, never a signature.

def edited_folder(job, tmp_path, edit):
    folder = tmp_path / "edited"
    shutil.copytree(job / "AdamW8bit", folder)
    meta = pickle.loads((folder / ".metadata").read_bytes())
    edit(meta)
    (folder / ".metadata").write_bytes(pickle.dumps(meta))
    return folder


def index_of(meta, fqn, offsets):
    (index,) = [i for i in meta.storage_data if i.fqn == fqn and list(i.offset) == offsets]
    return index


def drop_stored(meta):
    del meta.storage_data[index_of(meta, "state.0.exp_avg", [128, 0])]


def drop_declared_and_stored(meta):
    drop_stored(meta)
    meta.state_dict_metadata["state.0.exp_avg"].chunks.pop(1)


def overlap(meta):
    from torch.distributed.checkpoint.metadata import MetadataIndex

    chunk = meta.state_dict_metadata["state.0.exp_avg"].chunks[1]
    chunk.offsets = torch.Size([64, 0])
    info = meta.storage_data.pop(index_of(meta, "state.0.exp_avg", [128, 0]))
    meta.storage_data[MetadataIndex("state.0.exp_avg", torch.Size([64, 0]), 0)] = info


def other_bytes(meta):  # the second chunk's bytes are another state's chunk (32 x 256)
    meta.storage_data[index_of(meta, "state.0.exp_avg", [128, 0])] = meta.storage_data[
        index_of(meta, "state.2.exp_avg", [32, 0])]


def one_rank_metadata(meta):  # the metadata of a one-rank save, with the chunks two ranks stored
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata

    meta.state_dict_metadata["state.0.exp_avg"].chunks = [ChunkStorageMetadata(torch.Size([0, 0]),
                                                                               torch.Size([256, 64]))]


def truncated(meta):
    info = meta.storage_data[index_of(meta, "state.0.exp_avg", [128, 0])]
    info.length -= 100


@pytest.mark.parametrize("edit,message", [
    (drop_stored, r"state.0.exp_avg: the chunk at offsets \[128, 0\] of shape \[128, 64\] is declared but not "
                  r"stored \(a missing chunk\)"),
    (drop_declared_and_stored, r"state.0.exp_avg: its chunks cover 8192 of its 16384 elements"),
    (overlap, r"state.0.exp_avg: chunk at offsets \[0, 0\] of shape \[128, 64\] overlaps the chunk at offsets "
              r"\[64, 0\]"),
    (other_bytes, r"state.0.exp_avg: the chunk at offsets \[128, 0\] holds a OptimState8bit of shape \(32, 256\); "
                  r"the metadata declares \[128, 64\]"),
    (one_rank_metadata, r"state.0.exp_avg: the chunk stored at offsets \[128, 0\] is not among the metadata's "
                        r"chunks"),
    (truncated, r"item 'state.0.exp_avg' chunk at offsets \[128, 0\]: not a torch.save zip \(no zip end record"),
])
def test_a_bad_folder_is_one_case_error_naming_the_state_and_the_chunk(job, tmp_path, edit, message):
    folder = edited_folder(job, tmp_path, edit)
    target = tmp_path / "out" / "states.safetensors"
    target.parent.mkdir()
    for call in (lowbit.state_signature, lowbit.quantized_states, lowbit.dequantized_state_case, lowbit.audit_state,
                 lambda f: lowbit.dequantized_state_case(f, out=target)):
        with pytest.raises(lowbit.CaseError, match=message):
            call(folder)
    assert not os.listdir(target.parent)  # no partial case file, no temporary left


def test_python_m_lowbit_reads_the_folders_the_lowbit_command_cannot(job, tmp_path, capsys):
    from lowbit.__main__ import main

    folder = job / "AdamW8bit"
    sig = lowbit.state_signature(folder)
    assert main(["inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"signature (DCP folder of 12 chunks): {sig.digest}" in out
    assert "  state.4.exp_avg: plain + torchao.codebook8.signed, shape [127, 64], 2 chunk(s)\n" in out
    mixed = sig.states["state.4.exp_avg"]["dequantized"]
    assert f"    offsets [64, 0] shape [63, 64] plain\n    dequantized values: {mixed}\n" in out
    target = tmp_path / "states.safetensors"
    run = subprocess.run([sys.executable, "-m", "lowbit", "state-case", str(folder), str(target)], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             [os.path.dirname(os.path.dirname(lowbit.__file__)), os.environ.get("PYTHONPATH", "")])))
    assert run.returncode == 0, run.stderr
    assert f"audit them with: lowbit audit --state {target} --tensors state.0.exp_avg," in run.stdout
    case, expected = lowbit.load_case(target), lowbit.dequantized_state_case(folder)
    assert sorted(case) == sorted(expected) == sorted(EVEN + MIXED)
    for key in case:
        assert np.array_equal(case[key].view(np.uint32), expected[key].view(np.uint32)), key
    # a bad folder: exit 2 and one line naming it
    edited = edited_folder(job, tmp_path, drop_stored)
    assert main(["inspect", str(edited)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"lowbit: error: {edited}: state.0.exp_avg: the chunk at offsets")
    assert main(["inspect"]) == 2 and capsys.readouterr().err == ("lowbit: error: inspect takes CHECKPOINT; given 0 "
                                                                  "operand(s)\n")
