from __future__ import annotations

from pathlib import Path

import pytest

from iclr26_common.testing import (
    CliContract,
    assert_one_line_error,
    fast_dev_args,
    shipped_configs,
)
from robotics_remac.cli import main, parse_delays, run_lightning_cli

CONFIGS = shipped_configs("robotics_remac")


class TestCliContract(CliContract):
    package = "robotics_remac"
    commands = ("collect", "eval", "configs")

    def check_config(self, printed: dict, declared: dict) -> None:
        assert printed["model"]["class_path"] == declared["model"]["class_path"]
        assert printed["trainer"]["max_epochs"] == declared["trainer"]["max_epochs"]


def _tiny(command: str, demo_dir: Path, root: Path, *extra: str) -> list[str]:
    """``command`` of the shipped ``tiny`` config (then ``extra``) on the demo data, writing
    under ``root``."""
    return [
        command,
        "--config",
        "tiny",
        *extra,
        f"--data.init_args.data_dir={demo_dir}",
        f"--trainer.default_root_dir={root}",
    ]


def test_unknown_config_is_one_line(capsys: pytest.CaptureFixture) -> None:
    line = _one_line_error(capsys, ["fit", "-c", "nosuch.yaml"])
    assert "nosuch.yaml" in line and "remac" in line  # names the shipped configs


def test_remac_finetune_from_a_base_checkpoint(demo_dir: Path, tmp_path: Path) -> None:
    cli = run_lightning_cli(
        _tiny(
            "fit",
            demo_dir,
            tmp_path,
            "--trainer.max_epochs=1",
            "--trainer.enable_checkpointing=true",
        )
    )
    (ckpt,) = tmp_path.rglob("*.ckpt")
    out = tmp_path / "remac"
    cli = run_lightning_cli(
        [
            "fit",
            "--config",
            "remac",
            f"--model.init_args.base_ckpt={ckpt}",
            f"--data.init_args.data_dir={demo_dir}",
            "--trainer.max_steps=1",
            "--trainer.limit_val_batches=0",
            "--trainer.logger=false",
            "--trainer.enable_checkpointing=true",
            f"--trainer.default_root_dir={out}",
        ]
    )
    assert cli.trainer.global_step == 1
    assert cli.model.hparams["sizes"]["channels"] == 16  # the base's widths, not the config's 32
    # Failed before issue 29: LightningCLI parses a checkpoint's hyperparameters back into the
    # model's arguments, and the extra 'policy_config' REMAC stored made `test --ckpt_path` crash.
    (remac_ckpt,) = out.rglob("*.ckpt")
    tested = run_lightning_cli(
        [
            "test",
            "--config",
            "remac",
            f"--ckpt_path={remac_ckpt}",
            f"--data.init_args.data_dir={demo_dir}",
            "--trainer.limit_test_batches=1",
            "--trainer.logger=false",
            f"--trainer.default_root_dir={tmp_path / 'test'}",
        ]
    )
    assert tested.trainer.state.finished
    assert tested.model.policy.config["channels"] == 16


def test_collect_then_eval(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import torch

    from robotics_remac.checkpoint import save_policy
    from robotics_remac.model import FlowPolicy, add_lora

    assert main(["collect", "--out", str(tmp_path / "d"), "--episodes", "3"]) == 0
    assert (tmp_path / "d/data/chunk-000/episode_000002.parquet").is_file()
    torch.manual_seed(0)
    base = save_policy(
        tmp_path / "b.pt", FlowPolicy(channels=16, hidden=32, token_hidden=8), "base"
    )
    remac = save_policy(
        tmp_path / "r.pt", add_lora(FlowPolicy(channels=16, hidden=32, token_hidden=8)), "remac"
    )
    out = tmp_path / "ev"
    assert (
        main(
            [
                "eval",
                "--policy",
                str(base),
                "--remac",
                str(remac),
                "--method",
                "naive,remac,te",
                "--delays",
                "0,3",
                "--episodes",
                "4",
                "--exec-horizon",
                "3",
                "--assumed-delay",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    lines = (out / "results.csv").read_text().splitlines()
    assert len(lines) == 1 + 6 and lines[0].startswith("method,delay,assumed_delay")
    assert (out / "success_vs_delay.png").stat().st_size > 0
    # the existing columns come first, unchanged; the intervals follow
    import csv

    rows = list(csv.DictReader((out / "results.csv").open()))
    existing = ["method", "delay", "assumed_delay", "exec_horizon", "success", "ci_low"]
    assert list(rows[0])[:6] == existing
    for row in rows:
        assert row["success_n"] == "4" and row["baseline"] == "naive"
        assert row["success_ci_method"] == "wilson"  # 0/1 per episode: Wilson's interval
        if row["method"] == "naive":
            assert row["success_diff"] == "" and row["success_diff_ci_method"] == ""
        else:
            assert row["success_diff_ci_method"] in ("paired t", "exact")
    printed = capsys.readouterr().out
    assert "n=4 episodes" in printed and "vs naive" in printed


def test_eval_intervals_over_episodes_planted(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """naive and sync act alike at d = 0 (both execute the new chunk at once): their paired
    difference on the same episodes is exactly 0, zero width; the planner (the ceiling) against
    an untrained policy: its interval excludes 0. One episode: Wilson's interval, wide but
    inside [0, 1] and never a zero width."""
    import csv

    import torch

    from robotics_remac.checkpoint import save_policy
    from robotics_remac.model import FlowPolicy

    torch.manual_seed(0)
    base = save_policy(tmp_path / "b.pt", FlowPolicy(channels=8, hidden=8, token_hidden=4), "base")
    out = tmp_path / "ev"
    args = ["eval", "--policy", str(base), "--delays", "0", "--exec-horizon", "4"]
    assert (
        main([*args, "--method", "naive,sync,planner", "--episodes", "30", "--out", str(out)]) == 0
    )
    rows = {r["method"]: r for r in csv.DictReader((out / "results.csv").open())}
    sync, planner = rows["sync"], rows["planner"]
    assert sync["success"] == rows["naive"]["success"]
    assert float(sync["success_diff"]) == 0.0 and sync["success_diff_ci_method"] == "exact"
    assert float(sync["success_diff_low"]) == float(sync["success_diff_high"]) == 0.0
    assert planner["success_diff_ci_method"] == "paired bootstrap"
    assert planner["success_diff_n"] == "30" and planner["success_diff_resample_seed"] == "0"
    assert float(planner["success_diff_low"]) > 0
    assert (
        float(planner["success_low"]) <= float(planner["success"]) <= float(planner["success_high"])
    )
    printed = capsys.readouterr().out
    assert "vs naive +0.000 (exact, n=30 episodes)" in printed
    one = tmp_path / "one"
    assert main([*args, "--method", "planner", "--episodes", "1", "--out", str(one)]) == 0
    (row,) = list(csv.DictReader((one / "results.csv").open()))
    assert row["success_ci_method"] == "wilson" and row["success_n"] == "1"
    assert 0.0 <= float(row["success_low"]) < float(row["success_high"]) <= 1.0
    assert "baseline" not in row  # one method: nothing to compare with
    printed = capsys.readouterr().out
    assert "(wilson, n=1 episodes)" in printed and "± 0" not in printed


def _tiny_base(tmp_path: Path) -> Path:
    """An untrained tiny base policy saved as ``tmp_path/b.pt``."""
    from robotics_remac.checkpoint import save_policy
    from robotics_remac.model import FlowPolicy

    return save_policy(tmp_path / "b.pt", FlowPolicy(channels=8, hidden=8, token_hidden=4), "base")


def _eval(base: Path, out: Path, *flags: str) -> list[str]:
    """``eval --policy BASE *FLAGS --out OUT``."""
    return ["eval", "--policy", str(base), *flags, "--out", str(out)]


def test_eval_planner_alone_needs_no_trained_policy(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    flags = ["--method", "planner", "--delays", "0,4", "--exec-horizon", "4", "--episodes", "40"]
    assert main(_eval(_tiny_base(tmp_path), out, *flags, "--seed", "1")) == 0
    rows = (out / "results.csv").read_text().splitlines()[1:]
    assert [r.split(",")[:2] for r in rows] == [["planner", "0"], ["planner", "4"]]
    assert all(float(r.split(",")[3]) > 0.5 for r in rows)  # the expert-based ceiling succeeds


def test_eval_measured_delay(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = _tiny_base(tmp_path)
    out = tmp_path / "ev"
    # a 10 s control period: every (positive) latency is one step, so d = 1 at every boundary
    flags = ["--method", "planner", "--measured-delay", "2", "--control-period", "10"]
    assert main(_eval(base, out, *flags, "--exec-horizon", "4", "--episodes", "16")) == 0
    import csv

    (row,) = list(csv.DictReader((out / "results.csv").open()))
    assert row["delay"] == "measured" and float(row["mean_delay"]) == 1.0
    assert float(row["underestimated"]) == 0.0 and float(row["capped"]) == 0.0
    assert not (out / "success_vs_delay.png").exists()
    capsys.readouterr()  # the run's progress lines
    out = tmp_path / "ev2"  # a new folder: the errors below are not about --out
    line = _one_line_error(
        capsys, _eval(base, out, "--measured-delay", "2", "--assumed-delay", "1")
    )
    assert "--assumed-delay cannot be combined" in line
    flags = ["--method", "planner", "--measured-delay", "5", "--exec-horizon", "4"]
    line = _one_line_error(capsys, _eval(base, out, *flags))
    assert "must satisfy" in line
    assert not out.exists()  # a refused run leaves no folder


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys, prog="robotics-remac")


def test_delay_not_below_horizon_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from robotics_remac.checkpoint import save_policy
    from robotics_remac.model import FlowPolicy

    base = save_policy(
        tmp_path / "b.pt", FlowPolicy(channels=16, hidden=32, token_hidden=8), "base"
    )
    out = tmp_path / "o"
    line = _one_line_error(capsys, _eval(base, out, "--method", "naive", "--delays", "8"))
    assert "d=8" in line and "H=8" in line
    line = _one_line_error(capsys, _eval(base, out, "--method", "remac"))
    assert "--remac" in line
    line = _one_line_error(capsys, _eval(tmp_path / "nope.ckpt", out))
    assert "nope.ckpt" in line


def test_bad_dataset_is_one_line(demo_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(shutil.copytree(demo_dir, tmp_path / "bad"))
    path = root / "data/chunk-000/episode_000004.parquet"
    table = pq.read_table(path)
    states = table.column("observation.state").to_pylist()
    states[10][2] = float("nan")
    i = table.column_names.index("observation.state")
    pq.write_table(table.set_column(i, "observation.state", pa.array(states)), path)
    line = _one_line_error(
        capsys,
        fast_dev_args(tmp_path, f"--data.init_args.data_dir={root}"),
    )
    assert "episode_000004.parquet" in line and "observation.state" in line and "frame 10" in line


def test_collect_into_non_empty_folder_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("x")
    line = _one_line_error(capsys, ["collect", "--out", str(tmp_path / "d")])
    assert f"--out {tmp_path / 'd'}: holds earlier results; pass --overwrite" in line


def test_parse_delays() -> None:
    import argparse

    assert parse_delays("0-4") == [0, 1, 2, 3, 4] and parse_delays("1,3") == [1, 3]
    for bad in ("", "a-b", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_delays(bad)


def test_predict_runs_and_returns_chunks(demo_dir: Path, tmp_path: Path) -> None:
    """Issue 25: `predict` was in the help but crashed (no predict_step / predict_dataloader)."""
    import torch

    cli = run_lightning_cli(_tiny("predict", demo_dir, tmp_path))
    assert cli.trainer.state.finished
    chunks = torch.cat(cli.trainer.predict_loop.predictions)
    assert chunks.shape == (len(cli.datamodule.val_set), 8, 2) and torch.isfinite(chunks).all()


def test_predict_writes_predictions_and_overwrites_only_when_asked(  # type: ignore[no-untyped-def]
    demo_dir: Path, tmp_path: Path, capsys
) -> None:
    """Review of issue 25: predictions were returned to Lightning and dropped (no file)."""
    import torch

    out = tmp_path / "run"
    cli = run_lightning_cli(_tiny("predict", demo_dir, out))
    saved = torch.load(out / "predictions.pt", weights_only=True)
    torch.testing.assert_close(saved["chunks"], torch.cat(cli.trainer.predict_loop.predictions))
    assert saved["chunks"].shape == (len(cli.datamodule.val_set), 8, 2)
    before = (out / "predictions.pt").read_bytes()
    capsys.readouterr()  # drop the first run's output (Lightning's log lines)
    line = _one_line_error(
        capsys,
        _tiny("predict", demo_dir, out),
    )
    assert line.endswith(
        f"predict: {out / 'predictions.pt'}: exists; pass --overwrite to replace it"
    )
    assert (out / "predictions.pt").read_bytes() == before
    cli = run_lightning_cli([*_tiny("predict", demo_dir, out), "--overwrite"])  # replaced
    again = torch.load(out / "predictions.pt", weights_only=True)
    torch.testing.assert_close(again["chunks"], torch.cat(cli.trainer.predict_loop.predictions))
    assert set(again) == set(saved) == {"chunks", "episode_index", "frame_index", "split"}


def test_predict_hides_the_batch_indices_warning_and_prints_wrote_last(  # type: ignore[no-untyped-def]
    demo_dir: Path, tmp_path: Path, capsys, recwarn, monkeypatch
) -> None:
    """Review of issue 38: every `predict` showed Lightning's "Couldn't infer the batch indices"
    warning (the writer takes positions from the batch's `index`) and printed "wrote ..." before
    the progress bar ended. Control: with the writer's filter pointed at another message, the
    same run shows the warning (so its absence is the filter's doing)."""
    from robotics_remac import writer

    def batch_warnings() -> list[str]:
        found = [str(w.message) for w in recwarn if "infer the batch indices" in str(w.message)]
        recwarn.clear()
        return found

    monkeypatch.setattr(writer, "BATCH_INDICES_WARNING", "a message Lightning never gives")
    run_lightning_cli([*_tiny("predict", demo_dir, tmp_path / "control"), "--overwrite"])
    assert batch_warnings(), "control: Lightning no longer warns here; the test checks nothing"
    monkeypatch.undo()
    capsys.readouterr()
    out = tmp_path / "run"
    run_lightning_cli(_tiny("predict", demo_dir, out))
    assert batch_warnings() == []
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines[-1].startswith(f"wrote {out / 'predictions.pt'} (")  # after the progress bar
    assert sum(line.startswith("wrote ") for line in lines) == 1


def test_junk_checkpoint_in_a_config_file_is_one_line(  # type: ignore[no-untyped-def]
    demo_dir: Path, tmp_path: Path, capsys
) -> None:
    """Review of issue 25: the check read argv only, so ``ckpt_path:`` in a YAML bypassed it."""
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"junk")
    extra = tmp_path / "extra.yaml"
    extra.write_text(f"ckpt_path: {junk}\n")
    line = _one_line_error(
        capsys,
        _tiny("test", demo_dir, tmp_path, "--config", str(extra)),
    )
    assert "junk.ckpt: not a readable checkpoint" in line


def test_junk_checkpoint_is_one_line(demo_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Issue 25: `--ckpt_path` to a junk file gave a torch unpickling traceback."""
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"junk")
    for command in ("test", "predict"):
        line = _one_line_error(
            capsys,
            _tiny(command, demo_dir, tmp_path, f"--ckpt_path={junk}"),
        )
        assert "junk.ckpt: not a readable checkpoint" in line
