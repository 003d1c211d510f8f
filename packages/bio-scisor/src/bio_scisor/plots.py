"""Score-vs-DMS scatter plots (matplotlib, Agg; no display needed) for ``score --plot`` and the
per-assay figures ``proteingym`` writes into its output folder."""

from __future__ import annotations

import io
from collections.abc import Mapping

import numpy as np

__all__ = ["scatter_png"]


def scatter_png(
    dms: np.ndarray,
    scores: Mapping[str, np.ndarray],
    n_deleted: np.ndarray,
    title: str,
    xlabel: str = "DMS_score",
) -> bytes:
    """PNG bytes of one panel per score column: the score (y) against the measurement ``dms``
    (x), single deletions and 2+-residue deletions in two colours, each panel titled with its
    Spearman over the variants."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from bio_scisor.metrics import spearman

    dms = np.asarray(dms, dtype=np.float64)
    single = np.asarray(n_deleted) == 1
    fig = Figure(figsize=(4.2 * len(scores), 3.8))
    FigureCanvasAgg(fig)
    for k, (name, values) in enumerate(scores.items(), start=1):
        values = np.asarray(values, dtype=np.float64)
        ax = fig.add_subplot(1, len(scores), k)
        for mask, label, colour in ((single, "single", "tab:blue"), (~single, "multi", "tab:red")):
            if mask.any():
                ax.scatter(dms[mask], values[mask], s=10, alpha=0.6, c=colour, label=label)
        rho = spearman(values, dms)
        ax.set_title(f"{name}: Spearman {rho:+.3f} (n={len(values)})", fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()
