from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from iclr26_common.testing import (
    DDP_CPU_ARGS,
    assert_cli_help,
    assert_one_line_error,
    help_commands,
    run_console_script,
    shipped_configs,
)
from rf_matid import __version__
from rf_matid.cli import main, run_lightning_cli
from rf_matid.model import MODELS

CONFIGS = shipped_configs("rf_matid")


def test_top_level_help_lists_every_subcommand() -> None:
    out = assert_cli_help(main)
    assert help_commands(out) == [
        "fit",
        "validate",
        "test",
        "predict",
        "predict-files",
        "synth",
        "benchmark",
        "configs",
    ]


def test_version(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_unknown_command_exits_2() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["train"])
    assert exit_info.value.code == 2


def test_every_model_has_a_shipped_config() -> None:
    names = {path.stem for path in CONFIGS}
    assert set(MODELS) <= names and "tiny" in names


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_parses(config: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--print_config"])
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    declared = yaml.safe_load(config.read_text())
    assert printed["model"]["init_args"]["arch"] == declared["model"]["init_args"]["arch"]
    assert printed["model"]["init_args"]["arch"] in MODELS
    assert printed["trainer"]["max_epochs"] == declared["trainer"]["max_epochs"]


def _tiny_run(command: str, data_dir: Path, root: Path, *extra: str):
    """LightningCLI ``command`` with the shipped tiny config for one fast_dev_run batch."""
    return run_lightning_cli(
        [
            command,
            "--config",
            "tiny",
            f"--data.init_args.data_dir={data_dir}",
            "--trainer.fast_dev_run=1",
            f"--trainer.default_root_dir={root}",
            *extra,
        ]
    )


def test_fit_tiny_config_in_process(tiny_dataset: Path, tmp_path: Path) -> None:
    cli = _tiny_run("fit", tiny_dataset, tmp_path)
    assert cli.trainer.state.finished
    assert cli.trainer.global_step == 1
    # sizes linked from the data module into the model
    assert cli.model.hparams.num_classes == 16 and cli.model.hparams.seq_len == 2048
    assert cli.model.hparams.class_names[0] == "brick01"


def test_test_subcommand_with_super_classes(tiny_dataset: Path, tmp_path: Path) -> None:
    cli = _tiny_run(
        "test", tiny_dataset, tmp_path, "--data.init_args.application_mode=super_classes"
    )
    assert cli.model.hparams.num_classes == 5
    assert int(cli.model.test_confusion.sum()) > 0


def test_synth_writes_the_upstream_layout(tmp_path: Path) -> None:
    out = tmp_path / "synth"
    main(
        [
            "synth",
            "--out",
            str(out),
            "--classes",
            "glass01,wood01",
            "--distances",
            "200,400",
            "--angles",
            "0:2:1",
            "--no-time",
            "--upstream-header",
        ]
    )
    folders = sorted(p.name for p in (out / "frequency_domain").iterdir())  # upstream's name
    assert len(folders) == 2 * 2 * 3
    assert "ms46131a-4To43.5GHz-2048-glass01-400mm-2deg" in folders
    sample = out / "frequency_domain" / folders[0] / "0000.csv"
    assert sample.read_text().startswith("freq.GHZ,real,imag\n4000000000.0,")  # Hz values


def test_synth_rejects_unknown_classes(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["synth", "--out", str(tmp_path / "x"), "--classes", "steel01"])
    assert exit_info.value.code == 2


def test_configs_lists_paths(capsys: pytest.CaptureFixture) -> None:
    assert main(["configs"]) == 0
    assert "transformer1d" in capsys.readouterr().out


def test_predict_subcommand_writes_the_test_split_predictions(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`predict` used to exit 0 having written nothing; it writes predictions.csv into the run
    folder (next to config.yaml), and a second run takes the next free name."""
    import csv

    from rf_matid.data import RFMatIDDataModule
    from rf_matid.io import parse_position_folder

    cli = _tiny_run("predict", tiny_dataset, tmp_path)
    assert cli.trainer.state.finished
    path = tmp_path / "predictions.csv"
    assert f"wrote {path}" in capsys.readouterr().out
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    batch = cli.datamodule.hparams.batch_size  # fast_dev_run: one batch
    assert len(rows) == batch
    names = cli.datamodule.class_names
    assert list(rows[0]) == ["file", "predicted", "label", *(f"prob_{n}" for n in names)]
    expected = RFMatIDDataModule(str(tiny_dataset)).sample_records("test")[:batch]
    assert [(row["file"], row["label"]) for row in rows] == expected
    for row in rows:
        assert row["label"] == parse_position_folder(Path(row["file"]).parent).class_name
        probs = [float(row[f"prob_{n}"]) for n in names]
        assert sum(probs) == pytest.approx(1.0, abs=1e-4)
        assert row["predicted"] == names[probs.index(max(probs))]
    _tiny_run("predict", tiny_dataset, tmp_path)
    assert (tmp_path / "predictions-1.csv").is_file()  # never over the first run's file


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    """``main(args)``: exit code 2, one ``rf-matid[ COMMAND]: error: ...`` stderr line."""
    line = assert_one_line_error(main, args, capsys, prog="rf-matid")
    assert "error: " in line
    return line


def test_fit_without_logger_keeps_the_users_config_yaml(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fit --config tiny` (logger off: the run's folder is default_root_dir, the cwd) saves
    its config beside ./config.yaml, never over it."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "config.yaml").write_text("my: own config\n")
    monkeypatch.chdir(cwd)
    main(
        [
            "fit",
            "-c",
            "tiny",
            f"--data.init_args.data_dir={tiny_dataset}",
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=1",
            "--trainer.limit_val_batches=1",
        ]
    )
    assert (cwd / "config.yaml").read_text() == "my: own config\n"
    assert sorted(p.name for p in cwd.iterdir()) == ["config-1.yaml", "config.yaml"]
    saved = yaml.safe_load((cwd / "config-1.yaml").read_text())
    assert saved["data"]["init_args"]["data_dir"] == str(tiny_dataset)


def test_fit_tiny_under_ddp_on_two_cpu_processes(tiny_dataset: Path, tmp_path: Path) -> None:
    """Lightning's ddp re-runs the console script's command line for rank 1 (gloo on CPU):
    both ranks train, the losses are averaged over ranks, rank 0 alone writes the config."""
    args = [
        "fit",
        "--config",
        "tiny",
        f"--data.init_args.data_dir={tiny_dataset}",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=1",
        "--trainer.logger=true",
        *DDP_CPU_ARGS,
    ]
    proc = run_console_script("rf-matid", args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr and "sync_dist" not in proc.stderr
    configs = sorted((tmp_path / "lightning_logs").rglob("config*.yaml"))
    assert [p.relative_to(tmp_path).as_posix() for p in configs] == [
        "lightning_logs/version_0/config.yaml"
    ]
    header = (tmp_path / "lightning_logs/version_0/metrics.csv").read_text().splitlines()[0]
    assert "val/acc" in header and "train/loss_epoch" in header


def test_fit_saves_its_config_into_the_logger_run_directory(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "runs"
    for _ in range(2):  # a second run gets its own version directory, nothing is overwritten
        main(
            [
                "fit",
                "--config",
                "tiny",
                f"--data.init_args.data_dir={tiny_dataset}",
                "--trainer.max_epochs=1",
                "--trainer.limit_train_batches=1",
                "--trainer.limit_val_batches=1",
                "--trainer.logger=true",
                f"--trainer.default_root_dir={root}",
            ]
        )
    saved = sorted(root.glob("**/config.yaml"))
    assert len(saved) == 2 and saved[0].parent != saved[1].parent
    assert yaml.safe_load(saved[0].read_text())["model"]["init_args"]["arch"] == "material_id"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_missing_data_dir_is_one_line(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    line = _one_line_error(
        capsys, ["fit", "--config", "tiny", f"--data.init_args.data_dir={tmp_path / 'nope'}"]
    )
    assert "nope" in line


def test_unbuildable_split_is_one_line(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    data = tmp_path / "near"
    main(
        [
            "synth",
            "--out",
            str(data),
            "--classes",
            "glass01,wood01",
            "--distances",
            "200,400",
            "--angles",
            "0:2:1",
            "--no-time",
        ]
    )
    capsys.readouterr()
    line = _one_line_error(
        capsys,
        [
            "fit",
            "--config",
            "tiny",
            f"--data.init_args.data_dir={data}",
            "--data.init_args.split=S2-mod3",
            "--trainer.fast_dev_run=1",
            f"--trainer.default_root_dir={tmp_path}",
        ],
    )
    assert "S2-mod3" in line and "no test samples" in line


@pytest.mark.parametrize("distances", ["300:200:50", "", "200:x:50"])
def test_synth_bad_distances_are_one_line(
    distances: str, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    line = _one_line_error(
        capsys, ["synth", "--out", str(tmp_path / "x"), "--distances", distances]
    )
    assert "--distances" in line
    assert not (tmp_path / "x").exists()


def test_synth_into_a_non_empty_out_is_one_line(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    args = [
        "synth",
        "--out",
        str(tmp_path / "d"),
        "--classes",
        "glass01",
        "--distances",
        "200",
        "--angles",
        "0",
        "--no-time",
    ]
    assert main(args) == 0
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    line = _one_line_error(capsys, args)
    assert "already holds samples" in line
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_bugs_are_not_turned_into_one_line_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ValueError raised outside rf_matid's own validation keeps its traceback."""
    import rf_matid.cli as cli

    def broken(*_args: object) -> int:
        return len(dict([(1, 2, 3)]))  # ValueError raised by the interpreter, not by rf_matid

    monkeypatch.setattr(cli, "synth_main", broken)
    with pytest.raises(ValueError, match="dictionary update sequence"):
        main(["synth"])


def test_traceback_on_request(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rf_matid.io import RFMatIDFormatError

    monkeypatch.setenv("RF_MATID_TRACEBACK", "1")
    with pytest.raises(RFMatIDFormatError):
        main(["fit", "--config", "tiny", f"--data.init_args.data_dir={tmp_path / 'nope'}"])


def test_validate_subcommand_reports_the_val_accuracy(tiny_dataset: Path, tmp_path: Path) -> None:
    import torch

    cli = run_lightning_cli(
        [
            "validate",
            "--config",
            "tiny",
            f"--data.init_args.data_dir={tiny_dataset}",
            f"--trainer.default_root_dir={tmp_path}",
        ]
    )
    assert cli.trainer.state.finished
    module, datamodule = cli.model.eval(), cli.datamodule
    correct = total = 0
    with torch.no_grad():
        for batch in datamodule.val_dataloader():
            correct += int((module(batch["x"]).argmax(1) == batch["y"]).sum())
            total += len(batch["y"])
    assert total == datamodule.split_sizes()["val"] > 0
    assert float(cli.trainer.callback_metrics["val/acc"]) == pytest.approx(correct / total)
