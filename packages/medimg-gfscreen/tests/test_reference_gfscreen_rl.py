"""Reference test of the RL objective against the official GF-Screen code (Luffy03/GF-Screen,
commit in ``data/reference/gfscreen_rl.json``): upstream ``GFScreen_RL.get_RL_loss`` (detection
reward -> batch-wide group-relative advantages -> PPO clip + KL) and
``group_relative_advantages``, run once by ``reference_make_rl.py`` on the inputs of its
``rl_inputs()`` (eight sub-volumes, unsaturated Glance logits: p from 0.08 to 0.93; PPO ratios
inside and outside [0.9, 1.1] and one past the clamp at 5) and on reward vectors where the std
floor and the advantage clamp apply. Here the same inputs go through our ``detection_reward``,
``group_advantages`` (``groups=None``: upstream's batch-wide group) and ``rl_loss``.

Compared: the loss and its gradient with respect to the Glance logits (the gradient carries
every sub-volume's clip / clamp branch, a scalar loss could hide one), and the advantages.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close
from medimg_gfscreen import model
from medimg_gfscreen.model import detection_reward, group_advantages, rl_loss

HERE = Path(__file__).parent
REFERENCE = json.loads((HERE / "data" / "reference" / "gfscreen_rl.json").read_text())
sys.path.insert(0, str(HERE))
from reference_make_rl import ADVANTAGE_REWARDS, rl_inputs  # noqa: E402

#: Relative tolerances (``max |ours - official| / max |official|``). Measured 2026-12-07 on this
#: machine (x86-64, torch 2.13 CPU), unset and ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE:
#: loss 0, gradient 0, advantages 0 (the same float32 operations in the same order; eight
#: values, no reduction split by threads). Tolerance 1e-6: float32 rounding of a reordered sum
#: (~1e-7 relative) with a 10x margin. The mutations below move them by >= 1e-2.
TOL = 1e-6


def _ours(inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    logits = inputs["logits"].clone().requires_grad_(True)
    rewards = detection_reward(inputs["seg"], inputs["label"])
    loss, _ = rl_loss(logits, inputs["old_logits"], group_advantages(rewards))
    loss.backward()
    return loss.detach(), logits.grad


def test_reference_records_the_commit_and_functions() -> None:
    assert REFERENCE["commit"] == "114ca511c866236774f6e4964f36c40f333bf831"
    assert any("get_RL_loss" in f for f in REFERENCE["functions"])
    assert REFERENCE["advantage_rewards"] == ADVANTAGE_REWARDS


def test_rl_loss_and_its_gradient_match_the_official_get_rl_loss() -> None:
    loss, grad = _ours(rl_inputs())
    assert_portable_close(loss.numpy(), REFERENCE["rl_loss"], tol=TOL, what="RL loss")
    official = torch.tensor(REFERENCE["rl_loss_grad"])
    assert official.abs().max() > 1e-2  # the gradient is not vanishing
    assert_portable_close(grad.numpy(), official.numpy(), tol=TOL, what="d loss / d logits")


@pytest.mark.parametrize(
    ("constant", "value"),
    [
        ("PPO_EPSILON", 0.3),  # issue 37: PPO epsilon 0.1 -> 0.3 passed every reference test
        ("KL_BETA", 0.1),
        ("RATIO_CLAMP", (0.01, 20.0)),
    ],
)
def test_a_changed_ppo_constant_misses_the_official_gradient(
    monkeypatch: pytest.MonkeyPatch, constant: str, value: object
) -> None:
    monkeypatch.setattr(model, constant, value)
    _, grad = _ours(rl_inputs())
    official = torch.tensor(REFERENCE["rl_loss_grad"]).numpy()
    assert_mutation_detected(grad.numpy(), official, tol=TOL, what=constant)


def test_a_reward_that_counts_false_positives_misses_the_official_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A detection reward given for any foreground (not for hitting the lesion) changes the
    advantages of the false-positive sub-volume and moves the loss."""
    monkeypatch.setattr(
        model, "detection_reward", lambda seg, label: (seg.argmax(1) == 1).flatten(1).any(1).float()
    )
    inputs = rl_inputs()
    rewards = model.detection_reward(inputs["seg"], inputs["label"])
    loss, _ = rl_loss(inputs["logits"], inputs["old_logits"], group_advantages(rewards))
    assert_mutation_detected(loss.numpy(), REFERENCE["rl_loss"], tol=TOL, what="reward")


@pytest.mark.parametrize("case", sorted(ADVANTAGE_REWARDS))
def test_group_advantages_match_the_official(case: str) -> None:
    ours = group_advantages(torch.tensor(ADVANTAGE_REWARDS[case]))
    official = torch.tensor(REFERENCE["advantages"][case])
    if case == "constant":  # every reward equal: the official advantages are exactly 0
        assert torch.equal(ours, official)
        return
    assert_portable_close(ours.numpy(), official.numpy(), tol=TOL, what=case)


@pytest.mark.parametrize(
    ("case", "constant", "value"),
    [("floor", "ADVANTAGE_STD_FLOOR", 1e-3), ("clamp", "ADVANTAGE_CLAMP", 10.0)],
)
def test_a_changed_advantage_constant_misses_the_official(
    monkeypatch: pytest.MonkeyPatch, case: str, constant: str, value: float
) -> None:
    monkeypatch.setattr(model, constant, value)
    ours = group_advantages(torch.tensor(ADVANTAGE_REWARDS[case]))
    official = torch.tensor(REFERENCE["advantages"][case]).numpy()
    assert_mutation_detected(ours.numpy(), official, tol=TOL, what=constant)
