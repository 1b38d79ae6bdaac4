"""Quantized optimizer states as the libraries make them: each state tensor mapped to its format and
dequantized by the engine exactly as the library dequantizes it (the library's own code is the
independent source), and state_signature stable over torch.save/load and a DCP save/load of each
library's 8-bit state, different when one code changes."""
import numpy as np
import pytest

import lowbit

torch = pytest.importorskip("torch")


def torchao_states():
    pytest.importorskip("torchao")
    from torchao.optim.subclass_4bit import OptimState4bit
    from torchao.optim.subclass_8bit import OptimState8bit
    from torchao.optim.subclass_fp8 import OptimStateFp8

    g = torch.Generator().manual_seed(5)
    m, v = torch.randn(64, 96, generator=g) * 1e-3, torch.rand(64, 96, generator=g) * 1e-6
    # torchao's own quantization (copy_ from a float tensor), as its optimizers store a state
    s8m, s8v = OptimState8bit.zeros((64, 96), signed=True, block_size=256), OptimState8bit.zeros((64, 96), signed=False)
    s8m.copy_(m)
    s8v.copy_(v)
    s4 = OptimState4bit.zeros((64, 96), signed=True, block_size=128)
    s4.copy_(m)
    f8 = OptimStateFp8.zeros((64, 96), block_size=256)
    f8.copy_(m)
    return {"state": {0: {"step": torch.tensor(3.0), "exp_avg": s8m, "exp_avg_sq": s8v},
                      1: {"step": torch.tensor(3.0), "exp_avg": s4},
                      2: {"step": torch.tensor(3.0), "exp_avg": f8}},
            "param_groups": [{"lr": 1e-3, "params": [0, 1, 2]}]}


def bnb_state_dict():
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(7)
    p = torch.nn.Parameter(torch.randn(64, 80))  # 5 120 elements: above min_8bit_size, a partial last block
    opt = bnb.optim.Adam8bit([p], lr=1e-3)
    for _ in range(2):
        p.grad = torch.randn_like(p)
        opt.step()
    return opt.state_dict()


@pytest.mark.parametrize("window", [None, 512, 768])  # lowbit/_values.py: the whole state, or whole blocks at a time
def test_torchao_states_map_to_their_formats_and_dequantize_as_torchao_does(window, monkeypatch):
    from lowbit import _values

    if window:
        monkeypatch.setattr(_values, "WINDOW", window)
    sd = torchao_states()
    states = {s.key: s for s in lowbit.quantized_states(sd)}
    assert {k: s.format for k, s in states.items()} == {
        "state.0.exp_avg": "torchao.codebook8.signed", "state.0.exp_avg_sq": "torchao.codebook8.unsigned",
        "state.1.exp_avg": "torchao.codebook4.signed", "state.2.exp_avg": "torchao.fp8"}
    for key, s in states.items():
        pid, name = key.split(".")[1:]
        theirs = sd["state"][int(pid)][name].dequantize().reshape(-1).numpy()
        ours = lowbit.dequantize(s.case)
        assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)), key
        by_window = _values.Values(s.case, theirs.size)
        assert by_window.step == (window // s.case.params["block_size"] * s.case.params["block_size"] if window
                                  else theirs.size)
        assert np.array_equal(by_window.whole().view(np.uint32), theirs.view(np.uint32)), key
        assert np.array_equal(by_window.read(100, 1500).view(np.uint32), theirs[100:1500].view(np.uint32)), key
    case = lowbit.dequantized_state_case(sd)
    for key, s in states.items():
        pid, name = key.split(".")[1:]
        theirs = sd["state"][int(pid)][name].dequantize().numpy()
        assert np.array_equal(case[key].view(np.uint32), theirs.view(np.uint32)), key


@pytest.mark.parametrize("window", [None, 512])
def test_bnb_states_dequantize_as_bitsandbytes_does(window, monkeypatch):
    from lowbit import _values

    if window:
        monkeypatch.setattr(_values, "WINDOW", window)
    sd = bnb_state_dict()
    import bitsandbytes.functional as F

    states = {s.key: s for s in lowbit.quantized_states(sd)}
    assert set(states) == {"state.0.state1", "state.0.state2"}
    inner = sd["state"][0].get("__bnb_optimizer_quant_state__", sd["state"][0])
    for k in ("1", "2"):
        theirs = F.dequantize_blockwise(inner[f"state{k}"], absmax=inner[f"absmax{k}"], code=inner[f"qmap{k}"],
                                        blocksize=256).reshape(-1).numpy()
        ours = lowbit.dequantize(states[f"state.0.state{k}"].case)
        assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)), k
        by_window = _values.Values(states[f"state.0.state{k}"].case, theirs.size)  # 5 120: a partial last block
        assert np.array_equal(by_window.whole().view(np.uint32), theirs.view(np.uint32)), k


def save_load(sd, tmp_path):
    path = tmp_path / "opt.pt"
    torch.save(sd, path)
    return torch.load(path, weights_only=True), path


def dcp_round_trip(sd, tmp_path):
    import torch.distributed.checkpoint as dcp

    folder = tmp_path / "dcp"
    dcp.save(sd, checkpoint_id=str(folder))  # single process: no process group
    return folder


@pytest.mark.parametrize("library", ["torchao", "bitsandbytes"])
def test_signature_is_stable_over_torch_save_and_dcp(library, tmp_path):
    sd = torchao_states() if library == "torchao" else bnb_state_dict()
    before = lowbit.state_signature(sd)
    loaded, path = save_load(sd, tmp_path)
    assert lowbit.state_signature(loaded) == before
    assert lowbit.state_signature(path) == before  # the file itself
    folder = dcp_round_trip(sd, tmp_path)
    after_dcp = lowbit.state_signature(folder)
    assert after_dcp == before, (before.states, after_dcp.states)
    assert len(before.digest) == 64 and before.states


@pytest.mark.parametrize("library", ["torchao", "bitsandbytes"])
def test_signature_differs_when_one_code_changes(library):
    sd = torchao_states() if library == "torchao" else bnb_state_dict()
    before = lowbit.state_signature(sd)
    changed = torchao_states() if library == "torchao" else bnb_state_dict()  # the same state again (seeded)
    assert lowbit.state_signature(changed) == before
    if library == "torchao":
        codes = changed["state"][0]["exp_avg"].codes
        key = "state.0.exp_avg"
    else:
        inner = changed["state"][0].get("__bnb_optimizer_quant_state__", changed["state"][0])
        codes = inner["state1"]
        key = "state.0.state1"
    flat = codes.view(-1)
    flat[100] = (int(flat[100]) + 1) % 256
    after = lowbit.state_signature(changed)
    assert after != before and after.stored != before.stored and after.dequantized != before.dequantized
    differ = [k for k in before.states if before.states[k] != after.states[k]]
    assert differ == [key]


def test_layout_independent_stored_digest():
    sd = torchao_states()
    before = lowbit.state_signature(sd)
    s = sd["state"][0]["exp_avg"]
    # the same codes in a transposed storage (a non-contiguous view of other memory)
    s.codes = s.codes.t().contiguous().t()
    assert not s.codes.is_contiguous()
    assert lowbit.state_signature(sd) == before


def test_audit_state_warns_on_an_already_quantized_state():
    sd = torchao_states()
    m = torch.randn(64, 96, generator=torch.Generator().manual_seed(5)) * 1e-3  # the moment state.0.exp_avg holds
    rows, warnings = lowbit.audit_state(sd, formats=["torchao.codebook8.*"], block_sizes=[128, 256],
                                        moments={"exp_avg (fp32)": m})
    # one per quantized state, none for the unquantized moment; each names the format the optimizer
    # stored it in
    assert len(warnings) == 4 and all("already quantized" in w and "the optimizer stored it as torchao." in w
                                      for w in warnings), warnings
    # an unsigned state (its map holds 1.0) round-trips exactly in its own format and block: the fake
    # optimum the warning is about, found by the engine's search (every nonzero block back unchanged)
    sq = [w for w in warnings if w.startswith("state.0.exp_avg_sq looks already quantized: ")]
    assert len(sq) == 1 and sq[0].endswith("; the optimizer stored it as torchao.codebook8.unsigned at block 256"), warnings
    assert "torchao.codebook8.unsigned at block 256 gives 24 of its 24 nonzero blocks back unchanged" in sq[0], sq
    own = [r for r in rows if r["tensor"] == "state.0.exp_avg_sq" and r["format"] == "torchao.codebook8.unsigned"
           and r["block_size"] == 256]
    assert own and own[0]["max_abs"] == 0
    fresh = [r for r in rows if r["tensor"] == "exp_avg (fp32)" and r["block_size"] == 256 and
             r["format"] == "torchao.codebook8.signed"]
    assert fresh and fresh[0]["max_abs"] > 0 and fresh[0]["source"] == "unquantized"
    refused = [r for r in rows if r["tensor"] == "exp_avg (fp32)" and r["format"] == "torchao.codebook8.unsigned"]
    assert refused and all("unsigned" in r["not_applicable"] for r in refused)


def test_dequantized_state_case_feeds_the_audit_command(tmp_path):
    sd = torchao_states()
    case = lowbit.dequantized_state_case(sd)
    assert case["state.0.exp_avg"].shape == (64, 96) and case.dtypes["state.0.exp_avg"] == "F32"
    theirs = sd["state"][0]["exp_avg"].dequantize().numpy()
    assert np.array_equal(case["state.0.exp_avg"].view(np.uint32), theirs.view(np.uint32))
    path = tmp_path / "dequantized.safetensors"
    lowbit.save_case(path, case)
    back = lowbit.load_case(path)
    assert set(back) == set(case) and np.array_equal(back["state.2.exp_avg"], case["state.2.exp_avg"])
    # out=: the same file written by the call; the same case from a single-process DCP folder, streamed
    assert lowbit.dequantized_state_case(sd, out=tmp_path / "direct.safetensors") == {k: (64, 96) for k in case}
    assert (tmp_path / "direct.safetensors").read_bytes() == path.read_bytes()
    import torch.distributed.checkpoint as dcp

    dcp.save(sd, checkpoint_id=str(tmp_path / "dcp"))
    assert lowbit.dequantized_state_case(tmp_path / "dcp", out=tmp_path / "streamed.safetensors") == {
        k: (64, 96) for k in case}
    assert (tmp_path / "streamed.safetensors").read_bytes() == path.read_bytes()


def test_audit_state_names_the_stored_format_where_the_engine_sees_nothing_quantized():
    # a fresh torchao state (zeros_like before the first step): no nonzero block, so the engine's rule
    # (a quarter of the nonzero blocks back unchanged) cannot fire, yet the tensor is a quantized
    # state's dequantized values, and the warning must still say so
    pytest.importorskip("torchao")
    from torchao.optim.subclass_8bit import OptimState8bit

    fresh = {"state": {0: {"step": torch.tensor(0.0), "exp_avg": OptimState8bit.zeros((64, 96), signed=True)}},
             "param_groups": [{"lr": 1e-3, "params": [0]}]}
    rows, warnings = lowbit.audit_state(fresh, formats=["torchao.codebook8.signed"], block_sizes=[256])
    assert warnings == ["state.0.exp_avg: the optimizer stored it as torchao.codebook8.signed at block 256; the audit "
                        "reads its dequantized values, not the moments, though no configuration gives a quarter of "
                        "its nonzero blocks back unchanged"], warnings
    assert len(rows) == 1 and rows[0]["max_abs"] == 0 and not rows[0]["looks_already_quantized"]
