"""One-time recipe that produced ``data/reference/gfscreen_rl.json`` by running the official
GF-Screen RL objective (not collected by pytest; it holds no official code: it imports the
official repository from the path given).

Official functions: ``models.GF_Screen_RL.GFScreen_RL.get_RL_loss`` (called unbound: it reads
nothing from ``self``) and ``models.GF_Screen_RL.group_relative_advantages``, at the commit
recorded in the JSON (Luffy03/GF-Screen 114ca51, the commit of ``gfscreen_valid.json``). Run it
with any torch + MONAI that imports the official module (recorded: this workspace's
torch 2.13.0+cpu, MONAI 1.6.1; the functions are torch only)::

    git -C GF-Screen checkout 114ca511c866236774f6e4964f36c40f333bf831
    python tests/reference_make_rl.py --official GF-Screen --out /tmp/reference

Inputs (:func:`rl_inputs`): eight sub-volumes with unsaturated Glance logits (p from 0.08 to
0.93), an old policy whose p differs so that the PPO ratio lies both inside and outside
[0.9, 1.1] and one beyond the clamp at 5, Focus logits on 4x4x2 sub-volumes and labels so that
the detection reward is 1 on three of them; and reward vectors for the advantages (a spread
one, a constant one where the std floor 1e-2 applies, one where the clamp at 5 bites).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_recipe as recipe  # noqa: E402

COMMIT = "114ca511c866236774f6e4964f36c40f333bf831"
FUNCTIONS = (
    "models.GF_Screen_RL.GFScreen_RL.get_RL_loss",
    "models.GF_Screen_RL.group_relative_advantages",
)
#: rewards for ``group_relative_advantages``: spread, constant (std floor), one outlier (clamp)
ADVANTAGE_REWARDS = {
    "spread": [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0],
    "constant": [1.0] * 8,
    "floor": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.51],
    "clamp": [1.0] + [0.0] * 39,
}


def rl_inputs() -> dict[str, torch.Tensor]:
    """Glance logits ``[8, 2]`` (current and old policy), Focus logits ``[8, 2, 4, 4, 2]`` and
    labels ``[8, 1, 4, 4, 2]``, deterministic (no random draw)."""
    gaps = torch.tensor([-2.4, -1.2, -0.3, 0.2, 0.9, 1.6, 2.6, 1.1])  # logit_1 - logit_0
    old_gaps = torch.tensor([-2.0, -1.5, 0.1, 0.2, 0.4, 2.4, 2.2, -2.5])
    logits = torch.stack([torch.full_like(gaps, 0.3), 0.3 + gaps], dim=1)
    old_logits = torch.stack([torch.full_like(old_gaps, -0.2), -0.2 + old_gaps], dim=1)
    label = torch.zeros(8, 1, 4, 4, 2)
    label[[0, 1, 4, 6], 0, 1, 1, 0] = 1  # four sub-volumes hold a lesion voxel
    seg = torch.zeros(8, 2, 4, 4, 2)
    seg[:, 0] = 1.0
    seg[[1, 4, 6], 1, 1, 1, 0] = 2.0  # Focus finds three of them
    seg[3, 1, 2, 2, 1] = 2.0  # and one false positive on a lesion-free sub-volume
    return {"logits": logits, "old_logits": old_logits, "seg": seg, "label": label}


class _OldPolicy:
    """Stands in for the official ``old_policy_model``: ``get_actions`` returns fixed logits."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits

    def get_actions(self, crops: torch.Tensor) -> torch.Tensor:
        return self.logits


def main() -> int:
    ns = recipe.official_args(__doc__, "folder for the JSON")
    from models.GF_Screen_RL import GFScreen_RL, group_relative_advantages

    inputs = rl_inputs()
    logits = inputs["logits"].clone().requires_grad_(True)
    loss = GFScreen_RL.get_RL_loss(
        None,
        actions_logits=logits,
        old_policy_model=_OldPolicy(inputs["old_logits"]),
        seg_crops=torch.zeros(8, 1, 4, 4, 2),
        seg=inputs["seg"],
        seg_labels=inputs["label"],
    )
    loss.backward()
    advantages = {
        k: group_relative_advantages(torch.tensor(v)).tolist() for k, v in ADVANTAGE_REWARDS.items()
    }
    out = {
        "repo": "Luffy03/GF-Screen",
        "commit": recipe.official_commit(ns.official, COMMIT),
        "functions": list(FUNCTIONS),
        "torch": torch.__version__,
        "rl_loss": loss.item(),
        "rl_loss_grad": logits.grad.tolist(),
        "advantage_rewards": ADVANTAGE_REWARDS,
        "advantages": advantages,
    }
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "gfscreen_rl.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({"rl_loss": out["rl_loss"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
