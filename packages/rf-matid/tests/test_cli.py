from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from iclr26_common.testing import assert_cli_help, shipped_configs
from rf_matid import __version__
from rf_matid.cli import main, parse_int_list, run_lightning_cli
from rf_matid.model import MODELS

CONFIGS = shipped_configs("rf_matid")


def test_top_level_help_lists_every_subcommand() -> None:
    out = assert_cli_help(main)
    for command in ("fit", "validate", "test", "predict", "synth", "benchmark", "configs"):
        assert command in out


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
    main(["synth", "--out", str(out), "--classes", "glass01,wood01", "--distances", "200,400",
          "--angles", "0:2:1", "--no-time"])  # fmt: skip
    folders = sorted(p.name for p in (out / "freq_domain").iterdir())
    assert len(folders) == 2 * 2 * 3
    assert "ms46131a-4To43.5GHz-2048-glass01-400mm-2deg" in folders


def test_synth_rejects_unknown_classes(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["synth", "--out", str(tmp_path / "x"), "--classes", "steel01"])
    assert exit_info.value.code == 2


def test_configs_lists_paths(capsys: pytest.CaptureFixture) -> None:
    assert main(["configs"]) == 0
    assert "transformer1d" in capsys.readouterr().out


def test_parse_int_list() -> None:
    assert parse_int_list("200:400:100") == [200, 300, 400]
    assert parse_int_list("1,5") == [1, 5]


def test_predict_subcommand(tiny_dataset: Path, tmp_path: Path) -> None:
    cli = _tiny_run("predict", tiny_dataset, tmp_path)
    assert cli.trainer.state.finished
    assert cli.trainer.predict_loop.predictions[0]["probs"].shape[1] == 16
