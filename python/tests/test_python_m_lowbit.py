"""`python -m lowbit` (issue 27 items 3 and 5): hostile command lines give exit 2 and one line on stderr
naming what is wrong (never a traceback, never a replaced file, nothing written into the checkpoint);
the progress line goes to stderr only (on a terminal, or with --progress), so --json's stdout is one JSON
object, and its figures are state_signature's."""
import hashlib
import json
import os
import shutil

import pytest

import lowbit
from lowbit.__main__ import main

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A one-process DCP folder of a torchao AdamW8bit state (two parameters), and a torch.save file of it."""
    import torch.distributed.checkpoint as dcp
    from torchao.optim.subclass_8bit import OptimState8bit

    g = torch.Generator().manual_seed(3)
    sd = {"state": {}}
    for i in range(2):
        m, v = OptimState8bit.zeros((64, 128), signed=True), OptimState8bit.zeros((64, 128), signed=False)
        m.copy_(torch.randn(64, 128, generator=g))
        v.copy_(torch.rand(64, 128, generator=g))
        sd["state"][i] = {"step": torch.tensor(1.0), "exp_avg": m, "exp_avg_sq": v}
    root = tmp_path_factory.mktemp("cli")
    dcp.save(sd, checkpoint_id=str(root / "dcp"))
    torch.save(sd, root / "states.pt")
    return root


def contents(root) -> dict:
    """Every file under root with the sha256 of its bytes (links as their target's text)."""
    out = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(base, name)
            if os.path.islink(p):
                out[p] = "link " + os.readlink(p)
            elif os.path.isfile(p):
                out[p] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def one_line_error(capsys, argv, expected):
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("lowbit: error: ") and "Traceback" not in captured.err
    assert expected in captured.err, captured.err
    return captured.err


def test_hostile_command_lines_are_one_line_and_exit_2(folder, tmp_path, capsys):
    dcp_folder, saved = str(folder / "dcp"), str(folder / "states.pt")
    before = contents(folder)
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    linked = tmp_path / "linked"
    os.symlink(dcp_folder, linked)
    chunk_linked = tmp_path / "chunk-linked"
    shutil.copytree(dcp_folder, chunk_linked)
    os.rename(chunk_linked / "__0_0.distcp", tmp_path / "moved.distcp")
    os.symlink(tmp_path / "moved.distcp", chunk_linked / "__0_0.distcp")
    existing = tmp_path / "existing.safetensors"
    existing.write_bytes(b"mine")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out_link = tmp_path / "out-link.safetensors"
    os.symlink(victim, out_link)
    cases = [
        ([], "no command"),
        (["frobnicate", dcp_folder], "unknown command 'frobnicate'"),
        (["inspect"], "inspect takes CHECKPOINT; given 0 operand(s)"),
        (["inspect", dcp_folder, dcp_folder], "given 2 operand(s)"),
        (["state-case", dcp_folder], "state-case takes CHECKPOINT and OUT; given 1"),
        (["inspect", str(tmp_path / "missing")], f"{tmp_path / 'missing'}: no such checkpoint folder or file"),
        (["inspect", ""], "CHECKPOINT: an empty path"),
        (["inspect", str(text)], f"{text}: not a torch.save zip"),
        (["inspect", str(empty)], f"{empty}/.metadata: cannot open '.metadata' inside the folder"),
        (["inspect", str(linked)], f"{linked}: a symbolic link; give the checkpoint it points to ({dcp_folder})"),
        (["inspect", str(chunk_linked)], "cannot open '__0_0.distcp' inside the folder (a symbolic link)"),
        (["inspect", dcp_folder, "--frob"], "inspect: unknown option '--frob'"),
        (["state-case", dcp_folder, str(tmp_path / "x.safetensors"), "--json"], "state-case: unknown option '--json'"),
        (["inspect", dcp_folder, "--json=yes"], "--json takes no value"),
        (["inspect", dcp_folder, "--bnb-block-size", "0"], "--bnb-block-size '0': not a whole number"),
        (["inspect", dcp_folder, "--bnb-block-size=abc"], "--bnb-block-size 'abc': not a whole number"),
        (["inspect", dcp_folder, "--bnb-block-size=٣"], "not a whole number"),  # a digit, not an ASCII one
        (["inspect", dcp_folder, "--bnb-block-size"], "--bnb-block-size: a value is missing"),
        (["inspect", dcp_folder, "--bnb-block-size", "-1"], "--bnb-block-size '-1': not a whole number"),
        (["state-case", dcp_folder, str(existing)], f"{existing}: it exists; lowbit writes a new file"),
        (["state-case", dcp_folder, str(out_link)], f"{out_link}: a symbolic link; lowbit writes a new file"),
        (["state-case", saved, saved], f"{saved}: it exists"),
        (["state-case", dcp_folder, dcp_folder], f"{dcp_folder}: it exists"),
        (["state-case", dcp_folder, str(tmp_path / "no" / "such" / "out.safetensors")], "cannot write"),
        (["state-case", dcp_folder, ""], "OUT: an empty path"),
        (["audit"], "audit takes CHECKPOINT; given 0 operand(s)"),
        (["audit", dcp_folder, "--block-sizes", "100"], "--block-sizes: 100 is not a power of two in 16..65536"),
        (["audit", dcp_folder, "--block-sizes=64,,128"], "--block-sizes '64,,128': an empty item"),
        (["audit", dcp_folder, "--block-sizes", "8.5"], "--block-sizes '8.5': not a whole number"),
        (["audit", dcp_folder, "--formats"], "--formats: a value is missing"),
        (["audit", dcp_folder, "--formats", "no.such"], "no format matches 'no.such'"),
        (["inspect", dcp_folder, "--formats", "torchao.fp8"], "inspect: unknown option '--formats'"),
    ]
    for argv, expected in cases:
        one_line_error(capsys, argv, expected)
    assert existing.read_bytes() == b"mine" and victim.read_text() == "keep me"
    assert contents(folder) == before  # the checkpoints untouched, nothing written beside them
    assert sorted(os.listdir(tmp_path)) == sorted(["notes.txt", "empty", "linked", "chunk-linked", "moved.distcp",
                                                   "existing.safetensors", "victim.txt", "out-link.safetensors"])


def test_help_is_the_usage_on_stdout(capsys):
    for argv in (["--help"], ["-h"], ["inspect", "--help"], ["audit", "--help"], ["state-case", "-h"]):
        assert main(argv) == 0
        captured = capsys.readouterr()
        assert captured.out.startswith("usage: python -m lowbit inspect CHECKPOINT") and captured.err == ""


def test_progress_goes_to_stderr_and_json_to_stdout(folder, tmp_path, capsys):
    # stderr is pytest's capture, not a terminal: the progress line is shown by --progress alone
    # (test_torchrun_states.py runs `python -m lowbit state-case` itself, through the interpreter)
    dcp_folder = str(folder / "dcp")
    sig = lowbit.state_signature(dcp_folder)
    assert main(["inspect", dcp_folder, "--json", "--progress"]) == 0
    run = capsys.readouterr()
    shown = json.loads(run.out)
    assert (shown["digest"], shown["stored"], shown["dequantized"], shown["scope"]) == (
        sig.digest, sig.stored, sig.dequantized, "whole")
    assert shown["states"]["state.1.exp_avg"]["global_shape"] == [64, 128]
    assert shown["states"]["state.1.exp_avg"]["chunks"][0]["format"] == "torchao.codebook8.signed"
    assert run.err == "lowbit: read 1 of 2 parts (50 %)\nlowbit: read 2 of 2 parts (100 %)\n"
    assert main(["inspect", dcp_folder, "--json"]) == 0  # no option, not a terminal: no progress line
    quiet = capsys.readouterr()
    assert quiet.out == run.out and quiet.err == ""
    target = tmp_path / "states.safetensors"
    assert main(["state-case", dcp_folder, str(target), "--progress"]) == 0
    run = capsys.readouterr()
    assert run.err == "lowbit: read 1 of 2 parts (50 %)\nlowbit: read 2 of 2 parts (100 %)\n" * 2  # two passes
    assert run.out.startswith(f"{target}: 4 dequantized state(s): state.0.exp_avg, state.0.exp_avg_sq, ")
    assert target.read_bytes() == lowbit.case_bytes(lowbit.dequantized_state_case(dcp_folder))


def test_audit_prints_audit_states_rows_and_warnings(folder, capsys):
    dcp_folder = str(folder / "dcp")
    rows, warnings = lowbit.audit_state(dcp_folder, formats=["torchao.fp8", "torchao.codebook8.unsigned"],
                                        block_sizes=[64, 256])
    argv = ["audit", dcp_folder, "--formats", "torchao.fp8,torchao.codebook8.unsigned", "--block-sizes=64,256"]
    assert main(argv + ["--json", "--progress"]) == 0
    run = capsys.readouterr()
    shown = json.loads(run.out)  # strict JSON: an infinite sqnr_db (zero error) is null, as lowbit audit writes it
    assert len(shown["rows"]) == len(rows) == 16 and shown["warnings"] == warnings and len(warnings) == 4
    for mine, theirs in zip(shown["rows"], rows):
        assert mine == {k: None if v == float("inf") else v for k, v in theirs.items()}
    assert any(r.get("looks_already_quantized") and r["sqnr_db"] is None for r in shown["rows"])
    assert run.err == "lowbit: read 1 of 2 parts (50 %)\nlowbit: read 2 of 2 parts (100 %)\n"
    assert main(argv) == 0
    run = capsys.readouterr()
    lines = run.out.splitlines()
    assert lines[0] == dcp_folder and len(lines) == 1 + 16 + 4 and run.err == ""
    assert lines[1] == ("  state.0.exp_avg: torchao.codebook8.unsigned at block 64: n/a (unsigned map: the data has "
                        "negative values)")
    assert lines[-1] == f"warning: {warnings[-1]}"
