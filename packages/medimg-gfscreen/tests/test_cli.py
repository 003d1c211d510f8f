from __future__ import annotations

import argparse
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
import yaml

from iclr26_common.testing import (
    CliContract,
    assert_one_line_error,
    fast_dev_args,
    only_file,
    run_ddp,
    run_main,
    shipped_configs,
)
from medimg_gfscreen.cli import main, run_lightning_cli

CONFIGS = shipped_configs("medimg_gfscreen")


class TestCliContract(CliContract):
    package = "medimg_gfscreen"
    commands = ("synth", "datalist", "screen", "export", "configs")

    def check_config(self, printed: dict, declared: dict) -> None:
        assert printed["model"]["init_args"]["focus"] == {
            **printed["model"]["init_args"]["focus"],
            **declared["model"]["init_args"]["focus"],
        }
        assert printed["data"]["init_args"]["roi_size"] == declared["data"]["init_args"]["roi_size"]
        assert printed["trainer"]["max_epochs"] == declared["trainer"]["max_epochs"]


def test_paper_config_keeps_the_paper_defaults() -> None:
    declared = yaml.safe_load((CONFIGS[0].parent / "gfscreen.yaml").read_text())
    model, data = declared["model"]["init_args"], declared["data"]["init_args"]
    assert model["focus"] == {"arch": "swin_unetr", "feature_size": 48}
    assert data["roi_size"] == [96, 96, 64] and data["num_samples"] * data["batch_size"] == 16
    assert model["inference"]["threshold"] == 0.9 and model["inference"]["overlap"] == 0.75


def test_fit_tiny_config_in_process(synth_dir: Path, tmp_path: Path) -> None:
    cli = run_lightning_cli(
        fast_dev_args(tmp_path, f"--data.init_args.datalist={synth_dir / 'datalist.json'}")
    )
    assert cli.trainer.state.finished and cli.trainer.global_step >= 1
    # linked from the data module
    assert tuple(cli.model.hparams.roi_size) == (32, 32, 16) and cli.model.hparams.num_samples == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written without a logger


def test_synth_and_datalist_commands(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "data"
    assert main(["synth", "--out", str(out), "--n", "3", "--shape", "48,48,16"]) == 0
    assert len(list((out / "imagesTr").glob("*_0000.nii.gz"))) == 3
    assert main(["datalist", str(out), "--out", str(tmp_path / "dl.json"), "--folds", "3"]) == 0
    payload = json.loads((tmp_path / "dl.json").read_text())
    assert len(payload["validation"]) == 1 and len(payload["training"]) == 2


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys, prog="medimg-gfscreen: error: ")


def test_screen_writes_a_mask_with_the_input_affine(
    synth_dir: Path, tiny_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    out = tmp_path / "mask.nii.gz"
    args = ["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out), "--print-tiles"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "selection rate 100.0 %" in printed  # tiny weights: threshold 0
    assert "tile voxel" in printed and " mm " in printed  # input voxel and world positions
    src, mask = nib.load(image), nib.load(out)
    assert mask.shape == src.shape and np.allclose(mask.affine, src.affine)
    assert mask.get_data_dtype() == np.uint8
    assert set(np.unique(np.asarray(mask.dataobj)).tolist()) <= {0, 1}
    # an existing output is refused in one line
    line = _one_line_error(
        capsys, ["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out)]
    )
    assert "exists" in line


def test_screen_scores_the_tiles_test_scores(
    synth_dir: Path, tiny_weights: Path, tmp_path: Path
) -> None:
    """screen preprocesses as validation / test do (CropForegroundd included): same tiles, same
    Glance scores, same selection. Without the crop it selected 28 % where test selected 58 %."""
    from medimg_gfscreen.io import load_datalist
    from medimg_gfscreen.screen import load_screen_module, screen_file
    from medimg_gfscreen.transforms import val_transforms

    module = load_screen_module(tiny_weights)
    item = load_datalist(synth_dir / "datalist.json", "validation")[0]
    image = val_transforms("abdomen", module.roi_size)(item)["image"]
    expected = module.screen(image[None], threshold=0.5)
    info = screen_file(
        Path(item["image"]), tiny_weights, tmp_path / "m.nii.gz", threshold=0.5, progress=False
    )
    assert [t["start"] for t in info["tiles"]] == [t[0] for t in expected.tiles]
    assert [t["p"] for t in info["tiles"]] == pytest.approx(
        [t[1] for t in expected.tiles], abs=1e-6
    )
    assert info["selection_rate"] == expected.selection_rate


def test_screen_progress_is_the_workspace_one_and_quiet_turns_it_off(
    synth_dir: Path, tiny_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Screening shows progress through ``iclr26_common.progress`` (plain lines when stderr is
    not a terminal), none with ``progress=False`` (d875146: a tqdm bar of its own, the one
    place in the workspace outside the common progress helper)."""
    from medimg_gfscreen.io import load_datalist
    from medimg_gfscreen.screen import screen_file

    item = load_datalist(synth_dir / "datalist.json", "validation")[0]
    capsys.readouterr()
    screen_file(Path(item["image"]), tiny_weights, tmp_path / "a.nii.gz", threshold=-1.0)
    err = capsys.readouterr().err
    assert "glance tile batches:" in err and "focus tile batches:" in err, err
    assert "it/s" not in err and "\r" not in err  # no tqdm bar
    screen_file(
        Path(item["image"]), tiny_weights, tmp_path / "b.nii.gz", threshold=-1.0, progress=False
    )
    assert "tile batches" not in capsys.readouterr().err


def test_screen_reports_positions_in_the_input_image(tmp_path: Path) -> None:
    """A bright marker at a known voxel of an LPS-oriented 0.8 x 0.8 x 2.5 mm input: its position
    in the preprocessed grid (RAS, 1 x 1 x 3 mm, cropped and padded) maps back to that voxel and
    to its world coordinate."""
    from medimg_gfscreen.screen import tile_positions
    from medimg_gfscreen.transforms import infer_transforms

    affine = np.array([[-0.8, 0, 0, 120.0], [0, -0.8, 0, 90.0], [0, 0, 2.5, -40.0], [0, 0, 0, 1]])
    data = np.full((90, 80, 30), -1000, np.int16)
    data[10:80, 8:72, :] = 40  # body
    marker = (61, 23, 17)
    data[marker[0] - 1 : marker[0] + 2, marker[1] - 1 : marker[1] + 2, marker[2]] = 3000
    path = tmp_path / "lps_0000.nii.gz"
    nib.save(nib.Nifti1Image(data, affine), path)
    # find the marker in the preprocessed grid (a window wide enough to keep it the maximum)
    ranged = infer_transforms([-1000, 4000], (32, 32, 16))({"image": str(path)})["image"]
    index = np.unravel_index(int(torch.argmax(ranged[0])), ranged.shape[1:])
    roi = (32, 32, 16)
    start = [i - (r - 1) / 2 for i, r in zip(index, roi, strict=True)]
    ((voxel, world),) = tile_positions([start], roi, ranged.affine, affine)
    assert np.allclose(voxel, marker, atol=1.0)
    assert np.allclose(world, (affine @ [*marker, 1])[:3], atol=2.0)


def test_screen_threshold_one_writes_an_empty_mask(
    synth_dir: Path, tiny_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    out = tmp_path / "empty.nii.gz"
    main(
        [
            "screen",
            str(image),
            "--ckpt",
            str(tiny_weights),
            "--out",
            str(out),
            "--threshold",
            "1",
            "--quiet",
        ]
    )
    assert "selection rate 0.0 %" in capsys.readouterr().out
    assert int(np.asarray(nib.load(out).dataobj).sum()) == 0


def test_weights_load_with_weights_only(tiny_weights: Path) -> None:
    payload = torch.load(tiny_weights, weights_only=True)
    assert {"focus", "glance", "hparams"} <= set(payload)


def test_screen_bad_inputs_are_one_line(
    tmp_path: Path, tiny_weights: Path, capsys: pytest.CaptureFixture
) -> None:
    png = tmp_path / "scan.png"
    png.write_bytes(b"\x89PNG")
    line = _one_line_error(
        capsys,
        ["screen", str(png), "--ckpt", str(tiny_weights), "--out", str(tmp_path / "m.nii.gz")],
    )
    assert "scan.png" in line and "NIfTI" in line
    data = np.zeros((40, 40, 16), np.float32)
    data[3, 3, 3] = np.nan
    nib.save(nib.Nifti1Image(data, np.diag([1, 1, 3, 1.0])), tmp_path / "nan_case_0000.nii.gz")
    line = _one_line_error(
        capsys,
        [
            "screen",
            str(tmp_path / "nan_case_0000.nii.gz"),
            "--ckpt",
            str(tiny_weights),
            "--out",
            str(tmp_path / "m.nii.gz"),
        ],
    )
    assert "nan_case" in line and "NaN" in line


def test_screen_refuses_a_non_ct_image_unless_prenormalized(
    tmp_path: Path, tiny_weights: Path, capsys: pytest.CaptureFixture
) -> None:
    """A float [0, 1] image was screened silently before ("selected 245/245 tiles ... 0 lesion
    voxels"); now one line naming the case, and --prenormalized opts out."""
    data = np.random.default_rng(0).uniform(0, 1, size=(48, 48, 16)).astype(np.float32)
    image = tmp_path / "unit_0000.nii.gz"
    nib.save(nib.Nifti1Image(data, np.diag([1, 1, 3, 1.0])), image)
    args = ["screen", str(image), "--ckpt", str(tiny_weights), "--quiet"]
    line = _one_line_error(capsys, [*args, "--out", str(tmp_path / "a.nii.gz")])
    assert "unit" in line and "Hounsfield" in line and "prenormalized" in line
    out = tmp_path / "b.nii.gz"
    run = run_main(main, [*args, "--out", str(out), "--prenormalized"], capsys)
    assert run.code == 0, run.err
    assert nib.load(out).shape == data.shape


def test_fit_with_a_missing_label_is_one_line(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    payload = json.loads((synth_dir / "datalist.json").read_text())
    for entry in payload["training"]:
        entry["image"] = str(synth_dir / entry["image"])
        entry["label"] = str(synth_dir / entry["label"])
    for entry in payload["validation"]:
        entry["image"] = str(synth_dir / entry["image"])
        entry["label"] = str(synth_dir / entry["label"])
    del payload["training"][0]["label"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(payload))
    line = _one_line_error(
        capsys,
        ["fit", "--config", "tiny", f"--data.init_args.datalist={bad}", "--trainer.fast_dev_run=1"],
    )
    assert payload["training"][0]["name"] in line and "label" in line


def _absolute_datalist(synth_dir: Path, tmp_path: Path) -> Path:
    payload = json.loads((synth_dir / "datalist.json").read_text())
    for key in ("training", "validation"):
        for entry in payload[key]:
            entry["image"] = str(synth_dir / entry["image"])
            entry["label"] = str(synth_dir / entry["label"])
    path = tmp_path / "datalist.json"
    path.write_text(json.dumps(payload))
    return path


def test_logged_fit_keeps_the_users_config_yaml_and_links_hparams(
    synth_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """With a logger the config goes into its version folder, not over ./config.yaml; the
    logger's hparams merge needs the linked roi_size/spacing equal in model and data module
    (an instantiate link passed tuples: "different values", the run stopped)."""
    datalist = _absolute_datalist(synth_dir, tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text("mine: 1\n")
    args = [
        "fit",
        "-c",
        "tiny",
        f"--data.init_args.datalist={datalist}",
        "--trainer.logger=true",
        "--trainer.limit_train_batches=1",
        "--trainer.limit_val_batches=1",
    ]
    run = run_main(main, args, capsys)
    assert run.code == 0, run.err
    assert (tmp_path / "config.yaml").read_text() == "mine: 1\n"
    version = tmp_path / "lightning_logs" / "version_0"
    saved = yaml.safe_load((version / "config.yaml").read_text())
    assert saved["data"]["init_args"]["datalist"] == str(datalist)
    hparams = yaml.safe_load((version / "hparams.yaml").read_text())
    assert hparams["roi_size"] == [32, 32, 16] and hparams["num_samples"] == 2


#: CPU-size networks for the configs with the paper's SwinUNETR Focus (sizes only; the linked
#: ROI is the smallest SwinUNETR input whose bottleneck keeps more than one voxel)
SWIN_SIZE_OVERRIDES = (
    "--model.init_args.focus.feature_size=12",
    "--model.init_args.focus.swin_depths=[1,1,1,1]",
    "--model.init_args.glance.widths=[8,16,32,64]",
    "--model.init_args.glance.conv1_stride=2",
)
DATA_SIZE_OVERRIDES = (
    "--data.init_args.num_workers=0",
    "--data.init_args.batch_size=1",
    "--data.init_args.num_samples=2",
    "--data.init_args.roi_size=[64,64,32]",
)


def _size_overrides(config: Path) -> list[str]:
    declared = yaml.safe_load(config.read_text())["model"]["init_args"]
    swin = declared.get("focus", {}).get("arch", "swin_unetr") == "swin_unetr"
    return [*DATA_SIZE_OVERRIDES, *(SWIN_SIZE_OVERRIDES if swin else ())]


def _config_weights(config: Path, path: Path) -> Path:
    """Exported weights of an untrained module with ``config``'s model arguments and the size
    overrides, recording the config's HU window (what ``screen`` then applies)."""
    from medimg_gfscreen.lit_module import GFScreenModule
    from medimg_gfscreen.settings import module_kwargs

    declared = yaml.safe_load(config.read_text())
    kwargs = dict(declared["model"]["init_args"], roi_size=(64, 64, 32), num_samples=2)
    for option in _size_overrides(config):
        key, value = option.removeprefix("--").split("=", 1)
        if key.startswith("model.init_args."):
            group, field = key.removeprefix("model.init_args.").split(".")
            kwargs[group] = {**kwargs.get(group, {}), field: yaml.safe_load(value)}
    torch.manual_seed(0)
    module = GFScreenModule(**module_kwargs(kwargs))
    region = declared["data"]["init_args"]["region"]
    torch.save(module.export_weights({"region": region, "prenormalized": False}), path)
    return path


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_config_runs_fit_test_predict_and_screen(
    config: Path, synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Each shipped YAML (parsed as shipped; networks shrunk to CPU size by size overrides only)
    through ``main``: ``fit`` and ``test`` with ``fast_dev_run`` (the logger on: Lightning's
    hparams merge, which stopped ``fit --config gfscreen`` with "different values" for the
    linked roi_size/spacing, runs under fast_dev_run too), ``predict`` (one mask) and ``screen``
    with weights of the config's architecture (its HU window recorded)."""
    datalist = _absolute_datalist(synth_dir, tmp_path)
    common = [
        "--config",
        str(config),
        f"--data.init_args.datalist={datalist}",
        "--trainer.fast_dev_run=true",
        f"--trainer.default_root_dir={tmp_path}",
        "--trainer.enable_progress_bar=false",
        *_size_overrides(config),
    ]
    fit = run_main(main, ["fit", *common, "--trainer.logger=true"], capsys)
    assert fit.code == 0, fit.err
    tested = run_main(main, ["test", *common], capsys)
    assert tested.code == 0, tested.err
    assert "test/sw_dsc" in tested.out and "test/selection_rate" in tested.out
    images, masks = _four_images(synth_dir, tmp_path / "images"), tmp_path / "masks"
    predict_args = [
        f"--data.init_args.predict_dir={images}",
        f"--data.init_args.output_dir={masks}",
    ]
    predicted = run_main(main, ["predict", *common, *predict_args], capsys)
    assert predicted.code == 0, predicted.err
    (mask,) = sorted(masks.glob("*.nii.gz"))  # fast_dev_run: one batch of one image
    source = images / mask.name.replace(".nii.gz", "_0000.nii.gz")
    assert nib.load(mask).shape == nib.load(source).shape
    weights = _config_weights(config, tmp_path / "weights.pt")
    out = tmp_path / "screened.nii.gz"
    screened = run_main(
        main, ["screen", str(source), "--ckpt", str(weights), "--out", str(out)], capsys
    )
    assert screened.code == 0, screened.err
    region = yaml.safe_load(config.read_text())["data"]["init_args"]["region"]
    assert f"HU window: {region} (region the checkpoint's)" in screened.out
    assert nib.load(out).shape == nib.load(source).shape


def _four_images(synth_dir: Path, folder: Path) -> Path:
    folder.mkdir()
    for image in sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[:2]:
        (folder / image.name).write_bytes(image.read_bytes())
    return folder


def test_predict_writes_a_mask_per_image_without_labels(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """predict wrote nothing and needed labels before."""
    images = _four_images(synth_dir, tmp_path / "images")
    out = tmp_path / "masks"
    args = [
        "predict",
        "--config",
        "tiny",
        "--data.init_args.datalist=unused.json",
        f"--data.init_args.predict_dir={images}",
        f"--data.init_args.output_dir={out}",
        "--model.init_args.inference.threshold=-1",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    run = run_main(main, args, capsys)
    assert run.code == 0, run.err
    for image in sorted(images.iterdir()):
        mask = nib.load(out / image.name.replace("_0000", ""))
        src = nib.load(image)
        assert mask.shape == src.shape and np.allclose(mask.affine, src.affine)
        assert mask.get_data_dtype() == np.uint8
    line = _one_line_error(capsys, args)  # the masks exist now: refused, nothing replaced
    assert "holds earlier results; pass --overwrite" in line and "output_dir" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["fit", "--config", "nosuch.yaml"], "shipped: gfscreen, gfscreen_chest, msd_liver, tiny"),
        (["fit", "-c", "tiny", "--model.init_args.optim.lr", "x"], 'fit: Parser key "model'),
        # the flat arguments before the grouping are refused, not ignored
        (["fit", "-c", "tiny", "--model.init_args.lr=0.1"], "Option 'lr' is not accepted"),
        (
            ["fit", "-c", "tiny", "--model.init_args.threshold=0.5"],
            "Option 'threshold' is not accepted",
        ),
        # the settings' checks reach the command line as one line naming the field
        (
            ["fit", "-c", "tiny", "--model.init_args.objective.reward=nosuch"],
            "ObjectiveSettings.reward must be one of ['detection', 'dice'], got 'nosuch'",
        ),
        (
            ["fit", "-c", "tiny", "--model.init_args.inference.overlap=1.5"],
            "InferenceSettings.overlap must be in [0, 1)",
        ),
    ],
)
def test_fit_parse_errors_are_one_line(
    capsys: pytest.CaptureFixture, args: list[str], expected: str
) -> None:
    assert expected in _one_line_error(capsys, args)


def test_a_config_in_the_flat_shape_before_the_grouping_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The model arguments were flat (``focus_arch``, ``lr``, ...) before the settings were
    grouped: such a YAML is refused by name, not silently trained with the defaults."""
    declared = yaml.safe_load((CONFIGS[0].parent / "tiny.yaml").read_text())
    declared["model"]["init_args"] = {"focus_arch": "unet", "unet_channels": [8, 16, 32, 64]}
    config = tmp_path / "flat.yaml"
    config.write_text(yaml.safe_dump(declared))
    line = _one_line_error(capsys, ["fit", "--config", str(config)])
    assert "Option 'focus_arch' is not accepted" in line


def test_fit_checkpoint_stores_plain_hparams_and_screens(synth_dir: Path, tmp_path: Path) -> None:
    """The grouped settings are stored as plain dicts: Lightning's ``.ckpt`` of a ``fit`` reads
    with ``weights_only=True`` (dataclasses in it would be refused) and rebuilds the module."""
    from medimg_gfscreen.screen import load_screen_module

    cli = run_lightning_cli(
        [
            "fit",
            "--config",
            "tiny",
            f"--data.init_args.datalist={_absolute_datalist(synth_dir, tmp_path)}",
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=1",
            "--trainer.limit_val_batches=0",
            "--trainer.enable_checkpointing=true",
            "--model.init_args.inference.threshold=0.25",
            f"--trainer.default_root_dir={tmp_path}",
        ]
    )
    (ckpt,) = sorted(tmp_path.rglob("*.ckpt"))
    stored = torch.load(ckpt, weights_only=True)["hyper_parameters"]
    assert stored["inference"]["threshold"] == 0.25 and stored["focus"]["arch"] == "unet"
    module = load_screen_module(ckpt)
    assert module.inference == cli.model.inference and module.glance_settings.conv1_stride == 2
    for name, value in cli.model.focus.state_dict().items():
        torch.testing.assert_close(module.focus.state_dict()[name], value.cpu())


@pytest.mark.slow
def test_fit_tiny_under_ddp_on_two_cpu_processes(synth_dir: Path, tmp_path: Path) -> None:
    """Two gloo processes: exit 0, no sync_dist warning (``run_ddp``), rank 0 alone writes the
    config, and the validation metrics reach the CSV logger."""
    datalist = _absolute_datalist(synth_dir, tmp_path)
    args = [
        "fit",
        "--config",
        "tiny",
        f"--data.init_args.datalist={datalist}",
        "--trainer.logger=true",
    ]
    run_ddp("medimg-gfscreen", args, tmp_path)
    config = only_file(tmp_path / "lightning_logs", "config*.yaml")
    assert config.relative_to(tmp_path).as_posix() == "lightning_logs/version_0/config.yaml"
    metrics = (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").read_text()
    assert "val/dsc" in metrics.splitlines()[0]


def test_screen_refuses_a_missing_or_unreadable_checkpoint_in_one_line(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Missing, not a torch file, or a pickle that ``weights_only=True`` refuses (a class that
    is not a tensor, a container or an allowed numpy scalar): one line naming the file, exit 2,
    nothing written."""
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    out = tmp_path / "m.nii.gz"
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    pickled = tmp_path / "pickled.pt"
    torch.save({"state_dict": {}, "trainer": argparse.Namespace(lr=1.0)}, pickled)
    for ckpt in (tmp_path / "missing.pt", garbage, pickled):
        args = ["screen", str(image), "--ckpt", str(ckpt), "--out", str(out), "--quiet"]
        line = _one_line_error(capsys, args)
        assert str(ckpt) in line, line
        assert ("no such checkpoint" if ckpt.name == "missing.pt" else "not a readable") in line
    assert not out.exists()


def test_fit_with_workers_refuses_a_non_ct_image_in_one_line(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """With DataLoader workers (every paper config: num_workers 4) the voxel checks ran in a
    worker, whose error reached the CLI re-wrapped without its cause: a traceback, exit 1, after
    Lightning's start-up. Now they run in the main process before the Trainer."""
    payload = json.loads(_absolute_datalist(synth_dir, tmp_path).read_text())
    entry = payload["training"][0]
    source = nib.load(entry["image"])
    data = np.random.default_rng(0).uniform(0, 1, size=source.shape).astype(np.float32)
    entry["image"] = str(tmp_path / "unit_0000.nii.gz")
    nib.save(nib.Nifti1Image(data, source.affine), entry["image"])
    datalist = tmp_path / "unit.json"
    datalist.write_text(json.dumps(payload))
    line = _one_line_error(
        capsys,
        [
            "fit",
            "--config",
            "tiny",
            f"--data.init_args.datalist={datalist}",
            "--data.init_args.num_workers=2",
            "--trainer.max_epochs=1",
            f"--trainer.default_root_dir={tmp_path}",
        ],
    )
    assert entry["name"] in line and "Hounsfield" in line


def _chest_weights(tiny_weights: Path, tmp_path: Path) -> Path:
    """The tiny weights recorded as trained on the chest window, gate 0.5."""
    payload = torch.load(tiny_weights, weights_only=True)
    payload["hparams"]["inference"]["threshold"] = 0.5
    payload["preprocessing"] = {"region": "chest", "prenormalized": False}
    path = tmp_path / "chest.pt"
    torch.save(payload, path)
    return path


def test_screen_uses_the_training_hu_window(
    synth_dir: Path, tiny_weights: Path, tmp_path: Path
) -> None:
    """A gfscreen_chest model was screened with the abdomen window ([-175, 250] HU instead of
    [-900, 650]): --region defaulted to abdomen whatever the training used."""
    from medimg_gfscreen.io import load_datalist
    from medimg_gfscreen.screen import load_screen_module, screen_file
    from medimg_gfscreen.transforms import val_transforms

    weights = _chest_weights(tiny_weights, tmp_path)
    module = load_screen_module(weights)
    item = load_datalist(synth_dir / "datalist.json", "validation")[0]
    expected = module.screen(val_transforms("chest", module.roi_size)(item)["image"][None])
    info = screen_file(Path(item["image"]), weights, tmp_path / "m.nii.gz", progress=False)
    assert info["preprocessing"] == {"region": "chest", "prenormalized": False}
    assert [t["p"] for t in info["tiles"]] == pytest.approx([t[1] for t in expected.tiles], 1e-6)


def test_screen_refuses_a_region_other_than_the_trainings(
    synth_dir: Path, tiny_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    weights = _chest_weights(tiny_weights, tmp_path)
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    args = ["screen", str(image), "--ckpt", str(weights), "--quiet", "--region", "abdomen"]
    line = _one_line_error(capsys, [*args, "--out", str(tmp_path / "a.nii.gz")])
    assert "chest" in line and "abdomen" in line and "--allow-mismatch" in line
    run = run_main(main, [*args, "--out", str(tmp_path / "b.nii.gz"), "--allow-mismatch"], capsys)
    assert run.code == 0, run.err


def test_lightning_checkpoint_records_the_data_modules_window(
    tiny_weights: Path, tmp_path: Path
) -> None:
    """A Lightning .ckpt keeps the data module's hyperparameters; load_weights ignored them."""
    from medimg_gfscreen.screen import load_weights

    tiny = torch.load(tiny_weights, weights_only=True)
    state = {f"focus.{k}": v for k, v in tiny["focus"].items()}
    state |= {f"glance.{k}": v for k, v in tiny["glance"].items()}
    ckpt = {
        "state_dict": state,
        "hyper_parameters": tiny["hparams"],
        "datamodule_hyper_parameters": {
            "region": "chest",
            "prenormalized": False,
            "roi_size": (32, 32, 16),
        },
    }
    torch.save(ckpt, tmp_path / "last.ckpt")
    expected = {"region": "chest", "prenormalized": False}
    assert load_weights(tmp_path / "last.ckpt")["preprocessing"] == expected
    # export carries it into the .pt that screen reads
    assert (
        main(["export", "--ckpt", str(tmp_path / "last.ckpt"), "--out", str(tmp_path / "w.pt")])
        == 0
    )
    assert torch.load(tmp_path / "w.pt", weights_only=True)["preprocessing"] == expected


def test_screen_no_hu_check_accepts_ct_without_air(
    tmp_path: Path, tiny_weights: Path, capsys: pytest.CaptureFixture
) -> None:
    """A CT in HU cropped inside the body (no voxel <= -200 HU) could only be screened with
    --prenormalized, which also dropped the HU window."""
    data = np.full((48, 48, 16), 40, np.int16)
    data[10:30, 10:30, 4:12] = -100  # fat
    image = tmp_path / "inside_0000.nii.gz"
    nib.save(nib.Nifti1Image(data, np.diag([1, 1, 3, 1.0])), image)
    args = ["screen", str(image), "--ckpt", str(tiny_weights), "--quiet"]
    line = _one_line_error(capsys, [*args, "--out", str(tmp_path / "a.nii.gz")])
    assert "inside" in line and "--no-hu-check" in line
    run = run_main(main, [*args, "--out", str(tmp_path / "b.nii.gz"), "--no-hu-check"], capsys)
    assert run.code == 0, run.err


def test_predict_refuses_two_images_of_one_case_before_writing(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """x.nii and x_0000.nii.gz in predict_dir both map to x.nii.gz: the first mask was written,
    then the second write stopped the run with FileExistsError."""
    images = _four_images(synth_dir, tmp_path / "images")
    first = sorted(images.iterdir())[0]
    twin = images / first.name.replace("_0000.nii.gz", ".nii.gz")
    twin.write_bytes(first.read_bytes())
    out = tmp_path / "masks"
    line = _one_line_error(
        capsys,
        [
            "predict",
            "--config",
            "tiny",
            "--data.init_args.datalist=unused.json",
            f"--data.init_args.predict_dir={images}",
            f"--data.init_args.output_dir={out}",
        ],
    )
    assert first.name in line and twin.name in line
    assert not out.exists() or not any(out.iterdir())
