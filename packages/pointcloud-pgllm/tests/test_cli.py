from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from iclr26_common.testing import (
    CliContract,
    assert_one_line_error,
    fast_dev_args,
    fit_beside_users_config,
    shipped_configs,
)
from pointcloud_pgllm.cli import main, run_lightning_cli

CONFIGS = shipped_configs("pointcloud_pgllm")


class TestCliContract(CliContract):
    package = "pointcloud_pgllm"
    commands = ("synth", "embed", "caption", "classify", "ood", "configs")
    commands_with_help = ("synth", "embed", "caption", "classify", "ood", "configs")

    def check_config(self, printed: dict, declared: dict) -> None:
        assert printed["model"]["init_args"]["widths"] == declared["model"]["init_args"]["widths"]
        assert printed["trainer"]["max_epochs"] == declared["trainer"]["max_epochs"]


# data-size overrides only: the shipped files themselves are parsed (pointnet2 trains on 24
# synthetic clouds per class by default; 3 per class give the one batch fast_dev_run needs)
SMALL_DATA = ["--data.init_args.synthetic_per_class=3"]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_runs_fit_test_and_predict(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every shipped config goes through ``main([...])``: ``fit``, ``test`` and ``predict`` with
    ``fast_dev_run`` (one batch each). A spy on the module's steps records what ran."""
    from pointcloud_pgllm.lit_module import PointCloudClassifier

    seen: list[tuple[str, tuple[int, ...]]] = []
    step, predict = PointCloudClassifier._step, PointCloudClassifier.predict_step

    def spy_step(self, batch, stage):  # type: ignore[no-untyped-def]
        seen.append((stage, tuple(batch[0].shape)))
        return step(self, batch, stage)

    def spy_predict(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        out = predict(self, batch, batch_idx)
        seen.append(("predict", tuple(out["probs"].shape)))
        torch.testing.assert_close(out["probs"].sum(-1), torch.ones(len(out["probs"])))
        return out

    monkeypatch.setattr(PointCloudClassifier, "_step", spy_step)
    monkeypatch.setattr(PointCloudClassifier, "predict_step", spy_predict)
    monkeypatch.chdir(tmp_path)
    declared = yaml.safe_load(config.read_text())["data"]["init_args"]
    cloud = (declared["n_points"], 3)
    common = ["--config", str(config), "--trainer.fast_dev_run=true", *SMALL_DATA]
    for command, stages in (("fit", ["train", "val"]), ("test", ["test"]), ("predict", [])):
        seen.clear()
        assert main([command, *common, f"--trainer.default_root_dir={tmp_path}"]) == 0
        assert [s for s, _ in seen if s != "predict"] == stages, command
        assert all(shape[1:] == cloud for s, shape in seen if s != "predict"), seen
        assert all(0 < shape[0] <= declared["batch_size"] for _, shape in seen), seen
    assert [(s, shape[1]) for s, shape in seen] == [("predict", 13)]  # the synthetic ID classes
    # fast_dev_run writes no logs, configs or checkpoints; predict writes its one table
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.csv"]


def test_fit_tiny_in_process_links_classes_and_checkpoint_feeds_embed(tmp_path: Path) -> None:
    cli = run_lightning_cli(fast_dev_args(tmp_path))
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    assert cli.model.hparams.num_classes == 13 and cli.model.hparams.class_names[0] == "airplane"
    ckpt = tmp_path / "enc.ckpt"
    cli.trainer.save_checkpoint(ckpt)
    from pointcloud_pgllm.model import load_encoder

    enc = load_encoder(str(ckpt))
    assert enc.out_dim == 32


def test_fit_tiny_on_an_off_tree(small_tree: Path, tmp_path: Path) -> None:
    cli = run_lightning_cli(fast_dev_args(tmp_path, f"--data.init_args.data_dir={small_tree}"))
    assert cli.model.hparams.num_classes == 6 and cli.model.hparams.class_names[2] == "chair"


def test_synth_rejects_unknown_class(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        main(["synth", "--out", str(tmp_path / "x"), "--classes", "spaceship"])
    assert info.value.code == 2 and "spaceship" in capsys.readouterr().err


def test_embed_and_caption(small_tree: Path, tmp_path: Path) -> None:
    assert (
        main(
            ["embed", "--data", str(small_tree), "--out", str(tmp_path / "e"), "--n-points", "128"]
        )
        == 0
    )
    feats = np.load(tmp_path / "e" / "features.npy")
    assert feats.shape == (18, 72 * 16) and np.isfinite(feats).all()
    assert np.load(tmp_path / "e" / "labels.npy").tolist() == sorted([0, 1, 2, 3, 4, 5] * 3)
    assert (
        main(
            [
                "caption",
                "--data",
                str(small_tree),
                "--out",
                str(tmp_path / "c.csv"),
                "--n-points",
                "256",
            ]
        )
        == 0
    )
    rows = (tmp_path / "c.csv").read_text().splitlines()
    assert rows[0] == "source,class,caption" and len(rows) == 19


def test_classify_and_ood_write_csv_and_metrics(small_tree: Path, tmp_path: Path) -> None:
    args = ["--data", str(small_tree), "--n-points", "256", "--graph-k", "4"]
    assert main(["classify", *args, "--out", str(tmp_path / "cls")]) == 0
    metrics = json.loads((tmp_path / "cls" / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {"none", "guidance", "propagation", "both"}
    assert metrics["normalize"] is True  # our encoder's features: L2-normalised by default
    assert 0.0 <= metrics["metrics"]["both"]["accuracy"] <= 1.0
    assert len((tmp_path / "cls" / "predictions.csv").read_text().splitlines()) == 19
    assert (
        main(["ood", *args, "--id-classes", "chair,cup,airplane", "--out", str(tmp_path / "ood")])
        == 0
    )
    m = json.loads((tmp_path / "ood" / "metrics.json").read_text())["metrics"]["both"]
    assert {"accuracy", "auroc", "fpr95"} == set(m)
    lines = (tmp_path / "ood" / "ood_scores.csv").read_text().splitlines()
    assert sum(line.split(",")[1] == "OOD" for line in lines[1:]) == 9


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    """The one error line of ``main(args)``; the data commands run with --quiet, so the progress
    lines of the stages that ran before the error (issue 36) stay out of the count."""
    quiet = ["--quiet"] if args and args[0] in ("classify", "ood", "embed", "caption") else []
    return assert_one_line_error(main, [*args, *quiet], capsys, prog="pointcloud-pgllm")


def test_bad_off_is_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "data" / "chair" / "test"
    bad.mkdir(parents=True)
    (bad / "chair_0001.off").write_text("OFF\n3 x 0\n")
    line = _one_line_error(
        capsys, ["embed", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "o")]
    )
    assert "chair_0001.off" in line and "counts" in line


def test_nan_cloud_and_missing_h5_key(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import h5py

    folder = tmp_path / "d" / "cup" / "test"
    folder.mkdir(parents=True)
    (folder / "a.xyz").write_text("0 0 0\nnan 1 1\n")
    line = _one_line_error(
        capsys, ["caption", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "c.csv")]
    )
    assert "a.xyz" in line and "NaN" in line
    with h5py.File(tmp_path / "s.h5", "w") as f:
        f.create_dataset("data", data=np.zeros((1, 4, 3)))
    line = _one_line_error(
        capsys, ["embed", "--data", str(tmp_path / "s.h5"), "--out", str(tmp_path / "e")]
    )
    assert "s.h5" in line and "'label'" in line


def test_unknown_id_class_and_existing_output(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    def ood_error(*options: str) -> str:
        argv = ["ood", "--data", str(small_tree), *options, "--out", str(tmp_path / "o")]
        return _one_line_error(capsys, argv)

    line = ood_error("--id-classes", "chair,sofa")
    assert "'sofa'" in line and "--id-classes" in line
    assert "MN2" in ood_error("--id-split", "MN2")
    out = tmp_path / "c.csv"
    out.write_text("keep")
    line = _one_line_error(capsys, ["caption", "--data", str(small_tree), "--out", str(out)])
    assert "exists" in line and out.read_text() == "keep"


def test_ood_with_http_scorer_and_single_probability(
    small_tree: Path, tmp_path: Path, chat_server
) -> None:
    """The fake LLM says 'four legs' means chair and gives ID probability 0.9 to any object that
    stands on legs, 0.1 otherwise: the CLI must carry its answers into the CSV and metrics."""

    def reply(prompt: str) -> str:
        own = prompt.split("\n")[0]
        legs = "legs" in own
        if "probability" in prompt:
            return json.dumps({"probability": 0.9 if legs else 0.1})
        return json.dumps({"chair": 90 if legs else 10, "cup": 10 if legs else 80})

    url, replies, _ = chat_server
    replies.append(reply)
    args = ["ood", "--data", str(small_tree), "--n-points", "256", "--graph-k", "4"]
    args += ["--id-classes", "chair,cup", "--scorer", "http", "--base-url", url]
    args += ["--model", "fake", "--ood-score", "single-probability", "--out", str(tmp_path / "o")]
    assert main(args) == 0
    payload = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert payload["ood_score"] == "single-probability" and payload["scorer"] == "http"
    none = payload["metrics"]["none"]
    assert {"accuracy", "auroc", "fpr95"} == set(none)
    rows = [
        ln.split(",") for ln in (tmp_path / "o" / "ood_scores.csv").read_text().splitlines()[1:]
    ]
    assert {float(r[4]) for r in rows} - {0.9, 0.1}  # refined by propagation, not the raw answers


CLASSIFY_USAGE = "pointcloud-pgllm classify: error: {} (see pointcloud-pgllm classify --help)"
OOD_USAGE = "pointcloud-pgllm ood: error: {} (see pointcloud-pgllm ood --help)"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["classify", "--data", "{tree}", "--captions", "c.json"],
            CLASSIFY_USAGE.format("--data and --captions/--features exclude each other"),
        ),
        (["classify"], CLASSIFY_USAGE.format("give --data, or --captions with --features")),
        (
            ["classify", "--captions", "c.json"],
            CLASSIFY_USAGE.format("--captions and --features go together"),
        ),
        (
            ["classify", "--data", "{tree}", "--graph-k", "18"],
            CLASSIFY_USAGE.format("--graph-k and --guidance-k must be in 1..17 for 18 clouds"),
        ),
        (
            ["classify", "--data", "{tree}", "--guidance-k", "0"],
            CLASSIFY_USAGE.format("--graph-k and --guidance-k must be in 1..17 for 18 clouds"),
        ),
        (
            ["classify", "--data", "{tree}", "--scorer", "http"],
            CLASSIFY_USAGE.format("--scorer http needs --base-url and --model"),
        ),
        (
            ["ood", "--data", "{tree}", "--id-split", "MN1", "--ood-score", "single-probability"],
            OOD_USAGE.format("--ood-score single-probability needs --scorer http"),
        ),
        (
            ["classify", "--data", "{tree}", "--alpha", "2"],
            "pointcloud-pgllm: error: alpha must be in [0, 1], got 2.0",
        ),
    ],
)
def test_option_errors_keep_the_lines_of_the_cli_before_the_api(
    args: list[str], expected: str, small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The exact lines ``pointcloud-pgllm`` printed at 8d3cb5d (before the pipeline moved into
    api.py): option problems are the subcommand's usage error, with its --help hint."""
    argv = [a.replace("{tree}", str(small_tree)) for a in args]
    line = _one_line_error(capsys, [*argv, "--n-points", "128", "--out", str(tmp_path / "o")])
    assert line == expected
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["ood", "--id-classes", "chair"],
            OOD_USAGE.format("--id-classes: give at least 2 distinct classes, got 1 (chair)"),
        ),
        (
            ["classify", "--classes", "chair", "--graph-k", "2", "--guidance-k", "2"],
            CLASSIFY_USAGE.format("--classes: give at least 2 distinct classes, got 1 (chair)"),
        ),
        (
            ["classify", "--classes", "chair,chair", "--graph-k", "2", "--guidance-k", "2"],
            CLASSIFY_USAGE.format(
                "--classes: give at least 2 distinct classes, got 2 (chair, chair)"
            ),
        ),
    ],
)
def test_one_class_is_a_one_line_usage_error(
    args: list[str], expected: str, small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """One class used to end in sklearn's "needs samples of at least 2 classes" traceback
    (exit 1) from the tfidf scorer's fit."""
    argv = [*args, "--data", str(small_tree), "--n-points", "128", "--out", str(tmp_path / "o")]
    assert _one_line_error(capsys, argv) == expected


def test_fit_without_logger_never_overwrites_the_working_directorys_config(tmp_path: Path) -> None:
    """Without a logger the run folder is --trainer.default_root_dir, here the working
    directory: a user's config.yaml there is kept, and this run's resolved config goes next to
    it (config-1.yaml); nothing else. (tiny keeps its logger and checkpoint since issue 36, so
    the test turns them off.)"""
    saved = fit_beside_users_config(run_lightning_cli, tmp_path)
    assert saved["model"]["init_args"]["widths"] == [16, 32]  # tiny's, with the overrides
    assert saved["trainer"]["max_steps"] == 1


def test_unknown_config_is_one_line(capsys: pytest.CaptureFixture) -> None:
    line = _one_line_error(capsys, ["fit", "--config", "nosuch.yaml"])
    assert "nosuch.yaml" in line and "pointnet2" in line  # names the shipped configs
