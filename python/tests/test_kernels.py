"""A kernel under review against the reference: the right NumPy port of torchao's 8-bit state passes on
the whole default battery; each mutant fails with the class a kernel author expects in the message."""
import pytest

import lowbit
import lowbit.testing
import numpy_kernels

FORMAT = "torchao.codebook8.signed"


@pytest.mark.lowbit_format(FORMAT)
def test_right_numpy_kernel_passes(lowbit_case):
    outputs = numpy_kernels.torchao_codebook8(lowbit_case["input"], lowbit_case["qmap"], **lowbit_case.params)
    report = lowbit.testing.assert_conformant(FORMAT, lowbit_case, outputs)
    assert report.conformant and report.mismatches == 0


def failures(**mutation):
    """The NotConformant errors of a mutant over the default battery."""
    out = []
    for case in lowbit.default_inputs(FORMAT):
        outputs = numpy_kernels.torchao_codebook8(case["input"], case["qmap"], **case.params, **mutation)
        try:
            lowbit.testing.assert_conformant(FORMAT, case, outputs)
        except lowbit.testing.NotConformant as e:
            out.append(e)
    return out


def test_reciprocal_multiply_fails_as_arithmetic_variant():
    errors = failures(reciprocal=True)
    assert errors, "x * (1 / scale) must differ from x / scale somewhere on the battery (scaled-edges)"
    classes = {}
    for e in errors:
        assert isinstance(e, AssertionError)
        for k, v in e.report.classes.items():
            classes[k] = classes.get(k, 0) + v
    assert "arithmetic-variant" in classes, classes
    message = str(next(e for e in errors if "arithmetic-variant" in e.report.classes))
    assert "NOT conformant" in message and "arithmetic-variant" in message and "reciprocal" in message
    assert "first" in message  # the first mismatches are listed


def test_ties_down_fails_as_tie():
    errors = failures(ties_up=False)
    assert errors
    tie_errors = [e for e in errors if "tie" in e.report.classes]
    assert tie_errors, [e.report.classes for e in errors]
    assert "| tie |" in str(tie_errors[0]) or "tie" in str(tie_errors[0])


def test_a_missing_output_is_not_conformant():
    case = lowbit.default_inputs(FORMAT)[0]
    outputs = numpy_kernels.torchao_codebook8(case["input"], case["qmap"], **case.params)
    del outputs["dequant"]
    with pytest.raises(AssertionError, match="missing from the actual case"):
        lowbit.testing.assert_conformant(FORMAT, case, outputs)


def test_one_flipped_code_is_reported_at_its_index():
    case = lowbit.default_inputs(FORMAT)[-1]
    outputs = numpy_kernels.torchao_codebook8(case["input"], case["qmap"], **case.params)
    outputs["codes"] = outputs["codes"].copy()
    outputs["codes"][7] ^= 1
    with pytest.raises(lowbit.testing.NotConformant) as info:
        lowbit.testing.assert_conformant(FORMAT, case, outputs)
    codes = info.value.report.tensor("codes")
    assert codes.mismatches == 1 and codes.first_mismatches[0]["index"] == 7
    assert info.value.report.tensor("scale").mismatches == 0


def test_policy_and_strict_reach_the_engine(tmp_path):
    """The ties-down mutant's tie-only cases pass under a policy that allows ties (bnb-cuda), fail
    under --strict, and a policy file given by path is read."""
    tie_only = []
    for case in lowbit.default_inputs(FORMAT):
        outputs = numpy_kernels.torchao_codebook8(case["input"], case["qmap"], **case.params, ties_up=False)
        report = lowbit.testing.lowbit.compare(lowbit.reference(FORMAT, case), {**case, **outputs})
        if not report.conformant and set(report.classes) <= {"tie", "scale-propagated"} and "tie" in report.classes:
            tie_only.append((case, outputs))
    assert tie_only
    case, outputs = tie_only[0]
    report = lowbit.testing.assert_conformant(FORMAT, case, outputs, policy="bnb-cuda")
    assert report.conformant and report.policy == "bnb-cuda" and report.mismatches > 0
    with pytest.raises(AssertionError, match=r"\(strict\)"):
        lowbit.testing.assert_conformant(FORMAT, case, outputs, policy="bnb-cuda", strict=True)
    own = tmp_path / "ties.json"
    own.write_text('{"name": "ties", "description": "ties allowed", "allow_ties": true, "boundary_ulps": 0, '
                   '"allow_scale_propagated": false}')
    assert lowbit.compare(lowbit.reference(FORMAT, case), {**case, **outputs}, policy=str(own)).conformant
    with pytest.raises(RuntimeError, match="no-such-policy"):
        lowbit.compare(lowbit.reference(FORMAT, case), {**case, **outputs}, policy="no-such-policy")
