"""The grouped settings of ``GFScreenModule`` (:mod:`medimg_gfscreen.settings`): one-line checks
naming the field, the flat hyperparameters of checkpoints written before the grouping, and the
plain-dict form checkpoints store."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from medimg_gfscreen.settings import (
    FLAT_KEYS,
    GROUPS,
    FocusSettings,
    GlanceSettings,
    InferenceSettings,
    ObjectiveSettings,
    OptimSettings,
    module_kwargs,
    plain_hparams,
)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: FocusSettings(arch="vit"), "FocusSettings.arch must be one of"),
        (lambda: FocusSettings(patch_merging="x"), "FocusSettings.patch_merging must be one of"),
        (lambda: FocusSettings(feature_size=0), "FocusSettings.feature_size must be > 0"),
        (lambda: FocusSettings(swin_depths=(2, 2)), "FocusSettings.swin_depths must be 4 "),
        (lambda: FocusSettings(unet_channels=(8,)), "FocusSettings.unet_channels must be 2 or"),
        (lambda: GlanceSettings(backbone="resnet50"), "GlanceSettings.backbone must be one of"),
        (lambda: GlanceSettings(norm="layer"), "GlanceSettings.norm must be one of"),
        (lambda: GlanceSettings(widths=(8, 0, 8, 8)), "GlanceSettings.widths must be 4 positive"),
        (lambda: ObjectiveSettings(group_by="ct"), "ObjectiveSettings.group_by must be one of"),
        (lambda: ObjectiveSettings(reward="iou"), "ObjectiveSettings.reward must be one of"),
        (lambda: ObjectiveSettings(rl_weight=-1), "ObjectiveSettings.rl_weight must be >= 0"),
        (lambda: ObjectiveSettings(update_epochs=0), "ObjectiveSettings.update_epochs must be >"),
        (lambda: OptimSettings(lr=0.0), "OptimSettings.lr must be > 0"),
        (lambda: OptimSettings(cosine_epochs=0), "OptimSettings.cosine_epochs must be > 0"),
        (lambda: InferenceSettings(overlap=1.0), "InferenceSettings.overlap must be in [0, 1)"),
        (lambda: InferenceSettings(sw_batch_size=0), "InferenceSettings.sw_batch_size must be"),
    ],
)
def test_bad_settings_are_one_line_naming_the_field(make, message: str) -> None:
    with pytest.raises(ValueError) as error:
        make()
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_flat_names_cover_every_grouped_field_once() -> None:
    """Every field of every group has exactly one flat name (the pre-grouping argument), so a
    flat checkpoint loses nothing."""
    fields = sorted((group, f) for group, cls in GROUPS.items() for f in cls.__dataclass_fields__)
    assert sorted(FLAT_KEYS.values()) == fields


def test_module_kwargs_reads_the_flat_hparams_of_older_checkpoints() -> None:
    flat = {
        "focus_arch": "unet",
        "unet_channels": [8, 16, 32, 64],
        "glance_widths": [8, 16, 32, 64],
        "glance_conv1_stride": 2,
        "reward": "dice",
        "lr": 1e-3,
        "threshold": 0.5,
        "roi_size": [32, 32, 16],
        "num_samples": 2,
        "_class_path": "medimg_gfscreen.lit_module.GFScreenModule",  # LightningCLI's, ignored
    }
    kwargs = module_kwargs(flat)
    assert kwargs["focus"] == FocusSettings(arch="unet", unet_channels=(8, 16, 32, 64))
    assert kwargs["glance"] == GlanceSettings(widths=(8, 16, 32, 64), conv1_stride=2)
    assert kwargs["objective"] == ObjectiveSettings(reward="dice")
    assert kwargs["optim"] == OptimSettings(lr=1e-3)
    assert kwargs["inference"] == InferenceSettings(threshold=0.5)
    assert (kwargs["roi_size"], kwargs["num_samples"]) == ([32, 32, 16], 2)


def test_a_flat_name_overrides_its_grouped_field() -> None:
    """``load_screen_module(ckpt, overlap=0.5)`` passes flat overrides over grouped hparams."""
    grouped = {"inference": {"overlap": 0.75, "threshold": 0.3}, "overlap": 0.5}
    assert module_kwargs(grouped)["inference"] == InferenceSettings(overlap=0.5, threshold=0.3)


def test_plain_hparams_load_with_weights_only(tmp_path: Path) -> None:
    """Settings as plain dicts (tuples as lists) survive ``torch.load(weights_only=True)`` and
    read back to equal settings."""
    kwargs = {"focus": FocusSettings(arch="unet"), "inference": InferenceSettings(overlap=0.5)}
    with pytest.raises(Exception, match="Weights only load failed"):
        torch.save(kwargs, tmp_path / "raw.pt")
        torch.load(tmp_path / "raw.pt", weights_only=True)
    torch.save(plain_hparams(kwargs), tmp_path / "plain.pt")
    loaded = torch.load(tmp_path / "plain.pt", weights_only=True)
    assert loaded["focus"]["unet_channels"] == [16, 32, 64, 128]
    assert module_kwargs(loaded) == kwargs


def test_weights_exported_before_the_grouping_still_screen(
    tiny_weights: Path, tmp_path: Path
) -> None:
    """Weights (or a Lightning ``.ckpt``) written by the code before the grouping store flat
    hparams (``focus_arch``, ``glance_widths``, ``threshold``, ...): they rebuild the same
    module and score the tiles as the grouped file does."""
    from medimg_gfscreen.screen import load_screen_module

    payload = torch.load(tiny_weights, weights_only=True)
    grouped = payload["hparams"]
    flat = {k: v for k, v in grouped.items() if k not in GROUPS}
    for name, (group, field) in FLAT_KEYS.items():
        flat[name] = grouped[group][field]
    torch.save({**payload, "hparams": flat}, tmp_path / "old.pt")
    old, new = load_screen_module(tmp_path / "old.pt"), load_screen_module(tiny_weights)
    assert (old.focus_settings, old.glance_settings) == (new.focus_settings, new.glance_settings)
    assert (old.objective, old.optim, old.inference) == (new.objective, new.optim, new.inference)
    volume = torch.rand(1, 1, 48, 48, 24, generator=torch.Generator().manual_seed(0))
    assert old.screen(volume).tiles == new.screen(volume).tiles
