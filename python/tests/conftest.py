import os
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
