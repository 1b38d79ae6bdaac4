"""Issue 27 item 1: torchao's quantized states inside DTensors, as FSDP2's fully_shard holds them, are
found by quantized_states / state_signature / audit_state / dequantized_state_case, each recorded with
the DTensor's global shape, placements and this rank's offsets. The values come from torchao's own
dequantize (the independent source); the offsets are torch's even chunking, worked out by hand."""
import numpy as np
import pytest

import lowbit

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)


@pytest.fixture
def rank_1_of_2():
    """This process as rank 1 of 2 (torch's fake process group: no collective runs), for the offsets
    of a second rank's shard."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=1, world_size=2)
    from torch.distributed.device_mesh import init_device_mesh

    try:
        yield init_device_mesh("cpu", (2,))
    finally:
        dist.destroy_process_group()


def train(mesh, monkeypatch):
    """The issue's reproduction: a model, fully_shard on the mesh (or none), torchao AdamW8bit, 3 steps.
    torchao's step runs eagerly (torch.compile patched to return the function): the state classes are
    the same, the test takes seconds, and torch 2.15's inductor cache was seen to hand AdamW4bit an
    AdamW8bit step compiled by an earlier run (wrong number of dimensions), which is not ours to test."""
    from torch.distributed.fsdp import fully_shard
    from torchao.optim import AdamW8bit

    monkeypatch.setattr(torch, "compile", lambda fn=None, **kw: fn)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Linear(128, 64))
    if mesh is not None:
        fully_shard(model, mesh=mesh)
    opt = AdamW8bit(model.parameters())
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        model(torch.randn(4, 64, generator=g)).square().sum().backward()
        opt.step()
        opt.zero_grad()
    return opt.state_dict()


def test_fsdp2_states_are_found_with_their_global_shape_placement_and_offsets(one_rank_gloo, monkeypatch):
    from torch.distributed.tensor import DTensor

    sd = train(one_rank_gloo, monkeypatch)
    assert isinstance(sd["state"][0]["exp_avg"], DTensor)  # the object
    states = {s.key: s for s in lowbit.quantized_states(sd)}
    # the two weights (8 192 elements each); the biases (128, 64) are below torchao's 4 096 and stay float
    assert {k: (s.format, s.shape, s.global_shape, s.placements, s.offsets) for k, s in states.items()} == {
        "state.0.exp_avg": ("torchao.codebook8.signed", (128, 64), (128, 64), ("Shard(dim=0)",), (0, 0)),
        "state.0.exp_avg_sq": ("torchao.codebook8.unsigned", (128, 64), (128, 64), ("Shard(dim=0)",), (0, 0)),
        "state.2.exp_avg": ("torchao.codebook8.signed", (64, 128), (64, 128), ("Shard(dim=0)",), (0, 0)),
        "state.2.exp_avg_sq": ("torchao.codebook8.unsigned", (64, 128), (64, 128), ("Shard(dim=0)",), (0, 0))}
    for key, s in states.items():
        _, pid, name = key.split(".")
        theirs = sd["state"][int(pid)][name].to_local().dequantize().reshape(-1).numpy()
        assert np.array_equal(lowbit.dequantize(s.case).view(np.uint32), theirs.view(np.uint32)), key
    # one rank holds the whole state: the same signature as the same training without FSDP
    plain = train(None, monkeypatch)
    assert lowbit.state_signature(sd) == lowbit.state_signature(plain)
    case = lowbit.dequantized_state_case(sd)
    assert case["state.2.exp_avg"].shape == (64, 128)
    rows, warnings = lowbit.audit_state(sd, formats=["torchao.codebook8.signed"], block_sizes=[256])
    assert {r["tensor"] for r in rows} == set(states) and len(warnings) == 4


def optim_state(kind, shape):
    from torchao.optim.subclass_4bit import OptimState4bit
    from torchao.optim.subclass_8bit import OptimState8bit
    from torchao.optim.subclass_fp8 import OptimStateFp8

    s = {"8bit": lambda: OptimState8bit.zeros(shape, signed=True, block_size=256),
         "4bit": lambda: OptimState4bit.zeros(shape, signed=True, block_size=128),
         "fp8": lambda: OptimStateFp8.zeros(shape, block_size=256)}[kind]()
    s.copy_(torch.randn(shape, generator=torch.Generator().manual_seed(2)))
    return s


@pytest.mark.parametrize("kind", ["8bit", "4bit", "fp8"])
@pytest.mark.parametrize("placement,global_shape,offsets", [
    ("Shard(0)", (128, 128), (64, 0)),  # rank 1 of 2 holds rows 64..127
    ("Shard(1)", (64, 256), (0, 128)),  # columns 128..255
    ("Replicate()", (64, 128), (0, 0)),
])
def test_a_second_ranks_shard_records_its_offsets(kind, placement, global_shape, offsets, rank_1_of_2):
    from torch.distributed.tensor import DTensor, Replicate, Shard

    local = optim_state(kind, (64, 128))
    p = {"Shard(0)": Shard(0), "Shard(1)": Shard(1), "Replicate()": Replicate()}[placement]
    d = DTensor.from_local(local, rank_1_of_2, [p], run_check=False, shape=torch.Size(global_shape),
                           stride=(global_shape[1], 1))
    (s,) = lowbit.quantized_states({"state": {0: {"exp_avg": d}}})
    assert (s.shape, s.global_shape, s.placements, s.offsets) == ((64, 128), global_shape, (repr(p),), offsets)
    assert np.array_equal(lowbit.dequantize(s.case).view(np.uint32),
                          local.dequantize().reshape(-1).numpy().view(np.uint32))
    # the local shard's signature: the same as the state's own outside a DTensor
    assert lowbit.state_signature({"state": {0: {"exp_avg": d}}}) == lowbit.state_signature({"state": {0: {"exp_avg": local}}})


def test_a_dtensor_whose_shape_does_not_hold_its_state_is_refused(rank_1_of_2):
    from torch.distributed.tensor import DTensor, Shard

    d = DTensor.from_local(optim_state("8bit", (64, 128)), rank_1_of_2, [Shard(0)], run_check=False,
                           shape=torch.Size((100, 128)), stride=(128, 1))  # rank 1's rows would be 50
    with pytest.raises(ValueError, match=r"state.0.exp_avg: the DTensor's local shape \[50, 128\] is not its "
                                         r"torchao state's \[64, 128\]"):
        lowbit.quantized_states({"state": {0: {"exp_avg": d}}})


def bnb_model_steps(wrap):
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    model = wrap(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Linear(128, 64)))
    opt = bnb.optim.Adam8bit(model.parameters())
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        model(torch.randn(4, 64, generator=g)).square().sum().backward()
        opt.step()
        opt.zero_grad()
    return opt.state_dict()


def test_bitsandbytes_adam8bit_does_not_step_under_fsdp2(one_rank_gloo):
    # what bitsandbytes 0.50.2 does under fully_shard on the CPU: its fused step refuses DTensor
    # parameters, so there is no sharded bitsandbytes state to read (pinned: a later release may change it)
    from torch.distributed.fsdp import fully_shard

    with pytest.raises(RuntimeError, match="got mixed torch.Tensor and DTensor"):
        bnb_model_steps(lambda m: fully_shard(m, mesh=one_rank_gloo))


def test_bitsandbytes_states_under_ddp_are_plain_and_found(one_rank_gloo):
    # DDP replicates: each rank's optimizer holds whole, plain states, read as outside any wrapper
    ddp = bnb_model_steps(lambda m: torch.nn.parallel.DistributedDataParallel(m))
    plain = bnb_model_steps(lambda m: m)
    states = lowbit.quantized_states(ddp)
    assert [(s.key, s.shape, s.global_shape, s.placements, s.offsets) for s in states] == [
        ("state.0.state1", (128, 64), (128, 64), (), (0, 0)), ("state.0.state2", (128, 64), (128, 64), (), (0, 0)),
        ("state.2.state1", (64, 128), (64, 128), (), (0, 0)), ("state.2.state2", (64, 128), (64, 128), (), (0, 0))]
    assert lowbit.state_signature(ddp) == lowbit.state_signature(plain)


@pytest.mark.parametrize("kind", ["8bit", "4bit", "fp8"])
def test_a_dtensor_whose_local_state_parts_disagree_is_refused(kind, rank_1_of_2):
    """Issue 44 item 2: a DTensor's local torchao state is checked as any other (its wrapper shape
    against its codes and scales) before a value is read; on main 30a3794 it was listed, and its
    signature looped in the value reader."""
    from torch.distributed.tensor import DTensor, Shard

    d = DTensor.from_local(optim_state(kind, (64, 128)), rank_1_of_2, [Shard(0)], run_check=False,
                           shape=torch.Size((128, 128)), stride=(128, 1))
    local = d._local_tensor  # changed after from_local (whose view would rebuild it), as torch.load can leave it
    half = local.codes.reshape(-1)[:local.codes.numel() // 2].clone()
    local.codes = half if kind == "4bit" else half.reshape(32, 128)  # codes of 32 rows under a 64-row wrapper
    local.scale = local.scale[:local.scale.numel() // 2].clone()
    with pytest.raises(lowbit.CaseError, match=r"state.0.exp_avg: a OptimState\w+ of shape \[64, 128\] \(8192 "
                                               r"elements\) holds"):
        lowbit.quantized_states({"state": {0: {"exp_avg": d}}})
