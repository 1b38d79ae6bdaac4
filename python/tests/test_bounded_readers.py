"""Bounded readers (issue 44, "What to build" 1): every pickle a checkpoint holds (a DCP folder's
.metadata, its items, a torch.save file's data.pkl) is scanned before anything unpickles it (nesting,
opcodes, the memory it would build), a torch.save zip is refused when a record is compressed, a DCP
item's bytes are bounded by what the metadata declares of it before they are read, the state walk is
iterative with a depth limit and plain keys, and a tensor's view must fit in its storage before it is
copied. The crafted inputs are small (a sparse file stands for gigabytes); whatever could crash or
exhaust the machine on a regression runs in a child process under an address-space limit."""
import io
import os
import resource
import subprocess
import sys
import textwrap
import time
import zipfile
import zlib

import pytest

import lowbit
from dcp_pickles import dumps, metadata

GIB = 1 << 30


def run_child(code, address_space=None, timeout=300):
    """code in a child Python, its address space limited (so that an allocation the reader should never
    make fails there, not in the test run): (return code, stdout + stderr, peak RSS in bytes)."""
    def limit():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    # the peak of this process's own memory (VmHWM: ru_maxrss would hold the forking test run's)
    script = "import lowbit\n" + textwrap.dedent(code) + (
        "\nprint('peak', [int(line.split()[1]) * 1024 for line in open('/proc/self/status') "
        "if line.startswith('VmHWM:')][0])\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                       preexec_fn=limit)
    peak = [int(line.split()[1]) for line in r.stdout.splitlines() if line.startswith("peak ")]
    return r.returncode, r.stdout + r.stderr, peak[0] if peak else None


READ_AND_REPORT = """
try:
    lowbit.{reader}({path!r})
    print("read")
except lowbit.CaseError as e:
    print("CaseError:", e)
"""

# A dict keyed by a tuple nested 200 000 deep (TUPLE1 on TUPLE1 ... on None): CPython's tuple hash
# recurses in C, and the SETITEM that hashes it overflows the C stack (SIGSEGV on main 30a3794).
DEEP_KEY = b"\x80\x02}N" + b"\x85" * 200_000 + b"K\x01s."
DEEP_FROZENSET = b"\x80\x04(N" + b"\x85" * 200_000 + b"\x91."  # a frozenset of it: hashed as it is built


def torch_save_with_pickle(tmp_path, pickle_bytes, name="hostile.pt"):
    """A torch.save file of {} whose data.pkl is replaced by pickle_bytes (every record stored, as
    torch writes it)."""
    torch = pytest.importorskip("torch")
    buffer = io.BytesIO()
    torch.save({}, buffer)
    path = tmp_path / name
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as src, zipfile.ZipFile(path, "w") as out:
        for info in src.infolist():
            data = pickle_bytes if info.filename.endswith("/data.pkl") else src.read(info)
            out.writestr(info.filename, data, compress_type=zipfile.ZIP_STORED)
    return path


@pytest.mark.parametrize("pickle_bytes", [DEEP_KEY, DEEP_FROZENSET], ids=["dict-key", "frozenset"])
def test_a_metadata_nesting_a_tuple_200000_deep_is_a_case_error_not_a_crash(pickle_bytes, tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / ".metadata").write_bytes(pickle_bytes)
    assert len(pickle_bytes) < 210_000
    for reader in ("quantized_states", "state_signature"):
        rc, out, _ = run_child(READ_AND_REPORT.format(reader=reader, path=str(folder)))
        assert rc == 0, f"{reader}: the child died (rc {rc}): {out[-2000:]}"
        assert f"CaseError: {folder}/.metadata: the pickle nests more than 100 levels deep" in out, out
    r = subprocess.run([sys.executable, "-m", "lowbit", "inspect", str(folder)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "nests more than 100 levels deep" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_torch_save_file_nesting_a_tuple_200000_deep_is_a_case_error_not_a_crash(tmp_path):
    path = torch_save_with_pickle(tmp_path, DEEP_KEY)
    rc, out, _ = run_child(READ_AND_REPORT.format(reader="quantized_states", path=str(path)))
    assert rc == 0, f"the child died (rc {rc}): {out[-2000:]}"
    assert f"CaseError: {path}: data.pkl: the pickle nests more than 100 levels deep" in out, out


def test_lists_nested_5000_deep_in_a_torch_save_file_are_refused_by_the_scanner(tmp_path):
    # 5000 empty lists, each appended to the one below: [[[...]]] 5000 deep (RecursionError in the walk
    # on main 30a3794)
    path = torch_save_with_pickle(tmp_path, b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b".")
    with pytest.raises(lowbit.CaseError, match=f"^{path}: data.pkl: the pickle nests more than 100 levels deep"):
        lowbit.quantized_states(path)


def nested_lists(depth):
    state = {"step": 1}
    for _ in range(depth):
        state = [state]
    return {"state": state}


def test_the_state_walk_is_iterative_with_a_depth_limit(tmp_path):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="nests more than 64 containers deep"):  # RecursionError on main
        lowbit.quantized_states(nested_lists(5000))
    path = tmp_path / "deep.pt"
    torch.save(nested_lists(80), path)  # within the scanner's 100 levels, past the walk's 64
    with pytest.raises(lowbit.CaseError, match=f"^{path}: state(.0)+: the state dict nests more than 64"):
        lowbit.quantized_states(path)
    torch.save(nested_lists(40), path)
    assert len(lowbit.quantized_states(path)) == 0


def test_a_tuple_key_is_refused_by_type(tmp_path):
    torch = pytest.importorskip("torch")
    key = "x"
    for _ in range(1000):
        key = (key,)
    with pytest.raises(TypeError, match="a key of type tuple"):  # RecursionError in str(key) on main
        lowbit.quantized_states({"state": {key: 1}})
    path = tmp_path / "tuple_key.pt"
    torch.save({"state": {("a", 1): torch.zeros(2)}}, path)
    with pytest.raises(lowbit.CaseError, match=f"^{path}: state: a key of type tuple"):
        lowbit.quantized_states(path)


def test_a_metadata_of_32_mib_of_empty_dicts_is_refused_within_the_memory_bound(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / ".metadata").write_bytes(b"\x80\x02(" + b"}" * (32 << 20) + b"l.")
    start = time.monotonic()
    rc, out, peak = run_child(READ_AND_REPORT.format(reader="quantized_states", path=str(folder)), 3 * GIB)
    assert rc == 0, out[-2000:]
    assert "would build more than " in out and "(estimated; lowbit admits 64 times the bytes read and 4194304 more" in out, out
    assert peak < 200 << 20, f"peak RSS {peak} bytes"  # 2.4 GB on main 30a3794 (MemoryError under this limit)
    print(f"refused in {time.monotonic() - start:.1f} s, peak RSS {peak >> 20} MiB")


class _RepeatedDeflate:
    """zipfile's compressor for a record of MiB-long writes of zeros after a short first write: each
    MiB's deflate stream (after a full flush, with only zeros in the window) is the same bytes, so that
    a gigabyte deflates in a second, not in zlib's minute."""

    def __init__(self):
        self.zlib = zlib.compressobj(9, zlib.DEFLATED, -15)
        self.repeated = None

    def compress(self, data):
        if self.repeated is not None and len(data) == 1 << 20:
            return self.repeated
        out = self.zlib.compress(data) + self.zlib.flush(zlib.Z_FULL_FLUSH)
        if len(data) == 1 << 20 and not any(data):
            self.repeated = out
        return out

    def flush(self):
        return self.zlib.flush(zlib.Z_FINISH)


def test_a_compressed_torch_save_record_is_refused_before_it_is_inflated(tmp_path):
    torch = pytest.importorskip("torch")
    buffer = io.BytesIO()
    torch.save({"state": {}}, buffer)
    path = tmp_path / "bomb.pt"
    # data.pkl deflated: a pickle of one 1 GiB bytes object in a 1 MB file (main 30a3794 let torch
    # inflate it: 1.7 GB peak); the zip's headers say so before anything is inflated
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as src, zipfile.ZipFile(path, "w") as out:
        for info in src.infolist():
            if not info.filename.endswith("/data.pkl"):
                out.writestr(info.filename, src.read(info))
                continue
            bomb = zipfile.ZipInfo(info.filename)
            bomb.compress_type, bomb.file_size = zipfile.ZIP_DEFLATED, GIB + 12
            with out.open(bomb, "w") as f:
                f._compressor = _RepeatedDeflate()
                f.write(b"\x80\x02\x8e" + GIB.to_bytes(8, "little"))
                zeros = bytes(1 << 20)
                for _ in range(GIB >> 20):
                    f.write(zeros)
                f.write(b".")
    assert path.stat().st_size < 4 << 20
    rc, out, peak = run_child(READ_AND_REPORT.format(reader="quantized_states", path=str(path)), 6 * GIB)
    assert rc == 0, out[-2000:]
    assert f"CaseError: {path}: record 'hostile/data.pkl' is compressed ({GIB + 12} bytes from" in out or \
        "is compressed" in out, out
    assert peak < GIB, peak


def test_a_dcp_item_of_8_gib_in_a_sparse_file_is_refused_before_it_is_read(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    length = 8 * GIB
    (folder / ".metadata").write_bytes(dumps(metadata([("state.0.exp_avg", "__0_0.distcp", 0, length, (4,))])))
    with open(folder / "__0_0.distcp", "wb") as f:
        f.truncate(length)  # sparse: no disk taken
    rc, out, peak = run_child(READ_AND_REPORT.format(reader="state_signature", path=str(folder)), 4 * GIB)
    assert rc == 0, out[-2000:]
    assert (f"CaseError: {folder}: item 'state.0.exp_avg': {length} bytes at __0_0.distcp:0, more than the "
            f"{(1 << 20) + 2 * 4 * 4} lowbit reads of it (twice its declared chunk's bytes and 1048576; 16777216 for "
            f"a non-tensor item); refused before reading") in out, out
    assert peak < 1 * GIB, peak


def test_a_non_tensor_item_is_bounded_too(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / ".metadata").write_bytes(dumps(metadata([("state.0.step", "__0_0.distcp", 0, 64 << 20, None)])))
    with open(folder / "__0_0.distcp", "wb") as f:
        f.truncate(64 << 20)
    with pytest.raises(lowbit.CaseError, match=f"{64 << 20} bytes at __0_0.distcp:0, more than the {1 << 24}"):
        lowbit.quantized_states(folder)


def test_a_view_repeating_3_kib_of_codes_2_to_the_33_times_is_refused_before_it_is_copied(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torchao.optim.subclass_8bit import OptimState8bit

    path = tmp_path / "stride0.pt"
    s = OptimState8bit.zeros((3072,), signed=True, block_size=256)
    n = 1 << 33
    s.codes = s.codes[:1].expand(n)  # stride 0: 2^33 elements over the 3 KiB storage (a view: nothing allocated)
    s.scale = s.scale[:1].expand(n // 256)
    torch.save({"state": {0: {"exp_avg": s}}}, path)
    assert path.stat().st_size < 64 << 10
    rc, out, peak = run_child(READ_AND_REPORT.format(reader="quantized_states", path=str(path)), 6 * GIB)
    assert rc == 0, out[-2000:]  # main 30a3794: torch's "can't allocate memory: you tried to allocate 8589934592 bytes"
    assert f"CaseError: {path}: state.0.exp_avg.codes: a view of {1 << 33} elements" in out, out
    assert peak < 2 * GIB, peak


def test_real_checkpoints_pickles_stay_far_inside_the_limits(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    import torch.distributed.checkpoint as dcp
    from lowbit import _pickles
    from torchao.optim.subclass_4bit import OptimState4bit
    from torchao.optim.subclass_8bit import OptimState8bit

    state = {"state": {0: {"exp_avg": OptimState8bit.zeros((8, 64), signed=True, block_size=256),
                           "exp_avg_sq": OptimState4bit.zeros((8, 64), signed=False, block_size=128),
                           "step": torch.tensor(3.0)}},
             "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0]}]}
    dcp.save(state, checkpoint_id=str(tmp_path / "dcp"))
    measured = _pickles.scan((tmp_path / "dcp" / ".metadata").read_bytes(), "metadata", _pickles.LIMITS)
    assert measured.depth <= 12 and measured.opcodes < 2000, measured
    torch.save(state, tmp_path / "state.pt")
    with open(tmp_path / "state.pt", "rb") as f:
        measured = _pickles.scan(_pickles.torch_save_pickle(f, "state.pt"), "state.pt", _pickles.LIMITS)
    assert measured.depth <= 12 and measured.opcodes < 2000, measured
    assert len(lowbit.quantized_states(tmp_path / "dcp")) == len(lowbit.quantized_states(tmp_path / "state.pt")) == 2


def torchao_state_with(fault):
    """A torchao state of 64 x 64 with one fault a file can hold (torch.load rebuilds each field as the
    pickle says)."""
    from torchao.optim.subclass_4bit import OptimState4bit
    from torchao.optim.subclass_8bit import OptimState8bit

    if fault == "unpacking":  # 100 packed bytes for 4096 4-bit codes
        s = OptimState4bit.zeros((64, 64), signed=True, block_size=128)
        s.codes = s.codes[:100].clone()
        return s
    s = OptimState8bit.zeros((64, 64), signed=True, block_size=256)
    if fault == "block size 0":
        s.block_size = 0
    elif fault == "block size past the schema":
        s.block_size = 1 << 40
    elif fault == "block size against the scales":
        s.block_size = 100
    elif fault == "codes fewer than the shape":  # NumPy's bare reshape error on main
        s.codes, s.scale = s.codes.reshape(-1)[:1024].clone(), s.scale[:4].clone()
    return s


@pytest.mark.parametrize("fault", ["unpacking", "block size 0", "block size past the schema",
                                   "block size against the scales", "codes fewer than the shape"])
def test_a_faulty_state_of_a_file_is_a_case_error_naming_the_file_and_the_state(fault, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    path = tmp_path / "faulty.pt"
    torch.save({"state": {0: {"exp_avg": torchao_state_with(fault)}}}, path)
    for reader in (lowbit.state_signature, lowbit.dequantized_state_case, lowbit.audit_state):
        with pytest.raises(lowbit.CaseError, match=f"^{path}: state.0.exp_avg: "):
            reader(path)


@pytest.mark.parametrize("dtype", ["bfloat16", "int64"])
def test_an_unquantized_chunk_of_another_dtype_is_a_case_error_naming_the_folder(dtype, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    import pickle
    import shutil

    import torch.distributed.checkpoint  # noqa: F401 (the classes of the metadata we rewrite)

    folder = tmp_path / "ckpt"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "fuzz_seeds_dcp", "torchao_2ranks"), folder)
    meta = pickle.loads((folder / ".metadata").read_bytes())  # a file of ours
    for index, info in meta.storage_data.items():
        if index.fqn == "state.1.exp_avg" and list(index.offset) == [128, 0]:  # rank 1's float32 part
            buffer = io.BytesIO()
            torch.save(torch.zeros(127, 32, dtype=getattr(torch, dtype)), buffer)
            with open(folder / "__0_0.distcp", "ab") as f:
                info.offset = f.seek(0, 2)
                f.write(buffer.getvalue())
            info.length = len(buffer.getvalue())
    (folder / ".metadata").write_bytes(pickle.dumps(meta))
    name = {"bfloat16": "BF16", "int64": "I64"}[dtype]
    for reader in (lowbit.state_signature, lowbit.dequantized_state_case):
        with pytest.raises(lowbit.CaseError, match=f"^{folder}: state.1.exp_avg: chunk at offsets \\[128, 0\\] of "
                                                   f"shape \\[127, 32\\] is an unquantized {name} tensor"):
            reader(folder)
