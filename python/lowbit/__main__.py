"""`python -m lowbit`: the optimizer checkpoints the `lowbit` command cannot read, since reading them takes
torch (a torch distributed-checkpoint folder, single- or multi-rank, or a torch.save file):

    python -m lowbit inspect CHECKPOINT            the quantized states, their chunks and the signature
    python -m lowbit state-case CHECKPOINT OUT     their dequantized values as a case file, for
                                                   `lowbit audit --state OUT` and `lowbit inspect OUT`

The checkpoint is read as hostile input (docs/python.md, "Reading files you did not write"). Exit codes as
the `lowbit` command's: 0 done, 2 a bad file or usage, with one line on stderr naming it.
"""
from __future__ import annotations

import sys

USAGE = ("usage: python -m lowbit inspect CHECKPOINT\n"
         "       python -m lowbit state-case CHECKPOINT OUT.safetensors\n"
         "CHECKPOINT: a torch distributed-checkpoint folder (any number of ranks) or a torch.save file of an "
         "optimizer's state_dict()")


def _progress(done, total) -> None:
    """A progress line on a terminal's stderr, rewritten after each part of a folder is read."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\rlowbit: read {done} of {total} parts ({100 * done // total} %)" +
                         ("\n" if done == total else ""))
        sys.stderr.flush()


def inspect(path) -> None:
    import lowbit

    sig = lowbit.state_signature(path, progress=_progress)
    print(path)
    for key, s in sig.states.items():
        fmt = s["format"] if isinstance(s["format"], str) else " + ".join(s["format"])
        print(f"  {key}: {fmt}, shape {list(s['global_shape'])}, {len(s['chunks'])} chunk(s)")
        for c in s["chunks"]:
            print(f"    offsets {list(c['offsets'])} shape {list(c['shape'])} {c['format']}")
        print(f"    dequantized values: {s['dequantized']}")
    print(f"signature ({sig.scope}): {sig.digest}\n  stored (depends on the shard layout): {sig.stored}\n"
          f"  dequantized (the values in global order): {sig.dequantized}")


def state_case(path, out) -> None:
    import lowbit

    case = lowbit.dequantized_state_case(path)
    lowbit.save_case(out, case)
    print(f"{out}: {len(case)} dequantized state(s): {', '.join(case)}")
    print(f"audit them with: lowbit audit --state {out} --tensors {','.join(case)}")


def main(argv) -> int:
    if len(argv) == 2 and argv[0] == "inspect":
        command = lambda: inspect(argv[1])  # noqa: E731
    elif len(argv) == 3 and argv[0] == "state-case":
        command = lambda: state_case(argv[1], argv[2])  # noqa: E731
    else:
        print(USAGE, file=sys.stderr)
        return 0 if argv in (["--help"], ["-h"]) else 2
    try:
        command()
    except (ValueError, TypeError, OSError) as e:  # CaseError is a ValueError: a bad file, named in the message
        print(f"lowbit: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
