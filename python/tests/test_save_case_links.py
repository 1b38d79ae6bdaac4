"""Issue 25 item 2, the Python writer: save_case's temporary is created with O_CREAT | O_EXCL |
O_NOFOLLOW under an unpredictable name, so that a link planted at any name one can predict (the
engine's old <target>.tmp.<pid> among them) leaves the file it points to untouched."""
import os

import numpy as np
import pytest

import lowbit
from lowbit import _files

CASE = {"x": np.arange(16, dtype=np.float32)}
VICTIM = b"the victim's own bytes\n"


def predictable_names(target):
    pid = os.getpid()
    names = [f"{target}.tmp", f"{target}~", f"{target}.part", f"{target}.new"]
    names += [f"{target}.tmp.{p}" for p in range(max(1, pid - 64), pid + 64)]  # this process and its neighbours
    d, b = os.path.split(target)
    names += [os.path.join(d, f".{b}.tmp"), os.path.join(d, f".{b}.tmp.{pid}")]
    return names


def test_links_at_every_predictable_name_leave_their_victim_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    target = str(tmp_path / "r.safetensors")
    planted = predictable_names(target)
    for name in planted:
        os.symlink(victim, name)
    lowbit.save_case(target, CASE)
    assert victim.read_bytes() == VICTIM
    assert open(target, "rb").read() == lowbit.case_bytes(CASE) and not os.path.islink(target)
    assert all(os.readlink(n) == str(victim) for n in planted)  # not replaced either
    leftovers = set(os.listdir(tmp_path)) - {os.path.basename(n) for n in planted} - {"victim", "r.safetensors"}
    assert not leftovers, leftovers


def test_a_drawn_name_that_is_taken_is_never_opened(tmp_path, monkeypatch):
    # the names drawn are forced onto a planted link (then a planted file): O_EXCL | O_NOFOLLOW refuses
    # both, and the next name is used
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    target = str(tmp_path / "r.safetensors")
    os.symlink(victim, tmp_path / "taken-link")
    (tmp_path / "taken-file").write_bytes(VICTIM)
    drawn = iter([str(tmp_path / "taken-link"), str(tmp_path / "taken-file"), str(tmp_path / "free")])
    monkeypatch.setattr(_files, "_temporary_name", lambda path: next(drawn))
    lowbit.save_case(target, CASE)
    assert victim.read_bytes() == VICTIM and (tmp_path / "taken-file").read_bytes() == VICTIM
    assert open(target, "rb").read() == lowbit.case_bytes(CASE) and not (tmp_path / "free").exists()


def test_every_name_taken_is_an_error_and_writes_nothing(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    os.symlink(victim, tmp_path / "taken")
    monkeypatch.setattr(_files, "_temporary_name", lambda path: str(tmp_path / "taken"))
    with pytest.raises(OSError, match="temporary names beside it were all taken"):
        lowbit.save_case(tmp_path / "r.safetensors", CASE)
    assert victim.read_bytes() == VICTIM and not (tmp_path / "r.safetensors").exists()


@pytest.mark.parametrize("kind", ["link", "folder", "fifo"])
def test_a_target_that_is_not_a_regular_file_is_refused(kind, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    target = tmp_path / "r.safetensors"
    {"link": lambda: os.symlink(victim, target), "folder": lambda: target.mkdir(),
     "fifo": lambda: os.mkfifo(target)}[kind]()
    with pytest.raises(OSError, match="cannot write '.*r.safetensors': it is"):
        lowbit.save_case(target, CASE)
    assert victim.read_bytes() == VICTIM
    assert sorted(os.listdir(tmp_path)) == ["r.safetensors", "victim"]  # no temporary left


def test_the_file_is_replaced_whole(tmp_path):
    target = tmp_path / "r.safetensors"
    target.write_bytes(b"old" * 1000)
    lowbit.save_case(target, CASE)
    assert target.read_bytes() == lowbit.case_bytes(CASE)
    assert np.array_equal(lowbit.load_case(target)["x"], CASE["x"])


def test_a_signal_handled_as_the_temporary_is_opened_leaves_nothing(tmp_path, monkeypatch):
    # issue 44: python -m lowbit's SIGTERM is raised where Python is, which can be the moment os.open has
    # made the temporary and not yet returned its descriptor (old main: the temporary stayed)
    real_open = os.open

    def open_then_interrupted(name, *args):
        os.close(real_open(name, *args))
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(_files.os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        lowbit.save_case(str(tmp_path / "r.safetensors"), CASE)
    assert os.listdir(tmp_path) == []
