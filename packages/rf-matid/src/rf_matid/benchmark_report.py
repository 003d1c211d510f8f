"""The RF-MatID benchmark's outputs: a line per finished cell (:func:`print_row`), the
``benchmark.md`` tables of mean ± std over seeds (:func:`markdown_table`), ``benchmark.json`` and
one confusion-matrix PNG per cell (:func:`write_outputs`; atomic writes, mode 0644).
:mod:`rf_matid.benchmark` re-exports every name."""

from __future__ import annotations

import io
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from iclr26_common.outputs import write_bytes, write_text
from rf_matid.benchmark_store import BenchmarkRow

__all__ = [
    "SPLIT_NAMES",
    "markdown_table",
    "plot_confusion",
    "print_row",
    "summarize",
    "write_outputs",
]

SPLIT_NAMES = ("S1", "S2-mod1", "S2-mod2", "S2-mod3", "S3-mod1", "S3-mod2", "S3-mod3")


def print_row(row: BenchmarkRow) -> None:
    """One progress line per trained configuration."""
    print(
        f"{row.arch:14s} {row.protocol} {row.split:8s} seed {row.seed}: "
        f"test acc {100 * row.accuracy:5.1f}%  macro-F1 {100 * row.macro_f1:5.1f}%  "
        f"({row.n_train} train / {row.n_test} test, {row.train_seconds:.0f} s)",
        flush=True,
    )


def summarize(
    rows: Sequence[BenchmarkRow], metric: str = "accuracy"
) -> dict[tuple[str, str, str], tuple[float, float, int]]:
    """(arch, protocol, split) -> (mean, std, n seeds) of ``metric``; the std of one seed is
    ``nan`` (undefined, not 0)."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for row in rows:
        groups.setdefault((row.arch, row.protocol, row.split), []).append(getattr(row, metric))
    return {
        key: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else math.nan, len(v))
        for key, v in groups.items()
    }


def markdown_table(rows: Sequence[BenchmarkRow], metric: str = "accuracy") -> str:
    """Rows: model × protocol; columns: splits; cells: mean ± std over seeds (in %); a cell of
    one seed shows its value and ``(n=1)`` without a spread (one run has none)."""
    stats = summarize(rows, metric)
    splits = [s for s in SPLIT_NAMES if any(key[2] == s for key in stats)]
    pairs = list(dict.fromkeys((key[0], key[1]) for key in stats))
    header = f"| model | protocol | {' | '.join(splits)} |"
    lines = [header, "|---|---|" + "---:|" * len(splits)]
    for arch, protocol in pairs:
        cells = []
        for split in splits:
            if (arch, protocol, split) in stats:
                mean, std, n = stats[(arch, protocol, split)]
                spread = f" ± {100 * std:.1f}" if n > 1 else ""
                cells.append(f"{100 * mean:.1f}{spread} (n={n})")
            else:
                cells.append("—")
        lines.append(f"| {arch} | {protocol} | {' | '.join(cells)} |")
    return "\n".join(lines)


def plot_confusion(row: BenchmarkRow, path: Path) -> Path:
    """Row-normalised confusion matrix of one test run, as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    confusion = np.asarray(row.confusion, dtype=float)
    normalised = confusion / np.maximum(confusion.sum(axis=1, keepdims=True), 1)
    size = max(4.0, 0.45 * len(row.class_names) + 2)
    fig = Figure(figsize=(size, size))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    image = ax.imshow(normalised, vmin=0, vmax=1, cmap="Blues")
    ax.set_xticks(range(len(row.class_names)), row.class_names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(row.class_names)), row.class_names, fontsize=7)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(
        f"{row.arch} {row.protocol} {row.split} (seed {row.seed}): acc {100 * row.accuracy:.1f}%"
    )
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=110, format="png")
    return write_bytes(path, buffer.getvalue())  # atomic, mode 0644


def write_outputs(rows: Sequence[BenchmarkRow], out_dir: Path) -> dict[str, Path]:
    """benchmark.md (accuracy and macro-F1 tables), benchmark.json, one confusion PNG per cell
    (atomic writes, mode 0644)."""
    markdown = write_text(
        out_dir / "benchmark.md",
        "# RF-MatID benchmark\n\n## Test accuracy (%)\n\n"
        + markdown_table(rows, "accuracy")
        + "\n\n## Test macro-F1 (%)\n\n"
        + markdown_table(rows, "macro_f1")
        + "\n",
    )
    results = write_text(
        out_dir / "benchmark.json", json.dumps([asdict(r) for r in rows], indent=1)
    )
    written = {"markdown": markdown, "json": results}
    seen = set()
    for row in rows:
        key = (row.arch, row.protocol, row.split)
        if key not in seen:
            seen.add(key)
            name = f"confusion_{row.arch}_{row.protocol}_{row.split}.png"
            written[name] = plot_confusion(row, out_dir / name)
    return written
