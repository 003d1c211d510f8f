from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rf_matid.benchmark import BenchmarkRow, markdown_table, train_and_test, write_outputs
from rf_matid.cli import main

#: ``benchmark_row`` (conftest) and factories like it: keyword fields -> a BenchmarkRow
RowFactory = Callable[..., BenchmarkRow]


def _row(benchmark_row: RowFactory, split: str, seed: int, accuracy: float) -> BenchmarkRow:
    return benchmark_row(
        split=split,
        seed=seed,
        accuracy=accuracy,
        macro_f1=accuracy / 2,
        val_accuracy=accuracy,
        class_names=["a", "b"],
        confusion=[[3, 1], [0, 1]],
    )


def test_markdown_table_reports_mean_and_std_over_seeds(benchmark_row: RowFactory) -> None:
    rows = [
        _row(benchmark_row, "S1", 0, 0.9),
        _row(benchmark_row, "S1", 1, 0.7),
        _row(benchmark_row, "S2-mod2", 0, 0.5),
    ]
    table = markdown_table(rows)
    assert "| model | protocol | S1 | S2-mod2 |" in table
    assert "80.0 ± 14.1 (n=2)" in table
    # one seed has no spread: the value and n=1, not "± 0.0" (HEAD d9942d3 printed
    # "50.0 ± 0.0 (n=1)", a spread of zero that was never measured)
    assert "| 50.0 (n=1) |" in table
    assert "± 0.0" not in table


def test_write_outputs(tmp_path: Path, benchmark_row: RowFactory) -> None:
    written = write_outputs([_row(benchmark_row, "S1", 0, 0.9)], tmp_path)
    assert (tmp_path / "confusion_mlp_P1_S1.png").stat().st_size > 1000
    assert json.loads(written["json"].read_text())[0]["accuracy"] == 0.9
    assert "Test macro-F1" in written["markdown"].read_text()


TINY_MODEL = {"arch_kwargs": {"base_channels": 4}}


def test_train_and_test_on_tiny_data(tiny_dataset: Path) -> None:
    import numpy as np

    from rf_matid.io import load_dataset
    from rf_matid.splits import make_split

    row = train_and_test(
        tiny_dataset,
        "material_id",
        protocol="P2",
        split="S3-mod1",
        epochs=1,
        batch_size=32,
        model_kwargs=TINY_MODEL,
        accelerator="cpu",
    )
    data = load_dataset(tiny_dataset)
    parts = make_split(data.distance_mm, data.angle_deg, "S3", 1, seed=42)
    assert (row.n_train, row.n_val, row.n_test) == tuple(
        len(parts[p]) for p in ("train", "val", "test")
    )
    confusion = np.asarray(row.confusion)
    assert confusion.sum() == row.n_test
    # rows are the true classes of the S3-mod1 test positions (angles 2 and 8 of 0..10 step 2)
    true_counts = np.bincount(
        [sorted(set(data.class_names)).index(data.class_names[i]) for i in parts["test"]],
        minlength=16,
    )
    assert confusion.sum(axis=1).tolist() == true_counts.tolist()
    assert row.accuracy == pytest.approx(np.trace(confusion) / row.n_test, abs=1e-6)
    # per-spectrum scores (issue 39, the paired claim): the test files in test order, and the
    # correct answers add up to the confusion matrix's diagonal
    assert row.test_files == [data.files[i] for i in parts["test"]]
    assert len(row.test_correct) == row.n_test and set(row.test_correct) <= {0, 1}
    assert sum(row.test_correct) == int(np.trace(confusion))


def test_training_seed_does_not_change_the_split(tiny_dataset: Path) -> None:
    rows = [
        train_and_test(
            tiny_dataset,
            "material_id",
            split="S1",
            epochs=1,
            seed=seed,
            model_kwargs=TINY_MODEL,
            accelerator="cpu",
        )
        for seed in (0, 1)
    ]
    assert rows[0].n_test == rows[1].n_test
    # same test samples: the true-class counts (confusion row sums) agree
    assert [sum(r) for r in rows[0].confusion] == [sum(r) for r in rows[1].confusion]


def test_train_and_test_leaves_logging_and_warning_filters_alone(tiny_dataset: Path) -> None:
    import logging
    import warnings

    logger = logging.getLogger("lightning.pytorch")
    logger.setLevel(logging.INFO)
    filters = list(warnings.filters)
    try:
        train_and_test(
            tiny_dataset,
            "material_id",
            protocol="P2",
            split="S1",
            epochs=1,
            model_kwargs=TINY_MODEL,
            accelerator="cpu",
        )
        assert logger.level == logging.INFO
        assert warnings.filters == filters
    finally:
        logger.setLevel(logging.NOTSET)


def test_plots_do_not_switch_the_matplotlib_backend(
    tmp_path: Path, benchmark_row: RowFactory
) -> None:
    import matplotlib

    from rf_matid.experiment import plot_split_bars

    previous = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        from rf_matid.benchmark import plot_confusion

        plot_confusion(_row(benchmark_row, "S1", 0, 0.8), tmp_path / "c.png")
        per_seed = {"mlp": {s: [0.5, 0.7] for s in ("S1", "S2-mod2", "S2-mod3", "S3-mod1")}}
        plot_split_bars(per_seed, tmp_path / "bars.png")
        assert matplotlib.get_backend() == "svg"
        assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
        assert (tmp_path / "bars.png").read_bytes()[:4] == b"\x89PNG"
    finally:
        matplotlib.use(previous)


def test_benchmark_synth_reuses_its_data_on_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import rf_matid.benchmark_store as benchmark

    grid = {"distances_mm": [200, 1700], "angles_deg": [0], "samples_per_position": 1}
    monkeypatch.setattr(benchmark, "MINIATURE_GRID", grid)
    first = benchmark.synthetic_dataset(tmp_path)
    files = sorted(p.relative_to(tmp_path) for p in first.rglob("*.csv"))
    assert len(files) == 16 * 2
    mtimes = [p.stat().st_mtime_ns for p in sorted(first.rglob("*.csv"))]
    assert benchmark.synthetic_dataset(tmp_path) == first
    assert "reusing" in capsys.readouterr().out
    assert [p.stat().st_mtime_ns for p in sorted(first.rglob("*.csv"))] == mtimes
    # another grid, or data that an interrupted run left without the marker: refused, untouched
    monkeypatch.setattr(benchmark, "MINIATURE_GRID", {**grid, "angles_deg": [0, 1]})
    with pytest.raises(FileExistsError, match="another grid"):
        benchmark.synthetic_dataset(tmp_path)
    (first / benchmark.SYNTH_MARKER).unlink()
    with pytest.raises(FileExistsError, match="not completed"):
        benchmark.synthetic_dataset(tmp_path)
    assert sorted(p.relative_to(tmp_path) for p in first.rglob("*.csv")) == files


def test_benchmark_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "out" / "data").mkdir(parents=True)
    (tmp_path / "out" / "data" / "notes.txt").write_text("mine")
    for args, expected in (
        (["--synth", "--out", str(tmp_path / "out")], "holds earlier results"),
        (["--synth", "--out", str(tmp_path / "out"), "--overwrite"], "not completed"),
        (["--data", str(tmp_path / "missing")], "not a directory"),
        (["--data", str(tmp_path), "--seeds", "3:1:1"], "--seeds"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["benchmark", *args])
        assert exit_info.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], lines


def test_benchmark_cli_rejects_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["benchmark", "--data", str(tmp_path), "--models", "svm"])
    assert exit_info.value.code == 2
    assert "unknown model ['svm']" in capsys.readouterr().err


@pytest.mark.slow
def test_cnn_learns_the_synthetic_materials_well_above_chance(tiny_dataset: Path) -> None:
    """The generator carries a learnable material signal: 16-way S1 accuracy >> 1/16."""
    row = train_and_test(tiny_dataset, "material_id", split="S1", epochs=12, accelerator="cpu")
    assert row.accuracy > 4 / 16


def test_run_benchmark_chooses_the_device_once_through_iclr26_common(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The experiment forced accelerator="cpu"; now the workspace's device helper chooses, in
    the calling process (where it is recorded), and every training gets that choice."""
    import iclr26_common.device as device
    import rf_matid.benchmark as bench

    asked: list[str] = []

    def choose() -> str:
        asked.append("asked")
        return "gpu"

    seen: list[tuple] = []
    monkeypatch.setattr(device, "lightning_accelerator", choose)
    # ICLR26_DEVICE=cuda:1: Lightning's devices=1 would mean cuda:0, so the index must travel too
    monkeypatch.setattr(device, "lightning_devices", lambda: [1])
    monkeypatch.setattr(
        bench, "train_and_test", lambda **task: seen.append((task["accelerator"], task["devices"]))
    )
    bench.run_benchmark("data", ["mlp"], splits=["S1", "S2-mod2"], seeds=[0])
    assert asked == ["asked"] and seen == [("gpu", [1]), ("gpu", [1])]
    bench.run_benchmark("data", ["mlp"], accelerator="cpu")
    assert asked == ["asked"] and seen[-1] == ("cpu", None)


def test_every_task_fits_train_and_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_benchmark's task dicts go to train_and_test(**task): every key must be one of its
    parameters (a 'devices' key it lacked broke the experiment while a mocked test passed)."""
    import inspect

    import rf_matid.benchmark as bench

    parameters = set(inspect.signature(bench.train_and_test).parameters)
    tasks: list[dict] = []
    monkeypatch.setattr(bench, "train_and_test", lambda **task: tasks.append(task))
    bench.run_benchmark("data", ["mlp"])
    assert tasks and set(tasks[0]) <= parameters


def test_a_long_cell_prints_epoch_lines_at_most_every_so_often(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from types import SimpleNamespace

    from rf_matid.benchmark import epoch_lines_callback

    every = epoch_lines_callback("cnn P1 S1 seed 0", 3, 0.0)
    every.on_train_start(None, None)
    for epoch in range(3):
        every.on_train_epoch_end(SimpleNamespace(current_epoch=epoch), None)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in lines] == [
        f"cnn P1 S1 seed 0 epochs: {e}/3" for e in (1, 2, 3)
    ]
    rarely = epoch_lines_callback("cnn P1 S1 seed 0", 3, 3600.0)
    rarely.on_train_start(None, None)
    for epoch in range(3):
        rarely.on_train_epoch_end(SimpleNamespace(current_epoch=epoch), None)
    assert capsys.readouterr().err == ""  # a short cell stays silent
