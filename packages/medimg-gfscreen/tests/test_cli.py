from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
import yaml

from iclr26_common.testing import (
    DDP_CPU_ARGS,
    assert_cli_help,
    assert_one_line_error,
    help_commands,
    run_console_script,
    run_main,
    shipped_configs,
)
from medimg_gfscreen import __version__
from medimg_gfscreen.cli import main, run_lightning_cli

CONFIGS = shipped_configs("medimg_gfscreen")


def test_top_level_help_lists_every_subcommand() -> None:
    out = assert_cli_help(main)
    assert help_commands(out) == [
        "fit", "validate", "test", "predict", "synth", "datalist", "screen", "export", "configs"
    ]  # fmt: skip


def test_version(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and __version__ in capsys.readouterr().out


def test_unknown_command_exits_2() -> None:
    with pytest.raises(SystemExit) as info:
        main(["train"])
    assert info.value.code == 2


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_parses(config: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        main(["fit", "--config", str(config), "--print_config"])
    assert info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    declared = yaml.safe_load(config.read_text())
    assert (
        printed["model"]["init_args"]["focus_arch"] == declared["model"]["init_args"]["focus_arch"]
    )
    assert printed["data"]["init_args"]["roi_size"] == declared["data"]["init_args"]["roi_size"]
    assert printed["trainer"]["max_epochs"] == declared["trainer"]["max_epochs"]


def test_paper_config_keeps_the_paper_defaults() -> None:
    declared = yaml.safe_load((CONFIGS[0].parent / "gfscreen.yaml").read_text())
    model, data = declared["model"]["init_args"], declared["data"]["init_args"]
    assert model["focus_arch"] == "swin_unetr" and model["feature_size"] == 48
    assert data["roi_size"] == [96, 96, 64] and data["num_samples"] * data["batch_size"] == 16
    assert model["threshold"] == 0.9 and model["overlap"] == 0.75


def test_fit_tiny_config_in_process(synth_dir: Path, tmp_path: Path) -> None:
    cli = run_lightning_cli(
        ["fit", "--config", "tiny", f"--data.init_args.datalist={synth_dir / 'datalist.json'}",
         "--trainer.fast_dev_run=1", f"--trainer.default_root_dir={tmp_path}"]
    )  # fmt: skip
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
    assert main(["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "selection rate 100.0 %" in printed and "tile" in printed  # tiny weights: threshold 0
    src, mask = nib.load(image), nib.load(out)
    assert mask.shape == src.shape and np.allclose(mask.affine, src.affine)
    assert mask.get_data_dtype() == np.uint8
    assert set(np.unique(np.asarray(mask.dataobj)).tolist()) <= {0, 1}
    # an existing output is refused in one line
    line = _one_line_error(
        capsys, ["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out)]
    )
    assert "exists" in line


def test_screen_threshold_one_writes_an_empty_mask(
    synth_dir: Path, tiny_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    out = tmp_path / "empty.nii.gz"
    main(["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out), "--threshold", "1",
          "--quiet"])  # fmt: skip
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
    line = _one_line_error(capsys, ["screen", str(png), "--ckpt", str(tiny_weights), "--out",
                                    str(tmp_path / "m.nii.gz")])  # fmt: skip
    assert "scan.png" in line and "NIfTI" in line
    data = np.zeros((40, 40, 16), np.float32)
    data[3, 3, 3] = np.nan
    nib.save(nib.Nifti1Image(data, np.diag([1, 1, 3, 1.0])), tmp_path / "nan_case_0000.nii.gz")
    line = _one_line_error(capsys, ["screen", str(tmp_path / "nan_case_0000.nii.gz"), "--ckpt",
                                    str(tiny_weights), "--out", str(tmp_path / "m.nii.gz")])  # fmt: skip
    assert "nan_case" in line and "NaN" in line


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
    line = _one_line_error(capsys, ["fit", "--config", "tiny", f"--data.init_args.datalist={bad}",
                                    "--trainer.fast_dev_run=1"])  # fmt: skip
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
    args = ["fit", "-c", "tiny", f"--data.init_args.datalist={datalist}", "--trainer.logger=true",
            "--trainer.limit_train_batches=1", "--trainer.limit_val_batches=1"]  # fmt: skip
    run = run_main(main, args, capsys)
    assert run.code == 0, run.err
    assert (tmp_path / "config.yaml").read_text() == "mine: 1\n"
    version = tmp_path / "lightning_logs" / "version_0"
    saved = yaml.safe_load((version / "config.yaml").read_text())
    assert saved["data"]["init_args"]["datalist"] == str(datalist)
    hparams = yaml.safe_load((version / "hparams.yaml").read_text())
    assert hparams["roi_size"] == [32, 32, 16] and hparams["num_samples"] == 2


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["fit", "--config", "nosuch.yaml"], "shipped: gfscreen, gfscreen_chest, msd_liver, tiny"),
        (["fit", "-c", "tiny", "--model.init_args.lr", "x"], 'fit: Parser key "model'),
    ],
)
def test_fit_parse_errors_are_one_line(
    capsys: pytest.CaptureFixture, args: list[str], expected: str
) -> None:
    assert expected in _one_line_error(capsys, args)


@pytest.mark.slow
def test_fit_tiny_under_ddp_on_two_cpu_processes(synth_dir: Path, tmp_path: Path) -> None:
    datalist = _absolute_datalist(synth_dir, tmp_path)
    args = ["fit", "--config", "tiny", f"--data.init_args.datalist={datalist}",
            "--trainer.logger=true", *DDP_CPU_ARGS]  # fmt: skip
    proc = run_console_script("medimg-gfscreen", args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr and "sync_dist" not in proc.stderr
    configs = sorted((tmp_path / "lightning_logs").rglob("config*.yaml"))
    assert [p.relative_to(tmp_path).as_posix() for p in configs] == [
        "lightning_logs/version_0/config.yaml"
    ]
    metrics = (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").read_text()
    assert "val/dsc" in metrics.splitlines()[0]
