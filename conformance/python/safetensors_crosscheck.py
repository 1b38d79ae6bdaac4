"""Cross-check of the case-file layout with the official `safetensors` package.

1. A file written by `lowbit golden generate` must be accepted by safetensors' own validating
   reader (Rust, `safetensors.deserialize`), with the same names, dtypes, shapes and bytes.
2. A file written by `safetensors.serialize` (every dtype the suite supports, metadata, an empty
   tensor) must be accepted by `lowbit inspect`, which prints each tensor's sha256: they must equal
   hashlib's over the same bytes.

Exit 77 (skipped) when the safetensors package is not installed: the C++ suite never needs Python.
"""
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import safetensors
except ImportError:
    print("skipped: the safetensors package is not installed (pip install safetensors)")
    sys.exit(77)


def serialize(blobs, metadata):
    """safetensors.serialize over raw bytes, for the API before and after TensorSpec (0.8)."""
    if not hasattr(safetensors, "TensorSpec"):
        return safetensors.serialize(
            {name: {"dtype": dt, "shape": shape, "data": data} for name, (dt, shape, data) in blobs.items()},
            metadata=metadata)
    import numpy as np
    buffers = {name: np.frombuffer(data + b"\0", dtype=np.uint8).copy() for name, (_, _, data) in blobs.items()}
    specs = {name: safetensors.TensorSpec(dtype=dt, shape=tuple(shape), data_ptr=buffers[name].ctypes.data,
                                          data_len=len(data))
             for name, (dt, shape, data) in blobs.items()}
    return safetensors.serialize(specs, metadata=metadata)


lowbit = sys.argv[1]
with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "g"
    subprocess.run([lowbit, "golden", "generate", "--format", "fp8.e5m2.inf", "--input", "normal:n=33,std=1000",
                    "--out", str(out)], check=True, capture_output=True)
    path = out / "fp8.e5m2.inf" / "normal.n33.std1000.safetensors"
    tensors = dict(safetensors.deserialize(path.read_bytes()))
    assert sorted(tensors) == ["codes", "dequant", "input"], sorted(tensors)
    assert tensors["codes"]["dtype"] == "float8_e5m2" or tensors["codes"]["dtype"].upper() == "F8_E5M2", tensors["codes"]["dtype"]
    assert tensors["codes"]["shape"] == [33] and len(bytes(tensors["codes"]["data"])) == 33
    assert len(bytes(tensors["input"]["data"])) == 33 * 4

    blobs = {
        "f32": ("float32", [2, 2], bytes(range(16))),
        "f16": ("float16", [3], bytes(range(6))),
        "bf16": ("bfloat16", [1, 2], bytes(range(4))),
        "u8": ("uint8", [5], bytes([0, 1, 127, 128, 255])),
        "i32": ("int32", [2], bytes(range(8))),
        "i64": ("int64", [1], bytes(range(8))),
        "e4m3": ("float8_e4m3fn", [4], bytes([0x00, 0x7E, 0xFE, 0x7F])),
        "e5m2": ("float8_e5m2", [2], bytes([0x7C, 0x01])),
        "empty": ("float32", [0, 3], b""),
    }
    written = Path(tmp) / "from_python.safetensors"
    written.write_bytes(serialize(blobs, {"format": "none", "source": "safetensors " + safetensors.__version__}))
    shown = subprocess.run([lowbit, "inspect", str(written)], check=True, capture_output=True, text=True).stdout
    for name, (_, _, data) in blobs.items():
        line = next((l for l in shown.splitlines() if l.strip().startswith(name + " ")), None)
        assert line is not None, f"lowbit inspect does not list {name}:\n{shown}"
        assert hashlib.sha256(data).hexdigest() in line, f"{name}: sha256 differs\n{line}"
print("safetensors cross-check passed:", safetensors.__version__)
