"""lowbit.verify: the engine's verify run (the same function as `lowbit verify`) on kernel plugins built
with the repository (conformance/plugins/ and the mutation bank conformance/mutants/, in
build/release/conformance/plugins/, or $LOWBIT_PLUGIN_DIR). The reference as a plugin must pass, a
mutant must be caught with the class its bug has, and where the CLI is built its report, lines and
verdict must be the package's byte for byte. Without a build of the plugins these tests are skipped
(the package alone builds no plugin)."""
import json
import os
import subprocess

import pytest

import lowbit
from conftest import GOLDEN, REPO

PLUGINS = os.environ.get("LOWBIT_PLUGIN_DIR", os.path.join(REPO, "build", "release", "conformance", "plugins"))
CLI = os.environ.get("LOWBIT_CLI", os.path.join(REPO, "build", "release", "tools", "lowbit", "lowbit"))
# the variant the diagnosis must name for each mutant of the bank, declared by hand from each bug
with open(os.path.join(REPO, "conformance", "mutants", "diagnoses.json"), encoding="utf-8") as f:
    DECLARED = json.load(f)["mutants"]


def plugin(name):
    path = os.path.join(PLUGINS, name + ".so")
    if not os.path.isfile(path):
        pytest.skip(f"no {path}: the plugins are built with the repository (cmake --build --preset release)")
    return path


def test_the_reference_as_a_plugin_is_conformant_on_the_battery_and_the_golden_cases():
    r = lowbit.verify(plugin("reference_plugin"), "torchao.fp8", steps=1, golden=GOLDEN)
    assert r.conformant and bool(r)
    assert r.kernel == "reference.torchao.fp8" and r.format == "torchao.fp8"
    labels = [c.label for c in r.cases]
    assert "edges" in labels and any(label.startswith("golden ") for label in labels)
    assert all(c.conformant and c.report.mismatches == 0 for c in r.cases)
    assert r.diagnosis is None  # a conformant kernel is not diagnosed
    assert f": {len(r.cases)} of {len(r.cases)} cases conformant: conformant; " in r.summary
    assert r.markdown().startswith("# lowbit verify: kernel `reference.torchao.fp8`, format torchao.fp8: conformant")


def test_a_mutant_is_caught_with_the_class_of_its_bug(tmp_path):
    # torchao.codebook8.signed's quantizer multiplying by 1/absmax instead of dividing (mutant_reciprocal)
    r = lowbit.verify(plugin("mutant_reciprocal"), "torchao.codebook8.signed", save_cases=tmp_path / "saved")
    assert not r.conformant
    bad = [c for c in r.cases if not c.conformant]
    assert bad and "scaled-edges" in [c.label for c in bad]
    assert any(line.startswith("MISMATCH scaled-edges:") for line in r.lines)
    caught = next(c for c in bad if c.label == "scaled-edges")
    assert caught.report.tensor("codes").classes.get("arithmetic-variant", 0) > 0
    assert "NOT conformant" in r.summary and "NOT conformant" in r.markdown().splitlines()[0]
    # the diagnosis: the reciprocal variant reproduces every mismatch of every failing case
    assert r.diagnosis.variant == "reciprocal" and r.diagnosis.reproducing[0] == "reciprocal"
    assert r.diagnosis.description == "the reference with x * (1 / s) for x / s"
    assert r.diagnosis.cases == len(bad) and r.diagnosis.mismatches > 0 and r.diagnosis.closest is None
    assert r.diagnosis.line in r.summary and repr(r.diagnosis) == "Diagnosis(reciprocal)"
    saved = sorted(os.listdir(tmp_path / "saved"))
    assert "scaled-edges.actual.safetensors" in saved and "scaled-edges.expected.safetensors" in saved
    actual = lowbit.load_case(tmp_path / "saved" / "scaled-edges.actual.safetensors")
    expected = lowbit.load_case(tmp_path / "saved" / "scaled-edges.expected.safetensors")
    assert not lowbit.compare(expected, actual).conformant


@pytest.mark.parametrize("library,format,args", [
    ("reference_plugin", "torchao.qmap", []),
    ("mutant_fp8_ties_away", "fp8.e4m3fn.satfinite", ["normal:n=300"]),
])
def test_the_cli_prints_and_writes_what_the_package_returns(tmp_path, library, format, args):
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no {CLI}: the CLI is built with the repository")
    path = plugin(library)
    r = lowbit.verify(path, format, inputs=args or None, golden=GOLDEN)
    kernel = f"{path}:{r.kernel}"
    cmd = [CLI, "verify", "--kernel", kernel, "--golden", GOLDEN, "--report", str(tmp_path / "r.json"),
           "--markdown", str(tmp_path / "r.md")] + [a for spec in args for a in ("--input", spec)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == (0 if r.conformant else 1), out.stderr
    assert out.stdout.splitlines() == r.lines + [r.summary]
    assert (tmp_path / "r.json").read_text() == r.json() + "\n"
    assert (tmp_path / "r.md").read_text() == r.markdown()


def test_bad_arguments_name_themselves():
    ref = plugin("reference_plugin")
    with pytest.raises(ValueError, match="no kernel named 'nope'"):
        lowbit.verify(ref, "torchao.fp8", name="nope")
    with pytest.raises(ValueError, match="implements torchao.fp8"):
        lowbit.verify(ref, "torchao.qmap", name="reference.torchao.fp8")
    with pytest.raises(ValueError, match="is not a file"):
        lowbit.verify(os.path.join(PLUGINS, "absent.so"), "torchao.fp8")
    with pytest.raises(ValueError, match="input 'nonsense:n=3'"):
        lowbit.verify(ref, "torchao.fp8", inputs=["nonsense:n=3"])
    with pytest.raises(ValueError, match="steps=0"):
        lowbit.verify(ref, "torchao.fp8", steps=0)
    with pytest.raises(ValueError, match="holds no MANIFEST.json"):
        lowbit.verify(ref, "torchao.fp8", golden=PLUGINS)
    with pytest.raises(lowbit.PluginError):
        lowbit.verify(plugin("malformed_abi_version"), "torchao.fp8")


def test_a_cuda_kernel_runs_through_the_runner_the_cli_uses(tmp_path, monkeypatch):
    # fake_cuda_runner stands in for liblowbit_cuda_runner.so (a "device" that runs the kernel on the host)
    runner, twin = plugin("fake_cuda_runner"), plugin("cuda_perblock_declared_twin")
    monkeypatch.setenv("LOWBIT_FAKE_CUDA", "ok")
    monkeypatch.delenv("LOWBIT_CUDA_RUNNER", raising=False)
    with pytest.raises(ValueError, match="needs a CUDA device: no CUDA runner library is given"):
        lowbit.verify(twin, "fp8.perblock.e4m3", inputs=["special"])
    r = lowbit.verify(twin, "fp8.perblock.e4m3", inputs=["special"], cuda_runner=runner)
    assert r.conformant, r.summary
    assert r.lines[0] == "device: lowbit fake device (compute capability 9.0), driver 13.1, runtime 13.0"
    assert json.loads(r.json())["device"]["name"] == "lowbit fake device"
    monkeypatch.setenv("LOWBIT_FAKE_CUDA", "no-device")
    with pytest.raises(ValueError, match="needs a CUDA device: cudaGetDeviceCount: no CUDA-capable device"):
        lowbit.verify(twin, "fp8.perblock.e4m3", inputs=["special"], cuda_runner=runner)
    # a wrong CUDA kernel (its scale by the reciprocal) is caught through the runner as on the CLI
    monkeypatch.setenv("LOWBIT_FAKE_CUDA", "ok")
    monkeypatch.setenv("LOWBIT_CUDA_RUNNER", runner)
    bad = lowbit.verify(plugin("cuda_mutant_perblock_reciprocal_declared_twin"), "fp8.perblock.e4m3")
    assert not bad.conformant and any(line.startswith("MISMATCH scaled-edges") for line in bad.lines)


def test_without_a_name_the_kernel_of_the_format_is_chosen_and_the_others_are_listed():
    twins = plugin("blockwise_host_twin")
    r = lowbit.verify(twins, "torchao.codebook8.unsigned", inputs=["special"])
    assert r.kernel == "host-twin.torchao.codebook8.unsigned" and r.conformant
    with pytest.raises(ValueError) as e:
        lowbit.verify(twins, "coat.act.pergroup")
    message = str(e.value).splitlines()
    assert message[0].endswith("holds no kernel of format coat.act.pergroup (its 7 kernels are listed below):")
    assert "  host-twin.torchao.fp8 (torchao.fp8)" in message[1:] and len(message) == 8


def test_every_mutant_of_the_bank_gets_the_cli_s_verdict_and_lines_from_python():
    # issue 28's Done when: lowbit.verify reproduces the CLI's verdicts on the bank (conformance/mutants/,
    # one kernel a plugin): the same exit status, case lines, verdict line and report
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no {CLI}: the CLI is built with the repository")
    bank = sorted(f for f in os.listdir(PLUGINS) if f.startswith("mutant_") and f.endswith(".so")) if os.path.isdir(PLUGINS) else []
    if not bank:
        pytest.skip(f"no mutants in {PLUGINS}: they are built with the repository")
    for library in bank:
        path = os.path.join(PLUGINS, library)
        out = subprocess.run([CLI, "verify", "--kernel", path, "--golden", GOLDEN], capture_output=True, text=True)
        assert out.returncode == 1, (library, out.stdout, out.stderr)  # each mutant is caught
        summary = out.stdout.splitlines()[-1]
        format = summary.split(", format ", 1)[1].split(",", 1)[0]
        r = lowbit.verify(path, format, golden=GOLDEN)
        assert not r.conformant, library
        assert out.stdout.splitlines() == r.lines + [r.summary], library
        # the diagnosis as an object: the verdict line's, naming the variant the bank declares
        assert r.diagnosis is not None and r.diagnosis.line in r.summary, library
        declared = DECLARED[library[:-3]]
        named = r.diagnosis.nan_aside[0] if declared.get("nan_aside") else r.diagnosis.variant
        assert named == declared["variant"], (library, r.diagnosis.line)


def test_param_sets_every_generated_case_and_a_bad_one_is_named():
    # bitsandbytes' optimizers' second-moment map: the mutant wrong only there is caught with it alone
    r = lowbit.verify(plugin("mutant_bnb_dequant_nan_positive"), "bnb.blockwise8.dynamic", inputs=["special"],
                      param={"map": "dynamic_unsigned"})
    assert not r.conformant and [c.label for c in r.cases] == ["special.map-dynamic_unsigned"]
    assert lowbit.verify(plugin("mutant_bnb_dequant_nan_positive"), "bnb.blockwise8.dynamic", inputs=["special"]).conformant
    with pytest.raises(ValueError, match="param map=bogus: bnb map must be"):
        lowbit.verify(plugin("reference_plugin"), "bnb.blockwise8.dynamic", param={"map": "bogus"})
    with pytest.raises(ValueError, match="param nope=1: bnb.blockwise8.dynamic has no parameter 'nope'"):
        lowbit.verify(plugin("reference_plugin"), "bnb.blockwise8.dynamic", param={"nope": 1})
    with pytest.raises(TypeError, match="param"):
        lowbit.verify(plugin("reference_plugin"), "bnb.blockwise8.dynamic", param=[("map", "x")])
