"""lowbit.reference on every registered format, and against the official golden cases (outputs of
torchao, bitsandbytes, torch, ml_dtypes and COAT themselves: an independent source)."""
import json
import os

import numpy as np
import pytest

import lowbit
from conftest import GOLDEN

ALL = lowbit.formats()


def test_formats_are_the_registry():
    assert len(ALL) == len(set(ALL)) >= 20
    for name in ("torchao.codebook8.signed", "torchao.codebook4.unsigned", "torchao.fp8", "bnb.blockwise8.dynamic"):
        assert name in ALL
    info = lowbit.format_info("torchao.codebook8.signed")
    assert info.default_params == {"block_size": 256}
    assert [t.name for t in info.outputs] == ["codes", "scale", "dequant"]
    with pytest.raises(ValueError, match="unknown format 'no.such'"):
        lowbit.format_info("no.such")


@pytest.mark.parametrize("name", ALL)
def test_every_format_runs_with_its_defaults(name):
    info = lowbit.format_info(name)
    battery = lowbit.default_inputs(name, steps=1)
    # every format has one: the 2-D formats (COAT's coat.act.* and coat.fake.symm) as whole tiles
    assert battery, f"{name}: empty default battery"
    out = lowbit.reference(name, battery[0])
    made = set(out) - set(battery[0])
    assert made and made <= {t.name for t in info.outputs}, (name, made)
    # the engine's own check of the result against the format's schema: every output there
    lowbit._core.validate(*out._engine_form(), "complete")
    # deterministic, and identical to the battery's own reference outputs
    again = lowbit.reference(name, battery[0])
    assert lowbit.compare(out, again, strict=True).conformant
    full = lowbit.default_inputs(name, steps=1, with_outputs=True)[0]
    assert lowbit.compare(full, out, strict=True).conformant


def golden_entries():
    with open(os.path.join(GOLDEN, "MANIFEST.json")) as f:
        entries = json.load(f)["files"]
    # one case per format keeps the suite quick; conform (CTest) runs them all
    seen, out = set(), []
    for e in entries:
        if e["format"] in seen or e["format"] not in ALL:
            continue
        seen.add(e["format"])
        out.append(e)
    return out


@pytest.mark.parametrize("entry", golden_entries(), ids=lambda e: e["path"])
def test_reference_reproduces_a_golden_case(entry):
    golden = lowbit.load_case(os.path.join(GOLDEN, entry["path"]))
    info = lowbit.format_info(golden.format)
    inputs = {t.name: golden[t.name] for t in info.inputs + info.optional_inputs if t.name in golden}
    inputs = lowbit.Case(inputs, metadata=golden.metadata, dtypes={k: golden.dtypes[k] for k in inputs})
    out = lowbit.reference(golden.format, inputs)
    report = lowbit.compare(golden, out)
    assert report.conformant, report.markdown()


def test_params_override_defaults_and_bad_params_are_refused():
    x = np.linspace(-1, 1, 512, dtype=np.float32)
    out = lowbit.reference("torchao.codebook8.signed", {"input": x}, block_size=128)
    assert out["scale"].shape == (4,)
    with pytest.raises(ValueError, match="nope"):
        lowbit.reference("torchao.codebook8.signed", {"input": x}, nope=1)
    with pytest.raises(ValueError):
        lowbit.reference("torchao.codebook8.signed", {"input": x}, block_size=-1)


def test_inputs_are_never_converted():
    with pytest.raises(TypeError, match="float64"):
        lowbit.reference("torchao.fp8", {"input": np.zeros(256)})
    with pytest.raises(TypeError, match="not an array"):
        lowbit.reference("torchao.fp8", {"input": [0.0] * 256})


def test_bit_views_keep_their_dtype():
    x = np.linspace(-3, 3, 256, dtype=np.float32)
    out = lowbit.reference("torchao.fp8", {"input": x})
    assert out.dtypes["codes"] == "F8_E4M3" and out["codes"].dtype == np.uint8
    # uint8 codes given back take the format's FP8 dtype: identical
    actual = {"input": x, "codes": out["codes"].copy(), "scale": out["scale"], "dequant": out["dequant"]}
    assert lowbit.compare(out, actual).conformant
    # a strided (non-contiguous) view is read in element order
    wide = np.zeros((256, 2), dtype=np.float32)
    wide[:, 0] = x
    again = lowbit.reference("torchao.fp8", {"input": wide[:, 0]})
    assert np.array_equal(again["codes"], out["codes"])


def test_bf16_inputs_as_bit_patterns():
    x = np.random.default_rng(4).standard_normal((32, 128)).astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # bf16 by truncation: exactly representable values
    as_bf16 = lowbit.reference("coat.act.pergroup", {"input": bits})
    assert as_bf16.dtypes["input"] == "BF16" and as_bf16["input"].dtype == np.uint16
    widened = (bits.astype(np.uint32) << 16).view(np.float32)
    as_f32 = lowbit.reference("coat.act.pergroup", {"input": widened})
    # the same values in bf16 and in float32 quantize alike (COAT reads bf16 as float32)
    for name in set(as_f32) - {"input"}:
        assert np.array_equal(as_bf16[name], as_f32[name]), name


class DLPackOnly:
    """A DLPack producer that is not a NumPy array (as a JAX or CuPy CPU array would be)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_any_dlpack_producer_is_read():
    x = np.random.default_rng(5).standard_normal(512).astype(np.float32)
    a = lowbit.reference("torchao.codebook8.signed", {"input": DLPackOnly(x)})
    b = lowbit.reference("torchao.codebook8.signed", {"input": x})
    assert lowbit.compare(b, a, strict=True).conformant
