"""lowbit.verify on a Python function (issue 28 item 6): the engine's verify (battery, golden cases,
report) runs a NumPy or torch kernel in this process. Kernels: numpy_kernels.py (a port of torchao's
code and its one-bug mutants) and torchao's own quant_utils functions; expected values are the
reference's and the official golden cases, never the function's."""
import numpy as np
import pytest

import lowbit
import numpy_kernels
from conftest import GOLDEN


def numpy_codebook8(**mutation):
    def kernel(case):
        return numpy_kernels.torchao_codebook8(case["input"], case["qmap"], **case.params, **mutation)
    return kernel


def test_a_numpy_port_of_torchao_conforms_on_the_battery_and_the_golden_cases():
    r = lowbit.verify(numpy_codebook8(), "torchao.codebook8.signed", golden=GOLDEN, name="numpy port")
    assert r.conformant, "\n".join(r.lines)
    assert r.kernel == "numpy port" and r.data["library"] == "Python function numpy port"
    labels = [c.label for c in r.cases]
    assert "scaled-edges" in labels and sum(label.startswith("golden ") for label in labels) >= 6


@pytest.mark.parametrize("mutation,caught_on", [({"reciprocal": True}, "scaled-edges"), ({"ties_up": False}, "edges")])
def test_a_numpy_mutant_is_caught(mutation, caught_on):
    r = lowbit.verify(numpy_codebook8(**mutation), "torchao.codebook8.signed")
    assert not r.conformant
    assert any(line.startswith(f"MISMATCH {caught_on}:") for line in r.lines), r.lines
    assert "(Python function test_verify_callable.numpy_codebook8.<locals>.kernel)" in r.summary


def test_assert_verified_returns_the_report_or_fails_with_the_failing_cases_and_the_diagnosis():
    from lowbit.testing import NotConformant, assert_verified

    good = assert_verified(numpy_codebook8(), "torchao.codebook8.signed", inputs=["edges", "scaled-edges"])
    assert good.conformant and [c.label for c in good.cases] == ["edges", "scaled-edges"]
    with pytest.raises(NotConformant) as caught:
        assert_verified(numpy_codebook8(reciprocal=True), "torchao.codebook8.signed", inputs=["edges", "scaled-edges"])
    message = str(caught.value).splitlines()
    # the one failing case's line, then the verdict with the diagnosis: the reciprocal, named
    assert len(message) == 2 and message[0].startswith("MISMATCH scaled-edges: "), message
    assert "NOT conformant" in message[1] and "(reciprocal): " in message[1], message
    assert caught.value.report.diagnosis.variant == "reciprocal"


def test_torchao_s_own_functions_conform_and_their_reciprocal_variant_is_caught():
    quant_utils = pytest.importorskip("torchao.optim.quant_utils")
    import torch

    def official(case):
        x, qmap = case.torch("input"), case.torch("qmap")
        y, scale = quant_utils.scale_tensor(x, case.params["block_size"])
        codes = quant_utils.quantize_8bit_with_qmap(y, qmap)
        return {"codes": codes, "scale": scale, "dequant": quant_utils.dequant_with_qmap(codes, qmap, scale)}

    def reciprocal(case):
        x, qmap = case.torch("input"), case.torch("qmap")
        blocks = x.view(-1, case.params["block_size"])
        scale = blocks.abs().amax(-1).clip(1e-12)
        codes = quant_utils.quantize_8bit_with_qmap((blocks * (1 / scale.view(-1, 1))).view(x.shape), qmap)
        return {"codes": codes, "scale": scale, "dequant": quant_utils.dequant_with_qmap(codes, qmap, scale)}

    good = lowbit.verify(official, "torchao.codebook8.signed", golden=GOLDEN)
    assert good.conformant, "\n".join(good.lines)
    bad = lowbit.verify(reciprocal, "torchao.codebook8.signed", golden=GOLDEN)
    assert not bad.conformant and "MISMATCH scaled-edges: 96381 elements" in "\n".join(bad.lines)


@pytest.mark.parametrize("returns,says", [
    (lambda case: 1 / 0, "the kernel raised ZeroDivisionError: division by zero"),
    (lambda case: [1, 2], "returned list, not a dict of its outputs (codes, scale, dequant)"),
    (lambda case: {"codes": np.zeros(3, np.uint8)}, "returned 'codes' of shape [3]; torchao.codebook8.signed makes U8 [1280]"),
    (lambda case: {**numpy_kernels.torchao_codebook8(case["input"], case["qmap"]), "extra": np.zeros(1)},
     "returned 'extra', which torchao.codebook8.signed does not make"),
    (lambda case: {**numpy_kernels.torchao_codebook8(case["input"], case["qmap"]), "scale": None}, "tensor 'scale'"),
    (lambda case: {k: v for k, v in numpy_kernels.torchao_codebook8(case["input"], case["qmap"]).items() if k != "dequant"},
     "returned no 'dequant' (F32 [1280])"),
    (lambda case: {**numpy_kernels.torchao_codebook8(case["input"], case["qmap"]),
                   "codes": numpy_kernels.torchao_codebook8(case["input"], case["qmap"])["codes"].astype(np.int64)},
     "returned 'codes' as I64 [1280]; torchao.codebook8.signed makes U8 [1280]"),
])
def test_a_function_that_fails_or_returns_the_wrong_outputs_fails_its_case(returns, says):
    r = lowbit.verify(returns, "torchao.codebook8.signed", inputs=["edges"])
    assert not r.conformant and len(r.cases) == 1
    assert r.lines[0].startswith("FAILED   edges: ") and says in r.lines[0], r.lines[0]
    assert r.cases[0].failure


def test_plugin_options_are_refused_for_a_function():
    with pytest.raises(ValueError, match="timeout: applies to a plugin's kernels"):
        lowbit.verify(numpy_codebook8(), "torchao.codebook8.signed", timeout=5)
    with pytest.raises(ValueError, match="cuda_runner: applies to a plugin's kernels"):
        lowbit.verify(numpy_codebook8(), "torchao.codebook8.signed", cuda_runner="/x.so")
    with pytest.raises(ValueError, match="input 'nonsense:n=3'"):
        lowbit.verify(numpy_codebook8(), "torchao.codebook8.signed", inputs=["nonsense:n=3"])


def test_the_docs_pytest_example_runs_as_printed_and_fails_my_8bit_with_its_diagnosis(tmp_path):
    # docs/python.md's pytest example of lowbit.testing.assert_verified, run as printed (from the
    # repository's root, where golden="golden" is): torchao's own functions pass, my_8bit fails with the
    # failing cases' lines and the reciprocal named
    pytest.importorskip("torchao.optim.quant_utils")
    import os
    import subprocess
    import sys

    from conftest import REPO

    docs = open(os.path.join(REPO, "docs", "python.md"), encoding="utf-8").read()
    start = docs.index("```python\nimport lowbit.testing\nimport pytest\nfrom torchao.optim.quant_utils")
    code = docs[start + len("```python\n"):docs.index("```", start + 3)]
    (tmp_path / "test_example.py").write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(lowbit.__file__)),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_example.py")],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "1 failed, 1 passed" in out.stdout, out.stdout[-3000:]
    assert "E           lowbit.testing.NotConformant: MISMATCH scaled-edges: 96381 elements, 1672 mismatches" in out.stdout
    assert "diagnosis: behaves as the reference with x * (1 / s) for x / s (reciprocal): " in out.stdout
