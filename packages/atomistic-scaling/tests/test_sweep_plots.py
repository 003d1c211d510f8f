"""The sweep's plots keep their x tick labels apart (issue 39: at HEAD d9942d3 matplotlib's
default log axes labelled minor ticks too when the range spans under a few decades, and the
labels were drawn over each other: measured there, ``loss_vs_compute.png`` at compute 5e9-4e10
("3x10^10" over "2x10^10") and 4e9-7e10, and ``loss_vs_data.png`` (D = 200-1600: "4x10^2"
over "3x10^2") in every case below; all fail there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from atomistic_scaling import sweep_report


def _records(compute_lo: float, compute_hi: float) -> list[dict[str, Any]]:
    rows = []
    for arch in ("mpnn", "l1"):
        for k, width in enumerate((4, 8, 16)):
            for j, d in enumerate((200, 400, 800, 1600)):
                share = (3 * j + k) / 11  # 12 distinct compute values spread over the range
                rows.append(
                    {
                        "arch": arch,
                        "width": width,
                        "n_params": 100 * width,
                        "D": d,
                        "seed": 0,
                        "compute": compute_lo * (compute_hi / compute_lo) ** share,
                        "loss": 1.0 / (1 + j + k),
                    }
                )
    return rows


def _figures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, records: list) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    monkeypatch.setattr(
        sweep_report, "_save_png", lambda fig, path: figures.setdefault(path.name, fig)
    )
    fits = {arch: {"alpha": 0.3, "beta": 0.4, "gamma_c": 0.2} for arch in ("mpnn", "l1")}
    names = sweep_report.plot_sweep(records, fits, tmp_path, trivial=1.2)
    assert set(names) == set(figures) == {"loss_vs_compute.png", "loss_vs_data.png"}
    return figures


def _overlaps(fig: Any) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty x tick labels (major and minor) whose boxes intersect."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    pairs = []
    for ax in fig.axes:
        labels = [
            t for t in ax.get_xticklabels(which="both") if t.get_visible() and t.get_text().strip()
        ]
        x0, x1 = ax.get_window_extent(renderer).x0, ax.get_window_extent(renderer).x1
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
        boxes = [(s, b) for s, b in boxes if b.x1 >= x0 - 1 and b.x0 <= x1 + 1]  # on the axis
        for i in range(len(boxes)):
            for j in range(i):
                a, b = boxes[i][1], boxes[j][1]
                if (
                    min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5
                    and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5
                ):
                    pairs.append((boxes[i][0], boxes[j][0]))
        assert labels, "an axis without any x tick label"
    return pairs


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(2e9, 8e9), (5e9, 4e10), (4e9, 7e10), (1e6, 1e13)],
    ids=["0.6 decade", "0.9 decade", "1.2 decades", "7 decades"],
)
def test_sweep_plots_keep_x_tick_labels_apart(
    lo: float, hi: float, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, fig in _figures(monkeypatch, tmp_path, _records(lo, hi)).items():
        assert _overlaps(fig) == [], name
