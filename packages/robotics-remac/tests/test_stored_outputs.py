"""Stored outputs: seeded numbers computed by the code as it was before the issue-29 refactor,
compared here so a refactor that changes any number fails.

Fixture: ``data/stored_outputs/remac_stored_outputs.npz`` (inputs and outputs, float32) with
``remac_stored_outputs.json`` beside it (seeds, sizes, the commit it was made at, the command).
Regenerate (only when a change of numbers is intended, and say so in the commit)::

    REMAC_REGENERATE_STORED_OUTPUTS=1 .venv/bin/python -m pytest -q \\
        packages/robotics-remac/tests/test_stored_outputs.py

What is stored (every parameter of the networks is overwritten with seeded Gaussian values, so the
AdaLN gates and LoRA ``B`` are not at their zero initialisation and every layer matters):

- ``FlowPolicy`` velocities for one flow time per chunk ``[B]`` and one per action ``[B, H]``;
  with masked LoRA (mask of per-sample delays), without mask (LoRA-only) and merged for ``d = 2``.
- The training losses on one seeded batch: the base flow-matching loss, training-time RTC's, and
  every part of ``RemacModule.remac_loss`` for each rung of the ablation ladder (train and eval
  mode of the loss), plus ``predict_step`` chunks.
- The samplers with a delay ``d = 3`` and a prefix: Euler, prefix-preserved (zeros, noise,
  remainder starts), RTC guidance, BID and training-time RTC.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from robotics_remac.lit_module import FlowPolicyModule, RemacModule
from robotics_remac.model import FlowPolicy, add_lora, delay_mask, merge_lora
from robotics_remac.sampling import (
    bid_sample,
    euler_sample,
    prefix_preserved_sample,
    rtc_sample,
    training_time_rtc_sample,
)
from robotics_remac.settings import PolicySizes, TrainingTimeRTCSettings
from robotics_remac.training import ABLATIONS

DATA = Path(__file__).parent / "data" / "stored_outputs"
NPZ = DATA / "remac_stored_outputs.npz"
SIDECAR = DATA / "remac_stored_outputs.json"
REGENERATE = os.environ.get("REMAC_REGENERATE_STORED_OUTPUTS") == "1"

SIZES = {"channels": 16, "hidden": 32, "token_hidden": 8, "depth": 2}
B, H, OBS, ACT = 4, 8, 8, 2
DELAYS = (0, 1, 3, 5)  # one per batch row of the LoRA mask
SAMPLER_DELAY, SAMPLER_EXEC = 3, 3
PARAM_SEED, INPUT_SEED, LOSS_SEED, NOISE_SEED = 11, 12, 13, 14
PARAM_STD = 0.2
# float32 on the CPU with one thread: the same operations give the same bits; the tolerance only
# absorbs a different BLAS summation order on another machine.
RTOL, ATOL = 1e-5, 1e-6


def _randomise(module: torch.nn.Module, seed: int) -> None:
    """Every parameter (in ``named_parameters`` order) := N(0, PARAM_STD²), seeded."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in module.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * PARAM_STD)


def _inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(INPUT_SEED)
    return {
        "obs": torch.randn(B, OBS, generator=g),
        "x": torch.randn(B, H, ACT, generator=g),
        "t": torch.rand(B, generator=g),
        "t_tokens": torch.rand(B, H, generator=g),
        "prefix": torch.randn(B, H, ACT, generator=g),
        "batch_obs": torch.randn(16, OBS, generator=g),
        "batch_actions": torch.randn(16, H, ACT, generator=g),
        "batch_prev_obs": torch.randn(16, H, OBS, generator=g),
        "batch_frame": torch.randint(0, 12, (16,), generator=g),
    }


def _policy() -> FlowPolicy:
    policy = FlowPolicy(obs_dim=OBS, action_dim=ACT, horizon=H, **SIZES)
    _randomise(policy, PARAM_SEED)
    return policy.eval()


def _lora_policy(use_mask: bool) -> FlowPolicy:
    policy = add_lora(_policy(), rank=4, alpha=8.0, dropout=0.1, use_mask=use_mask)
    _randomise(policy, PARAM_SEED + 1)
    return policy.eval()


def _base_module(ttrtc: bool) -> FlowPolicyModule:
    return FlowPolicyModule(
        horizon=H,
        obs_dim=OBS,
        action_dim=ACT,
        sizes=PolicySizes(**SIZES),
        training_time_rtc=TrainingTimeRTCSettings(enabled=ttrtc),
    )


def _remac_module(ablation: str) -> RemacModule:
    return RemacModule(
        horizon=H, obs_dim=OBS, action_dim=ACT, sizes=PolicySizes(**SIZES), **ABLATIONS[ablation]
    )


def compute() -> dict[str, np.ndarray]:
    """Every stored number, computed by the code as it is now."""
    torch.set_num_threads(1)
    inp = _inputs()
    obs, x, t, prefix = inp["obs"], inp["x"], inp["t"], inp["prefix"]
    mask = delay_mask(torch.tensor(DELAYS), H)
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        base = _policy()
        out["policy_v"] = base(obs, x, t)
        out["policy_v_token_times"] = base(obs, x, inp["t_tokens"])
        remac = _lora_policy(True)
        out["lora_masked_v"] = remac(obs, x, t, mask)
        out["lora_masked_no_mask_arg_v"] = remac(obs, x, t)
        out["lora_merged_d2_v"] = merge_lora(remac, 2)(obs, x, t)
        out["lora_only_v"] = _lora_policy(False)(obs, x, t)

    def gen() -> torch.Generator:
        return torch.Generator().manual_seed(NOISE_SEED)

    d, e = SAMPLER_DELAY, SAMPLER_EXEC
    out["euler"] = euler_sample(base, obs, 5, gen())
    for start in ("zeros", "noise", "remainder"):
        out[f"prefix_{start}"] = prefix_preserved_sample(remac, obs, prefix, d, 5, start, gen())
    out["rtc"] = rtc_sample(base, obs, prefix, d, e, 5, 5.0, gen())
    out["bid"] = bid_sample(base, obs, prefix, d, e, 4, 5, gen())
    out["ttrtc"] = training_time_rtc_sample(base, obs, prefix, d, 5, gen())

    batch = {k[len("batch_") :]: v for k, v in inp.items() if k.startswith("batch_")}
    for name, ttrtc in (("base", False), ("ttrtc", True)):
        module = _base_module(ttrtc)
        _randomise(module, PARAM_SEED + 2)
        torch.manual_seed(LOSS_SEED)
        out[f"loss_{name}"] = module.flow_loss(batch).detach()
        out[f"predict_{name}"] = module.predict_step(batch, 0)
    for ablation in ABLATIONS:
        module = _remac_module(ablation)
        _randomise(module, PARAM_SEED + 3)
        for train in (True, False):
            torch.manual_seed(LOSS_SEED)
            parts = module.remac_loss(batch, train=train)
            for part, value in parts.items():
                out[f"remac_{ablation}_{'train' if train else 'eval'}_{part}"] = value.detach()
        torch.manual_seed(LOSS_SEED)
        out[f"predict_remac_{ablation}"] = module.eval().predict_step(batch, 0)
    arrays = {f"in_{k}": v.numpy() for k, v in inp.items()}
    arrays.update({f"out_{k}": v.numpy() for k, v in out.items()})
    return arrays


def _regenerate() -> None:
    import subprocess

    arrays = compute()
    DATA.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(NPZ, **arrays)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=DATA, check=False
    ).stdout.strip()
    meta = {
        "made_by": "packages/robotics-remac/tests/test_stored_outputs.py::compute",
        "command": "REMAC_REGENERATE_STORED_OUTPUTS=1 .venv/bin/python -m pytest -q "
        "packages/robotics-remac/tests/test_stored_outputs.py",
        "commit": commit,
        "torch": torch.__version__,
        "threads": 1,
        "sizes": {**SIZES, "batch": B, "horizon": H, "obs_dim": OBS, "action_dim": ACT},
        "seeds": {
            "parameters": PARAM_SEED,
            "inputs": INPUT_SEED,
            "loss (torch.manual_seed)": LOSS_SEED,
            "sampler noise": NOISE_SEED,
        },
        "lora_mask_delays": list(DELAYS),
        "sampler_delay": SAMPLER_DELAY,
        "sampler_exec_horizon": SAMPLER_EXEC,
        "keys": sorted(arrays),
    }
    SIDECAR.write_text(json.dumps(meta, indent=1) + "\n")


@pytest.fixture(scope="module")
def stored() -> dict[str, np.ndarray]:
    if REGENERATE:
        _regenerate()
    with np.load(NPZ) as blob:
        return dict(blob)


@pytest.fixture(scope="module")
def current() -> dict[str, np.ndarray]:
    return compute()


def test_inputs_are_the_stored_ones(stored: dict, current: dict) -> None:
    for key in (k for k in stored if k.startswith("in_")):
        np.testing.assert_array_equal(current[key], stored[key], err_msg=key)


def test_every_stored_output_is_still_computed(stored: dict, current: dict) -> None:
    assert sorted(stored) == sorted(current)
    assert (
        len([k for k in stored if k.startswith("out_remac_")]) == (2 + 3 + 3 + 4) * 2
    )  # parts of lora_only, mask, mask_curriculum, remac


@pytest.mark.parametrize(
    "group",
    ["out_policy", "out_lora", "out_euler", "out_prefix", "out_rtc", "out_bid", "out_ttrtc"],
)
def test_networks_and_samplers_match(group: str, stored: dict, current: dict) -> None:
    keys = [k for k in stored if k.startswith(group)]
    assert keys
    for key in keys:
        torch.testing.assert_close(
            torch.from_numpy(current[key]), torch.from_numpy(stored[key]), rtol=RTOL, atol=ATOL
        )


@pytest.mark.parametrize("group", ["out_loss", "out_predict", "out_remac"])
def test_training_losses_and_predictions_match(group: str, stored: dict, current: dict) -> None:
    keys = [k for k in stored if k.startswith(group)]
    assert keys
    for key in keys:
        torch.testing.assert_close(
            torch.from_numpy(current[key]), torch.from_numpy(stored[key]), rtol=RTOL, atol=ATOL
        )
