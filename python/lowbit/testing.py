"""pytest helpers: assert_conformant, the check of a kernel's outputs against the reference."""
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
