"""The pytest plugin (registered by the package's pytest11 entry point).

    @pytest.mark.lowbit_format("torchao.codebook8.signed")
    def test_my_kernel(lowbit_case):
        outputs = my_kernel(lowbit_case["input"], lowbit_case["qmap"])
        lowbit.testing.assert_conformant("torchao.codebook8.signed", lowbit_case, outputs)

A test that takes the ``lowbit_case`` fixture runs once per case of the format's default battery
(lowbit.default_inputs: the inputs of ``lowbit verify``), with the case's battery name as its test id.
The marker takes the format and, for optimizer steps, ``steps=N`` (default 3).
"""
from __future__ import annotations

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "lowbit_format(name, steps=3): the format whose default battery the "
                                       "lowbit_case fixture yields, one test per case")


def pytest_generate_tests(metafunc):
    if "lowbit_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("lowbit_format")
    if marker is None or not marker.args:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: the lowbit_case fixture needs "
                                f"@pytest.mark.lowbit_format(\"format.name\")")
    import lowbit

    cases = lowbit.default_inputs(marker.args[0], steps=marker.kwargs.get("steps", 3))
    if not cases:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: format {marker.args[0]} has no default battery")
    metafunc.parametrize("lowbit_case", cases, ids=[c.origin for c in cases])
