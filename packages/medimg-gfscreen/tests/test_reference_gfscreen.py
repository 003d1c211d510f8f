"""Reference test against the official GF-Screen code (Luffy03/GF-Screen, commit in
``data/reference/gfscreen_valid.json``).

The official ``GFScreen_RL`` model (ResNet-18 Glance, SwinUNETR-v2 Focus with feature size 12) was
built once in a scratch environment, its state dict filled by ``reference_recipe.py`` (weights
seeded by each official key name, a head offset so that the gate selects two of four tiles), and
``GFScreen_RL.valid`` run on the recipe's 120x96x80 volume. The JSON holds the official key names
and shapes, the tile corners and Glance scores, the compress ratio; the NPZ the mask and the
lesion probability on a 4-voxel subsample. Here the same weights are written in the official
checkpoint layout, loaded through our loader and screened with our gated inference.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_gfscreen.lit_module import GFScreenModule
from medimg_gfscreen.official import to_official_state_dict
from medimg_gfscreen.screen import load_screen_module, load_weights

HERE = Path(__file__).parent
REFERENCE = HERE / "data" / "reference"
META = json.loads((REFERENCE / "gfscreen_valid.json").read_text())
FEATURE_SIZE = META["args"]["feature_size"]


def _recipe():
    spec = importlib.util.spec_from_file_location("reference_recipe", HERE / "reference_recipe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECIPE = _recipe()


def _our_official_layout() -> dict[str, torch.Tensor]:
    module = GFScreenModule(focus_arch="swin_unetr", feature_size=FEATURE_SIZE)
    return to_official_state_dict(module.focus.state_dict(), module.glance.state_dict())


@pytest.fixture(scope="module")
def official_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe's weights saved as upstream's ``save_checkpoint`` saves them."""
    state = RECIPE.recipe_state_dict(_our_official_layout(), META["head_offset"])
    path = tmp_path_factory.mktemp("official") / "model_final.pt"
    torch.save({"epoch": 0, "best_acc": 0.0, "state_dict": state}, path)
    return path


def test_official_key_names_and_shapes_map_onto_ours() -> None:
    ours = {key: list(value.shape) for key, value in _our_official_layout().items()}
    assert ours == META["official_keys"]


def test_official_checkpoint_loads_with_its_architecture(official_checkpoint: Path) -> None:
    weights = load_weights(official_checkpoint)
    hp = weights["hparams"]
    assert (hp["focus_arch"], hp["feature_size"], hp["glance_backbone"]) == (
        "swin_unetr", FEATURE_SIZE, "resnet18"
    )  # fmt: skip
    assert hp["glance_widths"] == [64, 128, 256, 512] and hp["roi_size"] == [96, 96, 64]
    module = load_screen_module(official_checkpoint)
    key = "swinViT.layers1.0.blocks.0.attn.qkv.weight"
    expected = RECIPE.recipe_tensor(f"segmentation_model.{key}", module.focus.state_dict()[key])
    assert torch.equal(module.focus.state_dict()[key], expected)
    head = module.glance.head.bias
    assert float(head[1] - head[0]) == pytest.approx(
        float(RECIPE.recipe_tensor("glance_model.layer.0.bias", head)[1])
        - float(RECIPE.recipe_tensor("glance_model.layer.0.bias", head)[0])
        + META["head_offset"],
        abs=1e-5,
    )


@pytest.mark.slow
def test_gated_inference_matches_the_official_valid(official_checkpoint: Path) -> None:
    volume = RECIPE.reference_volume()
    assert RECIPE.volume_digest(volume) == META["volume_sha256"]
    module = load_screen_module(official_checkpoint)
    result = module.screen(torch.from_numpy(volume)[None, None], keep_probs=True)
    assert [list(start) for start, _, _ in result.tiles] == META["tile_starts"]
    assert [p for _, p, _ in result.tiles] == pytest.approx(META["tile_p"], abs=1e-4)
    assert result.selection_rate == pytest.approx(META["compress_ratio"])
    assert 0 < result.n_selected < result.n_tiles
    data = np.load(REFERENCE / "gfscreen_valid_mask.npz")
    shape = tuple(int(v) for v in data["shape"])
    official = np.unpackbits(data["mask"])[: int(np.prod(shape))].reshape(shape)
    ours = result.mask.numpy()
    assert int(official.sum()) == META["mask_voxels"] > 0
    lesion = result.probs[0, 1].numpy()
    close_call = np.abs(lesion - 0.5) < 1e-4
    assert np.array_equal(ours[~close_call], official[~close_call])
    sub = lesion[::4, ::4, ::4]
    covered = data["lesion_prob"] > 0
    assert np.allclose(sub[covered], data["lesion_prob"][covered], atol=1e-4)
