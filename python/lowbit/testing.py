"""pytest helpers: assert_conformant, the check of a kernel's outputs against the reference, and
assert_verified, lowbit.verify's whole run (battery, golden cases, diagnosis) as one assertion."""
from __future__ import annotations

import lowbit


class NotConformant(AssertionError):
    """A kernel's outputs differ from the reference beyond the policy; .report is the comparison."""

    def __init__(self, message: str, report):
        super().__init__(message)
        self.report = report


def assert_conformant(format: str, inputs, outputs, policy: str = None, strict: bool = False, max_listed: int = 10,
                      **params):
    """Runs the reference on `inputs` (a dict or a Case, e.g. the lowbit_case fixture's) with `params`,
    and compares `outputs` (a dict of name -> array or torch tensor: every output of the format) with
    the reference's, bit for bit, under `policy` (default: the format's). Raises NotConformant (an
    AssertionError) whose message is the report's verdict, totals and first mismatches (the engine's
    Markdown, at most max_listed per tensor); returns the Report when the outputs conform."""
    expected = lowbit.reference(format, inputs, **params)
    info = lowbit.format_info(format)
    input_names = {t.name for t in info.inputs + info.optional_inputs}
    # the actual case is the same inputs with the kernel's outputs, as verify builds it
    actual = lowbit.Case({k: v for k, v in expected.items() if k in input_names}, metadata=expected.metadata,
                         dtypes={k: v for k, v in expected.dtypes.items() if k in input_names},
                         origin="the kernel's outputs")
    actual.update(outputs)
    report = lowbit.compare(expected, actual, policy=policy, strict=strict, max_listed=max_listed)
    if not report.conformant:
        raise NotConformant(f"{format}: the outputs are not conformant\n\n{report.markdown()}", report)
    return report


def assert_verified(kernel, format: str, **verify_args):
    """Runs lowbit.verify(kernel, format, **verify_args) (a plugin's path or a Python function; the same
    arguments) and returns its VerifyReport when every case conforms. Otherwise raises NotConformant (an
    AssertionError) whose message is what a failing test should show: each case that did not conform
    (verify's MISMATCH and FAILED lines, not the ok ones) and the verdict line with its diagnosis, the
    known variant of the format's arithmetic that reproduces the kernel's outputs where there is one."""
    report = lowbit.verify(kernel, format, **verify_args)
    if not report.conformant:
        failed = [line for line in report.lines if not line.startswith("ok ")]
        raise NotConformant("\n".join(failed + [report.summary]), report)
    return report
