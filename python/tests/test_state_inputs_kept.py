"""Issue 44 item 3: nothing lost, nothing stale. dequantized_state_case(out=) never names what it reads
(the torch.save file, however reached; a DCP folder or anything inside it); the lazy quantized_states
of a folder serves no state once another writer changed the folder; a state that vanishes between the
streamed case's two passes is an error (never zeros, no file left); two tensors whose keys join into one
dotted name are refused with both keys named."""
import os

import numpy as np
import pytest

import lowbit
from lowbit import state as state_module

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")


def torchao_sd(seed=0, params=2):
    from torchao.optim.subclass_8bit import OptimState8bit

    g = torch.Generator().manual_seed(seed)
    out = {}
    for i in range(params):
        s = OptimState8bit.zeros((16, 256), signed=True)
        s.copy_(torch.randn(16, 256, generator=g) * 1e-3)
        out[i] = {"exp_avg": s, "step": torch.tensor(1.0)}
    return {"state": out, "param_groups": [{"lr": 1e-3, "params": list(range(params))}]}


def dcp_folder(path, sd):
    import torch.distributed.checkpoint as dcp

    dcp.save(sd, checkpoint_id=str(path))
    return path


def contents(folder):
    return {name: open(os.path.join(folder, name), "rb").read() for name in sorted(os.listdir(folder))}


def test_out_never_names_the_torch_save_file_it_reads(tmp_path):
    path = tmp_path / "opt.pt"
    torch.save(torchao_sd(), path)
    before = path.read_bytes()
    os.symlink(path, tmp_path / "link.pt")
    os.mkdir(tmp_path / "sub")
    os.symlink(tmp_path, tmp_path / "sub" / "up")  # the file again through a linked folder
    os.link(path, tmp_path / "hard.pt")  # another name of the same file
    for out in (path, tmp_path / "link.pt", tmp_path / "sub" / "up" / "opt.pt", tmp_path / "hard.pt",
                str(tmp_path / "sub" / ".." / "opt.pt")):
        with pytest.raises(ValueError, match="is the checkpoint it reads"):
            lowbit.dequantized_state_case(path, out=out)
        assert path.read_bytes() == before
    shapes = lowbit.dequantized_state_case(path, out=tmp_path / "case.safetensors")  # elsewhere: written
    assert shapes == {"state.0.exp_avg": (16, 256), "state.1.exp_avg": (16, 256)}
    assert path.read_bytes() == before


def test_out_never_names_the_dcp_folder_or_anything_inside_it(tmp_path):
    folder = dcp_folder(tmp_path / "dcp", torchao_sd())
    before = contents(folder)
    item = next(n for n in os.listdir(folder) if n.endswith(".distcp"))
    os.symlink(folder, tmp_path / "alias")
    for out in (folder / ".metadata", folder / item, folder / "new.safetensors", tmp_path / "alias" / ".metadata",
                tmp_path / "alias" / "new.safetensors", folder, str(folder) + "/../dcp/.metadata"):
        with pytest.raises(ValueError, match="lies inside the checkpoint folder"):
            lowbit.dequantized_state_case(folder, out=out)
        assert contents(folder) == before
    assert lowbit.dequantized_state_case(folder, out=tmp_path / "case.safetensors")
    assert contents(folder) == before


def test_the_lazy_listing_serves_no_state_from_a_folder_another_writer_changed(tmp_path):
    folder = dcp_folder(tmp_path / "dcp", torchao_sd(seed=1))
    states = lowbit.quantized_states(folder)
    first = states[0].stored["codes"][0].copy()
    assert np.array_equal(states[0].stored["codes"][0], first)  # served again while the folder is as listed
    dcp_folder(folder, torchao_sd(seed=2))  # another job saves into the same folder
    for i in (0, 1, -1):
        with pytest.raises(lowbit.CaseError, match="changed since quantized_states listed it") as e:
            states[i]
        assert str(folder) in str(e.value)
    with pytest.raises(lowbit.CaseError, match="changed since"):
        list(states)
    again = lowbit.quantized_states(folder)  # listed again: the new contents
    assert not np.array_equal(again[0].stored["codes"][0], first)


def test_a_changed_item_file_is_seen_though_its_size_and_metadata_are_the_same(tmp_path):
    folder = dcp_folder(tmp_path / "dcp", torchao_sd(seed=1))
    states = lowbit.quantized_states(folder)
    item = next(folder / n for n in os.listdir(folder) if n.endswith(".distcp"))
    data = item.read_bytes()
    stat = os.stat(item)
    item.write_bytes(data)  # the same bytes rewritten, its mtime put back: the ctime still moves
    os.utime(item, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(lowbit.CaseError, match=r"changed since quantized_states listed it \(.*distcp changed\)"):
        states[0]


def test_a_folder_changed_while_it_is_listed_is_refused(tmp_path):
    folder = dcp_folder(tmp_path / "dcp", torchao_sd(seed=1))

    def progress(done, total):
        if done == 1:
            os.utime(folder / ".metadata", ns=(1, 1))

    with pytest.raises(lowbit.CaseError, match="changed since quantized_states began to list it"):
        lowbit.quantized_states(folder, progress=progress)


def leftovers(tmp_path):
    return sorted(n for n in os.listdir(tmp_path) if n.startswith("."))


def test_a_state_that_vanishes_between_the_two_passes_is_an_error_and_no_file_is_left(tmp_path):
    folder = dcp_folder(tmp_path / "dcp", torchao_sd(seed=1, params=2))
    out = tmp_path / "case.safetensors"
    passes = []

    def progress(done, total):  # the end of the first pass: another job saves one state fewer
        if done == total and not passes:
            passes.append(1)
            import shutil

            shutil.rmtree(folder)
            dcp_folder(folder, torchao_sd(seed=1, params=1))

    with pytest.raises(lowbit.CaseError) as e:
        lowbit.dequantized_state_case(folder, out=out, progress=progress)
    assert str(folder) in str(e.value) and "changed" in str(e.value)
    assert not out.exists() and leftovers(tmp_path) == []


def test_a_state_the_second_pass_does_not_give_again_is_an_error_never_zeros(tmp_path, monkeypatch):
    """The second pass's own count, whatever made it miss a state (the folder record unchanged)."""
    folder = dcp_folder(tmp_path / "dcp", torchao_sd(seed=1, params=2))
    out = tmp_path / "case.safetensors"
    original = state_module._folder_value_chunks

    def second_pass_without_state_1(*args, **kwargs):
        for chunks in original(*args, **kwargs):
            yield [c for c in chunks if c.key != "state.1.exp_avg"]

    monkeypatch.setattr(state_module, "_folder_value_chunks", second_pass_without_state_1)
    with pytest.raises(lowbit.CaseError, match=r"state\.1\.exp_avg vanished or changed between the two passes"):
        lowbit.dequantized_state_case(folder, out=out)
    assert not out.exists() and leftovers(tmp_path) == []


def colliding(kind):
    sd = torchao_sd(seed=3, params=2)
    if kind == "int and str":  # keys 0 and "0" of one dict
        sd["state"]["0"] = sd["state"].pop(1)
        return sd, "['state', 0, 'exp_avg']", "['state', '0', 'exp_avg']"
    sd["state.0"] = {"exp_avg": sd["state"].pop(1)["exp_avg"]}  # "state.0" beside "state" holding 0
    return sd, "['state.0', 'exp_avg']", "['state', 0, 'exp_avg']"


@pytest.mark.parametrize("kind", ["int and str", "a dotted key"])
def test_two_states_of_one_dotted_name_are_refused_with_both_keys_named(tmp_path, kind):
    sd, first, second = colliding(kind)
    for call in (lowbit.state_signature, lowbit.dequantized_state_case, lowbit.quantized_states):
        with pytest.raises(ValueError) as e:
            call(sd)
        text = str(e.value)
        assert "state.0.exp_avg" in text and "replicated" not in text, text
        assert first in text and second in text, text
    path = tmp_path / "opt.pt"
    torch.save(sd, path)
    with pytest.raises(lowbit.CaseError, match="state.0.exp_avg") as e:
        lowbit.state_signature(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("call", ["state_signature", "audit_state"])
def test_a_signature_or_audit_of_a_folder_changed_while_it_is_read_is_refused(tmp_path, call):
    """Not a signature (nor audit rows) made of two versions of a folder: the record of the folder
    before the read must hold after it."""
    folder = dcp_folder(tmp_path / "dcp", torchao_sd(seed=1, params=2))

    def progress(done, total):  # after the first part: another job rewrites the second
        if done == 1:
            dcp_folder(folder, torchao_sd(seed=2, params=2))

    kwargs = {"formats": ["torchao.fp8"], "block_sizes": [256]} if call == "audit_state" else {}
    with pytest.raises(lowbit.CaseError, match="changed since") as e:
        getattr(lowbit, call)(folder, progress=progress, **kwargs)
    assert str(folder) in str(e.value)
    getattr(lowbit, call)(folder, **kwargs)  # read again, unchanged: done
