"""conftest.torchrun, the harness of the torchrun jobs: a job whose rank died of a signal runs once
more, with the first attempt's logs kept as a warning; a rank that keeps dying, or that exits with an
error, fails the test with that rank's own output; a job that hangs is stopped with every rank."""
import os

import pytest

pytest.importorskip("torch.distributed")
from conftest import kill_ranks_of, torchrun  # noqa: E402


def test_a_rank_that_aborts_once_is_run_again_and_warned_about(tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    with pytest.warns(UserWarning, match="a rank died of a signal; ran the job again") as caught:
        torchrun(out, 2, "crashing_job.py", "abort-once")
    assert sorted(os.listdir(out)) == ["rank0", "rank1"]
    assert "Fatal Python error: Aborted" in str(caught[0].message)  # the rank's own faulthandler output


def test_a_rank_that_aborts_every_time_fails_after_one_more_attempt(tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    with pytest.warns(UserWarning), pytest.raises(AssertionError, match="Fatal Python error: Aborted"):
        torchrun(out, 2, "crashing_job.py", "abort-always")


def test_a_rank_that_exits_with_an_error_fails_at_once(tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    with pytest.raises(AssertionError, match="the error this mode asks for"):
        torchrun(out, 2, "crashing_job.py", "error")
    assert not (tmp_path / "job.attempt2.logs").exists()


def test_a_job_that_hangs_is_stopped_with_every_rank_and_fails(tmp_path):
    # rank 1 ignores SIGTERM: torchrun (stopped after its grace) would leave it waiting for ever, each
    # rank being in a session of its own; the harness kills what names the job's folder
    out = tmp_path / "job"
    out.mkdir()
    with pytest.raises(AssertionError, match=r"ran past 10 s and was stopped \([12] rank processes"):
        torchrun(out, 2, "crashing_job.py", "hang", timeout=10)
    assert kill_ranks_of(out) == 0  # nothing of the job is left
