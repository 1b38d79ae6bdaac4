"""A pickle's opcodes walked before anything unpickles it, so that a hostile pickle is refused by its
shape, not by what building it does.

Building is where a pickle does harm without calling any global: CPython hashes a tuple (a dict key, a
frozenset's member) by recursing in C, so a dict keyed by a tuple nested 200 000 deep, 200 KB of
opcodes, kills the process with SIGSEGV before any check of ours runs (in lowbit's unpickler and in
torch.load alike); 32 MiB of EMPTY_DICT opcodes build 2.4 GB of empty dicts. scan() walks the opcodes
(by pickletools' table of them) with a model of the unpickler's stack and memo that builds nothing: each value is
its nesting depth (a container is one deeper than the deepest value put in it) and the walk adds up an
estimate of the memory the objects would take. It refuses, with a CaseError naming the file, a pickle
that nests deeper, runs more opcodes or would build more memory than its Limits allow, and a container
changed after it was put inside another (APPEND, SETITEM, BUILD, ... on a value already placed), which
would make the depths recorded for the containers around it stale: pickle's own pickler never writes
that for a checkpoint (it fills a container before placing it; only an object that contains itself
through its own constructor arguments would need it).
"""
from __future__ import annotations

import array
import pickletools
import zipfile
from dataclasses import dataclass

from ._core import CaseError


@dataclass(frozen=True)
class Limits:
    depth: int  # containers inside containers
    opcodes: int
    memory: int  # bytes of objects the pickle would build (the estimate below)


# What the objects cost, as an upper estimate of CPython's sizes (sys.getsizeof): an object 64 bytes ({}
# 64, [] 56, an int 28, a float 24, a str 49 and a bytes 33 plus their length, counted too), except
# None, True, False and the empty tuple, which are shared (0); each value pushed on the stack or put in
# a container 8 (a list's slot; a dict's entry and index take about 40 a pair: 24 a value); each memo
# entry 96 (a dict entry and its int key: 80 measured).
OBJECT_BYTES = 64
SHARED = {"NONE", "NEWTRUE", "NEWFALSE", "EMPTY_TUPLE"}
STACK_BYTES = 8
REFERENCE_BYTES = 24
MEMO_BYTES = 96

# dcp.save's .metadata (torch 2.15) of torchao's 8-bit, 4-bit and FP8 states nests 11 levels, their
# torch.save 10 and bitsandbytes' Adam8bit's 8 (measured by test_bounded_readers.py). 100 admits ten
# times that, and CPython hashes a tuple 100 deep without trouble.
MAX_DEPTH = 100
# A .metadata of 30 000 items (27 MB, python/tests/dcp_pickles.py) runs 3.6 million opcodes and is
# estimated at 267 MB (its objects take 131 MB, tracemalloc): the limits admit four times that, and
# scanning up to them takes 10 to 30 s (0.6 to 2 µs an opcode, on an idle or a loaded machine).
MAX_OPCODES = 1 << 24
MAX_MEMORY = 1 << 30
# What a pickle builds is bounded by its size too: real checkpoints' pickles are estimated at 10 to 32
# bytes of objects a byte (the 27 MB .metadata of dcp_pickles.py 10; dcp.save's own of 2 000 torchao
# states 32, torch.save's of them 27 to 30: protocol 4 memoizes nearly every object, one byte each),
# where a flood of one-byte opcodes (empty dicts or lists, memo entries) is estimated at 72 to 104 a
# byte, and is refused after about half a million of them, in a second.
AMPLIFICATION = 64
SLACK = 1 << 22


# Each opcode as (what it does, how its argument is read, its operands). On the model's stack (an
# array of int64, 8 bytes a value whatever it stands for) a value that never changes (an int, a
# string, None: depth 0; a tuple or frozenset: its depth) is its depth, >= 0; a value that can change
# (a list, dict, set or any object a call or BUILD makes) is ~i < 0, i its index in the arrays of such
# values' depths and of whether each is placed inside another yet (its depth fixed there).
_ATOM, _MAKE, _FILL, _MARK, _POP, _POP_MARK, _DUP, _PUT, _GET, _NOTHING, _STOP = range(11)
_MUTABLE = {"EMPTY_LIST", "LIST", "EMPTY_DICT", "DICT", "EMPTY_SET", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "INST",
            "STACK_GLOBAL", "BINPERSID"}
_FILLS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}  # change the value below their operands
_ACTIONS = {"MARK": _MARK, "POP": _POP, "POP_MARK": _POP_MARK, "DUP": _DUP, "MEMOIZE": _PUT, "PUT": _PUT,
            "BINPUT": _PUT, "LONG_BINPUT": _PUT, "GET": _GET, "BINGET": _GET, "LONG_BINGET": _GET, "PROTO": _NOTHING,
            "FRAME": _NOTHING, "READONLY_BUFFER": _NOTHING, "STOP": _STOP}


@dataclass(frozen=True)
class _Op:
    name: str
    action: int
    arg: int  # pickletools' ArgumentDescriptor.n: a fixed length, or UP_TO_NEWLINE / TAKEN_FROM_ARGUMENT*
    lines: int  # newline-ended lines of the argument (GLOBAL and INST: two)
    below_mark: int  # operands below a MARK (APPENDS' list), -1 without a MARK
    operands: int  # operands without a MARK
    mutable: bool
    cost: int  # bytes of the object it makes (OBJECT_BYTES, 0 for a shared one) and of its stack slot


def _op(op) -> _Op:
    before = [s.name for s in op.stack_before]
    if op.name in _ACTIONS:
        action = _ACTIONS[op.name]
    elif op.name in _FILLS:
        action = _FILL
    else:  # a value made of operands, or an empty container: one level deeper; else an atom
        makes = before or op.stack_after[0].name in ("list", "tuple", "dict", "set", "frozenset")
        action = _MAKE if makes else _ATOM
    return _Op(op.name, action, op.arg.n if op.arg else 0, 2 if op.arg and op.arg.name.endswith("_pair") else 1,
               before.index("mark") if "mark" in before else -1, len(before), op.name in _MUTABLE,
               (0 if op.name in SHARED else OBJECT_BYTES) + STACK_BYTES)


_OPS = {op.code.encode("latin-1")[0]: _op(op) for op in pickletools.opcodes}
_LENGTH_BYTES = {pickletools.TAKEN_FROM_ARGUMENT1: (1, False), pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
                 pickletools.TAKEN_FROM_ARGUMENT4U: (4, False), pickletools.TAKEN_FROM_ARGUMENT8U: (8, False)}


class _Walk:
    """The unpickler's stack and memo in the model (values as above), and the memory spent."""

    def __init__(self, data, origin, limits):
        self.data, self.origin, self.limits = data, origin, limits
        self.stack, self.marks, self.memo = array.array("q"), [], {}
        self.depths, self.placed_flags = array.array("i"), bytearray()  # of the values that can change
        self.memory, self.deepest = 0, 0

    def refuse(self, why):
        raise CaseError(f"{self.origin}: {why}; refused before unpickling (lowbit reads only pickles of the shape "
                        f"checkpoints have: docs/python.md, \"Reading files you did not write\")")

    def argument(self, op, pos):
        """(the position after op's argument, its int value for a memo opcode, its payload length)."""
        data = self.data
        if op.arg >= 0:
            end = pos + op.arg
            if end > len(data):
                self.refuse("a truncated pickle")
            return end, (int.from_bytes(data[pos:end], "little") if op.action in (_PUT, _GET) else 0), 0
        if op.arg == pickletools.UP_TO_NEWLINE:
            end = pos
            for _ in range(op.lines):
                end = data.find(b"\n", end) + 1
                if end == 0:
                    self.refuse("a truncated pickle (a line without its end)")
            value = 0
            if op.action in (_PUT, _GET):
                try:
                    value = int(data[pos:end])
                except ValueError:
                    self.refuse(f"a malformed pickle ({op.name} of {data[pos:end][:40]!r})")
            return end, value, end - pos
        size, signed = _LENGTH_BYTES[op.arg]
        length = int.from_bytes(data[pos:pos + size], "little", signed=signed)
        end = pos + size + length
        if pos + size > len(data) or length < 0 or end > len(data):
            self.refuse(f"a truncated pickle ({op.name} of {length} bytes)")
        return end, 0, length

    def operands(self, op):
        """The values op takes off the stack: those above the last MARK (and the mark) where it takes a
        MARK, after the ones below it; none may come from below the last MARK otherwise."""
        stack, marks = self.stack, self.marks
        above = ()
        if op.below_mark >= 0:
            if not marks:
                self.refuse(f"a malformed pickle ({op.name} without a MARK)")
            at = marks.pop()
            above = stack[at:]
            del stack[at:]
        n = op.operands if op.below_mark < 0 else op.below_mark
        if n > len(stack) - (marks[-1] if marks else 0):
            self.refuse(f"a malformed pickle ({op.name} takes more values than the stack holds)")
        taken = stack[len(stack) - n:]
        del stack[len(stack) - n:]
        return taken + above if above else taken

    def new_value(self, depth, mutable) -> int:
        self.deepest = max(self.deepest, depth)
        if not mutable:
            return depth
        self.depths.append(depth)
        self.placed_flags.append(0)
        return ~(len(self.depths) - 1)

    def placed(self, values) -> int:
        """Values put inside a container, each fixed there now: the depth of the deepest (-1: none)."""
        deepest = -1
        for v in values:
            if v < 0:
                self.placed_flags[~v] = 1
                v = self.depths[~v]
            if v > deepest:
                deepest = v
        if deepest >= self.limits.depth:
            self.refuse(f"the pickle nests more than {self.limits.depth} levels deep")
        return deepest

    def fill(self, op, taken):
        target = taken[0]
        if target >= 0:
            self.refuse(f"a malformed pickle ({op.name} on a value that cannot change)")
        if self.placed_flags[~target]:
            self.refuse(f"{op.name} changes a container already placed inside another (pickle's own pickler never "
                        f"writes that for a checkpoint)")
        depth = max(self.depths[~target], self.placed(taken[1:]) + 1)
        self.depths[~target] = depth
        self.deepest = max(self.deepest, depth)
        self.stack.append(target)

    def stack_op(self, op, arg):
        stack, marks = self.stack, self.marks
        if op.action == _NOTHING:  # PROTO, FRAME, READONLY_BUFFER (the buffer stays as it is)
            return
        if op.action == _MARK:
            marks.append(len(stack))
            return
        if op.action == _POP and len(stack) == (marks[-1] if marks else 0) and marks:
            marks.pop()  # pickle's load_pop: with no value above the last mark, the mark goes
            return
        if op.action == _POP_MARK:
            if not marks:
                self.refuse("a malformed pickle (POP_MARK without a MARK)")
            del stack[marks.pop():]
            return
        if op.action == _GET:
            if arg not in self.memo:
                self.refuse(f"a malformed pickle (memo entry {arg} is read before it is written)")
            self.memory += STACK_BYTES
            stack.append(self.memo[arg])
            return
        if len(stack) == (marks[-1] if marks else 0):
            self.refuse(f"a malformed pickle ({op.name} on an empty stack)")
        if op.action == _POP:
            stack.pop()
        elif op.action == _DUP:
            self.memory += STACK_BYTES
            stack.append(stack[-1])
        elif op.action == _PUT:
            key = len(self.memo) if op.name == "MEMOIZE" else arg
            if key not in self.memo:
                self.memory += MEMO_BYTES
            self.memo[key] = stack[-1]


def scan(data, origin: str, limits: Limits) -> Limits:
    """Raise a CaseError naming origin unless the pickle at the start of data, up to its STOP, stays
    within limits (depth, opcodes, memory: at most limits.memory, and at any point at most AMPLIFICATION
    times the bytes read plus SLACK); else return what it takes of each. Nothing of it is built."""
    walk = _Walk(data if isinstance(data, bytes) else bytes(data), origin, limits)
    data, stack, pos, count, end = walk.data, walk.stack, 0, 0, len(walk.data)
    while pos < end:
        op = _OPS.get(data[pos])
        if op is None:
            walk.refuse(f"not a pickle (byte {data[pos]:#04x} at {pos} is no opcode)")
        count += 1
        if count > limits.opcodes:
            walk.refuse(f"the pickle runs more than {limits.opcodes} opcodes")
        if op.arg == 0:  # no argument: most opcodes
            pos, arg, payload = pos + 1, 0, 0
        else:
            pos, arg, payload = walk.argument(op, pos + 1)
        action = op.action
        if action == _ATOM:
            walk.memory += op.cost + payload
            stack.append(0)
        elif action == _MAKE:
            taken = walk.operands(op)
            walk.memory += op.cost + payload + REFERENCE_BYTES * len(taken)
            stack.append(walk.new_value(walk.placed(taken) + 1, op.mutable))
        elif action == _FILL:
            taken = walk.operands(op)
            walk.memory += REFERENCE_BYTES * (len(taken) - 1)
            walk.fill(op, taken)
        elif action == _STOP:
            return Limits(walk.deepest, count, walk.memory)
        else:
            walk.stack_op(op, arg)
        if walk.memory > limits.memory or walk.memory > AMPLIFICATION * pos + SLACK:
            walk.refuse(f"the pickle would build more than {min(limits.memory, AMPLIFICATION * pos + SLACK)} bytes "
                        f"of objects by its first {pos} bytes (estimated; lowbit admits {AMPLIFICATION} times the "
                        f"bytes read and {SLACK} more, {limits.memory} in all)")
    walk.refuse("a truncated pickle (no STOP opcode)")


LIMITS = Limits(MAX_DEPTH, MAX_OPCODES, MAX_MEMORY)

# torch.save's zip (torch 2.15 caffe2/serialize/inline_container.cc writes it): every record stored,
# never compressed, under one folder named by the first record; the pickle is FOLDER/data.pkl.
MAX_PICKLE_BYTES = 1 << 28  # data.pkl (an optimizer state's pickle is kilobytes: its tensors are other records)
MAX_RECORDS = 1 << 20
MAX_CENTRAL_DIRECTORY = 1 << 27


def check_torch_save(file, origin: str) -> None:
    """Raise a CaseError naming origin unless the seekable binary `file` is a torch.save zip whose
    records all lie inside it uncompressed (so that nothing is inflated: a 1 MB file cannot claim a
    gigabyte) and whose data.pkl passes scan() within LIMITS; `file` is left at its start."""
    try:
        file.seek(0, 2)
        length = file.tell()
        file.seek(0)
        if not zipfile.is_zipfile(file):
            raise CaseError(f"{origin}: not a torch.save zip (no zip end record: cut short, or not written by "
                            f"torch.save; lowbit reads the zip format torch.save writes since torch 1.6)")
        end = zipfile._EndRecData(file)  # the end records alone: the central directory is not read yet
        if end is None or end[zipfile._ECD_ENTRIES_TOTAL] > MAX_RECORDS or end[zipfile._ECD_SIZE] > min(
                length, MAX_CENTRAL_DIRECTORY):
            raise CaseError(f"{origin}: a zip central directory of more than {MAX_RECORDS} records or "
                            f"{MAX_CENTRAL_DIRECTORY} bytes, or past the end of the file")
        file.seek(0)
        with zipfile.ZipFile(file) as archive:
            pickle_bytes = _data_pkl(archive, length, origin)
    except CaseError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, OverflowError) as e:
        raise CaseError(f"{origin}: not a readable torch.save zip ({type(e).__name__}: {str(e)[:200]})") from None
    finally:
        file.seek(0)
    scan(pickle_bytes, f"{origin}: data.pkl", LIMITS)


def torch_save_pickle(file, origin: str) -> bytes:
    """data.pkl of a torch.save zip (for the tests' measures of real files)."""
    with zipfile.ZipFile(file) as archive:
        return _data_pkl(archive, file.seek(0, 2), origin)


def _data_pkl(archive, length, origin) -> bytes:
    """The bytes of the archive's data.pkl, after checking every record (stored, inside the file, named
    once) as torch's reader would find it (the folder of the first record)."""
    infos = archive.infolist()
    if not infos:
        raise CaseError(f"{origin}: an empty zip, not a torch.save file")
    names = set()
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise CaseError(f"{origin}: record {info.filename[:200]!r} is compressed ({info.file_size} bytes from "
                            f"{info.compress_size}); torch.save stores every record as it is, and lowbit inflates "
                            f"nothing")
        if info.header_offset + info.file_size > length:
            raise CaseError(f"{origin}: record {info.filename[:200]!r} of {info.file_size} bytes lies past the end of "
                            f"the file ({length} bytes)")
        if info.filename in names:
            raise CaseError(f"{origin}: record {info.filename[:200]!r} appears twice")
        names.add(info.filename)
    name = infos[0].filename.split("/")[0] + "/data.pkl"
    if name not in names:
        raise CaseError(f"{origin}: no {name[:200]!r} record; not a torch.save file")
    info = archive.getinfo(name)
    if info.file_size > MAX_PICKLE_BYTES:
        raise CaseError(f"{origin}: {name[:200]!r} of {info.file_size} bytes, more than the {MAX_PICKLE_BYTES} lowbit "
                        f"reads")
    return archive.read(info)
