"""Issue 25 item 7: arrays read as their values whatever their byte order, conjugate or negative bit
and rank; every bad argument a TypeError / ValueError naming it; every bad file a CaseError. Each
reproduction of the issue is a test here (expected values from NumPy and torch, not from lowbit)."""
import json
import struct

import numpy as np
import pytest

import lowbit

# every case dtype of more than one byte, as NumPy holds it (BF16 as its uint16 bits)
MULTI_BYTE = ["<f4", "<f2", "<i4", "<i8", "<u2"]


def values(dtype):
    rng = np.random.default_rng(3)
    if dtype == "<u2":  # bf16 bit patterns, both bytes different
        return (rng.integers(0, 1 << 16, 64, dtype=np.uint32) | 0x0101).astype(np.uint16)
    return (rng.standard_normal(64) * 1000).astype(dtype)


@pytest.mark.parametrize("dtype", MULTI_BYTE)
def test_big_endian_arrays_are_read_as_their_values(dtype):
    little = values(dtype)
    big = little.astype(np.dtype(dtype).newbyteorder(">"))
    assert big.tobytes() != little.tobytes() and np.array_equal(big, little)  # the same values, other bytes
    back = lowbit.parse_case(lowbit.case_bytes({"t": big}))["t"]
    assert back.dtype == np.dtype(dtype) and back.tobytes() == little.tobytes()


def test_big_endian_bf16_bits_are_swapped_not_reinterpreted():
    x = np.tile(values("<u2").reshape(1, 64), (32, 2))  # 32 x 128, as coat.act.pergroup's tiles need
    out = lowbit.reference("coat.act.pergroup", {"input": x.astype(">u2")})
    assert out.dtypes["input"] == "BF16" and np.array_equal(out["input"], x)
    assert lowbit.compare(lowbit.reference("coat.act.pergroup", {"input": x}), out, strict=True).conformant


def test_the_negative_and_conjugate_bits_are_resolved():
    torch = pytest.importorskip("torch")
    x = torch.full((256,), 1 + 2j, dtype=torch.complex64)
    imag = x.conj().imag  # a view with the negative bit: its storage holds +2
    assert imag.is_neg() and float(imag[0]) == -2.0
    out = lowbit.reference("torchao.fp8", {"input": imag})
    assert np.array_equal(out["input"], np.full(256, -2.0, np.float32))
    neg = torch._neg_view(torch.linspace(-3, 3, 256))
    assert neg.is_neg()
    assert np.array_equal(lowbit.reference("torchao.fp8", {"input": neg})["input"],
                          (-torch.linspace(-3, 3, 256)).numpy())


def test_a_0d_array_stays_0d():
    c = lowbit.parse_case(lowbit.case_bytes({"s": np.array(np.float32(3.5)), "v": np.zeros((2, 0), np.uint8)}))
    assert c["s"].shape == () and c["s"] == np.float32(3.5) and c["v"].shape == (2, 0)
    torch = pytest.importorskip("torch")
    assert c.torch("s").shape == torch.Size([])
    assert lowbit.parse_case(lowbit.case_bytes({"s": torch.tensor(2.0)}))["s"].shape == ()


def fp8_input():
    return {"input": np.linspace(-1, 1, 256, dtype=np.float32)}


@pytest.mark.parametrize("call,error,named", [
    (lambda: lowbit.reference("torchao.fp8", fp8_input(), block_size=float("nan")), ValueError, "block_size=nan"),
    (lambda: lowbit.reference("torchao.fp8", fp8_input(), block_size=np.float64("inf")), ValueError, "block_size=inf"),
    (lambda: lowbit.reference("torchao.adam.codebook8", lowbit.default_inputs("torchao.adam.codebook8", steps=1)[0],
                              lr=float("inf")), ValueError, "lr=inf"),
    (lambda: lowbit.reference("torchao.fp8", {1: np.zeros(256, np.float32)}), TypeError, "tensor name 1"),
    (lambda: lowbit.reference(3, fp8_input()), TypeError, "format"),
    (lambda: lowbit.reference("torchao.fp8", [1, 2]), TypeError, "tensors"),
    (lambda: lowbit.quantized_states({}, bnb_block_size=0), ValueError, "bnb_block_size=0"),
    (lambda: lowbit.state_signature({}, bnb_block_size=2.5), TypeError, "bnb_block_size"),
    (lambda: lowbit.quantized_states({}, weights_only="no"), TypeError, "weights_only"),
    (lambda: lowbit.audit_state({}, threads=0), ValueError, "threads=0"),
    (lambda: lowbit.audit_state({}, block_sizes=[256, float("nan")]), TypeError, "block_sizes"),
    (lambda: lowbit.audit_state({}, block_sizes=[0]), ValueError, "block_sizes=0"),
    (lambda: lowbit.audit_state({}, formats=[7]), TypeError, "formats"),
    (lambda: lowbit.choose([], 0.01), TypeError, "budget"),
    (lambda: lowbit.default_inputs("torchao.fp8", steps=float("nan")), TypeError, "steps"),
    (lambda: lowbit.default_inputs("torchao.fp8", steps=0), ValueError, "steps=0"),
    (lambda: lowbit.default_inputs("torchao.fp8", steps=2**63), ValueError, "steps="),
    (lambda: lowbit.compare(fp8_input(), fp8_input(), max_listed=-1), ValueError, "max_listed=-1"),
    (lambda: lowbit.compare(fp8_input(), fp8_input(), strict="yes"), TypeError, "strict"),
    (lambda: lowbit.load_case(None), TypeError, "path"),
    (lambda: lowbit.save_case(3, fp8_input()), TypeError, "path"),
    (lambda: lowbit.parse_case("text"), TypeError, "data"),
])
def test_bad_arguments_name_themselves(call, error, named):
    with pytest.raises(error) as e:
        call()
    assert not isinstance(e.value, lowbit.CaseError)  # the caller's argument, not a file
    assert named in str(e.value), e.value


def safetensors_header(header):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h


def test_a_tensor_numpy_cannot_shape_is_a_case_error(tmp_path):
    path = tmp_path / "big.safetensors"
    path.write_bytes(safetensors_header({"t": {"dtype": "F32", "shape": [2**62, 0], "data_offsets": [0, 0]}}))
    with pytest.raises(lowbit.CaseError, match=r"big.safetensors: tensor 't': shape \[4611686018427387904, 0\]"):
        lowbit.load_case(path)
    with pytest.raises(lowbit.CaseError, match=r"tensor 't'"):
        lowbit.parse_case(path.read_bytes())
