"""One-time recipe that produced ``data/reference/gfscreen_gated_small.npz`` (+ ``.json``) by
running the official glance-gated inference ``GFScreen_RL.valid`` with a one-layer stand-in
Focus (not collected by pytest; it holds no official code: it imports the official repository
from the path given).

``valid`` is called unbound on a namespace holding the official ``Glance_model`` (ResNet-18,
the weights of ``reference_recipe.recipe_state_dict`` with the head offset recorded in
``gfscreen_valid.json`` plus :data:`GATE_SHIFT`: the gate p > 0.9 selects three of the four
tiles and the fourth has p ~ 0.7, so a gate at 0.5 would select it too) and, as
``segmentation_model``, :func:`stand_in_focus` (a 3x3x3 convolution, 1 -> 2 channels, weights
from ``reference_recipe.recipe_tensor``): the selection, the per-tile softmax and the averaging
over overlapping selected tiles are the official code's, at the cost of one small convolution
per tile instead of a SwinUNETR, so the test runs in the default suite. Run it with any torch +
MONAI that imports the official module (recorded: this workspace's torch 2.13.0+cpu, MONAI
1.6.1)::

    python tests/reference_make_gated.py --official GF-Screen --out /tmp/reference
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_recipe as recipe  # noqa: E402

COMMIT = "114ca511c866236774f6e4964f36c40f333bf831"
FUNCTION = "models.GF_Screen_RL.GFScreen_RL.valid (stand-in Focus: one 3x3x3 convolution)"
#: added to the recorded head offset: tile 2's log-odds -1.6 -> 1.0 (p 0.17 -> 0.73)
GATE_SHIFT = 2.6


def stand_in_focus() -> torch.nn.Conv3d:
    """Conv3d(1, 2, 3, padding=1) with recipe weights: lesion logits unsaturated on the
    reference volume (its values 0.3-0.9)."""
    conv = torch.nn.Conv3d(1, 2, 3, padding=1)
    with torch.no_grad():
        conv.weight.copy_(recipe.recipe_tensor("stand_in_focus.weight", conv.weight) * 0.5)
        conv.bias.copy_(torch.tensor([0.0, -0.1]))
    return conv.eval()


def main() -> int:
    ns = recipe.official_args(__doc__, "folder for the NPZ and JSON")
    from models.GF_Screen_RL import GFScreen_RL
    from models.glance import Glance_model

    meta = json.loads((HERE / "data" / "reference" / "gfscreen_valid.json").read_text())
    glance = Glance_model(backbone="resnet18").eval()
    prefixed = {f"glance_model.{k}": v for k, v in glance.state_dict().items()}
    state = recipe.recipe_state_dict(prefixed, meta["head_offset"] + GATE_SHIFT)
    glance.load_state_dict({k[len("glance_model.") :]: v for k, v in state.items()})
    fake = SimpleNamespace(
        glance_model=glance,
        segmentation_model=stand_in_focus(),
        args=SimpleNamespace(out_channels=2),
    )
    volume = torch.from_numpy(recipe.reference_volume())[None, None]
    with torch.no_grad():
        seg_out, compress_ratio = GFScreen_RL.valid(fake, volume)
        _, _, actions = glance(volume)
    lesion = seg_out[0, 1].numpy()[::4, ::4, ::4].astype(np.float32)
    ns.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(ns.out / "gfscreen_gated_small.npz", lesion_prob=lesion)
    out = {
        "repo": "Luffy03/GF-Screen",
        "commit": COMMIT,
        "function": FUNCTION,
        "torch": torch.__version__,
        "head_offset": meta["head_offset"] + GATE_SHIFT,
        "tile_p": actions.softmax(1)[:, 1].tolist(),
        "compress_ratio": float(compress_ratio),
        "files": {
            "gfscreen_gated_small.npz": "lesion_prob = seg_out[0, 1][::4, ::4, ::4] (0 where no "
            "selected tile covers)"
        },
    }
    (ns.out / "gfscreen_gated_small.json").write_text(json.dumps(out, indent=1) + "\n")
    covered = lesion[lesion > 0]
    print(f"compress ratio {compress_ratio}; lesion p {covered.min():.3f}-{covered.max():.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
