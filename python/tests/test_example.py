"""The five-line example of docs/python.md, run as it is printed there (test_docs_show_this_example
holds the two together), and the same check failing, with the report's summary, on a wrong kernel."""
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchao")

# --- example: docs/python.md ---
import pytest
import torch

import lowbit.testing
from torchao.optim.subclass_fp8 import quantize_fp8  # the kernel under review


@pytest.mark.lowbit_format("torchao.fp8")
def test_fp8_state_kernel(lowbit_case):
    block = lowbit_case.params["block_size"]  # the battery runs other block sizes too
    codes, scale = quantize_fp8(torch.from_numpy(lowbit_case["input"]), block_size=block)
    dequant = (codes.float().view(-1, block) * scale.view(-1, 1)).view(-1)
    lowbit.testing.assert_conformant("torchao.fp8", lowbit_case, {"codes": codes, "scale": scale, "dequant": dequant})
# --- end of example ---


def quantize_fp8_reciprocal_scale(x, block_size):
    """torchao's quantize_fp8 with amax * (1 / 448) for amax / 448: a wrong kernel (the scale is off by
    an ulp in some blocks, and every code of such a block with it)."""
    x = x.view(-1, block_size)
    scale = x.abs().amax(-1).clip(1e-12) * (1 / torch.finfo(torch.float8_e4m3fn).max)
    return (x / scale.view(-1, 1)).to(torch.float8_e4m3fn).view(-1), scale


def test_the_example_fails_with_the_summary_on_a_wrong_kernel():
    messages = []
    for case in lowbit.default_inputs("torchao.fp8"):
        block = case.params["block_size"]
        codes, scale = quantize_fp8_reciprocal_scale(torch.from_numpy(case["input"]), block)
        dequant = (codes.float().view(-1, block) * scale.view(-1, 1)).view(-1)
        try:
            lowbit.testing.assert_conformant("torchao.fp8", case, {"codes": codes, "scale": scale, "dequant": dequant})
        except AssertionError as e:
            messages.append(str(e))
    assert messages, "the wrong scale must fail on the default battery"
    assert all(m.startswith("torchao.fp8: the outputs are not conformant\n\n# Comparison: NOT conformant") for m in messages)
    assert all("## `scale`: first" in m and "scale-propagated" in m for m in messages), messages[0]


def test_docs_show_this_example():
    here = open(__file__).read()
    example = here.split("# --- example: docs/python.md ---\n")[1].split("# --- end of example ---")[0].strip()
    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")).read()
    assert example in docs, "docs/python.md must show the example of python/tests/test_example.py verbatim"
