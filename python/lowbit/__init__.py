"""lowbit: the bit-exact reference of low-bit optimizer quantizers, from Python.

Everything here calls the C++ engine (lowbit._core): the reference, the comparison and its mismatch
classes, the reports, the case reader and writer, the default input battery, the dequantizers and the
audit. This package only converts arrays and dicts. docs/python.md is its manual.
"""
from __future__ import annotations

import json
import numbers
import os

from . import _args, _core, _files
from ._arrays import BIT_VIEWS
from ._case import Case
from ._core import CaseError, PluginError
from ._formats import FormatInfo, TensorInfo, format_info
from ._formats import registry as _registry
from ._report import Diagnosis, Report, TensorReport, VerifyCase, VerifyReport

__version__ = _core.__version__
POLICY_DIR = os.path.join(os.path.dirname(__file__), "policies")

__all__ = [
    "Case", "CaseError", "PluginError", "VerifyReport", "VerifyCase", "Diagnosis", "verify", "FormatInfo", "TensorInfo", "Report", "TensorReport", "BIT_VIEWS", "formats", "format_info",
    "reference", "compare", "load_case", "save_case", "case_bytes", "parse_case", "default_inputs", "dequantize",
    "state_signature", "audit_state", "choose", "quantized_states", "dequantized_state_case", "tensor_signature",
    "optimizer_signature", "QuantizedState", "QuantizedStates", "StateSignature",
]


def formats() -> list:
    """The registered formats' names, in registry order (format_info(name) describes one)."""
    return list(_registry())


def _plain(v):
    return v.item() if hasattr(v, "item") and not isinstance(v, (list, dict, str)) else v


def _params_for(info: FormatInfo, params: dict) -> dict:
    """params as the engine's JSON types: a whole number given for a float default is that float."""
    out = {}
    for k, v in params.items():
        v = _plain(v)
        d = info.default_params.get(k)
        if isinstance(d, float) and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        out[k] = v
    return _args.params(out)


def _as_case(tensors, info: FormatInfo = None, origin="<python>") -> Case:
    if isinstance(tensors, Case):
        return tensors
    if not hasattr(tensors, "items"):
        raise TypeError(f"tensors: a {type(tensors).__name__}; give a lowbit.Case or a dict of name -> array")
    return Case(dict(tensors), origin=origin)


def _engine_form(case: Case, info: FormatInfo = None):
    return case._engine_form(info.declared_dtypes if info else None)


def reference(format: str, inputs, **params) -> Case:
    """The reference on `inputs` (a dict of name -> array, or a Case) with `params` over the format's
    defaults (and over the params a Case records). Tensors the format derives from its params (a
    codebook's default qmap) are added where `inputs` lacks them. Returns a Case with the inputs and
    the reference's outputs as NumPy arrays (BF16 and FP8 as bit patterns; Case.dtypes has the dtypes).
    Bad inputs (missing tensors, wrong dtype or shape, unknown params) raise lowbit.CaseError or
    ValueError naming the tensor or parameter."""
    info = format_info(format)
    given = _as_case(inputs, info)
    merged = dict(given.params) if given.format == format else {}
    merged.update(_args.params(params))
    merged = _params_for(info, merged)
    resolved = _core.resolved_params(format, json.dumps(merged))  # checks names and types first
    case = Case(dict(given), dtypes=given.dtypes, origin=given.origin)
    aux = Case._from_engine(_core.auxiliary_inputs(format, resolved))
    for name in aux:
        if name not in case:
            case[name] = aux[name]
            case.dtypes[name] = aux.dtypes[name]
    case.metadata = dict(given.metadata) if given.format == format else {}
    case.metadata.update({"format": format, "params": json.dumps(merged, sort_keys=True)})
    case.metadata.setdefault("source", f"lowbit {__version__}")
    case.metadata.setdefault("function", info.provenance)
    case.metadata.setdefault("generator", f"lowbit-python {__version__}")
    out = Case._from_engine(_core.run_reference(*_engine_form(case, info)))
    out.origin = f"lowbit.reference({format})"
    return out


def compare(expected, actual, policy: str = None, strict: bool = False, max_listed: int = 20) -> Report:
    """Every tensor of `expected` against the same-named tensor of `actual`, bit for bit, under a
    tolerance policy: a shipped name ("bit-exact", "bnb-cuda", "torch-cpu-eager") or a JSON file's path;
    default: the format's own. strict=True fails every mismatch, also those the policy allows.
    expected should be a complete case of its format (inputs and outputs, as reference() returns), so
    that each mismatch gets its class; a plain dict of `actual` takes expected's metadata."""
    if policy is not None and not isinstance(policy, str):
        policy = _args.path("policy", policy)
    strict = _args.flag("strict", strict)
    max_listed = _args.whole("max_listed", max_listed, 0, 1 << 31)
    exp = _as_case(expected, origin="expected")
    act = _as_case(actual, origin="actual")
    if not isinstance(actual, Case) or not act.metadata:
        act = Case(dict(act), metadata=exp.metadata, dtypes=act.dtypes, origin=act.origin)
    info = _registry().get(exp.format)
    if policy is None:
        policy = _core.default_tolerance(exp.format)
    # an actual bit-pattern array takes the expected tensor's dtype (uint8 codes against F8 codes)
    hints = lambda name: [exp.dtypes[name]] if name in exp.dtypes else (info.declared_dtypes(name) if info else None)
    e_form = _engine_form(exp, info)
    a_form = act._engine_form(hints)
    j, md, ok = _core.compare(*e_form, *a_form, policy, POLICY_DIR, bool(strict), int(max_listed))
    return Report(j, md, ok)


def load_case(path) -> Case:
    """A case file (safetensors), read and validated by the engine's reader: a malformed or hostile file
    raises lowbit.CaseError naming the file and the fault. Tensors of a registered format are also held
    to its schema (dtypes, shapes, indices)."""
    case = Case._from_engine(_core.read_case(_args.path("path", path)))
    if case.format in _registry():
        _core.validate(*_engine_form(case), "present")
    return case


def parse_case(data: bytes, origin: str = "<bytes>") -> Case:
    """load_case of a file's bytes."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data: a {type(data).__name__}, not bytes")
    case = Case._from_engine(_core.parse_case(bytes(data), _args.string("origin", origin)))
    if case.format in _registry():
        _core.validate(*_engine_form(case), "present")
    return case


def save_case(path, case) -> None:
    """Writes a case file as the C++ tools do (the engine's bytes: tensors in name order, header padded
    to 8 bytes), to a temporary file renamed into place: never a partial file, and never through a link
    planted beside it (lowbit/_files.py). `case` is a Case or a dict of arrays. OSError naming the path
    when it cannot be written (a target that is a link, a folder or a FIFO is refused)."""
    _files.write_atomically(_args.path("path", path), case_bytes(case))


def case_bytes(case) -> bytes:
    """The bytes save_case would write."""
    c = _as_case(case)
    return _core.serialize_case(*_engine_form(c, _registry().get(c.format)))


def default_inputs(format: str, steps: int = 3, with_outputs: bool = False) -> list:
    """The default input battery of `lowbit verify` for a format (its boundaries, special values and
    random distributions; an optimizer's steps from a few parameters, each step from the reference's
    state after the previous one), as a list of Cases carrying the format and params in their metadata
    and the battery's name for each case in .origin. with_outputs=True keeps the reference's outputs.
    Inputs the format cannot take (whole blocks, 2-D tiles) are left out, as verify skips them."""
    info = format_info(format)
    with_outputs = _args.flag("with_outputs", with_outputs)
    cases, _skipped = _core.battery(format, _args.whole("steps", steps, 1, 1000))
    out = []
    for stem, form in cases:
        c = Case._from_engine(form)
        c.origin = stem
        if not with_outputs:
            for t in info.outputs:
                if t.name not in [i.name for i in info.inputs + info.optional_inputs]:
                    c.pop(t.name, None)
                    c.dtypes.pop(t.name, None)
        out.append(c)
    return out


def verify(kernel, format: str, name: str = None, inputs=None, steps: int = 3, policy: str = None, strict: bool = False,
           golden=None, save_cases=None, timeout: float = 60.0, memory: int = 0, threads: int = 1,
           cuda_runner=None, param: dict = None) -> VerifyReport:
    """`lowbit verify` from Python: the engine's same verify run on a kernel, which is either

    - a kernel plugin: the shared library `kernel` (include/lowbit/kernel_plugin.h); `name` picks one of
      its kernels, by default its only one or the one that implements `format`, as `lowbit verify
      --kernel LIB --format F` does. It runs in a sandboxed child process per case, limited to `timeout`
      seconds and `memory` bytes (0: the default). A kernel that takes CUDA memory runs through a CUDA
      runner library (liblowbit_cuda_runner.so of a lowbit built with CUDA): `cuda_runner`, else the
      environment's LOWBIT_CUDA_RUNNER, on device 0, named in the report;
    - a Python function: `kernel(case)` gets each case's inputs as a lowbit.Case (its tensors by name,
      its resolved params as `case.params`, `case.torch(name)` for a torch tensor) and returns a dict of
      the format's outputs, NumPy arrays or torch tensors on any device, of the dtypes and shapes the
      format makes. It runs in this process (trusted code: no time or memory limit); an exception it
      raises, or a wrong output, fails that case. `name` names it in the reports (default
      module.qualname). It runs between calls as it found the process: the working directory, the
      environment and the signal handlers are restored after every call. A KeyboardInterrupt, SystemExit
      or GeneratorExit it raises (or Ctrl-C during the run) stops the run and is raised as itself; an
      output that cannot be read fails that case with the reason.

    Either runs on the default battery (or `inputs`, a list of input specs such as "normal:n=4096") and on
    the golden cases of the format in the folder `golden` (None: none), each compared with the reference
    bit for bit under `policy` (a shipped name or a JSON file's path; default: the format's). save_cases:
    a folder for the expected and actual case file of each case that does not conform. param: the
    format's parameters every generated case takes, over the battery's own values (`--param K=V`;
    {"map": "dynamic_unsigned"}), checked before any case runs. Returns a VerifyReport; raises ValueError
    for bad arguments, inputs or params, lowbit.PluginError for an unusable plugin."""
    format = _args.string("format", format)
    name = "" if name is None else _args.string("name", name)
    if inputs is None:
        inputs = []
    elif isinstance(inputs, str) or not all(isinstance(i, str) for i in inputs):
        raise TypeError("inputs: a list of input spec strings")
    steps = _args.whole("steps", steps, 1, 1000)
    policy = "" if policy is None else (policy if isinstance(policy, str) else _args.path("policy", policy))
    strict = _args.flag("strict", strict)
    # absolute before the run: a Python kernel runs in this process, and the folders must stay the ones named
    golden = "" if golden is None else os.path.abspath(_args.path("golden", golden))
    save_cases = "" if save_cases is None else os.path.abspath(_args.path("save_cases", save_cases))
    threads = _args.whole("threads", threads, 1, 1024)
    if param is None:
        param = {}
    elif not isinstance(param, dict) or not all(isinstance(k, str) for k in param):
        raise TypeError("param: a dict of the format's parameters, e.g. {'block_size': 256}")
    try:
        param_json = json.dumps(param, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"param={param!r}: not JSON values ({e})") from None
    if callable(kernel) and not isinstance(kernel, (str, bytes, os.PathLike)):
        for option, value, default in (("timeout", timeout, 60.0), ("memory", memory, 0), ("cuda_runner", cuda_runner, None)):
            if value != default:
                raise ValueError(f"{option}: applies to a plugin's kernels; a Python function runs in this process")
        from . import _callable
        return VerifyReport(*_core.verify_callable(_callable.runner(kernel, format), name or _callable.name_of(kernel),
                                                   format, list(inputs), steps, policy, POLICY_DIR, strict, golden,
                                                   save_cases, threads, param_json))
    library = _args.path("kernel", kernel)
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not 1e-3 <= float(timeout) <= 86400:
        raise ValueError(f"timeout={timeout!r}: not a number of seconds in 0.001..86400")
    memory = _args.whole("memory", memory, 0, 1 << 40)
    cuda_runner = "" if cuda_runner is None else _args.path("cuda_runner", cuda_runner)
    return VerifyReport(*_core.verify(library, name, format, list(inputs), steps, policy, POLICY_DIR, strict, golden,
                                      save_cases, float(timeout), memory, threads, cuda_runner, param_json))


def dequantize(case) -> "numpy.ndarray":
    """The dequantized float32 values of a quantized state case (codes, scales and tables of a
    registered format), by the format's own dequantizer; ValueError saying why when there are none."""
    c = _as_case(case)
    info = format_info(c.format)
    values, why = _core.dequantize(*_engine_form(c, info))
    if why:
        raise ValueError(f"{c.origin}: no dequantized values: {why}")
    return values


from .state import (QuantizedState, QuantizedStates, StateSignature, audit_state, choose,  # noqa: E402
                    dequantized_state_case, optimizer_signature, quantized_states, state_signature, tensor_signature)  # (they use the above)
