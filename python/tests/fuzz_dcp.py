"""A seeded random-mutation fuzzer of DCP folders against lowbit's DCP reader (issue 25 item 8).

Each execution writes one mutated folder, built from a seed folder of python/tests/fuzz_seeds_dcp/
(dcp.save of real torchao and bitsandbytes optimizer states, make_fuzz_seeds_dcp.py): its .metadata
re-emitted from the parsed pickle with fields, paths, names and globals changed (dangerous globals such
as os.system among them), or its bytes mutated; its chunk file truncated, extended or flipped; links,
folders and FIFOs planted in it; then reads it with lowbit. Every outcome must be a result or a
lowbit.CaseError / ValueError; and, checked independently of lowbit's reader:
- no code ran: no process was started, no os.system call made (an audit hook, armed only while
  lowbit reads) and no PWNED file exists;
- nothing outside the folder was read: a read that succeeded named only plain relative paths, with
  no link along them (checked on the folder as written).
Without torch the reader's torch-free stages run (metadata, paths, ranges, bytes: lowbit._dcp); with
torch, lowbit.quantized_states and state_signature on the folder too.

Issue 44's surfaces: pickle bombs spliced into the .metadata or into an item's data.pkl (a dict keyed
by a tuple nested up to 200 000 deep, a frozenset of it, lists nested deep, floods of empty dicts, memo
entries and opcodes), and an item rewritten as its own file (the integers of its pickle changed: a
tensor's sizes, strides and storage offset; a record compressed). The scanner's opcode and memory
limits are scaled down here (--small-limits, the default) so that a flood reaches them in
milliseconds; its depth limit is the shipped one. The run is under an address-space limit, so that an
allocation the readers should have refused is a MemoryError finding, not the machine's memory.

Usage: python fuzz_dcp.py [--runs N] [--seed S] [--artifacts DIR]; prints
"fuzz_dcp: ok (N runs, ...)" and exits 0, or prints each finding and exits 1.
"""
import argparse
import io
import os
import pickle
import pickletools
import random
import resource
import shutil
import stat
import sys
import tempfile
import time
import traceback
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lowbit  # noqa: E402
from lowbit import _dcp, _pickles  # noqa: E402

from dcp_pickles import Call, Global, Obj, dumps  # noqa: E402

SEEDS = os.path.join(HERE, "fuzz_seeds_dcp")
RECORDS = {"Metadata", "MetadataIndex", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
           "TensorProperties", "StorageMeta", "_StorageInfo"}
CALLS = {("torch", "Size"), ("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING"),
         ("torch.serialization", "_get_layout"), ("pathlib", "PosixPath")}
# events that mean code ran: a process, a shell, a library loaded
CODE_EVENTS = ("os.system", "subprocess.Popen", "os.posix_spawn", "os.spawn", "os.exec", "os.fork", "os.forkpty",
               "ctypes.dlopen", "pty.spawn", "webbrowser.open", "socket.connect")


# --- the seed's metadata as a tree (dcp_pickles' nodes), to mutate and emit again -----------------------

class _ObjFactory:
    module = name = ""

    def __new__(cls, *args):
        return Obj(cls.module, cls.name, None)


class _CallFactory:
    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        return Call(self.module, self.name, args)


class _TreeNodes:
    """Reads a seed's (trusted) .metadata into nodes: globals become Global / Obj / Call nodes."""

    def find_class(self, module, name):
        if name in RECORDS:
            return type(name, (_ObjFactory,), {"module": module, "name": name})
        if (module, name) in CALLS:
            return _CallFactory(module, name)
        return Global(module, name)


def _setstate(self, state):
    self.state = state


Obj.__setstate__ = _setstate  # BUILD of a parsed Obj keeps its state


class _TreeUnpickler(_TreeNodes, pickle.Unpickler):  # pickle's C unpickler
    pass


class _PyTreeUnpickler(_TreeNodes, pickle._Unpickler):  # its pure-Python one, as lowbit's
    pass


def parse_tree(data, unpickler=_TreeUnpickler):
    import io

    return unpickler(io.BytesIO(data)).load()


# --- mutations ------------------------------------------------------------------------------------------

class Ctx:
    def __init__(self, rng, tmp, folder, chunk_names):
        self.rng, self.tmp, self.folder, self.chunk_names = rng, tmp, folder, chunk_names
        self.pwned = os.path.join(tmp, "PWNED")


def hostile_paths(ctx):
    return ["../outside.distcp", os.path.join(ctx.tmp, "outside.distcp"), "link.distcp", "linkdir/outside.distcp",
            "sub/../" + ctx.chunk_names[0], "./" + ctx.chunk_names[0], "", ".", "..", "sub", "fifo.distcp",
            ctx.chunk_names[0] + "/", "/" + ctx.chunk_names[0], ctx.chunk_names[0] + "\0x", "sub//x", "missing.distcp",
            "sub/" + ctx.chunk_names[0], "a" * 5000]


def dangerous(ctx):
    cmd = f"touch {ctx.pwned}"
    return ctx.rng.choice([
        Call("os", "system", (cmd,)), Call("posix", "system", (cmd,)), Call("builtins", "eval", (f"__import__('os').system({cmd!r})",)),
        Call("builtins", "exec", (f"import os; os.system({cmd!r})",)), Call("subprocess", "call", ((cmd,),)),
        Call("subprocess", "check_output", (["touch", ctx.pwned],)), Call("builtins", "getattr", (1, "real")),
        Call("builtins", "__import__", ("os",)), Call("torch", "load", (ctx.pwned,)),
        Call("pickle", "loads", (b"cos\nsystem\n(S'true'\ntR.",)), Call("torch._utils", "_rebuild_tensor_v2", ()),
        Call("pathlib", "Path", ("/etc/passwd",)), Call("io", "open", ("/etc/passwd",)),
        Global("os", "environ"), Global("builtins", "open"), Obj("torch.distributed.checkpoint.planner", "WriteItem", {}),
        Call("torch", "Size", ([1, 2],)), Call("torch", "float32", ()), Global("torch", "not_a_dtype"),
    ])


def random_value(ctx):
    r = ctx.rng
    deep = []
    for _ in range(r.choice([1, 50, 2000])):
        deep = [deep, deep]  # a DAG whose plain repr is exponential
    return r.choice([0, 1, -1, 2**31, 2**62, 2**63, 2**64, -2**63, 2**1000, 1.5, float("nan"), "", "x" * 10000, b"\0\1",
                     None, True, (), [], {}, (1, "a"), deep, dangerous(ctx)])


def _reachable(tree):
    """Every node of the tree once (shared ones too)."""
    out, stack, seen = [], [tree], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        out.append(n)
        if isinstance(n, Obj):
            stack.append(n.state)
        elif isinstance(n, Call):
            stack.extend(n.args)
        elif isinstance(n, dict):
            stack.extend(n.keys())
            stack.extend(n.values())
        elif isinstance(n, (list, tuple)):
            stack.extend(n)
    return out


def nodes(tree):
    """(container, key) of every slot in the tree, to replace one."""
    for n in _reachable(tree):  # TensorProperties' tuple state and calls' arguments: lists from now on
        if isinstance(n, Obj) and isinstance(n.state, tuple):
            n.state = list(n.state)
        elif isinstance(n, Call) and not isinstance(n.args, list):
            n.args = list(n.args)
    slots = []
    for n in _reachable(tree):
        if isinstance(n, dict):
            slots += [(n, k) for k in n]
        elif isinstance(n, list):
            slots += [(n, i) for i in range(len(n))]
    return slots


def _dict_state(node):
    return node.state if isinstance(node, Obj) and isinstance(node.state, dict) else None


def storage_items(tree):
    st = tree.state.get("storage_data") if isinstance(tree, Obj) and isinstance(tree.state, dict) else None
    return list(st.items()) if isinstance(st, dict) else []


def mutate_tree(tree, ctx):
    r = ctx.rng
    for _ in range(r.choice([1, 1, 2, 3])):
        items = storage_items(tree)  # again: a mutation before may have replaced them
        op = r.randrange(9)
        if items and op == 0:  # a path
            _, info = r.choice(items)
            if _dict_state(info):
                info.state["relative_path"] = r.choice(hostile_paths(ctx) + ctx.chunk_names)
        elif items and op == 1:  # a range
            _, info = r.choice(items)
            if _dict_state(info):
                field = r.choice(["offset", "length"])
                v = info.state.get(field, 0)
                v = v if isinstance(v, int) else 0
                info.state[field] = r.choice([v + r.randint(-3, 3), 0, -1, 2**62, 2**63, v * 2, "1", None, 1.0])
        elif items and op == 2:  # a name
            index, _ = r.choice(items)
            if _dict_state(index):
                other = _dict_state(r.choice(items)[0]) or {}
                index.state["fqn"] = r.choice(["", "a..b", "state", "state.0", ".", "x" * 3000, ".".join("a" * 100), 5,
                                               None, "state.0.exp_avg.x", other.get("fqn", "")])
        elif items and op == 3:  # an item twice (a sharded save) or one dropped
            index, info = r.choice(items)
            st = tree.state["storage_data"]
            if r.random() < 0.5:
                st[Obj("torch.distributed.checkpoint.metadata", "MetadataIndex", dict(_dict_state(index) or {}))] = info
            else:
                st.pop(index, None)
        elif items and op == 4:  # transforms
            _, info = r.choice(items)
            if _dict_state(info):
                info.state["transform_descriptors"] = r.choice([["zstd"], [], None, "x", [1]])
        elif op == 5:  # code, anywhere
            slots = nodes(tree)
            if slots:
                c, k = r.choice(slots)
                c[k] = dangerous(ctx)
        elif op == 6:  # any value, anywhere
            slots = nodes(tree)
            if slots:
                c, k = r.choice(slots)
                c[k] = random_value(ctx)
        elif op == 7:  # a class for another
            objs = [n for n in _reachable(tree) if isinstance(n, Obj)]
            if objs:
                o = r.choice(objs)
                o.name = r.choice(sorted(RECORDS))
        else:  # the whole state replaced
            objs = [n for n in _reachable(tree) if isinstance(n, Obj)]
            if objs:
                r.choice(objs).state = random_value(ctx)
    return tree


def mutate_bytes(data, ctx, pool):
    r = ctx.rng
    b = bytearray(data)
    for _ in range(r.choice([1, 1, 2, 4, 8])):
        op = r.randrange(7)
        if not b:
            b += bytes([r.randrange(256)])
        i = r.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << r.randrange(8)
        elif op == 1:
            b[i] = r.choice([0, 0xFF, 0x7F, 0x80, r.randrange(256)])
        elif op == 2:
            b[i:i] = bytes(r.randrange(256) for _ in range(r.randint(1, 8)))
        elif op == 3:
            del b[i:i + r.randint(1, 64)]
        elif op == 4:
            del b[i:]
        elif op == 5:
            other = r.choice(pool)
            j = r.randrange(len(other))
            b[i:i + r.randint(1, 64)] = other[j:j + r.randint(1, 64)]
        else:
            j = r.randrange(len(b))
            b[i:i] = b[j:j + r.randint(1, 32)]
    return bytes(b)


def mutate_chunk(data, ctx):
    r = ctx.rng
    op = r.randrange(5)
    if op == 0:
        return data[:r.randrange(len(data) + 1)]
    if op == 1:
        return data + bytes(r.randrange(256) for _ in range(r.randint(1, 4096)))
    if op == 2:  # bytes flipped in a zip's header, in a tensor's data or anywhere
        b = bytearray(data)
        for _ in range(r.randint(1, 16)):
            b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        return bytes(b)
    if op == 3:
        b = bytearray(data)
        i = r.randrange(len(b))
        b[i:i + 4096] = bytes(min(4096, len(b) - i))
        return bytes(b)
    return data


# --- pickle bombs and rewritten items (issue 44) ---------------------------------------------------------

def pickle_bomb(r) -> bytes:
    """Opcodes that push one hostile value and POP it: spliced before a pickle's first frame, the pickle
    still reads as before, once the value is built."""
    depth = r.choice([64, 101, 1000, 200_000])
    deep = b"N" + b"\x85" * depth  # None in TUPLE1 in TUPLE1 ...
    n = r.choice([1000, 100_000, 1 << 20])
    return r.choice([
        b"}" + deep + b"K\x01s0",  # a dict keyed by the deep tuple (CPython hashes it recursively, in C)
        b"(" + deep + b"\x910",  # a frozenset of it
        b"]" * depth + b"a" * (depth - 1) + b"0",  # lists nested deep
        b"(" + b"}" * n + b"1",  # empty dicts
        b"N" + b"\x94" * n + b"0",  # memo entries
        b"(" + b"N" * n + b"1",  # opcodes
        b"]\x94]h\x00a0h\x00K\x01a0",  # a list changed after it was placed in another
    ])


def with_bomb(data: bytes, r) -> bytes:
    return data[:2] + pickle_bomb(r) + data[2:]  # after PROTO, before any FRAME


def _int_opcodes(data):
    """(start, end) of every opcode that pushes a small int (a tensor's sizes, strides, offsets ...)."""
    return [(pos, pos + 1 + {"BININT1": 1, "BININT2": 2, "BININT": 4}[op.name])
            for op, _, pos in pickletools.genops(data) if op.name in ("BININT1", "BININT2", "BININT")]


def mutate_ints(data: bytes, r) -> bytes:
    """Some ints of a pickle replaced: 0 (a stride, an offset), huge, negative (as LONG1 or BININT)."""
    try:
        spots = _int_opcodes(data)
    except Exception:
        return data
    for start, end in sorted(r.sample(spots, min(len(spots), r.choice([1, 2, 4]))), reverse=True):
        v = r.choice([0, 1, -1, 2**31 - 1, 2**33, 2**62, 2**63 + 1, 3072, 4096 * 4096])
        n = (v.bit_length() + 8) // 8
        data = data[:start] + b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True) + data[end:]
    return data


def rewrite_item(item: bytes, r) -> bytes:
    """One DCP item (a torch.save zip) rewritten whole, its CRCs right: its data.pkl's ints changed or a
    bomb spliced in, or a record compressed."""
    try:
        src = zipfile.ZipFile(io.BytesIO(item))
        records = [(i.filename, src.read(i)) for i in src.infolist()]
    except Exception:
        return item
    out = io.BytesIO()
    compressed = r.randrange(len(records)) if r.random() < 0.2 else -1
    with zipfile.ZipFile(out, "w") as z:
        for i, (name, data) in enumerate(records):
            if name.endswith("/data.pkl"):
                data = mutate_ints(data, r) if r.random() < 0.7 else with_bomb(data, r)
            z.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if i == compressed else zipfile.ZIP_STORED)
    return out.getvalue()


def move_item(tree, chunk_bytes, ctx):
    """An item of the tree rewritten (rewrite_item) into a file of its own, fuzz.distcp: (its bytes)
    or None where the tree has no item range to take."""
    ranged = [info for _, info in storage_items(tree) if isinstance((_dict_state(info) or {}).get("offset"), int)
              and isinstance(info.state.get("length"), int)]
    if not ranged:
        return None
    info = ctx.rng.choice(ranged).state
    item = chunk_bytes[info["offset"]:info["offset"] + info["length"]]
    data = rewrite_item(item, ctx.rng)
    info.update(relative_path="fuzz.distcp", offset=0, length=len(data))
    return data


# --- one execution --------------------------------------------------------------------------------------

def plant(ctx, chunk_name, chunk_bytes):
    """The folder's files and what a hostile folder adds: links out, a subfolder, a FIFO."""
    r, f = ctx.rng, ctx.folder
    with open(os.path.join(f, chunk_name), "wb") as out:
        out.write(chunk_bytes)
    os.mkdir(os.path.join(f, "sub"))
    os.symlink(os.path.join(ctx.tmp, "outside.distcp"), os.path.join(f, "link.distcp"))
    os.symlink(ctx.tmp, os.path.join(f, "linkdir"))
    os.mkfifo(os.path.join(f, "fifo.distcp"))
    if r.random() < 0.03:  # the chunk itself a link out (to a copy of itself) or a folder
        os.remove(os.path.join(f, chunk_name))
        if r.random() < 0.5:
            os.symlink(os.path.join(ctx.tmp, "outside.distcp"), os.path.join(f, chunk_name))
        else:
            os.mkdir(os.path.join(f, chunk_name))


def plain_inside(folder, relative):
    """The fuzzer's own rule (not lowbit's code): a relative path of plain components, no link along it."""
    if not isinstance(relative, str) or not relative or "\0" in relative or os.path.isabs(relative):
        return False
    parts = relative.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    at = folder
    for p in parts:
        at = os.path.join(at, p)
        if os.path.islink(at):
            return False
    return True


class Finding(Exception):
    pass


EVENTS = []
ARMED = [False]


def audit(event, args):
    if ARMED[0] and event.startswith(CODE_EVENTS):
        EVENTS.append((event, repr(args)[:200]))


def read_folder(folder, full):
    """lowbit's reader on the folder: the torch-free stages, then (with torch) the public functions."""
    with _dcp.Folder(folder) as f:
        items = f.items()
        f.read(items)
    if full:
        states = lowbit.quantized_states(folder)
        if states:
            lowbit.state_signature(folder)
    return True


def execute(ctx, seed, full, pool):
    r = ctx.rng
    shutil.rmtree(ctx.folder, ignore_errors=True)
    os.mkdir(ctx.folder)
    meta_bytes, chunk_name, chunk_bytes = seed
    kind = r.randrange(14)
    tree, moved = None, None
    if kind < 6:
        tree = mutate_tree(parse_tree(meta_bytes), ctx)
        meta = dumps(tree)
        if r.random() < 0.2:
            meta = mutate_bytes(meta, ctx, pool)
    elif kind < 9:
        meta = mutate_bytes(meta_bytes, ctx, pool)
    elif kind < 11:
        meta = with_bomb(meta_bytes, r)
    elif kind < 13:
        tree = parse_tree(meta_bytes)
        moved = move_item(tree, chunk_bytes, ctx)
        meta = dumps(tree)
    else:
        meta = meta_bytes
    chunk = mutate_chunk(chunk_bytes, ctx) if r.random() < 0.4 else chunk_bytes
    with open(os.path.join(ctx.folder, ".metadata"), "wb") as out:
        out.write(meta)
    plant(ctx, chunk_name, chunk)
    if moved is not None:
        with open(os.path.join(ctx.folder, "fuzz.distcp"), "wb") as out:
            out.write(moved)
    if r.random() < 0.02:  # .metadata a link out
        os.remove(os.path.join(ctx.folder, ".metadata"))
        os.symlink(os.path.join(ctx.tmp, "outside.metadata"), os.path.join(ctx.folder, ".metadata"))
    EVENTS.clear()
    ARMED[0] = True
    try:
        outcome = read_folder(ctx.folder, full)
    except lowbit.CaseError:
        outcome = "CaseError"
    except ValueError:
        outcome = "ValueError"
    except Exception as e:
        raise Finding(f"{type(e).__name__} escaped the reader:\n{traceback.format_exc()}") from None
    finally:
        ARMED[0] = False
    if EVENTS:
        raise Finding(f"code ran while lowbit read the folder: {EVENTS}")
    if os.path.exists(ctx.pwned):
        raise Finding("the PWNED file exists")
    if outcome is True:
        if os.path.islink(os.path.join(ctx.folder, ".metadata")):
            raise Finding("a linked .metadata was read")
        try:
            parsed = parse_tree(meta)
        except Exception:
            # the C unpickler refuses what the Python one lets pass (a BUILD of a false non-dict
            # state, a no-op there): the paths as the Python one reads them
            try:
                parsed = parse_tree(meta, _PyTreeUnpickler)
            except Exception as e:
                raise Finding(f"lowbit read metadata the fuzzer's own parser refuses ({e})") from None
        for _, info in storage_items(parsed):
            path = (_dict_state(info) or {}).get("relative_path")
            if not plain_inside(ctx.folder, path):
                raise Finding(f"a read succeeded through {path!r:.100}, which is not a plain path inside the folder")
    return outcome


def load_seeds():
    seeds = []
    for name in sorted(os.listdir(SEEDS)):
        folder = os.path.join(SEEDS, name)
        chunks = [f for f in os.listdir(folder) if f.endswith(".distcp")]
        if len(chunks) != 1:
            raise SystemExit(f"fuzz_dcp: {folder}: expected one .distcp file, found {chunks}")
        with open(os.path.join(folder, ".metadata"), "rb") as f:
            meta = f.read()
        with open(os.path.join(folder, chunks[0]), "rb") as f:
            chunk = f.read()
        seeds.append((name, (meta, chunks[0], chunk)))
    return seeds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2000, help="executions (default 2000)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--artifacts", default=None, help="where a finding's folder is kept (default: a temporary)")
    ap.add_argument("--max-findings", type=int, default=5)
    ap.add_argument("--shipped-limits", action="store_true",
                    help="the pickle scanner's shipped opcode and memory limits (default: scaled down to 2^16 "
                         "opcodes and 16 MiB, so that floods reach them at once)")
    ap.add_argument("--address-space-gib", type=int, default=24, help="RLIMIT_AS of the run (default 24 GiB)")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(20000)  # the emitter of the fuzzer's own deep values recurses
    if not args.shipped_limits:
        _pickles.LIMITS = _pickles.Limits(_pickles.MAX_DEPTH, 1 << 16, 16 << 20)
    limit = args.address_space_gib << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        import torch  # noqa: F401

        full = True
    except ImportError:
        full = False
    seeds = load_seeds()
    pool = [s[1][0] for s in seeds]
    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix="fuzz_dcp.")
    artifacts = args.artifacts or os.path.join(tmp, "artifacts")
    os.makedirs(artifacts, exist_ok=True)
    ctx = Ctx(rng, tmp, os.path.join(tmp, "ckpt"), [seeds[0][1][1]])
    for name, (meta, chunk_name, chunk) in seeds:  # every seed reads as it is (the fuzzer's baseline)
        with open(os.path.join(tmp, "outside.distcp"), "wb") as f:
            f.write(chunk)
        with open(os.path.join(tmp, "outside.metadata"), "wb") as f:
            f.write(meta)
        shutil.rmtree(ctx.folder, ignore_errors=True)
        os.mkdir(ctx.folder)
        with open(os.path.join(ctx.folder, ".metadata"), "wb") as f:
            f.write(meta)
        with open(os.path.join(ctx.folder, chunk_name), "wb") as f:
            f.write(chunk)
        read_folder(ctx.folder, full)  # also the warm-up: every import done before the hook is armed
    sys.addaudithook(audit)
    counts, findings, start = {}, 0, time.time()
    for run in range(args.runs):
        name, seed = seeds[rng.randrange(len(seeds))]
        ctx.chunk_names = [seed[1]]
        with open(os.path.join(tmp, "outside.distcp"), "wb") as f:
            f.write(seed[2])  # outside the folder: the same chunk, readable had the reader gone there
        with open(os.path.join(tmp, "outside.metadata"), "wb") as f:
            f.write(seed[0])
        try:
            outcome = execute(ctx, seed, full, pool)
            counts[outcome] = counts.get(outcome, 0) + 1
        except Finding as e:
            findings += 1
            kept = os.path.join(artifacts, f"finding-{run}")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(ctx.folder, kept, symlinks=True, ignore=lambda d, names: [
                n for n in names if stat.S_ISFIFO(os.lstat(os.path.join(d, n)).st_mode)])
            print(f"fuzz_dcp: FINDING at run {run} (seed {name}; folder kept in {kept}):\n{e}", flush=True)
            if os.path.exists(ctx.pwned):
                os.remove(ctx.pwned)
            if findings >= args.max_findings:
                break
    seconds = time.time() - start
    shutil.rmtree(ctx.folder, ignore_errors=True)
    summary = ", ".join(f"{v} {'results' if k is True else k}" for k, v in sorted(counts.items(), key=str))
    stages = "metadata, paths, ranges, torch.load, states, signature" if full else "metadata, paths, ranges (no torch)"
    if findings:
        print(f"fuzz_dcp: FAILED ({findings} finding(s) in {run + 1} runs; artifacts in {artifacts})")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"fuzz_dcp: ok ({args.runs} runs, seed {args.seed}, {seconds:.1f} s; {summary}; stages: {stages})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
