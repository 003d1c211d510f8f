from __future__ import annotations

import json
from pathlib import Path

import pytest

from rf_matid.benchmark import BenchmarkRow, markdown_table, train_and_test, write_outputs
from rf_matid.cli import main


def _row(split: str, seed: int, accuracy: float) -> BenchmarkRow:
    return BenchmarkRow(
        arch="mlp", protocol="P1", split=split, application_mode="all_classes", seed=seed,
        epochs=1, n_train=10, n_val=2, n_test=5, accuracy=accuracy, macro_f1=accuracy / 2,
        val_accuracy=accuracy, train_seconds=0.1, class_names=["a", "b"],
        confusion=[[3, 1], [0, 1]],
    )  # fmt: skip


def test_markdown_table_reports_mean_and_std_over_seeds() -> None:
    rows = [_row("S1", 0, 0.9), _row("S1", 1, 0.7), _row("S2-mod2", 0, 0.5)]
    table = markdown_table(rows)
    assert "| model | protocol | S1 | S2-mod2 |" in table
    assert "80.0 ± 14.1 (n=2)" in table
    assert "50.0 ± 0.0 (n=1)" in table


def test_write_outputs(tmp_path: Path) -> None:
    written = write_outputs([_row("S1", 0, 0.9)], tmp_path)
    assert (tmp_path / "confusion_mlp_P1_S1.png").stat().st_size > 1000
    assert json.loads(written["json"].read_text())[0]["accuracy"] == 0.9
    assert "Test macro-F1" in written["markdown"].read_text()


def test_train_and_test_on_tiny_data(tiny_dataset: Path) -> None:
    row = train_and_test(
        tiny_dataset, "material_id", protocol="P2", split="S3-mod1", epochs=1, batch_size=32,
        model_kwargs={"arch_kwargs": {"base_channels": 4}}, accelerator="cpu",
    )  # fmt: skip
    assert row.n_train + row.n_val + row.n_test == 672
    assert 0.0 <= row.accuracy <= 1.0
    confusion_total = sum(map(sum, row.confusion))
    assert confusion_total == row.n_test


def test_benchmark_cli_rejects_unknown_model(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["benchmark", "--data", str(tmp_path), "--models", "svm"])
    assert exit_info.value.code == 2


@pytest.mark.slow
def test_cnn_learns_the_synthetic_materials_well_above_chance(tiny_dataset: Path) -> None:
    """The generator carries a learnable material signal: 16-way S1 accuracy >> 1/16."""
    row = train_and_test(tiny_dataset, "material_id", split="S1", epochs=12, accelerator="cpu")
    assert row.accuracy > 4 / 16
