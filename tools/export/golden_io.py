"""Shared by the golden exporters: deterministic safetensors bytes, the MANIFEST, the
write-or-compare step at the end of every export, and a compile cache of each run's own.

Import this module before torch: it points torch.compile's on-disk caches at a fresh folder."""
import argparse
import atexit
import hashlib
import os
import shutil
import sys
import json
import tempfile
from pathlib import Path

# torch 2.15's on-disk compile caches (inductor's FX graph and kernel cache, triton's) do not key on
# ATEN_CPU_CAPABILITY: a kernel compiled at one capability was served at another and returned that
# capability's bits (bitsandbytes' compiled dequantize; issue 30). Every run of an exporter therefore
# compiles into a fresh folder of its own, named by the capability asked for and removed at exit, so
# that nothing compiled by another run, at another capability, is ever read. Set before torch is
# imported (both variables are also read at each compile, so an exporter that imported torch first
# is isolated all the same; compile_cache() checks that inductor uses the folder).
COMPILE_CACHE = Path(tempfile.mkdtemp(prefix=f"lowbit-export-compile-{os.environ.get('ATEN_CPU_CAPABILITY') or 'native'}-"))
os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(COMPILE_CACHE / "inductor")
os.environ["TRITON_CACHE_DIR"] = str(COMPILE_CACHE / "triton")
atexit.register(shutil.rmtree, COMPILE_CACHE, ignore_errors=True)

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import torch  # noqa: E402


def compile_cache() -> str:
    """The line an exporter that compiles prints about its compile cache: the capability the
    kernels were compiled for and the run's own folder. Checks that inductor's cache is the folder
    set above (a TORCHINDUCTOR_CACHE_DIR changed after this module was imported would share a cache
    across runs again)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    assert Path(cache_dir()) == COMPILE_CACHE / "inductor", f"inductor's cache is {cache_dir()}, not this run's"
    assert Path(os.environ["TRITON_CACHE_DIR"]) == COMPILE_CACHE / "triton", "triton's cache is not this run's"
    return (f"torch.compile (inductor) at CPU capability {torch.backends.cpu.get_cpu_capability()}, "
            "into a fresh compile cache of this run only (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR)")


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Dtype, shape and every byte equal (NaN payloads included; torch.equal would say NaN != NaN)."""
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    return a.dtype == b.dtype and a.shape == b.shape and bytes(a.reshape(-1).view(torch.uint8).numpy()) == bytes(
        b.reshape(-1).view(torch.uint8).numpy())


def check_compiled(what: str, compiled: torch.Tensor, eager: torch.Tensor):
    """A compiled function's result against its eager function's, bit for bit: an exporter writes
    nothing when they differ (which of the two a case should hold is then a question, not a case)."""
    if not same_bits(compiled, eager):
        c, e = compiled.detach().cpu().reshape(-1), eager.detach().cpu().reshape(-1)
        if c.dtype == e.dtype and c.shape == e.shape:
            iv = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[c.element_size()]
            diff = (c.view(iv) != e.view(iv)).nonzero().reshape(-1)
            k = int(diff[0])
            detail = (f"{diff.numel()} of {c.numel()} elements differ, first at {k}: compiled "
                      f"{int(c.view(iv)[k]) & ((1 << 8 * c.element_size()) - 1):#x}, eager "
                      f"{int(e.view(iv)[k]) & ((1 << 8 * c.element_size()) - 1):#x}")
        else:
            detail = f"compiled {c.dtype} {tuple(c.shape)}, eager {e.dtype} {tuple(e.shape)}"
        sys.exit(f"{what}: the compiled result differs from the eager one ({detail}); nothing written")

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.uint8: "U8", torch.int32: "I32",
          torch.int64: "I64", torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2"}


def fp8_rules(n: int) -> dict:
    """The float8_e4m3fn rules of the torch that runs, as observed (not as its version predicts):
    `overflow` from the cast of 480 (0x7E: satfinite, torch >= 2.13; 0x7F: nan), `nan_widening`
    from Tensor.float() of n NaN codes of both signs (the size of the cases, since a vectorized path
    may take over for long tensors): c10 0x7FF00000 | sign, quiet 0x7FC00000 | sign."""
    cast = int(torch.tensor([480.0]).to(torch.float8_e4m3fn).view(torch.uint8))
    assert cast in (0x7E, 0x7F), f"480 casts to {cast:#x}"
    nan_codes = torch.tensor([0x7F, 0xFF], dtype=torch.uint8).repeat(n // 2).view(torch.float8_e4m3fn)
    widened = {b & 0xFFFFFFFF for b in nan_codes.float().view(torch.int32).tolist()}
    rules = {"c10": {0x7FF00000, 0xFFF00000}, "quiet": {0x7FC00000, 0xFFC00000}}
    widening = [name for name, bits in rules.items() if widened == bits]
    assert widening, f"NaN codes widen to {sorted(hex(b) for b in widened)}: no known rule"
    return {"overflow": "satfinite" if cast == 0x7E else "nan", "nan_encoding": "torch", "nan_widening": widening[0]}


def linspace_rule() -> str:
    """Whether the running torch's CPU linspace fuses `start + step * k` (fma: vectorized kernels
    built with FMA) or rounds twice (nofma: the scalar kernels of capability default), as observed on
    torch.linspace(0.1, 1, n) for the sizes create_dynamic_map uses, against both formulas evaluated
    here: the product and the sum in float64 (exact for these operands) rounded once, or each rounded
    to float32 (below the halfway index start + step * k, above it end - step * (n - 1 - k))."""
    verdicts = set()
    for n in (3, 5, 9, 17, 33, 65, 129):
        got = torch.linspace(0.1, 1, n).numpy()
        start, end = np.float32(0.1), np.float32(1.0)
        step = np.float32((end - start) / np.float32(n - 1))
        k = np.arange(n)
        low = k < n // 2
        a = np.where(low, step, -step).astype(np.float32)
        b = np.where(low, k, n - 1 - k).astype(np.float32)
        c = np.where(low, start, end).astype(np.float32)
        fused = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
        twice = (a * b).astype(np.float32) + c
        matches = [name for name, v in (("fma", fused), ("nofma", twice)) if np.array_equal(v.view(np.uint32), got.view(np.uint32))]
        assert matches, f"torch.linspace(0.1, 1, {n}) matches neither rule"
        if len(matches) == 1:
            verdicts.add(matches[0])
    assert len(verdicts) == 1, f"torch.linspace: rules {verdicts}"
    return verdicts.pop()


def serialize(tensors: dict, metadata: dict) -> bytes:
    """safetensors bytes with a deterministic header (safetensors' own writer orders metadata keys
    by hash): tensors in name order, keys sorted, compact JSON padded with spaces to 8 bytes, the
    layout lowbit's writer produces."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"data_offsets": [offset, offset + len(raw)], "dtype": DTYPES[t.dtype], "shape": list(t.shape)}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    data = len(text).to_bytes(8, "little") + text + b"".join(blobs)
    safetensors.deserialize(data)  # the official reader must accept it
    return data



class Writer:
    """Collects cases in memory: relative path -> (bytes, MANIFEST entry)."""

    def __init__(self, versions: dict, generator: str):
        self.versions = versions  # source name -> "library version (torch ...)"
        self.generator = generator  # the exporter and lowbit version, recorded in every case
        self.entries = {}

    def add(self, source: str, fmt: str, name: str, tensors: dict, params: dict, function: str, seed: int, inputs: str):
        metadata = {"format": fmt, "params": json.dumps(params, sort_keys=True, separators=(",", ":")),
                    "source": self.versions[source], "function": function, "seed": str(seed), "input": inputs,
                    "generator": self.generator}
        tensors = {k: v.contiguous() for k, v in tensors.items()}
        data = serialize(tensors, metadata)
        rel = f"{source}/{fmt}/{name}.safetensors"
        self.entries[rel] = (data, {"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                                    "format": fmt, "source": metadata["source"], "function": function,
                                    "generator": self.generator})


def write_manifest(out: Path, entries: list):
    path = out / "MANIFEST.json"
    old = json.loads(path.read_text())["files"] if path.exists() else []
    merged = {e["path"]: e for e in old}
    merged.update({e["path"]: e for e in entries})
    doc = {"files": [merged[k] for k in sorted(merged)], "version": 1}
    path.write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")



def run(description: str, versions: dict, generator: str, export, add_arguments=None) -> int:
    """The command line every exporter shares: --out DIR, or --diff-against DIR to compare instead
    of writing. `export(writer)` adds the cases; with `add_arguments(parser)` the exporter adds its
    own options and is called as `export(writer, args)`."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="golden folder to write (MANIFEST.json is merged)")
    ap.add_argument("--diff-against", type=Path, help="compare with this golden folder instead of writing")
    if add_arguments:
        add_arguments(ap)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    w = Writer(versions, generator)
    export(w, args) if add_arguments else export(w)
    print(f"{len(w.entries)} cases from {', '.join(versions.values())}", file=sys.stderr)
    return finish(w, args.out, args.diff_against)


def metadata_of(data: bytes) -> dict:
    """The `__metadata__` strings of safetensors bytes."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]).get("__metadata__", {})


def finish(w: Writer, out: Path, diff_against: Path | None) -> int:
    if diff_against:
        manifest = json.loads((diff_against / "MANIFEST.json").read_text())
        known = {e["path"]: e for e in manifest["files"]}
        changed = 0
        for rel, (data, entry) in sorted(w.entries.items()):
            old = known.get(rel)
            if old is None:
                print(f"new       {rel}")
                changed += 1
                continue
            if old["sha256"] == entry["sha256"]:
                continue
            old_bytes = (diff_against / rel).read_bytes()
            before = dict(safetensors.deserialize(old_bytes))
            after = dict(safetensors.deserialize(data))
            tensors = [k for k in sorted(set(before) | set(after))
                       if k not in before or k not in after or before[k]["dtype"] != after[k]["dtype"]
                       or before[k]["shape"] != after[k]["shape"] or bytes(before[k]["data"]) != bytes(after[k]["data"])]
            meta_before, meta_after = metadata_of(old_bytes), metadata_of(data)
            keys = [k for k in sorted(set(meta_before) | set(meta_after)) if meta_before.get(k) != meta_after.get(k)]
            print(f"changed   {rel}: tensors {', '.join(tensors) or '(none)'}; metadata {', '.join(keys) or '(none)'}; "
                  f"was {old['source']}, now {entry['source']}")
            changed += 1
        print(f"{changed} of {len(w.entries)} cases differ from {diff_against}")
        return 1 if changed else 0

    for rel, (data, _) in w.entries.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    write_manifest(out, [e for _, e in w.entries.values()])
    total = sum(len(d) for d, _ in w.entries.values())
    print(f"wrote {len(w.entries)} cases, {total / 2**20:.1f} MiB, to {out}", file=sys.stderr)
    return 0

