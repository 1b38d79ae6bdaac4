"""A rank that fails inside its part of a collective signature (issue 44 item 4): whatever it raises, a
KeyboardInterrupt included, the other rank ends at once with an error naming the failing rank and its
reason, and both have reached the same number of collectives (the job's closing barrier completes).
`torchrun --nproc-per-node 2` of interrupted_rank_job.py (gloo, a 30 s group timeout)."""
import json

import pytest

pytest.importorskip("torch.distributed")
pytest.importorskip("torchao")
from conftest import torchrun  # noqa: E402


@pytest.mark.parametrize("mode,raised,reason", [
    ("keys-interrupt", "KeyboardInterrupt", "KeyboardInterrupt: rank 1 interrupted while it looked for its states"),
    ("chunk-exit", "SystemExit", "SystemExit: rank 1 exits while it signs state.0.exp_avg"),
])
def test_the_other_rank_ends_at_once_naming_the_failing_rank_s_reason(tmp_path, mode, raised, reason):
    # old main: rank 1 left before the collective (only an Exception was carried), rank 0 waited in it
    # for the group's timeout (30 s here) and raised gloo's "Timed out waiting 30000ms for send operation"
    out = tmp_path / "job"
    out.mkdir()
    torchrun(out, 2, "interrupted_rank_job.py", mode)
    rank0 = json.loads((out / "rank0.json").read_text())
    rank1 = json.loads((out / "rank1.json").read_text())
    assert rank1["raised"]["type"] == raised and rank1["raised"]["message"] in reason, rank1
    assert rank0["raised"] == {"type": "ValueError", "message": f"rank 1: {reason}"}, rank0
    assert rank0["seconds"] < 10 and rank1["seconds"] < 10, (rank0, rank1)


def test_a_rank_interrupted_inside_the_gather_aborts_the_group_with_its_reason(tmp_path):
    # rank 1 lives on for 10 s after it left the gather: old main left rank 0 in it until then (its
    # connections closed when its process ended)
    out = tmp_path / "job"
    out.mkdir()
    torchrun(out, 2, "interrupted_rank_job.py", "gather-interrupt")
    rank0 = json.loads((out / "rank0.json").read_text())
    rank1 = json.loads((out / "rank1.json").read_text())
    assert rank1["raised"] == {"type": "KeyboardInterrupt", "message": "rank 1 interrupted inside the gather"}, rank1
    assert rank0["raised"] == {"type": "ValueError", "message": "rank 1: KeyboardInterrupt: rank 1 interrupted inside "
                               "the gather (it left the collective; the process group is aborted)"}, rank0
    assert rank0["seconds"] < 5, rank0
