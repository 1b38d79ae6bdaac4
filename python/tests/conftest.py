import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import pytest

# numpy_kernels and the other helpers beside the tests
sys.path.insert(0, os.path.dirname(__file__))

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "golden")


def pytest_collection_modifyitems(items):
    """With pytest-xdist's --dist loadgroup (scripts/test-all.sh runs two workers), the tests of one file
    run on one worker, so that a module-scoped fixture (a torchrun job) runs once; and every test that
    takes the session's `job` joins one group, so that the 2-rank job runs once, not once per worker."""
    for item in items:
        group = "torchrun-job" if "job" in getattr(item, "fixturenames", ()) else item.path.name
        item.add_marker(pytest.mark.xdist_group(group))


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


def torchrun(out, ranks, script, *args, timeout=300):
    """`torchrun --standalone --nproc-per-node RANKS script OUT ARGS` (gloo, CPU) with this lowbit on its
    path. On failure the message holds each rank's own output (torchrun's per-rank logs, beside OUT),
    with Python's traceback of every thread where a rank died of a signal (PYTHONFAULTHANDLER).

    A job whose first failing rank died of a signal is run once more, into an emptied OUT, and the first
    attempt's logs are kept as a warning in pytest's summary: CI (2026-12-02) once saw rank 3 of the
    4-rank job abort in libstdc++ ("terminate called without an active exception"), which 50 runs of the
    same job here did not repeat. A rank that exits with an error is never retried, nor is any result
    the tests then compare."""
    first = torchrun_once(out, ranks, script, args, "attempt1", timeout)
    if first is None:
        return out
    if not first[0]:
        raise AssertionError(first[1])
    warnings.warn(f"torchrun {script}: a rank died of a signal; ran the job again. First attempt:\n{first[1]}")
    shutil.rmtree(out)
    out.mkdir()
    second = torchrun_once(out, ranks, script, args, "attempt2", timeout)
    assert second is None, second[1]
    return out


def torchrun_once(out, ranks, script, args, name, timeout=300):
    """One torchrun of the job: None when it succeeded, else (whether a rank died of a signal, the
    failure's text). A job past `timeout` seconds is stopped, every rank with it, and fails."""
    import lowbit

    logs = out.parent / f"{out.name}.{name}.logs"
    env = dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(lowbit.__file__)), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                            str(ranks), "--log-dir", str(logs), "--tee", "3",
                            os.path.join(os.path.dirname(__file__), script), str(out), *args], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM first: torchrun stops its ranks on it. A SIGKILL of torchrun alone (subprocess.run's
        # timeout) left them running, each in a session of its own, waiting in gloo for ever.
        run.terminate()
        try:
            _, stderr = run.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            run.kill()
            _, stderr = run.communicate()
        stopped = kill_ranks_of(out)
        return False, (f"torchrun {script} ran past {timeout} s and was stopped ({stopped} rank processes left by it "
                       f"killed)\n" + rank_logs(logs) + "\ntorchrun's own output:\n" + stderr[-3000:])
    if run.returncode == 0:
        return None
    # torchrun's summary names the first rank that failed ("Root Cause") with its exit code; a signal
    # reads "exitcode  : -6 (pid: ...)" (the ranks torchrun then stopped read -15, listed above it)
    root = stderr.rpartition("Root Cause")[2]
    signalled = re.search(r"exitcode\s*:\s*-\d+ \(pid", root) is not None
    return signalled, rank_logs(logs) + "\ntorchrun's own output:\n" + stderr[-3000:]


def kill_ranks_of(out):
    """SIGKILL every process whose arguments name the job's OUT folder (its ranks: `script OUT ...`), and
    wait until they are gone (a killed process keeps its arguments until it has exited); the number
    killed."""
    killed = [pid for pid in _processes_naming(out) if pid != os.getpid()]
    for pid in killed:
        try:
            os.kill(pid, 9)
        except OSError:
            pass  # gone meanwhile
    deadline = time.monotonic() + 10
    while _processes_naming(out) and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(killed)


def _processes_naming(out):
    """The pids whose arguments hold OUT (an exited process's, a zombie's, are empty)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if os.fsencode(str(out)) in f.read().split(b"\0"):
                    pids.append(int(pid))
        except OSError:
            pass  # gone meanwhile, or not ours to read
    return pids


def rank_logs(logs):
    """The last 3 000 characters of each rank's stderr and stdout under torchrun's --log-dir LOGS."""
    parts = []
    for path in sorted(logs.glob("*/attempt_*/*/std*.log")):
        text = path.read_text(errors="replace")
        if text:
            parts.append(f"--- {path.relative_to(logs)}:\n{text[-3000:]}")
    return "\n".join(parts) or f"(no rank wrote anything under {logs})"


@pytest.fixture(scope="session")
def job(tmp_path_factory):
    """The folder a `torchrun --nproc-per-node 2` run of sharded_job.py wrote (test_torchrun_states.py)."""
    pytest.importorskip("torch")
    pytest.importorskip("torchao")
    return torchrun(tmp_path_factory.mktemp("torchrun"), 2, "sharded_job.py")
