"""torch tensors in (through DLPack; bf16 and FP8 with their dtypes), and Case.torch out."""
import numpy as np
import pytest

import lowbit

torch = pytest.importorskip("torch")


def test_float32_tensors_read_as_numpy_arrays():
    x = torch.randn(512, generator=torch.Generator().manual_seed(2))
    from_torch = lowbit.reference("torchao.codebook8.signed", {"input": x})
    from_numpy = lowbit.reference("torchao.codebook8.signed", {"input": x.numpy()})
    assert lowbit.compare(from_numpy, from_torch, strict=True).conformant


def test_non_contiguous_tensors_are_read_in_element_order():
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(3))
    t = x.t()  # a view with swapped strides
    assert not t.is_contiguous()
    out = lowbit.reference("torchao.fp8", {"input": t.reshape(-1)[:256]})
    ref = lowbit.reference("torchao.fp8", {"input": np.ascontiguousarray(t.numpy()).reshape(-1)[:256]})
    assert np.array_equal(out["codes"], ref["codes"])
    out2 = lowbit.reference("coat.act.pergroup", {"input": t.contiguous()})
    out3 = lowbit.reference("coat.act.pergroup", {"input": t})
    assert lowbit.compare(out2, out3, strict=True).conformant


def test_bf16_tensors_keep_their_dtype():
    x = torch.randn(32, 128, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    out = lowbit.reference("coat.act.pergroup", {"input": x})
    assert out.dtypes["input"] == "BF16"
    bits = x.view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(out["input"], bits)
    assert torch.equal(out.torch("input"), x)


def test_fp8_outputs_come_back_as_torch_fp8():
    x = torch.linspace(-3, 3, 256)
    out = lowbit.reference("torchao.fp8", {"input": x})
    codes = out.torch("codes")
    assert codes.dtype == torch.float8_e4m3fn
    assert np.array_equal(codes.view(torch.uint8).numpy(), out["codes"])
    # and torch FP8 codes given back compare as F8_E4M3
    actual = {"input": x, "codes": codes, "scale": torch.from_numpy(out["scale"]), "dequant": out["dequant"]}
    assert lowbit.compare(out, actual, strict=True).conformant


def test_unsupported_torch_dtypes_are_refused():
    with pytest.raises(TypeError, match="torch.float64"):
        lowbit.reference("torchao.fp8", {"input": torch.zeros(256, dtype=torch.float64)})


def test_bf16_and_fp8_files_both_ways_with_safetensors_torch(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    x = torch.randn(32, 128, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    ours = lowbit.reference("coat.act.pergroup", {"input": x})
    path = tmp_path / "ours.safetensors"
    lowbit.save_case(path, ours)
    theirs = st.load_file(str(path))
    for name in ours:
        assert theirs[name].dtype == ours.torch(name).dtype, name
        assert torch.equal(theirs[name].view(torch.uint8), ours.torch(name).view(torch.uint8)), name
    path2 = tmp_path / "theirs.safetensors"
    st.save_file({name: ours.torch(name).contiguous() for name in ours}, str(path2), metadata=dict(ours.metadata))
    back = lowbit.load_case(path2)
    assert back.dtypes == ours.dtypes
    assert lowbit.compare(ours, back, strict=True).conformant
