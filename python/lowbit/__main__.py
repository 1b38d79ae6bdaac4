"""`python -m lowbit`: the optimizer checkpoints the `lowbit` command cannot read, since reading them takes
torch (a torch distributed-checkpoint folder, single- or multi-rank, or a torch.save file):

    python -m lowbit inspect CHECKPOINT [--json]   the quantized states, their chunks and the signature
    python -m lowbit audit CHECKPOINT [--json]     the round-trip audit of their dequantized values
    python -m lowbit state-case CHECKPOINT OUT     their dequantized values as a case file, for
                                                   `lowbit audit --state OUT` and `lowbit inspect OUT`

The checkpoint is read as hostile input (docs/python.md, "Reading files you did not write"), a DCP folder
one part at a time; OUT is written whole or not at all and never replaces anything, even when SIGINT,
SIGTERM or SIGHUP stops the run (exit 128 + the signal's number, one line on stderr). Every name from a
file (keys, paths) is printed escaped as the `lowbit` command prints it, and the command suggested after
state-case is quoted for the shell. Exit codes as the `lowbit` command's: 0 done, 2 a bad file or usage,
with one line on stderr naming it.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import threading

from ._text import message, printable, shell_word

USAGE = """usage: python -m lowbit inspect CHECKPOINT [--json] [--progress] [--bnb-block-size N]
       python -m lowbit audit CHECKPOINT [--formats LIST] [--block-sizes LIST] [--json] [--progress]
                              [--bnb-block-size N]
       python -m lowbit state-case CHECKPOINT OUT.safetensors [--progress] [--bnb-block-size N]
CHECKPOINT: a torch distributed-checkpoint folder (any number of ranks) or a torch.save file of an
  optimizer's state_dict() (a symbolic link is refused: give the path it points to)
OUT: a new file (an existing one, or a link, is refused, never replaced)
--json: inspect prints the signature, audit its rows and warnings, as one JSON object
--formats LIST: audit: comma-separated format names or globs (default: every audited format)
--block-sizes LIST: audit: comma-separated powers of two in 16..65536 (default 32,64,...,4096)
--progress: a progress line on stderr while a folder is read (shown by default when stderr is a terminal)
--bnb-block-size N: bitsandbytes' quantization block (default 256)"""

COMMANDS = {"inspect": 1, "audit": 1, "state-case": 2}  # command -> its number of operands
FLAGS = {"inspect": {"--json", "--progress"}, "audit": {"--json", "--progress"}, "state-case": {"--progress"}}
VALUED = {"inspect": {"--bnb-block-size"}, "audit": {"--bnb-block-size", "--formats", "--block-sizes"},
          "state-case": {"--bnb-block-size"}}


class Usage(Exception):
    """A bad command line: its message is the one line printed."""


class Stopped(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP, raised where the run is, as Ctrl-C's KeyboardInterrupt is: what is being
    written unwinds and its temporary is removed (lowbit/_files.py) before the process ends."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stopped_by_signals():
    """The block with SIGINT, SIGTERM and SIGHUP raising Stopped (their default would end the process
    where it stands, a temporary left behind). Only the first raises: one arriving while the first
    unwinds must not cut the removal short (SIGKILL still ends the process). The handlers that were
    there are restored after the block (main() also runs inside pytest)."""
    first = []

    def stop(signum, frame):
        if not first:
            first.append(signum)
            raise Stopped(signum)

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = {s: signal.signal(s, stop) for s in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class Progress:
    """A progress line on stderr, rewritten in place on a terminal; elsewhere (--progress into a log) a
    line each time the percentage changes. Never on stdout, so --json output stays one JSON object."""

    def __init__(self, shown: bool):
        self.shown, self.terminal, self.last = shown, sys.stderr.isatty(), None

    def __call__(self, done, total) -> None:
        if not self.shown:
            return
        percent = 100 * done // total
        if self.terminal:
            sys.stderr.write(f"\rlowbit: read {done} of {total} parts ({percent} %)" + ("\n" if done == total else ""))
        elif percent != self.last:
            sys.stderr.write(f"lowbit: read {done} of {total} parts ({percent} %)\n")
        self.last = None if done == total else percent
        sys.stderr.flush()


def _checkpoint(path) -> str:
    """The checkpoint operand: a folder or a regular file that exists, not a symbolic link."""
    if not path:
        raise Usage("CHECKPOINT: an empty path")
    if os.path.islink(path):
        raise Usage(f"{path}: a symbolic link; give the checkpoint it points to ({os.path.realpath(path)}), lowbit "
                    f"reads no link")
    if not os.path.lexists(path):
        raise Usage(f"{path}: no such checkpoint folder or file")
    if not (os.path.isdir(path) or os.path.isfile(path)):
        raise Usage(f"{path}: neither a folder nor a regular file")
    return path


def _out(path, checkpoint) -> str:
    if not path:
        raise Usage("OUT: an empty path")
    if os.path.islink(path):
        raise Usage(f"{path}: a symbolic link; lowbit writes a new file, never through a link")
    if os.path.lexists(path):
        raise Usage(f"{path}: it exists; lowbit writes a new file and replaces nothing (remove it or name another)")
    if os.path.abspath(path) == os.path.abspath(checkpoint):
        raise Usage(f"{path}: the checkpoint itself")
    return path


def _whole(option, value) -> int:
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= 1 << 31:
        raise Usage(f"{option} {value!r:.40}: not a whole number of elements from 1 to 2^31")
    return int(value)


def _valued(option, value, options) -> None:
    """An option's value into options (Usage naming a bad one)."""
    if option == "--bnb-block-size":
        options["bnb_block_size"] = _whole(option, value)
        return
    items = value.split(",")
    if not all(items):
        raise Usage(f"{option} {value!r:.80}: an empty item in the comma-separated list")
    if option == "--block-sizes":  # lowbit audit's rule, checked before the checkpoint is read
        sizes = [_whole(option, v) for v in items]
        for b in sizes:
            if b & (b - 1) or not 16 <= b <= 65536:
                raise Usage(f"{option}: {b} is not a power of two in 16..65536")
        options["block_sizes"] = sizes
    else:
        options["formats"] = items


def parse(argv) -> tuple:
    """(command, operands, options) of a command line; Usage naming the first thing wrong."""
    if not argv:
        raise Usage("no command (inspect, audit or state-case; --help for the usage)")
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        raise Usage(f"unknown command {command!r:.80} (inspect, audit or state-case; --help for the usage)")
    operands, options = [], {"json": False, "progress": sys.stderr.isatty(), "bnb_block_size": 256,
                             "formats": None, "block_sizes": [32, 64, 128, 256, 512, 1024, 2048, 4096]}
    i = 0
    while i < len(rest):
        arg = rest[i]
        name = arg.split("=", 1)[0]
        if name in VALUED[command]:
            value = arg.split("=", 1)[1] if "=" in arg else (rest[i + 1] if i + 1 < len(rest) else None)
            i += 1 if "=" in arg else 2
            if value is None:
                raise Usage(f"{name}: a value is missing")
            _valued(name, value, options)
            continue
        if arg.startswith("-") and arg != "-":
            if arg.split("=", 1)[0] in FLAGS[command]:
                if "=" in arg:
                    raise Usage(f"{arg.split('=', 1)[0]} takes no value ({arg!r:.80})")
                options[arg[2:]] = True
            else:
                raise Usage(f"{command}: unknown option {arg!r:.80} (--help for the usage)")
        else:
            operands.append(arg)
        i += 1
    if len(operands) != COMMANDS[command]:
        wanted = "CHECKPOINT and OUT" if command == "state-case" else "CHECKPOINT"
        raise Usage(f"{command} takes {wanted}; given {len(operands)} operand(s)")
    operands[0] = _checkpoint(operands[0])
    if command == "state-case":
        operands[1] = _out(operands[1], operands[0])
    return command, operands, options


def inspect(path, options) -> None:
    import lowbit

    sig = lowbit.state_signature(path, bnb_block_size=options["bnb_block_size"], progress=Progress(options["progress"]))
    if options["json"]:
        states = {key: {"format": s["format"], "global_shape": list(s["global_shape"]), "dequantized": s["dequantized"],
                        "chunks": [{"offsets": list(c["offsets"]), "shape": list(c["shape"]), "format": c["format"],
                                    "params": c["params"], "tensors": c["tensors"]} for c in s["chunks"]]}
                  for key, s in sig.states.items()}
        print(json.dumps({"checkpoint": path, "scope": sig.scope, "digest": sig.digest, "stored": sig.stored,
                          "dequantized": sig.dequantized, "states": states}, indent=1))
        return
    print(printable(path))
    for key, s in sig.states.items():
        fmt = s["format"] if isinstance(s["format"], str) else " + ".join(s["format"])
        print(f"  {printable(key)}: {fmt}, shape {list(s['global_shape'])}, {len(s['chunks'])} chunk(s)")
        for c in s["chunks"]:
            print(f"    offsets {list(c['offsets'])} shape {list(c['shape'])} {c['format']}")
        print(f"    dequantized values: {s['dequantized']}")
    print(f"signature ({sig.scope}): {sig.digest}\n  stored (depends on the shard layout): {sig.stored}\n"
          f"  dequantized (the values in global order): {sig.dequantized}")


def audit(path, options) -> None:
    import lowbit

    rows, warnings = lowbit.audit_state(path, formats=options["formats"], block_sizes=options["block_sizes"],
                                        bnb_block_size=options["bnb_block_size"],
                                        progress=Progress(options["progress"]))
    if options["json"]:
        # an infinite measure (sqnr_db of a zero error) is null, as lowbit audit's JSON report writes it
        rows = [{k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in r.items()} for r in rows]
        print(json.dumps({"checkpoint": path, "rows": rows, "warnings": warnings}, indent=1, allow_nan=False))
        return
    print(printable(path))
    for r in rows:
        where = f"  {printable(r['tensor'])}: {r['format']} at block {r['block_size']}: "
        if "not_applicable" in r:
            print(where + printable(r["not_applicable"]))
            continue
        print(where + f"{r['bits_per_element']:.4g} bits per element, mean_abs {r['mean_abs']:.4g}, rel_l2 "
              f"{r['rel_l2']:.4g}, max_abs {r['max_abs']:.4g}, sqnr {r['sqnr_db']:.2f} dB" +
              (" (looks already quantized)" if r.get("looks_already_quantized") else ""))
    for w in warnings:
        print(f"warning: {printable(w)}")


def state_case(path, out, options) -> None:
    import lowbit

    shapes = lowbit.dequantized_state_case(path, bnb_block_size=options["bnb_block_size"], out=out,
                                           progress=Progress(options["progress"]), replace=False)
    print(f"{printable(out)}: {len(shapes)} dequantized state(s): {', '.join(printable(k) for k in shapes)}")
    print(f"audit them with: lowbit audit --state {shell_word(out)} --tensors {shell_word(','.join(shapes))}")


def main(argv) -> int:
    if argv in (["--help"], ["-h"]) or (len(argv) == 2 and argv[0] in COMMANDS and argv[1] in ("--help", "-h")):
        print(USAGE)
        return 0
    operands = ["?"]
    try:
        with stopped_by_signals():
            command, operands, options = parse(argv)
            if command == "inspect":
                inspect(operands[0], options)
            elif command == "audit":
                audit(operands[0], options)
            else:
                state_case(operands[0], operands[1], options)
    except Stopped as e:  # what was being written is gone; the exit status a shell gives a signal's end
        print(f"lowbit: stopped by {e}: nothing written", file=sys.stderr)
        return 128 + e.signum
    except Usage as e:
        print(f"lowbit: error: {printable(e)}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, OSError) as e:  # CaseError is a ValueError: a bad file, named in the message
        print(f"lowbit: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # anything else a file made torch raise: still one line, never a traceback
        print(f"lowbit: error: {printable(operands[0])}: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return 2
    return 0


def _one_line(e: Exception) -> str:
    """An error's message as the lowbit command prints it: escaped (a key's newline or escape sequence
    is shown, never acted on), at most 2 000 characters of it."""
    return printable(message(e))[:2000]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
