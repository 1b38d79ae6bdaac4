"""DCP metadata pickles written without torch (for the tests and the DCP fuzzer): a small emitter of
pickle opcodes (protocol 2) for trees of plain values, objects rebuilt as pickle rebuilds a dataclass
(NEWOBJ, then BUILD with its state) and calls (REDUCE), under any module and name, so that a test can
write what torch's DCP writes (torch 2.15 torch/distributed/checkpoint/metadata.py, filesystem.py),
and what it never writes, on a machine without torch."""
import struct
from dataclasses import dataclass

DCP = "torch.distributed.checkpoint.metadata"
FS = "torch.distributed.checkpoint.filesystem"


@dataclass(eq=False)  # hashable by identity, as the unpickled global it stands for: a dict key too
class Global:
    module: str
    name: str


@dataclass(eq=False)  # hashable by identity: a dict key (MetadataIndex)
class Obj:  # module.name.__new__(cls) then BUILD(state), as pickle stores a dataclass
    module: str
    name: str
    state: object


@dataclass(eq=False)
class Call:  # module.name(*args) (REDUCE)
    module: str
    name: str
    args: tuple


def _emit(v, out, memo):
    if isinstance(v, (list, dict, Obj, Call)) and id(v) in memo:  # a shared reference: pickle's memo
        out += b"j" + struct.pack("<I", memo[id(v)][0])
        return
    if v is None:
        out += b"N"
    elif v is True or v is False:
        out += b"\x88" if v else b"\x89"
    elif isinstance(v, int):
        if -(1 << 31) <= v < (1 << 31):
            out += b"J" + struct.pack("<i", v)
        else:
            n = (v.bit_length() + 8) // 8
            out += b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)
    elif isinstance(v, float):
        out += b"G" + struct.pack(">d", v)
    elif isinstance(v, str):
        b = v.encode("utf-8", "surrogatepass")
        out += b"X" + struct.pack("<I", len(b)) + b
    elif isinstance(v, bytes):
        out += b"C" + bytes([len(v)]) + v if len(v) < 256 else b"B" + struct.pack("<I", len(v)) + v
    elif isinstance(v, tuple):
        out += b"("
        for e in v:
            _emit(e, out, memo)
        out += b"t"
    elif isinstance(v, list):
        out += b"]"
        _put(v, out, memo)
        out += b"("
        for e in v:
            _emit(e, out, memo)
        out += b"e"
    elif isinstance(v, dict):
        out += b"}"
        _put(v, out, memo)
        out += b"("
        for k, e in v.items():
            _emit(k, out, memo)
            _emit(e, out, memo)
        out += b"u"
    elif isinstance(v, Global):
        out += b"c" + v.module.encode() + b"\n" + v.name.encode() + b"\n"
    elif isinstance(v, Obj):
        _emit(Global(v.module, v.name), out, memo)
        out += b")\x81"
        _put(v, out, memo)
        _emit(v.state, out, memo)
        out += b"b"
    elif isinstance(v, Call):
        _emit(Global(v.module, v.name), out, memo)
        _emit(tuple(v.args), out, memo)
        out += b"R"
        _put(v, out, memo)
    else:
        raise TypeError(type(v).__name__)


def _put(v, out, memo):
    memo[id(v)] = (len(memo), v)  # v kept alive: its id stays its own
    out += b"r" + struct.pack("<I", memo[id(v)][0])


def dumps(tree) -> bytes:
    out = bytearray(b"\x80\x02")
    _emit(tree, out, {})
    return bytes(out + b".")


def size(*extents):
    return Call("torch", "Size", ((*extents,),))


def tensor_metadata(shape, dtype="float32"):
    props = Obj(DCP, "TensorProperties", (Global("torch", dtype), Call("torch.serialization", "_get_layout",
                ("torch.strided",)), False, Call(DCP, "_MEM_FORMAT_ENCODING", (0,)), False, ()))
    chunk = Obj(DCP, "ChunkStorageMetadata", {"offsets": size(*[0] * len(shape)), "sizes": size(*shape)})
    return Obj(DCP, "TensorStorageMetadata", {"properties": props, "size": size(*shape), "chunks": [chunk]})


def metadata(items):
    """A Metadata tree as DCP writes it: items is [(fqn, relative_path, offset, length, shape or None)]
    (None: a non-tensor item, BytesStorageMetadata)."""
    storage, sd_meta, planner = {}, {}, {}
    for i, (fqn, path, offset, length, shape) in enumerate(items):
        index = {"fqn": fqn, "offset": None if shape is None else size(*[0] * len(shape)),
                 "index": None if shape is None else 0}
        storage[Obj(DCP, "MetadataIndex", index)] = Obj(FS, "_StorageInfo", {"relative_path": path, "offset": offset,
                                                                             "length": length})
        sd_meta[fqn] = Obj(DCP, "BytesStorageMetadata", {}) if shape is None else tensor_metadata(shape)
        planner[fqn] = tuple(fqn.split("."))
    meta = Obj(DCP, "StorageMeta", {"checkpoint_id": Call("pathlib", "PosixPath", ("/tmp", "ckpt")), "save_id": "s",
                                    "load_id": None, "modules": []})
    return Obj(DCP, "Metadata", {"state_dict_metadata": sd_meta, "planner_data": planner, "storage_data": storage,
                                 "storage_meta": meta, "version": "1.0.0"})
