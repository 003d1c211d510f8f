"""One-time recipe that produced ``data/reference/gfscreen_valid.json`` and
``gfscreen_valid_mask.npz`` by running the official GF-Screen code (not collected by pytest; it
holds no official code: it imports the official repository from the path given).

Run it in a scratch environment outside the workspace, with the official repository checked out
at the commit recorded in the JSON::

    uv venv /tmp/ref-gfscreen && . /tmp/ref-gfscreen/bin/activate
    uv pip install --find-links /opt/wheels torch==2.13.0+cpu monai==1.4.0 numpy==1.26.4
    python tests/reference_make_gfscreen.py --official /path/to/GF-Screen --out /tmp/reference

(MONAI 1.4: upstream passes ``SwinUNETR(img_size=...)``, removed in MONAI 1.5.) It builds
``GFScreen_RL`` with the arguments in :data:`ARGS`, fills its state dict with
``reference_recipe.recipe_state_dict`` (the head offset chosen so that the gate p > 0.9 selects
three of the four tiles), scores the tiles with the official ``glance_model`` and runs the
official ``valid()`` on ``reference_recipe.reference_volume()``. Compare the files it writes
with the committed ones before replacing them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_recipe as recipe  # noqa: E402

ARGS = {
    "glance_backbone": "resnet18",
    "roi_x": 96,
    "roi_y": 96,
    "roi_z": 64,
    "in_channels": 1,
    "out_channels": 2,
    "feature_size": 12,
    "use_checkpoint": False,
    "batch_size": 1,
    "sw_batch_size": 4,
}
N_SELECTED = 3  # the gate's threshold logit log(9) goes midway between the 3rd and 4th tile
FUNCTION = "models.GF_Screen_RL.GFScreen_RL.valid (and glance_model.forward for the tile scores)"


def main() -> int:
    ns = recipe.official_args(__doc__, "folder for the JSON and NPZ", threads=2)
    import monai
    from models.GF_Screen_RL import GFScreen_RL  # the official model

    commit = recipe.official_commit(ns.official)
    model = GFScreen_RL(argparse.Namespace(**ARGS)).eval()
    official = model.state_dict()
    volume_np = recipe.reference_volume()
    volume = torch.from_numpy(volume_np)[None, None]

    model.load_state_dict(recipe.recipe_state_dict(official, 0.0), strict=True)
    with torch.no_grad():
        _, _, actions = model.glance_model(volume)
    d = sorted((actions[:, 1] - actions[:, 0]).tolist(), reverse=True)
    k = N_SELECTED
    head_offset = math.log(9.0) - (d[k - 1] + d[k]) / 2
    model.load_state_dict(recipe.recipe_state_dict(official, head_offset), strict=True)
    with torch.no_grad():
        _, coords, actions = model.glance_model(volume)
        seg_out, compress_ratio = model.valid(volume)
    p = actions.softmax(1)[:, 1]
    mask = seg_out[0].argmax(0).numpy().astype(np.uint8)
    lesion = seg_out[0, 1].numpy()[::4, ::4, ::4].astype(np.float32)

    ns.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        ns.out / "gfscreen_valid_mask.npz",
        mask=np.packbits(mask.ravel()),
        shape=np.array(mask.shape, np.int64),
        lesion_prob=lesion,
    )
    meta = {
        "source": "Luffy03/GF-Screen",
        "commit": commit,
        "function": FUNCTION,
        "command": "tests/reference_make_gfscreen.py --official GF-Screen --out DIR (its "
        f"docstring); torch {torch.__version__}, monai {monai.__version__}, numpy "
        f"{np.__version__}, {ns.threads} torch threads, float32",
        "args": ARGS,
        "monai": monai.__version__,
        "head_offset": head_offset,
        "head_scale": recipe.HEAD_SCALE,
        "logit_gap": d[k - 1] - d[k],
        "volume_shape": list(volume_np.shape),
        "volume_sha256": recipe.volume_digest(volume_np),
        "tile_starts": [list(map(int, c)) for c in coords[0]],
        "tile_p": p.tolist(),
        "compress_ratio": float(compress_ratio),
        "mask_voxels": int(mask.sum()),
        "official_keys": {key: list(value.shape) for key, value in official.items()},
        "files": {
            "gfscreen_valid_mask.npz": "mask (np.packbits of the argmax of valid()'s seg_out, "
            "C order), shape, lesion_prob = seg_out[0, 1][::4, ::4, ::4] (0 where no selected "
            "tile covers)"
        },
    }
    (ns.out / "gfscreen_valid.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {ns.out}: compress ratio {compress_ratio}, tile p {p.tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
