"""The states of all thirteen bitsandbytes 8-bit optimizer classes, as each class's own step leaves
them: found with the keys and shapes bitsandbytes gives them (AdEMAMix's 2-D state1 as its two first
moments), dequantized bit for bit as bitsandbytes' own dequantize_blockwise does (the independent
source), and signed alike in memory, in a torch.save file and in a DCP folder."""
import warnings

import numpy as np
import pytest

import lowbit

torch = pytest.importorskip("torch")
bnb = pytest.importorskip("bitsandbytes")

ONE_STATE = ["Lion8bit", "PagedLion8bit", "SGD8bit", "RMSprop8bit", "Adagrad8bit", "LARS8bit"]
TWO_STATES = ["Adam8bit", "AdamW8bit", "PagedAdam8bit", "PagedAdamW8bit", "LAMB8bit"]
ADEMAMIX = ["AdEMAMix8bit", "PagedAdEMAMix8bit"]
CLASSES = ONE_STATE + TWO_STATES + ADEMAMIX
SHAPE = (64, 81)  # 5 184 elements: above min_8bit_size (4096), a partial last block of 64


def trained(name: str, steps: int = 2) -> dict:
    """The class's state_dict after `steps` steps of seeded gradients on two parameters: one quantized,
    one below min_8bit_size (float32 states, not quantized)."""
    torch.manual_seed(11)
    big, small = torch.nn.Parameter(torch.randn(SHAPE)), torch.nn.Parameter(torch.randn(100))
    kwargs = {"lr": 1e-2}
    if name in ("SGD8bit", "LARS8bit"):
        kwargs["momentum"] = 0.9  # SGD8bit refuses momentum 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # paged classes on the CPU: "not supported, falling back"
        opt = getattr(bnb.optim, name)([big, small], **kwargs)
        for _ in range(steps):
            big.grad, small.grad = torch.randn_like(big), torch.randn_like(small)
            opt.step()
    return opt.state_dict()


def expected_keys(name: str) -> set:
    if name in ADEMAMIX:
        return {"state.0.state1[0]", "state.0.state1[1]", "state.0.state2"}
    if name in TWO_STATES:
        return {"state.0.state1", "state.0.state2"}
    return {"state.0.state1"}


def inner(sd: dict) -> dict:
    st = sd["state"][0]
    return st.get("__bnb_optimizer_quant_state__", st)


def test_the_thirteen_classes():
    assert len(CLASSES) == len(set(CLASSES)) == 13
    assert all(hasattr(bnb.optim, name) for name in CLASSES)


@pytest.mark.parametrize("name", CLASSES)
def test_states_found_and_dequantized_as_bitsandbytes_does(name):
    import bitsandbytes.functional as F

    sd = trained(name)
    states = {s.key: s for s in lowbit.quantized_states(sd)}
    assert set(states) == expected_keys(name)  # the small parameter's float32 states are not quantized
    d = inner(sd)
    for key, s in states.items():
        assert s.library == "bitsandbytes" and s.format == "bnb.blockwise8.dynamic" and s.shape == SHAPE, key
        part = key.split(".")[-1]
        k = part[5]  # state1, state2, state1[0], state1[1]
        codes, absmax = d[f"state{k}"], d[f"absmax{k}"]
        if part.endswith("]"):
            row = int(part[-2])
            codes, absmax = codes[row], absmax[row]
        theirs = F.dequantize_blockwise(codes, absmax=absmax, code=d[f"qmap{k}"], blocksize=256).reshape(-1).numpy()
        ours = lowbit.dequantize(s.case)
        assert ours.size == theirs.size == 64 * 81
        assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)), key
        assert np.count_nonzero(theirs) > 0, key  # two steps wrote the state


def test_ademamix_rows_are_its_two_moments():
    # the rows of state1 hold different moments (beta1 and beta3 EMAs of the same gradients): the slow
    # one moved less from zero after two steps
    sd = trained("AdEMAMix8bit")
    states = {s.key: np.abs(lowbit.dequantize(s.case)) for s in lowbit.quantized_states(sd)}
    fast, slow = states["state.0.state1[0]"], states["state.0.state1[1]"]
    assert fast.mean() > 100 * slow.mean() > 0


@pytest.mark.parametrize("name", CLASSES)
def test_signature_in_memory_file_and_dcp(name, tmp_path):
    import torch.distributed.checkpoint as dcp

    sd = trained(name)
    before = lowbit.state_signature(sd)
    assert set(before.states) == expected_keys(name)
    path = tmp_path / "opt.pt"
    torch.save(sd, path)
    assert lowbit.state_signature(path) == before
    assert {s.key for s in lowbit.quantized_states(path)} == expected_keys(name)
    folder = tmp_path / "dcp"
    dcp.save(sd, checkpoint_id=str(folder))  # one process, no process group
    assert lowbit.state_signature(folder) == before
    # a third step moves every state
    after = lowbit.state_signature(trained(name, steps=3))
    assert all(after.states[k] != before.states[k] for k in before.states), name


def test_one_code_of_the_slow_moment_changes_its_state_alone():
    sd = trained("AdEMAMix8bit")
    before = lowbit.state_signature(sd)
    flat = inner(sd)["state1"][1].view(-1)
    flat[5000] = (int(flat[5000]) + 1) % 256  # in the partial last block
    after = lowbit.state_signature(sd)
    assert [k for k in before.states if before.states[k] != after.states[k]] == ["state.0.state1[1]"]
    assert after != before and after.dequantized != before.dequantized


def test_ademamix_absmax_of_the_wrong_shape_is_refused():
    sd = trained("AdEMAMix8bit")
    d = inner(sd)
    d["absmax1"] = d["absmax1"][:, :-1]  # one block short in each row
    with pytest.raises(ValueError, match=r"state1\[0\]: 5184 codes and 20 absmax entries"):
        lowbit.quantized_states(sd)
    d["absmax1"] = torch.zeros(3, 21)
    with pytest.raises(ValueError, match=r"state1: a 2-D absmax1 of shape \[3, 21\]"):
        lowbit.quantized_states(sd)
    d["absmax1"], d["absmax2"] = torch.zeros(2, 21), torch.zeros(2, 21)
    with pytest.raises(ValueError, match=r"absmax2: shape \[2, 21\]; only AdEMAMix's absmax1 has two rows"):
        lowbit.quantized_states(sd)
