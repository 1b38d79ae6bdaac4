"""Case files: lowbit.load_case / save_case through the engine's reader and writer, interoperable with
the safetensors package both ways, and hostile files refused with a clear lowbit.CaseError."""
import json
import os
import struct

import numpy as np
import pytest

import lowbit

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def made_case():
    x = np.linspace(-2, 2, 512, dtype=np.float32)
    return lowbit.reference("torchao.codebook8.signed", {"input": x})


def test_save_then_load_is_identical(tmp_path):
    case = made_case()
    path = tmp_path / "c.safetensors"
    lowbit.save_case(path, case)
    back = lowbit.load_case(path)
    assert back.format == "torchao.codebook8.signed" and back.params == case.params
    assert set(back) == set(case)
    for name in case:
        assert back.dtypes[name] == case.dtypes[name]
        assert np.array_equal(back[name].view(np.uint8), case[name].view(np.uint8))
    assert lowbit.compare(case, back, strict=True).conformant
    assert path.read_bytes() == lowbit.case_bytes(case)
    assert not [p for p in os.listdir(tmp_path) if p != "c.safetensors"]  # no temporary left behind


def test_our_files_read_with_the_safetensors_package(tmp_path):
    case = made_case()
    path = str(tmp_path / "c.safetensors")
    lowbit.save_case(path, case)
    tensors = safetensors_numpy.load_file(path)
    assert set(tensors) == set(case)
    for name, a in tensors.items():
        assert a.dtype == case[name].dtype and np.array_equal(a, case[name])
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    assert meta["format"] == "torchao.codebook8.signed" and json.loads(meta["params"]) == case.params


def test_safetensors_package_files_read_with_lowbit(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(512).astype(np.float32)
    expected = lowbit.reference("torchao.codebook8.signed", {"input": x})
    path = str(tmp_path / "theirs.safetensors")
    safetensors_numpy.save_file({k: np.ascontiguousarray(v) for k, v in expected.items()}, path,
                                metadata=dict(expected.metadata))
    theirs = lowbit.load_case(path)
    assert theirs.format == expected.format
    assert lowbit.compare(expected, theirs, strict=True).conformant


def raw_file(tmp_path, data):
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(data)
    return path


def header_file(tmp_path, header, data=b"", length=None):
    text = json.dumps(header).encode()
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)
    return path


@pytest.mark.parametrize("name,build,fault", [
    ("empty", lambda p: raw_file(p, b""), ""),
    ("header past the end", lambda p: header_file(p, {}, length=1 << 40), ""),
    ("not JSON", lambda p: raw_file(p, struct.pack("<Q", 4) + b"{{{{"), ""),
    ("offsets past the data", lambda p: header_file(p, {"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
                                                    b"\0" * 8), ""),
    ("shape against bytes", lambda p: header_file(p, {"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}},
                                                  b"\0" * 16), ""),
    ("unknown dtype", lambda p: header_file(p, {"x": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}},
                                            b"\0" * 16), ""),
    ("overlapping tensors", lambda p: header_file(p, {"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                                                      "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}},
                                                  b"\0" * 12), ""),
    ("huge shape", lambda p: header_file(p, {"x": {"dtype": "F32", "shape": [1 << 62, 1 << 62],
                                                   "data_offsets": [0, 16]}}, b"\0" * 16), ""),
])
def test_hostile_files_raise_case_error(tmp_path, name, build, fault):
    path = build(tmp_path)
    with pytest.raises(lowbit.CaseError) as info:
        lowbit.load_case(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value).strip()
    with pytest.raises(lowbit.CaseError):
        lowbit.parse_case(path.read_bytes(), str(path))


def test_a_case_breaking_its_format_schema_is_refused(tmp_path):
    case = made_case()
    case["scale"] = case["scale"][:1].copy()  # one scale for two blocks
    path = tmp_path / "bad.safetensors"
    lowbit.save_case(path, case)
    with pytest.raises(lowbit.CaseError, match="scale"):
        lowbit.load_case(path)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(lowbit.CaseError, match="nothing.safetensors"):
        lowbit.load_case(tmp_path / "nothing.safetensors")
