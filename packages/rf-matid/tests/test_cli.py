from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from iclr26_common.testing import (
    DDP_CPU_ARGS,
    CliContract,
    assert_one_line_error,
    fast_dev_args,
    fit_beside_users_config,
    nonblank_lines,
    only_file,
    run_console_script,
    run_ddp,
    shipped_configs,
)
from rf_matid.cli import main, run_lightning_cli
from rf_matid.model import MODELS

CONFIGS = shipped_configs("rf_matid")


class TestCliContract(CliContract):
    package = "rf_matid"
    commands = ("predict-files", "synth", "benchmark", "configs")


def test_every_model_has_a_shipped_config() -> None:
    names = {path.stem for path in CONFIGS}
    assert set(MODELS) <= names and "tiny" in names


# Size-only overrides for the shipped configs' smoke runs: two spectra a batch, and the models
# whose cost grows with the input length (attention over every bin, one LSTM step per bin, an
# MLP with (2 L)^2 weights) on P2's 700 bins instead of P1's 2048. The rest is the shipped file.
SMOKE_SIZES = ("--data.init_args.batch_size=2",)
LENGTH_BOUND = {"rf_matid": "P2", "transformer1d": "P2", "bilstm": "P2", "mlp": "P2"}


def _read_predictions(path: Path) -> dict[str, list[float]]:
    """``{file name: class probabilities}`` of a predictions CSV (predict or predict-files)."""
    import csv

    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {
        Path(row["file"]).name + "@" + Path(row["file"]).parent.name: [
            float(v) for k, v in row.items() if k.startswith("prob_")
        ]
        for row in rows
    }


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_fits_tests_and_predicts(
    config: Path, tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every shipped YAML, as shipped (plus the size overrides above): `fit` with fast_dev_run,
    then `test` and `predict` from the fitted checkpoint, then `predict-files` on the files
    `predict` saw, whose probabilities must be those of `predict` (the data module's pipeline
    and predict-files' own reading, cropping and whitening agree)."""
    from rf_matid.predict import load_predictor

    declared = yaml.safe_load(config.read_text())
    model_args, data_args = declared["model"]["init_args"], declared["data"]["init_args"]
    arch = model_args["arch"]
    sizes = [*SMOKE_SIZES]
    if arch in LENGTH_BOUND:
        sizes.append(f"--data.init_args.protocol={LENGTH_BOUND[arch]}")
    common = [
        "--config",
        str(config),
        f"--data.init_args.data_dir={tiny_dataset}",
        *sizes,
        "--trainer.fast_dev_run=true",
    ]
    # run_lightning_cli is what main() dispatches `fit` to; it returns the CLI for the checks
    cli = run_lightning_cli(["fit", *common, f"--trainer.default_root_dir={tmp_path / 'fit'}"])
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    hparams = cli.model.hparams
    assert arch in MODELS and isinstance(cli.model.model, MODELS[arch])
    for key, value in model_args.items():  # the shipped model settings reached the module
        assert hparams[key] == value, key
    for key, value in data_args.items():
        if key not in ("data_dir", "batch_size") and not (
            key == "protocol" and arch in LENGTH_BOUND
        ):
            assert cli.datamodule.hparams[key] == value, key
    assert hparams.num_classes == 16 and hparams.class_names[0] == "brick01"  # linked sizes
    assert hparams.seq_len == (700 if arch in LENGTH_BOUND else 2048)
    checkpoint = tmp_path / "fitted.ckpt"
    cli.trainer.save_checkpoint(checkpoint, weights_only=True)  # fast_dev_run saves none
    assert load_predictor(checkpoint).protocol == cli.datamodule.hparams.protocol  # recorded

    runs = {command: tmp_path / command for command in ("test", "predict")}
    for command, root in runs.items():
        code = main(
            [command, *common, f"--ckpt_path={checkpoint}", f"--trainer.default_root_dir={root}"]
        )
        assert code in (0, None), command
    out = capsys.readouterr().out
    assert "test/acc" in out
    (predicted,) = runs["predict"].rglob("predictions*.csv")
    from_predict = _read_predictions(predicted)
    assert len(from_predict) == 2  # fast_dev_run: one batch of two test spectra

    files = [
        str(p) for p in tiny_dataset.rglob("*.csv") if f"{p.name}@{p.parent.name}" in from_predict
    ]
    out_csv = tmp_path / "predict-files.csv"
    assert main(["predict-files", "--ckpt", str(checkpoint), "--out", str(out_csv), *files]) == 0
    from_files = _read_predictions(out_csv)
    assert sorted(from_files) == sorted(from_predict)
    for name, probs in from_predict.items():
        assert sum(probs) == pytest.approx(1.0, abs=1e-4)
        np.testing.assert_allclose(from_files[name], probs, rtol=1e-4, atol=1e-6, err_msg=name)


def _tiny_run(command: str, data_dir: Path, root: Path, *extra: str):
    """LightningCLI ``command`` with the shipped tiny config for one fast_dev_run batch."""
    return run_lightning_cli(
        fast_dev_args(root, f"--data.init_args.data_dir={data_dir}", *extra, command=command)
    )


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
    folder (next to config.yaml). A second run into the same folder is refused in one line
    naming the file and --overwrite, and --overwrite replaces it (issue 36 review: 43a8cc5
    wrote predictions-1.csv beside it, against the rule every command keeps)."""
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
    before = path.read_bytes()
    args = fast_dev_args(tmp_path, f"--data.init_args.data_dir={tiny_dataset}", command="predict")
    line = assert_one_line_error(main, args, capsys, prog="rf-matid", drop_earlier=True)
    assert f"predict: {path}: exists; pass --overwrite to replace it" in line, line
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.glob("predictions*")) == ["predictions.csv"]
    path.write_text("mine\n")
    _tiny_run("predict", tiny_dataset, tmp_path, "--overwrite")
    assert path.read_text().startswith("file,predicted,label,")
    assert path.stat().st_mode & 0o777 == 0o644


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    """``main(args)``: exit code 2, one ``rf-matid[ COMMAND]: error: ...`` stderr line."""
    line = assert_one_line_error(main, args, capsys, prog="rf-matid")
    assert "error: " in line
    return line


def test_fit_without_logger_keeps_the_users_config_yaml(tiny_dataset: Path, tmp_path: Path) -> None:
    """`fit --config tiny` with the logger off and --trainer.default_root_dir the cwd (the
    run's folder) saves its config beside ./config.yaml, never over it. (tiny keeps its logger
    and checkpoint since issue 36; without a logger and without default_root_dir common saves
    no config into the current folder.)"""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    saved = fit_beside_users_config(main, cwd, [f"--data.init_args.data_dir={tiny_dataset}"])
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
    ]
    run_ddp("rf-matid", args, tmp_path)  # rc 0, two processes, no sync_dist warning
    config = only_file(tmp_path, "config*.yaml")
    assert config.relative_to(tmp_path).as_posix() == "lightning_logs/version_0/config.yaml"
    header = (config.parent / "metrics.csv").read_text().splitlines()[0]
    assert "val/acc" in header and "train/loss_epoch" in header


def test_predict_under_ddp_writes_one_predictions_csv(tiny_dataset: Path, tmp_path: Path) -> None:
    """Issue 39: under DDP (two gloo ranks) rank 0 writes the one predictions.csv, every test
    sample once in the split's order, with the probabilities one process writes (each rank
    wrote its own predictions-rank<R>.csv before). The checkpoint is trained for ten
    batches so that no two test spectra share their probabilities (the comparison could fail);
    a second DDP run into the same folder is refused in one line before any work."""
    import csv

    from rf_matid.data import RFMatIDDataModule

    fitted = run_lightning_cli(
        [
            "fit",
            "--config",
            "tiny",
            f"--data.init_args.data_dir={tiny_dataset}",
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=10",
            "--trainer.limit_val_batches=0",
            "--trainer.logger=false",
            "--trainer.enable_checkpointing=false",
            "--trainer.enable_progress_bar=false",
            f"--trainer.default_root_dir={tmp_path / 'fit'}",
        ]
    )
    checkpoint = tmp_path / "fitted.ckpt"
    fitted.trainer.save_checkpoint(checkpoint, weights_only=True)
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    ddp.mkdir()
    args = [
        "predict",
        "--config",
        "tiny",
        f"--data.init_args.data_dir={tiny_dataset}",
        f"--ckpt_path={checkpoint}",
        "--trainer.logger=false",
        "--trainer.enable_progress_bar=false",
    ]
    assert main([*args, f"--trainer.default_root_dir={single}"]) in (0, None)
    proc = run_ddp("rf-matid", [*args, f"--trainer.default_root_dir={ddp}"], ddp, timeout=600)
    assert proc.stdout.count("wrote ") == 1, proc.stdout  # rank 0 alone
    assert sorted(p.name for p in ddp.iterdir()) == ["config.yaml", "predictions.csv"]

    def table(path: Path) -> tuple[list[tuple[str, str]], np.ndarray]:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        keys = [(row["file"], row["label"]) for row in rows]
        probs = [[float(v) for k, v in row.items() if k.startswith("prob_")] for row in rows]
        return keys, np.array(probs)

    keys, probs = table(ddp / "predictions.csv")
    single_keys, single_probs = table(single / "predictions.csv")
    assert keys == single_keys == RFMatIDDataModule(str(tiny_dataset)).sample_records("test")
    atol = 2e-7  # two units of the last digit written (%.6g of probabilities ~0.06)
    apart = np.abs(single_probs[:, None] - single_probs[None]).max(-1)
    np.fill_diagonal(apart, np.inf)
    assert apart.min() > 4 * atol, apart.min()  # every sample's row tells it from the others
    np.testing.assert_allclose(probs, single_probs, rtol=0, atol=atol)

    before = (ddp / "predictions.csv").read_bytes()
    again = run_console_script(
        "rf-matid", [*args, f"--trainer.default_root_dir={ddp}", *DDP_CPU_ARGS], ddp
    )
    assert again.returncode == 2, again.stderr[-3000:]
    assert nonblank_lines(again.stderr) == [
        f"rf-matid: error: predict: {ddp / 'predictions.csv'}: exists; pass --overwrite to "
        "replace it"
    ]
    assert (ddp / "predictions.csv").read_bytes() == before


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
        fast_dev_args(
            tmp_path, f"--data.init_args.data_dir={data}", "--data.init_args.split=S2-mod3"
        ),
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
    assert "holds earlier results; pass --overwrite" in line
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
    (tmp_path / "data" / "not-a-position-folder").mkdir(parents=True)  # a reader error
    with pytest.raises(RFMatIDFormatError, match="not-a-position-folder"):
        main(["fit", "--config", "tiny", f"--data.init_args.data_dir={tmp_path / 'data'}"])


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
