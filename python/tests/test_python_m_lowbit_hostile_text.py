"""`python -m lowbit` on names a hostile checkpoint chose, and stopped by signals (issue 44 items 5 and 6):
every key and path is printed escaped as the lowbit command prints it (a newline cannot forge a
"signature (whole): ..." line, an escape sequence never reaches the terminal), the command suggested
after state-case pastes back as the same arguments and runs nothing, and SIGINT, SIGTERM or SIGHUP
during state-case leave no temporary behind."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import lowbit
from lowbit.__main__ import main

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

FORGED = "p\nsignature (whole): 0000\x1b[2J\x1b]0;owned\x07"
PASTED = "q$(touch pwned)`touch pwned2`'\"; touch pwned3 \\"


def state_8bit(seed):
    from torchao.optim.subclass_8bit import OptimState8bit

    m = OptimState8bit.zeros((16, 256), signed=True)
    m.copy_(torch.randn(16, 256, generator=torch.Generator().manual_seed(seed)))
    return m


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A torch.save file whose parameter keys are FORGED and PASTED, in a folder named with a newline."""
    root = tmp_path_factory.mktemp("text") / "dir\nsignature (whole): 1111"
    root.mkdir()
    sd = {"state": {FORGED: {"exp_avg": state_8bit(1)}, PASTED: {"exp_avg": state_8bit(2)}}}
    torch.save(sd, root / "states.pt")
    return root


def test_inspect_prints_every_name_escaped_and_forges_no_line(hostile, capsys):
    # old main: the key's newline printed a second "signature (whole): 0000..." line, and ESC reached the terminal
    path = str(hostile / "states.pt")
    sig = lowbit.state_signature(path)
    assert main(["inspect", path]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("signature")] == [f"signature (whole): {sig.digest}"]
    assert lines[0] == path.replace("\n", "\\n")
    escaped = FORGED.replace("\n", "\\n").replace("\x1b", "\\x1B").replace("\x07", "\\x07")
    assert f"  state.{escaped}.exp_avg: torchao.codebook8.signed, shape [16, 256], 1 chunk(s)" in lines, lines
    assert len(lines) == 1 + 2 * 3 + 3


def test_audit_prints_every_name_escaped(hostile, capsys):
    path = str(hostile / "states.pt")
    assert main(["audit", path, "--formats", "torchao.codebook8.signed,torchao.codebook8.unsigned",
                 "--block-sizes", "256"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    lines = out.splitlines()
    # the path, 2 states x 2 formats, and the already-quantized warning of each state: no line more
    assert len(lines) == 1 + 4 + 2 and lines[0] == path.replace("\n", "\\n"), lines
    assert sum(line.startswith("warning: state.p\\nsignature (whole): 0000\\x1B[2J") for line in lines) == 1, lines


def test_the_suggested_command_pastes_back_as_the_same_arguments_and_runs_nothing(hostile, tmp_path, capsys):
    # old main: `--tensors state.q$(touch pwned)...` unquoted: pasted, it ran touch
    out = tmp_path / "a b$(touch pwned0)\x1b[31m.safetensors"
    assert main(["state-case", str(hostile / "states.pt"), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and len(printed.splitlines()) == 2, printed
    suggested = printed.splitlines()[1]
    assert suggested.startswith("audit them with: lowbit audit --state ")
    # the suggestion as bash reads it, with printf for lowbit: each argument on its own, nothing run
    command = suggested[len("audit them with: lowbit "):]
    cwd = tmp_path / "paste"
    cwd.mkdir()
    pasted = subprocess.run(["bash", "-c", f"printf '%s\\0' {command}"], cwd=cwd, capture_output=True, timeout=30)
    assert pasted.returncode == 0, pasted.stderr
    keys = sorted(lowbit.dequantized_state_case(str(hostile / "states.pt")))
    assert pasted.stdout.split(b"\0")[:-1] == [b"audit", b"--state", os.fsencode(out), b"--tensors",
                                                ",".join(keys).encode()]
    assert os.listdir(cwd) == [] and not any(n.startswith("pwned") for n in os.listdir(tmp_path))


def test_error_lines_print_names_escaped(hostile, tmp_path, capsys):
    missing = tmp_path / "no\x1b[2Jsuch\nlowbit: error: forged"
    assert main(["inspect", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"lowbit: error: {tmp_path}/no\\x1B[2Jsuch\\nlowbit: error: forged: no such checkpoint folder or file\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A one-process DCP folder of four torchao states, in four parts."""
    import torch.distributed.checkpoint as dcp

    root = tmp_path_factory.mktemp("stopped")
    sd = {"state": {i: {"exp_avg": state_8bit(i)} for i in range(4)}}
    dcp.save(sd, checkpoint_id=str(root / "dcp"))
    return root / "dcp"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_state_case_leaves_no_temporary(folder, tmp_path, signum):
    # old main: SIGTERM and SIGHUP ended the process where it stood, OUT's temporary left beside it
    # (SIGINT's KeyboardInterrupt removed it, with a traceback). The run is held once the temporary is
    # there (the first part of the second pass) until the signal comes.
    driver = textwrap.dedent("""
        import os, sys, time
        import lowbit.__main__ as cli

        def held(self, done, total):  # once OUT's temporary is there (the second pass)
            if os.listdir(os.path.dirname(sys.argv[3])):
                sys.stderr.write(f"held at part {done} of {total}\\n")
                sys.stderr.flush()
                time.sleep(60)

        cli.Progress.__call__ = held
        sys.exit(cli.main(sys.argv[1:]))
    """)
    out = tmp_path / "out" / "states.safetensors"
    out.parent.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(lowbit.__file__)),
                                                       os.environ.get("PYTHONPATH", "")]))
    run = subprocess.Popen([sys.executable, "-c", driver, "state-case", str(folder), str(out), "--progress"],
                           env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = run.stderr.readline()
        while line and not line.startswith("held at part 1 of "):  # torch's warnings on import come first
            line = run.stderr.readline()
        assert line, "the run never read its first part"
        assert len(os.listdir(out.parent)) == 1  # OUT's temporary, being written
        run.send_signal(signum)
        err = run.stderr.read()
        code = run.wait(timeout=60)
    finally:
        run.kill()
    assert code == 128 + signum, (code, err)
    assert err.splitlines()[-1] == f"lowbit: stopped by {signal.Signals(signum).name}: nothing written", err
    assert "Traceback" not in err
    assert os.listdir(out.parent) == []
