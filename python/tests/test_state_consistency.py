"""Issue 44 item 2: a state's parts checked against each other where it is read. torch.load rebuilds a
torchao state's wrapper (its shape) and its fields (codes, scale, qmap, block_size) separately, so a
file can make them disagree: each such state of a torch.save file or a DCP folder is a CaseError that
names the file and the state, for every kind (8-bit, 4-bit, FP8) and for bitsandbytes' states, before a
value is read. A wrapper that claims more elements than its codes hold made the value reader loop,
growing memory until it ran out: that case runs in a child process with a time and memory limit."""
import ast
import os
import resource
import subprocess
import sys

import numpy as np
import pytest

import lowbit
from lowbit import _values

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

SHAPE = (32, 128)  # 4 096 elements: 16 blocks of 256, 32 of 128


def state(kind):
    """A torchao state of SHAPE, quantized by torchao itself."""
    from torchao.optim.subclass_4bit import OptimState4bit
    from torchao.optim.subclass_8bit import OptimState8bit
    from torchao.optim.subclass_fp8 import OptimStateFp8

    s = {"8bit": lambda: OptimState8bit.zeros(SHAPE, signed=True), "4bit": lambda: OptimState4bit.zeros(SHAPE),
         "fp8": lambda: OptimStateFp8.zeros(SHAPE)}[kind]()
    s.copy_(torch.randn(SHAPE, generator=torch.Generator().manual_seed(3)) * 1e-3)
    return s


def half_codes(s):  # the wrapper claims twice the elements its codes hold
    rows = s.codes.shape[0]
    s.codes = s.codes.reshape(-1)[:s.codes.numel() // 2].clone()
    if type(s).__name__ != "OptimState4bit":
        s.codes = s.codes.reshape(rows // 2, -1)
    s.scale = s.scale[:s.scale.numel() // 2].clone()


def double_codes(s):  # the wrapper claims half the elements its codes hold
    s.codes = torch.cat([s.codes, s.codes]).clone()
    s.scale = torch.cat([s.scale, s.scale]).clone()


def lying_block_size(s):
    s.block_size = s.block_size // 2


def short_scale(s):
    s.scale = s.scale[:-1].clone()


def short_qmap(s):
    s.qmap = s.qmap[:-1].clone()


def scale_2d(s):
    s.scale = s.scale.reshape(2, -1).clone()


def bf16_scale(s):
    s.scale = s.scale.to(torch.bfloat16)


LIES = {"codes hold half the shape": half_codes, "codes hold twice the shape": double_codes,
        "block_size lies": lying_block_size, "one scale short": short_scale, "qmap one entry short": short_qmap,
        "2-D scale": scale_2d, "bf16 scales": bf16_scale}
CASES = [(kind, lie) for kind in ("8bit", "4bit", "fp8") for lie in LIES if not (kind == "fp8" and "qmap" in lie)]


def saved(tmp_path, kind, lie, name="opt.pt"):
    s = state(kind)
    LIES[lie](s)
    path = tmp_path / name
    torch.save({"state": {0: {"exp_avg": s, "step": torch.tensor(1.0)}}}, path)
    return path


def refused(call, *names):
    with pytest.raises(lowbit.CaseError) as e:
        call()
    for name in names:
        assert name in str(e.value), str(e.value)
    return str(e.value)


@pytest.mark.parametrize("kind,lie", [c for c in CASES if c[1] != "codes hold half the shape"])
def test_a_torch_save_file_whose_state_parts_disagree_is_refused_naming_file_and_state(tmp_path, kind, lie):
    path = saved(tmp_path, kind, lie)
    for call in (lambda: lowbit.quantized_states(path), lambda: lowbit.state_signature(path),
                 lambda: lowbit.dequantized_state_case(path), lambda: lowbit.audit_state(path)):
        refused(call, str(path), "state.0.exp_avg")


def dcp_with_lying_item(tmp_path, kind, lie):
    """A one-process DCP folder whose state.0.exp_avg item holds the lying state as torch.save writes it
    (dcp.save itself would rebuild the state from its codes through torchao's detach)."""
    import io
    import pickle

    import torch.distributed.checkpoint as dcp

    folder = tmp_path / "dcp"
    dcp.save({"state": {0: {"exp_avg": state(kind)}}}, checkpoint_id=str(folder))
    s = state(kind)
    LIES[lie](s)
    data = io.BytesIO()
    torch.save(s, data)
    meta = pickle.loads((folder / ".metadata").read_bytes())  # torch's own classes: a file we wrote
    (index, info), = [(i, v) for i, v in meta.storage_data.items() if i.fqn == "state.0.exp_avg"]
    item = folder / info.relative_path
    info.offset, info.length = item.stat().st_size, len(data.getvalue())
    with open(item, "ab") as f:
        f.write(data.getvalue())
    (folder / ".metadata").write_bytes(pickle.dumps(meta))
    return folder


@pytest.mark.parametrize("kind,lie", [c for c in CASES if c[1] != "codes hold half the shape"])
def test_a_dcp_item_whose_state_parts_disagree_is_refused_naming_folder_and_state(tmp_path, kind, lie):
    folder = dcp_with_lying_item(tmp_path, kind, lie)
    refused(lambda: lowbit.quantized_states(folder), str(folder), "state.0.exp_avg")
    refused(lambda: lowbit.state_signature(folder), str(folder), "state.0.exp_avg")
    refused(lambda: lowbit.dequantized_state_case(folder, out=tmp_path / "c.safetensors"), str(folder),
            "state.0.exp_avg")
    assert not os.path.exists(tmp_path / "c.safetensors")


_CHILD = """
import contextlib, io, sys
import lowbit
from lowbit.__main__ import main

for path in sys.argv[1:]:
    for call in ("state_signature", "quantized_states", "dequantized_state_case"):
        try:
            getattr(lowbit, call)(path)
            print("READ", call, path)
        except lowbit.CaseError as e:
            print("REFUSED", call, repr(str(e)))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["inspect", path])
    print("INSPECT", code, repr(err.getvalue()))
"""


def limited():
    limit = 6 << 30  # the address space torch's import takes and a little more: an endless reader hits it fast
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize("container", ["torch.save", "DCP"])
def test_a_wrapper_that_claims_more_elements_than_its_codes_is_refused_not_read_forever(tmp_path, container):
    """Every reader and python -m lowbit inspect, in a child process limited in time and memory (the
    value reader looped here, growing memory until it ran out)."""
    lie, paths = "codes hold half the shape", []
    for kind in ("8bit", "4bit", "fp8"):
        (tmp_path / kind).mkdir()
        paths.append(saved(tmp_path / kind, kind, lie) if container == "torch.save" else
                     dcp_with_lying_item(tmp_path / kind, kind, lie))
    run = subprocess.run([sys.executable, "-c", _CHILD] + [str(p) for p in paths], capture_output=True, text=True,
                         timeout=90, preexec_fn=limited)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert len(lines) == 12, run.stdout
    for path, (signature, listing, case, inspect) in zip(paths, zip(*[iter(lines)] * 4)):
        for line in (signature, listing, case):
            assert line.startswith("REFUSED") and str(path) in line and "state.0.exp_avg" in line, line
            assert "holds codes of shape" in line or "packed code bytes" in line, line
        code, err = inspect.split(" ", 2)[1:]
        err = ast.literal_eval(err)  # the repr the child printed
        assert code == "2" and err.count("\n") == 1 and err.startswith("lowbit: error: "), inspect
        assert str(path) in err and "state.0.exp_avg" in err, inspect


_READER_CHILD = """
import numpy as np
import lowbit
from lowbit import _values

made = lowbit.reference("torchao.codebook8.signed", {"input": np.linspace(-1, 1, 4096, dtype=np.float32)})
case = lowbit.Case({k: made[k] for k in ("codes", "scale", "qmap")}, origin="s",
                   metadata={"format": made.format, "params": '{"block_size": 256}'})
for n in (8192, 2048):  # a state's shape of more, and of fewer, elements than its codes
    try:
        _values.Values(case, n).whole()
        print("READ", n)
    except lowbit.CaseError as e:
        print("REFUSED", n, e)
values = _values.Values(case, 4096)
assert np.array_equal(values.read(100, 300), values.whole()[100:300])
try:
    values.read(0, 4097)  # past the end: the range reader looped here, appending nothing
    print("READ past the end")
except IndexError as e:
    print("REFUSED past the end", e)
"""


def test_a_lying_chunk_of_a_two_rank_folder_is_refused_not_read_forever(job, tmp_path):
    """A chunk of a sharded state (the 2-rank torchrun job's folder, conftest.py's job) whose wrapper
    claims twice the elements its codes hold, read by every reader and python -m lowbit inspect in a
    child process limited in time and memory, as above."""
    import io
    import pickle
    import shutil

    folder = tmp_path / "AdamW8bit"
    shutil.copytree(job / "AdamW8bit", folder)
    meta = pickle.loads((folder / ".metadata").read_bytes())  # torch's own classes: a file the job wrote
    (index, info), = [(i, v) for i, v in meta.storage_data.items() if i.fqn == "state.0.exp_avg" and any(i.offset)]
    item = folder / info.relative_path
    with open(item, "rb") as f:
        f.seek(info.offset)
        chunk = torch.load(io.BytesIO(f.read(info.length)), weights_only=False)  # a file the job wrote
    half_codes(chunk)
    data = io.BytesIO()
    torch.save(chunk, data)
    info.offset, info.length = item.stat().st_size, len(data.getvalue())
    with open(item, "ab") as f:
        f.write(data.getvalue())
    (folder / ".metadata").write_bytes(pickle.dumps(meta))
    run = subprocess.run([sys.executable, "-c", _CHILD, str(folder)], capture_output=True, text=True,
                         timeout=90, preexec_fn=limited)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith("REFUSED") for line in lines[:3]), run.stdout
    assert all(str(folder) in line and "state.0.exp_avg" in line and "holds codes of shape" in line
               for line in lines[:3]), run.stdout
    assert lines[3].startswith("INSPECT 2 ") and "state.0.exp_avg" in lines[3], lines[3]


def test_the_value_reader_refuses_codes_that_do_not_hold_its_elements():
    """The reader itself (no torch: the engine's own case), in a child process limited in time and
    memory: a window whose codes give fewer or more values than its elements is an error, and a range
    is read in one pass over its windows (past the end, it looped, appending nothing)."""
    def small():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    run = subprocess.run([sys.executable, "-c", _READER_CHILD], capture_output=True, text=True, timeout=60,
                         preexec_fn=small)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert [line.split(" ")[:2] for line in lines] == [["REFUSED", "8192"], ["REFUSED", "2048"],
                                                      ["REFUSED", "past"]], run.stdout
    assert all("values dequantized" in line for line in lines[:2]), run.stdout


def bnb_saved(tmp_path, change):
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(7)
    p = torch.nn.Parameter(torch.randn(64, 80))
    opt = bnb.optim.Adam8bit([p], lr=1e-3)
    p.grad = torch.randn_like(p)
    opt.step()
    sd = opt.state_dict()
    inner = sd["state"][0].get("__bnb_optimizer_quant_state__", sd["state"][0])
    change(inner)
    path = tmp_path / "bnb.pt"
    torch.save(sd, path)
    return path


@pytest.mark.parametrize("change", [
    lambda d: d.update(qmap1=d["qmap1"][:128].clone()),  # a table of 128 entries
    lambda d: d.update(qmap2=d["qmap2"].to(torch.float16)),  # a table in another dtype
    lambda d: d.update(absmax1=d["absmax1"][:-1].clone()),  # one block's absmax short
    lambda d: d.update(absmax2=d["absmax2"].to(torch.bfloat16)),  # absmax in another dtype
], ids=["short qmap", "f16 qmap", "short absmax", "bf16 absmax"])
def test_a_bitsandbytes_state_whose_parts_disagree_is_refused_naming_file_and_state(tmp_path, change):
    path = bnb_saved(tmp_path, change)
    refused(lambda: lowbit.state_signature(path), str(path), "state.0.state")
    refused(lambda: lowbit.quantized_states(path), str(path), "state.0.state")
