import os
import subprocess
import sys
import tempfile

import pytest

# numpy_kernels and the other helpers beside the tests
sys.path.insert(0, os.path.dirname(__file__))

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "golden")


@pytest.fixture
def one_rank_gloo():
    """This process as the only rank of a gloo process group, and its one-rank CPU device mesh."""
    dist = pytest.importorskip("torch.distributed")
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{tempfile.mktemp(prefix='lowbit-pg.')}")
    from torch.distributed.device_mesh import init_device_mesh

    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def torchrun(out, ranks, script, *args):
    """`torchrun --standalone --nproc-per-node RANKS script OUT ARGS` (gloo, CPU) with this lowbit on its
    path; the job's output on failure."""
    import lowbit

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(lowbit.__file__)), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                          str(ranks), os.path.join(os.path.dirname(__file__), script), str(out), *args], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def job(tmp_path_factory):
    """The folder a `torchrun --nproc-per-node 2` run of sharded_job.py wrote (test_torchrun_states.py)."""
    pytest.importorskip("torch")
    pytest.importorskip("torchao")
    return torchrun(tmp_path_factory.mktemp("torchrun"), 2, "sharded_job.py")
