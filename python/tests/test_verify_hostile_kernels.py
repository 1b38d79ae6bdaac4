"""lowbit.verify of a Python function that misbehaves (issue 44 item 5): the process state it changes is
restored after every call, so it cannot make a golden case disappear; a BaseException it raises (or
Ctrl-C during the run) leaves verify as itself once the run is cleaned up; an output it returns that
cannot be read fails that case with the reason, and the run goes on."""
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import lowbit
import numpy_kernels
from conftest import GOLDEN, REPO

FORMAT = "torchao.codebook8.signed"


def port(case):
    return numpy_kernels.torchao_codebook8(case["input"], case["qmap"], **case.params)


def golden_labels(report):
    return sorted(c.label for c in report.cases if c.label.startswith("golden "))


@pytest.fixture(scope="module")
def every_golden_case():
    """The golden cases of FORMAT that verify runs for a kernel that keeps to itself."""
    labels = golden_labels(lowbit.verify(port, FORMAT, inputs=["edges"], golden=GOLDEN))
    assert len(labels) == 28, labels
    return labels


def test_a_kernel_that_changes_directory_environment_and_handlers_still_runs_every_golden_case(
        tmp_path, monkeypatch, every_golden_case):
    # old main: the relative golden folder was looked up from the kernel's directory after the first
    # call: 0 golden cases, "1 of 1 cases conformant"
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("LOWBIT_TEST_KERNEL", raising=False)
    int_handler, seen = signal.getsignal(signal.SIGINT), []

    def wanderer(case):
        seen.append((os.getcwd(), os.environ.get("LOWBIT_TEST_KERNEL"), signal.getsignal(signal.SIGINT)))
        os.chdir(tmp_path)
        os.environ["LOWBIT_TEST_KERNEL"] = "set by the kernel"
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return port(case)

    r = lowbit.verify(wanderer, FORMAT, inputs=["edges"], golden="golden")
    assert r.conformant and golden_labels(r) == every_golden_case, r.summary
    assert len(r.cases) == 29 and "29 of 29 cases conformant" in r.summary
    # every call found the process as verify was called, and so does the caller afterwards
    assert set(seen) == {(REPO, None, int_handler)}
    assert os.getcwd() == REPO and "LOWBIT_TEST_KERNEL" not in os.environ
    assert signal.getsignal(signal.SIGINT) is int_handler


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_a_base_exception_from_the_kernel_stops_the_run_and_is_raised_as_itself(raised, tmp_path, monkeypatch):
    # old main: ValueError: input 'normal:n=4096': Traceback ... KeyboardInterrupt
    monkeypatch.chdir(tmp_path)
    calls = []

    def kernel(case):
        calls.append(1)
        os.chdir("/")
        if len(calls) == 3:
            raise raised("from the kernel")
        return port(case)

    with pytest.raises(raised, match="from the kernel") as caught:
        lowbit.verify(kernel, FORMAT, inputs=["edges", "special", "normal:n=4096", "uniform:n=4096"], golden=GOLDEN)
    assert type(caught.value) is raised and len(calls) == 3  # no case ran after it
    assert os.getcwd() == str(tmp_path)
    # the run was cleaned up: the golden folder's lock is free, the next run sees every case
    again = lowbit.verify(port, FORMAT, inputs=["edges"], golden=GOLDEN)
    assert again.conformant and len(again.cases) == 29


def test_ctrl_c_during_the_run_is_a_keyboard_interrupt(monkeypatch):
    # SIGINT sent from another thread while the engine runs (and the kernel waits for it to be sent):
    # old main raised ValueError: input '...': Traceback ... KeyboardInterrupt
    sent, calls = threading.Event(), []

    def kernel(case):
        calls.append(1)
        if len(calls) == 1:
            threading.Thread(target=lambda: (os.kill(os.getpid(), signal.SIGINT), sent.set())).start()
        else:
            sent.wait(10)
        return port(case)

    with pytest.raises(KeyboardInterrupt):
        lowbit.verify(kernel, FORMAT, golden=GOLDEN)
    assert sent.is_set() and len(calls) < 10


class RaisingMapping(dict):
    def __getitem__(self, name):
        raise RuntimeError(f"no {name} today")


class RaisingDlpack:
    shape = (5,)

    def __dlpack__(self, *args, **kwargs):
        raise RuntimeError("the producer is gone")


class UnprintableError(Exception):
    def __str__(self):
        raise RuntimeError("no text either")


def meta_codes(out):
    torch = pytest.importorskip("torch")
    return {**out, "codes": torch.empty(1280, dtype=torch.uint8, device="meta")}


def raise_unprintable(out):
    raise UnprintableError()


@pytest.mark.parametrize("spoil,says", [
    (meta_codes, "returned 'codes', which cannot be read: NotImplementedError: "),
    (lambda out: {**out, "scale": RaisingDlpack()}, "returned 'scale', which cannot be read: RuntimeError: the producer is gone"),
    (lambda out: RaisingMapping(out), "returned outputs that cannot be read: RuntimeError: no "),
    (raise_unprintable, "raised UnprintableError: (a message that cannot be read: its __str__ raised RuntimeError)"),
])
def test_an_output_that_cannot_be_read_fails_its_case_and_the_run_goes_on(spoil, says):
    # old main: the run stopped with ValueError (or NotImplementedError, RuntimeError, MemoryError)
    def kernel(case):
        out = port(case)
        return spoil(out) if case["input"].size == 1280 else out

    r = lowbit.verify(kernel, FORMAT, inputs=["edges", "special"])
    assert [c.label for c in r.cases] == ["edges", "special"], r.lines
    assert r.lines[0].startswith("FAILED   edges: the kernel ") and says in r.lines[0], r.lines[0]
    assert r.lines[1].startswith("ok       special: ") and not r.conformant


@pytest.mark.parametrize("view,limit,says", [
    ("np.broadcast_to(np.float32(0), (1 << 40,))", 1 << 30, "returned 'dequant' of shape [1099511627776]; "),
    ("__import__('torch').zeros(1).expand(1 << 40)", 6 << 30, "returned 'dequant' of shape [1099511627776]; "),
])
def test_a_broadcast_view_of_2_40_elements_fails_its_case_by_its_shape(view, limit, says):
    # in a process limited in address space (torch's libraries take 2 to 4 GiB of it): the view is never
    # copied (old main copied it: 4 TiB, a MemoryError out of the run, or the machine's memory where it
    # overcommits)
    script = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
        import numpy as np, lowbit, numpy_kernels

        def kernel(case):
            out = numpy_kernels.torchao_codebook8(case["input"], case["qmap"], **case.params)
            return {{**out, "dequant": {view}}}

        r = lowbit.verify(kernel, {FORMAT!r}, inputs=["edges", "special"])
        print("\\n".join(r.lines))
    """)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(lowbit.__file__)), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("FAILED   edges: the kernel " + says), lines
    assert "torchao.codebook8.signed makes F32 [1280]" in lines[0] and lines[1].startswith("FAILED   special: ")


def test_ctrl_c_stops_a_plugin_s_run_after_the_running_case():
    # no Python code runs between a plugin's cases: old main noticed Ctrl-C once the whole run was over
    from test_verify import plugin

    reference = plugin("reference_plugin")
    inputs = [f"normal:n={(1 << 21) + 256 * k}" for k in range(6)]
    start = time.monotonic()
    assert lowbit.verify(reference, FORMAT, inputs=inputs).conformant
    whole = time.monotonic() - start
    timer = threading.Timer(whole / 8, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            timer.start()
            lowbit.verify(reference, FORMAT, inputs=inputs)
    finally:
        timer.join()
    assert time.monotonic() - start < whole / 2, whole


def test_a_golden_case_the_kernel_removes_stops_the_run_naming_it(tmp_path):
    # never passed over: the run ends with the reader's CaseError (the documented outcome)
    import shutil

    shutil.copy(os.path.join(GOLDEN, "MANIFEST.json"), tmp_path)
    shutil.copytree(os.path.join(GOLDEN, "torchao", FORMAT), tmp_path / "torchao" / FORMAT)
    victim = sorted((tmp_path / "torchao" / FORMAT).iterdir())[-1]

    def remover(case):
        if victim.exists():
            victim.rename(tmp_path / "elsewhere")
        return port(case)

    with pytest.raises(lowbit.CaseError, match=re.escape(f"{victim}: cannot open")):
        lowbit.verify(remover, FORMAT, inputs=["edges"], golden=tmp_path)
