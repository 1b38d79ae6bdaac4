"""A DCP folder is hostile input (issue 25): its .metadata pickle runs no code (only DCP's own classes
are unpickled, as inert stand-ins), and no item is read from outside the folder. The hostile folders
are written without torch (dcp_pickles), so that these run in a venv without it; the last tests
rewrite a real dcp.save folder."""
import os
import pickle
import shutil
import subprocess

import pytest

import lowbit
from dcp_pickles import Call, Global, Obj, DCP, dumps, metadata, size

READERS = {
    "quantized_states": lowbit.quantized_states,
    "state_signature": lowbit.state_signature,
    "audit_state": lowbit.audit_state,
    "dequantized_state_case": lowbit.dequantized_state_case,
}


class RunsACommand:
    """What a hostile .metadata holds: an object whose pickle calls os.system."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def folder_with(tmp_path, meta_bytes, files=None):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / ".metadata").write_bytes(meta_bytes)
    for name, data in (files or {}).items():
        (folder / name).write_bytes(data)
    return folder


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_metadata_that_calls_os_system_runs_nothing(reader, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = folder_with(tmp_path, pickle.dumps(RunsACommand("touch PWNED")))
    with pytest.raises(lowbit.CaseError) as e:
        READERS[reader](folder)
    assert not (tmp_path / "PWNED").exists()
    named = f"{os.system.__module__}.system"  # posix.system on Linux
    assert named in str(e.value) and "weights_only=False" in str(e.value) and ".metadata" in str(e.value), e.value


@pytest.mark.parametrize("module,name", [("os", "system"), ("builtins", "eval"), ("subprocess", "check_output"),
                                         ("torch", "load"), ("builtins", "getattr"), ("pathlib", "Path")])
def test_a_call_hidden_inside_valid_metadata_is_refused_by_name(module, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tree = metadata([("lr", "__0_0.distcp", 0, 4, None)])
    tree.state["storage_meta"].state["save_id"] = Call(module, name, ("touch PWNED",))
    folder = folder_with(tmp_path, dumps(tree), {"__0_0.distcp": b"0000"})
    with pytest.raises(lowbit.CaseError, match=f"calls for {module}.{name}, which DCP metadata never holds"):
        lowbit.quantized_states(folder)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("path,why", [("../outside.distcp", "leaves the folder"),
                                      ("sub/../__0_0.distcp", "leaves the folder"),
                                      ("/ABSOLUTE", "leaves the folder"),
                                      ("./__0_0.distcp", "leaves the folder"),
                                      ("link.distcp", "a symbolic link"),
                                      ("linkdir/outside.distcp", "a symbolic link"),
                                      ("missing.distcp", "No such file"),
                                      ("", "empty")])
def test_item_paths_are_resolved_strictly_inside_the_folder(path, why, tmp_path):
    outside = tmp_path / "outside.distcp"
    outside.write_bytes(b"x" * 64)
    path = path.replace("/ABSOLUTE", str(outside))
    folder = folder_with(tmp_path, dumps(metadata([("lr", path, 0, 4, None)])), {"__0_0.distcp": b"x" * 64})
    (folder / "sub").mkdir()
    os.symlink(outside, folder / "link.distcp")
    os.symlink(tmp_path, folder / "linkdir")
    for reader in READERS.values():
        with pytest.raises(lowbit.CaseError, match=why) as e:
            reader(folder)
        assert "item 'lr'" in str(e.value), e.value


def test_a_linked_metadata_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere.metadata"
    elsewhere.write_bytes(dumps(metadata([])))
    folder = tmp_path / "ckpt"
    folder.mkdir()
    os.symlink(elsewhere, folder / ".metadata")
    with pytest.raises(lowbit.CaseError, match="a symbolic link"):
        lowbit.quantized_states(folder)


@pytest.mark.parametrize("offset,length", [(60, 5), (0, 65), (2**62, 1), (1, 2**63)])
def test_an_item_past_the_end_of_its_file_is_refused_before_it_is_read(offset, length, tmp_path):
    folder = folder_with(tmp_path, dumps(metadata([("lr", "__0_0.distcp", offset, length, None)])),
                         {"__0_0.distcp": b"x" * 64})
    with pytest.raises(lowbit.CaseError, match="lie past the end of __0_0.distcp"):
        lowbit.quantized_states(folder)


@pytest.mark.parametrize("what,tree", [
    ("negative offset", metadata([("lr", "a", -1, 4, None)])),
    ("non-string name", Obj(DCP, "Metadata", {"storage_data": {Obj(DCP, "MetadataIndex", {"fqn": 7}): None}})),
    ("a list for storage_data", Obj(DCP, "Metadata", {"storage_data": []})),
    ("a Size of strings", Obj(DCP, "Metadata", {"storage_data": {}, "x": size("a")})),
    ("the wrong class", Obj(DCP, "StorageMeta", {"storage_data": {}})),
    ("constructor arguments", Call(DCP, "Metadata", ({},))),
    ("a dtype called", Call("torch", "float32", ())),
    ("a layout that is not one", Call("torch.serialization", "_get_layout", ("os.system",))),
    ("state set on torch.Size", Obj("torch", "Size", {"fn": Global("torch", "float32")})),
])
def test_malformed_metadata_is_a_case_error(what, tree, tmp_path):
    folder = folder_with(tmp_path, dumps(tree))
    with pytest.raises(lowbit.CaseError, match=r"\.metadata"):
        lowbit.quantized_states(folder)


def test_build_cannot_change_lowbit_for_later_reads(tmp_path):
    # BUILD (set an object's state) on the globals the unpickler hands out: torch.Size's stand-in, a
    # record class, a dtype; each refused, and a valid folder still reads the same afterwards
    targets = [b"ctorch\nSize\n", b"c" + DCP.encode() + b"\nMetadata\n", b"ctorch\nfloat32\n"]
    states = [b"}(X\x02\x00\x00\x00fnctorch\nfloat32\nu",  # a dict state
              b"N}(X\x04\x00\x00\x00kindX\x01\x00\x00\x00xu\x86"]  # (None, slots) state
    for i, target in enumerate(targets):
        for j, state in enumerate(states):
            (tmp_path / f"{i}{j}").mkdir()
            folder = folder_with(tmp_path / f"{i}{j}", b"\x80\x02" + target + state + b"b.")
            with pytest.raises(lowbit.CaseError, match=r"\.metadata"):
                lowbit.quantized_states(folder)
    (tmp_path / "good").mkdir()
    good = folder_with(tmp_path / "good", dumps(metadata([("lr", "a", 0, 4, None), ("x", "a", 4, 0, (1, 0))])),
                       {"a": b"0000"})
    with lowbit._dcp.Folder(good) as f:
        assert [(i.fqn, i.chunk_offset, i.offset, i.length) for i in f.items()] == [("lr", None, 0, 4), ("x", (0, 0), 4, 0)]


def test_a_huge_memo_index_allocates_nothing(tmp_path):
    # pickle's C unpickler sizes its memo by the index a PUT names: PUT 2^31-1 would allocate and clear
    # 32 GB (2^27 took 2 GB and 3.9 s when measured); lowbit's unpickler keeps a dict
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    folder = folder_with(tmp_path, b"\x80\x02N" + b"r" + (2**31 - 1).to_bytes(4, "little") + b".")
    with pytest.raises(lowbit.CaseError, match="a NoneType where DCP writes a Metadata"):
        lowbit.quantized_states(folder)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB: under 100 MiB


def test_malformed_pickles_are_case_errors(tmp_path):
    good = dumps(metadata([("lr", "a", 0, 4, None)]))
    built_not = b"\x80\x02c" + DCP.encode() + b"\nMetadata\n)\x81."  # NEWOBJ, no BUILD (found by fuzz_dcp)
    for i, data in enumerate([b"", b"\x80\x02", good[:len(good) // 2], b"\x80\x05\x95" + b"\xff" * 8, b"(" * 100000 + b".",
                              built_not]):
        folder = tmp_path / str(i)
        folder.mkdir()
        (folder / ".metadata").write_bytes(data)
        with pytest.raises(lowbit.CaseError, match=r"\.metadata"):
            lowbit.quantized_states(folder)


# --- real checkpoints (torch, torchao) ---

def real_folder(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    import torch.distributed.checkpoint as dcp
    from torchao.optim.subclass_8bit import OptimState8bit

    s = OptimState8bit.zeros((8, 64), signed=True, block_size=256)
    s.copy_(torch.randn(8, 64, generator=torch.Generator().manual_seed(1)))
    folder = tmp_path / "real"
    dcp.save({"state": {0: {"exp_avg": s}}}, checkpoint_id=str(folder))
    return folder


def test_a_real_folder_with_an_item_moved_outside_is_refused(tmp_path):
    folder = real_folder(tmp_path)
    before = lowbit.state_signature(folder)
    assert lowbit.state_signature(folder, weights_only=False) == before
    (chunk,) = [p for p in os.listdir(folder) if p.endswith(".distcp")]
    shutil.move(folder / chunk, tmp_path / "outside.distcp")
    meta = pickle.loads((folder / ".metadata").read_bytes())  # torch's own classes: a file we wrote
    for info in meta.storage_data.values():
        info.relative_path = "../outside.distcp"
    (folder / ".metadata").write_bytes(pickle.dumps(meta))
    with pytest.raises(lowbit.CaseError, match=r"'\.\./outside\.distcp' leaves the folder"):
        lowbit.state_signature(folder)
    os.symlink(tmp_path / "outside.distcp", folder / chunk)  # a link inside, to the same file
    for info in meta.storage_data.values():
        info.relative_path = chunk
    (folder / ".metadata").write_bytes(pickle.dumps(meta))
    with pytest.raises(lowbit.CaseError, match="a symbolic link"):
        lowbit.state_signature(folder)
    os.remove(folder / chunk)
    shutil.copy(tmp_path / "outside.distcp", folder / chunk)
    assert lowbit.state_signature(folder) == before


def test_the_restricted_unpickler_reads_what_torch_reads(tmp_path):
    folder = real_folder(tmp_path)
    from lowbit import _dcp

    with _dcp.Folder(folder) as f:
        assert f.items() == f.items(weights_only=False)


def test_a_corrupt_item_is_a_case_error(tmp_path):
    folder = real_folder(tmp_path)
    (chunk,) = [p for p in os.listdir(folder) if p.endswith(".distcp")]
    data = bytearray((folder / chunk).read_bytes())
    data[:64] = b"\0" * 64  # the zip header of the first item
    (folder / chunk).write_bytes(bytes(data))
    with pytest.raises(lowbit.CaseError, match="item 'state.0.exp_avg': (torch.load failed|not a readable torch.save "
                                               "zip)"):
        lowbit.state_signature(folder)


def test_the_pwned_reproduction_creates_the_file_through_plain_pickle(tmp_path):
    # the oracle for the tests above: the same .metadata does run its command through plain pickle
    # (what torch's FileSystemReader.read_metadata does), in a child process
    folder = folder_with(tmp_path, pickle.dumps(RunsACommand("touch PWNED")))
    code = f"import pickle; pickle.load(open({str(folder / '.metadata')!r}, 'rb'))"
    subprocess.run([os.sys.executable, "-c", code], cwd=tmp_path, check=True)
    assert (tmp_path / "PWNED").exists()


def test_the_docs_example_runs_nothing(tmp_path, monkeypatch, capsys):
    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")).read()
    code = docs.split("<!-- example: hostile-dcp -->\n```python\n")[1].split("```")[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/python.md", "exec"), {"__name__": "docs_example"})
    out = capsys.readouterr().out
    assert "/.metadata: the pickle calls for posix.system, which DCP metadata never holds; refused" in out, out
    assert not (tmp_path / "PWNED").exists()
