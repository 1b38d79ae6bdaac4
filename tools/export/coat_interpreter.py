"""Shared by the COAT exporters: COAT's Triton code run on the CPU under Triton's interpreter.

Importing this module sets TRITON_INTERPRET=1 (before triton is imported anywhere). COAT is read
from a checkout (--coat-src) and imported module by module, with empty stand-in packages in place
of its package __init__ files (which pull in training dependencies); COAT's files are not modified.
"""
import importlib
import os
import sys
import types

os.environ["TRITON_INTERPRET"] = "1"

COAT_COMMIT = "80ec99f"


def import_coat_modules(src: str, package: str, names: list) -> dict:
    """{name: module} for coat/<package path>/<name>.py from the checkout at src."""
    sys.path.insert(0, src)
    parts = package.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        if name not in sys.modules:  # an empty stand-in: skip the package __init__
            m = types.ModuleType(name)
            m.__path__ = [os.path.join(src, *parts[:depth])]
            sys.modules[name] = m
    return {n: importlib.import_module(f"{package}.{n}") for n in names}


def run_every_autotune_config_once():
    """No GPU driver times the autotuner's configs here: run each one once, as tuning would."""
    import triton.runtime.autotuner as at

    def bench(self):
        def run_once(kernel_call, quantiles):
            kernel_call()
            return [0.0, 0.0, 0.0]
        return run_once
    at.Autotuner.do_bench = property(bench)


def add_coat_src_argument(ap):
    ap.add_argument("--coat-src", required=True, help=f"COAT checkout (commit {COAT_COMMIT}) holding coat/activation/")
