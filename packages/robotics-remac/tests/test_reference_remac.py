"""Reference checks against the official REMAC code (hatchetProject/REMAC, JAX/flax.nnx).

The inputs were generated here (``reference_inputs``, fixed torch seed); the official functions were
run once on them in a scratch environment outside the workspace and only their outputs are
committed, in ``data/reference/remac_reference.npz`` (inputs and outputs) with the repository,
commit, functions and command in ``remac_reference.json``. No official code is in the project.
The checks feed our code the stored inputs (what the official code saw): ``torch.randn`` rounds
differently per CPU (its vectorised kernel), so regenerated inputs differ in the last bits under
``ATEN_CPU_CAPABILITY=default``; ``test_inputs_are_ours_at_the_fixed_seed`` checks that the
stored inputs are the seeded ones, to that round-off.

1. The masked-LoRA layer (``model_async_lora.LoRALinear.__call__``, dropout off): a per-token
   (channel) layer with the mask, and a token-mixing layer with ``mask=None`` (as upstream calls
   it; ours shifts/gates token layers with the mask, a documented deviation, so the comparison is
   with ``mask=None`` on both sides).
2. Prefix-preserved sampling (``LoRAFlowPolicy.action``) with a fixed velocity field in place of
   the network, for ours with ``start="remainder"`` (upstream's start) and the first chunk.
3. The asynchronous loop's merge at a chunk boundary (``eval_flow.eval``'s ``execute_chunk``):
   executed actions and the next committed chunk, for several ``(d, e)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close
from robotics_remac.model import LoRALinear, delay_mask
from robotics_remac.rollout import async_merge
from robotics_remac.sampling import prefix_preserved_sample

DATA = Path(__file__).parent / "data" / "reference"
SEED = 2026
RANK, ALPHA = 4, 8.0
B, H, A, N_OBS = 3, 8, 2, 5
C_IN, C_OUT = 6, 5  # the channel layer's sizes
T_OUT = 4  # the token layer maps H tokens to T_OUT
DELAYS = (0, 3, 5)  # one per batch row of the channel layer's mask
SAMPLER_DELAYS = (2, 3)
SAMPLER_STEPS = 5
MERGE_CASES = ((0, 1), (1, 4), (2, 4), (3, 4), (4, 4), (2, 3), (1, 7))
# Tolerances: relative errors (iclr26_common.testing.relative_error: max |diff| / max |official|),
# measured on an AMD EPYC (avx2 + avx512), 2026-12-06, over ATEN_CPU_CAPABILITY=default (with
# MKL_CBWR=COMPATIBLE), avx2, avx512, nothing set, one thread, and default with
# ONEDNN_MAX_CPU_ISA=SSE41 / OPENBLAS_CORETYPE=Prescott / NumPy's baseline kernels:
# - regenerated inputs against the stored ones: at most 4.8e-7 (merge_new; under ``default``
#   only: avx2, avx512 and nothing set give the stored bits). INPUT_TOL 5e-6, ~10x;
# - our outputs on the stored inputs against the official (JAX, float32) ones: at most 1.3e-7
#   (the channel layer; the same bits under every setting). TOL 1.5e-6, ~10x.
# The merge copies stored values: exact under every setting, compared exactly. Each check's
# mutation (a defect it exists for) moves the numbers by >= 0.5, > 10^4 x the tolerance.
INPUT_TOL = 5e-6
TOL = 1.5e-6


def reference_inputs() -> dict[str, np.ndarray]:
    """The fixed tensors (torch generator seeded with ``SEED``)."""
    g = torch.Generator().manual_seed(SEED)

    def r(*shape: int) -> np.ndarray:
        return torch.randn(shape, generator=g).numpy()

    return {
        "ch_W": r(C_OUT, C_IN),
        "ch_b": r(C_OUT),
        "ch_A": r(RANK, C_IN),
        "ch_B": r(C_OUT, RANK),
        "ch_Pw": r(C_IN, 1),
        "ch_Pb": r(C_IN),
        "ch_x": r(B, H, C_IN),
        "ch_mask": delay_mask(torch.tensor(DELAYS), H).numpy(),
        "tok_W": r(T_OUT, H),
        "tok_A": r(RANK, H),
        "tok_B": r(T_OUT, RANK),
        "tok_x": r(B, C_IN, H),
        "v_K": r(A, A),
        "v_U": r(N_OBS, A),
        "v_c": r(A),
        "obs": r(B, N_OBS),
        "prefix": r(B, H, A),
        "merge_old": r(B, H, A),
        "merge_new": r(B, H, A),
    }


class FixedField(torch.nn.Module):
    """The velocity field used in place of the network in check 2:
    ``v = tanh(x K + (obs U)[:, None] + t c) + 0.5 m`` (``m`` the generate-mask, ``[B, H, 1]``)."""

    def __init__(self, inp: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.horizon, self.action_dim = H, A
        self.K, self.U, self.c = (torch.from_numpy(inp[k]) for k in ("v_K", "v_U", "v_c"))

    def forward(self, obs, x, t, mask=None):  # type: ignore[no-untyped-def]
        m = torch.ones(x.shape[:2]) if mask is None else mask
        inner = x @ self.K + (obs @ self.U)[:, None, :] + t[:, None, None] * self.c
        return torch.tanh(inner) + 0.5 * m[..., None]


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    with np.load(DATA / "remac_reference.npz") as data:
        return dict(data)


def test_sidecar_names_the_official_source() -> None:
    meta = json.loads((DATA / "remac_reference.json").read_text())
    assert meta["repo"] == "hatchetProject/REMAC" and len(meta["commit"]) == 40
    assert {"function", "command"} <= set(meta["outputs"]["ch_y"])


@pytest.fixture(scope="module")
def inp(ref: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The stored inputs, the ones the official code was run on."""
    names = [k.removeprefix("in_") for k in ref if k.startswith("in_")]
    assert sorted(names) == sorted(reference_inputs())
    return {name: ref[f"in_{name}"] for name in names}


def test_inputs_are_ours_at_the_fixed_seed(inp: dict[str, np.ndarray]) -> None:
    for name, value in reference_inputs().items():
        assert_portable_close(value, inp[name], tol=INPUT_TOL, what=name)
    # the defect this guards against: inputs that are not the seeded ones (here another seed)
    g = torch.Generator().manual_seed(SEED + 1)
    other = torch.randn(inp["merge_new"].shape, generator=g).numpy()
    assert_mutation_detected(other, inp["merge_new"], tol=INPUT_TOL, what="merge_new, seed + 1")


def _lora(inp: dict[str, np.ndarray], pre: str, kind: str, bias: bool) -> LoRALinear:
    w = torch.from_numpy(inp[f"{pre}_W"])
    base = torch.nn.Linear(w.shape[1], w.shape[0], bias=bias)
    layer = LoRALinear(base, kind, H, RANK, ALPHA, dropout=0.1, use_mask=kind == "channel")
    with torch.no_grad():
        base.weight.copy_(w)
        if bias:
            base.bias.copy_(torch.from_numpy(inp[f"{pre}_b"]))
        layer.lora_A.copy_(torch.from_numpy(inp[f"{pre}_A"]))
        layer.lora_B.copy_(torch.from_numpy(inp[f"{pre}_B"]))
        if layer.mask_proj is not None:
            layer.mask_proj.weight.copy_(torch.from_numpy(inp[f"{pre}_Pw"]))
            layer.mask_proj.bias.copy_(torch.from_numpy(inp[f"{pre}_Pb"]))
    return layer.eval()


def test_masked_lora_channel_layer_matches_upstream(
    ref: dict[str, np.ndarray], inp: dict[str, np.ndarray]
) -> None:
    layer = _lora(inp, "ch", "channel", bias=True)
    with torch.no_grad():
        y = layer(torch.from_numpy(inp["ch_x"]), torch.from_numpy(inp["ch_mask"])).numpy()
    assert_portable_close(y, ref["ch_y"], tol=TOL, what="channel layer")
    # the check can fail: dropping the mask changes the numbers by far more than the tolerance
    with torch.no_grad():
        unmasked = layer(torch.from_numpy(inp["ch_x"])).numpy()
    assert_mutation_detected(unmasked, ref["ch_y"], tol=TOL, what="channel layer, no mask")


def test_token_mixing_lora_without_mask_matches_upstream(
    ref: dict[str, np.ndarray], inp: dict[str, np.ndarray]
) -> None:
    layer = _lora(inp, "tok", "token_in", bias=False)
    with torch.no_grad():
        y = layer(torch.from_numpy(inp["tok_x"]), None).numpy()
    assert_portable_close(y, ref["tok_y"], tol=TOL, what="token layer")
    # a LoRA scaling other than upstream's alpha / rank (here alpha / (2 rank))
    with torch.no_grad():
        layer.scale = layer.scale / 2
        halved = layer(torch.from_numpy(inp["tok_x"]), None).numpy()
    assert_mutation_detected(halved, ref["tok_y"], tol=TOL, what="token layer, scaling / 2")


@pytest.mark.parametrize("delay", SAMPLER_DELAYS)
def test_prefix_preserved_sampling_matches_upstream_action(
    ref: dict[str, np.ndarray], inp: dict[str, np.ndarray], delay: int
) -> None:
    field = FixedField(inp)
    obs, prefix = torch.from_numpy(inp["obs"]), torch.from_numpy(inp["prefix"])
    ours = prefix_preserved_sample(field, obs, prefix, delay, SAMPLER_STEPS, "remainder").numpy()
    expected = ref[f"action_d{delay}"]
    assert_portable_close(ours, expected, tol=TOL, what=f"action d={delay}")
    # our default start (zeros in the tail) is a documented deviation: it gives other numbers
    zeros = prefix_preserved_sample(field, obs, prefix, delay, SAMPLER_STEPS, "zeros").numpy()
    assert_mutation_detected(zeros, expected, tol=TOL, what=f"action d={delay}, zeros start")


def test_first_chunk_matches_upstream_init(
    ref: dict[str, np.ndarray], inp: dict[str, np.ndarray]
) -> None:
    """The loop's first chunk: ours samples from a zero chunk at d = 0 (world paused), upstream
    ``action(..., init=True)`` with ``d = 0`` (the numbers for upstream's ``d > 0`` condition the
    network on a delay mask; see the README's Deviations)."""
    obs, zeros, field = torch.from_numpy(inp["obs"]), torch.zeros(B, H, A), FixedField(inp)
    ours = prefix_preserved_sample(field, obs, zeros, 0, SAMPLER_STEPS)
    assert_portable_close(ours, ref["action_init_d0"], tol=TOL, what="first chunk")
    # the world not paused for the first chunk (d = 1: the first action held at the zero chunk)
    held = prefix_preserved_sample(field, obs, zeros, 1, SAMPLER_STEPS)
    assert_mutation_detected(held, ref["action_init_d0"], tol=TOL, what="first chunk, d = 1")


@pytest.mark.parametrize(("delay", "exec_horizon"), MERGE_CASES)
def test_async_merge_matches_upstream_execute_chunk(
    ref: dict[str, np.ndarray], inp: dict[str, np.ndarray], delay: int, exec_horizon: int
) -> None:
    old, new = torch.from_numpy(inp["merge_old"]), torch.from_numpy(inp["merge_new"])
    execute, next_old = async_merge(old, new, delay, exec_horizon)
    key = f"d{delay}_e{exec_horizon}"
    # the merge only copies (and zero-pads) the stored float32 values: the same bits on every CPU
    np.testing.assert_array_equal(execute.numpy(), ref[f"merge_exec_{key}"])
    np.testing.assert_array_equal(next_old.numpy(), ref[f"merge_next_{key}"])
    # the chunks confused (old and new swapped) changes both results, which exact equality sees
    swapped_execute, swapped_next = async_merge(new, old, delay, exec_horizon)
    assert not np.array_equal(swapped_execute.numpy(), ref[f"merge_exec_{key}"])
    assert not np.array_equal(swapped_next.numpy(), ref[f"merge_next_{key}"])
