"""Reference test against the official GF-Screen code (Luffy03/GF-Screen, commit in
``data/reference/gfscreen_valid.json``).

The official ``GFScreen_RL`` model (ResNet-18 Glance, SwinUNETR-v2 Focus with feature size 12) was
built once in a scratch environment by ``reference_make_gfscreen.py`` (which imports the official
repository from a path on its command line; rerun 2026-12-04, bit-identical numbers), its state
dict filled by ``reference_recipe.py`` (weights
seeded by each official key name, a head offset so that the gate selects three of four tiles), and
``GFScreen_RL.valid`` run on the recipe's 120x96x80 volume. The JSON holds the official key names
and shapes, the tile corners and Glance scores, the compress ratio; the NPZ the mask and the
lesion probability on a 4-voxel subsample. Here the same weights are written in the official
checkpoint layout, loaded through our loader and screened with our gated inference. The tiles,
Glance scores and compress ratio, and the Focus output on one tile, run in the default suite; the
whole gated inference (three Focus tiles) is marked slow.
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
from medimg_gfscreen.settings import FocusSettings

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
    module = GFScreenModule(focus=FocusSettings(arch="swin_unetr", feature_size=FEATURE_SIZE))
    return to_official_state_dict(module.focus.state_dict(), module.glance.state_dict())


@pytest.fixture(scope="module")
def official_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe's weights saved as upstream's ``save_checkpoint`` saves them."""
    state = RECIPE.recipe_state_dict(_our_official_layout(), META["head_offset"])
    path = tmp_path_factory.mktemp("official") / "model_final.pt"
    # upstream: val_acc_max = np.mean(...) then save_checkpoint(..., best_acc=val_acc_max)
    torch.save({"epoch": 0, "best_acc": np.float64(0.83), "state_dict": state}, path)
    return path


def _as_saved_by_numpy_1(path: Path, out: Path) -> Path:
    """``path`` with numpy's scalar reconstructor under its numpy 1.x name (``numpy.core``), as
    in checkpoints written with upstream's numpy 1.x."""
    import zipfile

    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("data.pkl"):
                assert b"numpy._core.multiarray\nscalar" in data
                data = data.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
            dst.writestr(info, data)
    return out


def test_official_checkpoint_with_a_numpy_best_acc_loads(
    official_checkpoint: Path, tmp_path: Path
) -> None:
    """Upstream's model_final.pt holds best_acc as a numpy float64: a plain
    torch.load(weights_only=True) refuses it ("Weights only load failed"); ours reads it, still
    with weights_only=True, whether numpy 1.x or 2.x pickled the scalar."""
    with pytest.raises(Exception, match="Weights only load failed"):
        torch.load(official_checkpoint, map_location="cpu", weights_only=True)
    old_numpy = _as_saved_by_numpy_1(official_checkpoint, tmp_path / "model_final_np1.pt")
    for path in (official_checkpoint, old_numpy):
        weights = load_weights(path)
        assert weights["hparams"]["focus_arch"] == "swin_unetr"
        assert set(weights["glance"]) and set(weights["focus"])


def test_official_key_names_and_shapes_map_onto_ours() -> None:
    ours = {key: list(value.shape) for key, value in _our_official_layout().items()}
    assert ours == META["official_keys"]


def test_official_checkpoint_loads_with_its_architecture(official_checkpoint: Path) -> None:
    weights = load_weights(official_checkpoint)
    hp = weights["hparams"]
    assert (hp["focus_arch"], hp["feature_size"], hp["glance_backbone"]) == (
        "swin_unetr",
        FEATURE_SIZE,
        "resnet18",
    )
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


def test_tiles_and_glance_scores_match_the_official_valid(official_checkpoint: Path) -> None:
    """The Glance half of the official ``valid()`` in the default suite (a few seconds): our
    tile grid gives the official tile corners, our Glance on those tiles the official scores, and
    the gate p > 0.9 the official compress ratio. The Focus half (mask) is the slow test below."""
    from medimg_gfscreen.inference import tile_slices

    volume = torch.from_numpy(RECIPE.reference_volume())[None, None]
    module = load_screen_module(official_checkpoint)
    tiles = tile_slices(volume.shape[2:], module.roi_size, module.inference.overlap)
    assert [[s.start for s in tile] for tile in tiles] == META["tile_starts"]
    crops = torch.cat([volume[(..., *tile)] for tile in tiles])
    with torch.no_grad():
        p = module.glance(crops).softmax(1)[:, 1]
    assert p.tolist() == pytest.approx(META["tile_p"], abs=1e-4)
    assert float((p > module.inference.threshold).float().mean()) == META["compress_ratio"]


def test_focus_on_one_tile_matches_the_official_valid(official_checkpoint: Path) -> None:
    """The Focus half in the default suite on one tile (one SwinUNETR forward): where only the
    selected tile at (24, 0, 16) covers the volume (x >= 96, z >= 16), the official valid()'s
    lesion probability and mask are that tile's Focus softmax, unaveraged."""
    volume = torch.from_numpy(RECIPE.reference_volume())[None, None]
    assert META["tile_starts"][3] == [24, 0, 16] and META["tile_p"][3] > 0.9
    assert META["tile_p"][2] < 0.9  # the only other tile reaching x >= 96 is not selected
    module = load_screen_module(official_checkpoint)
    with torch.no_grad():
        lesion = module.focus(volume[..., 24:120, 0:96, 16:80]).softmax(1)[0, 1].numpy()
    data = np.load(REFERENCE / "gfscreen_valid_mask.npz")
    official_prob = data["lesion_prob"][24:30, :, 4:20]  # volume x 96:120:4, z 16:80:4
    assert np.allclose(lesion[72::4, ::4, ::4], official_prob, atol=1e-4)
    shape = tuple(int(v) for v in data["shape"])
    official = np.unpackbits(data["mask"])[: int(np.prod(shape))].reshape(shape)[96:, :, 16:]
    ours = (lesion[72:] > 0.5).astype(np.uint8)
    clear = np.abs(lesion[72:] - 0.5) >= 1e-4
    assert official.any() and np.array_equal(ours[clear], official[clear])


@pytest.mark.slow  # Focus (SwinUNETR) on three 96x96x64 tiles: ~20 s on one quiet core
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
