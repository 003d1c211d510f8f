"""Score every deletion assay listed in a ProteinGym ``DMS_indels.csv`` and summarise.

Summary metric as ProteinGym: Spearman per assay, averaged within ``coarse_selection_type``, then
across types, with a bootstrap standard error; reported for all, single and multi deletions.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from torch import nn

from bio_scisor.io import read_dms_indels, read_reference
from bio_scisor.metrics import proteingym_summary, spearman
from bio_scisor.scoring import score_path

__all__ = ["score_reference"]


def score_reference(
    model: nn.Module,
    reference: str | Path,
    dms_dir: str | Path,
    out_dir: str | Path,
    on_non_deletion: str = "error",
    n_boot: int = 200,
) -> dict[str, dict[str, float]]:
    """Score each assay of ``reference`` (files in ``dms_dir``) with :func:`score_path`.

    Writes ``out_dir/<DMS_id>.csv`` (mutated_sequence, DMS_score, n_deleted, scisor_path) and
    ``out_dir/summary.csv`` (one row per assay). ``out_dir`` must not exist yet. Returns
    {"all" | "single" | "multi": {"spearman", "se", "n_assays"}}.
    """
    rows = read_reference(reference)
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists; give a new output folder")
    assays = [
        read_dms_indels(
            Path(dms_dir) / row["DMS_filename"],
            row["target_seq"],
            name=row["DMS_id"],
            coarse_selection_type=row["coarse_selection_type"],
            on_non_deletion=on_non_deletion,
        )
        for row in rows
    ]
    out_dir.mkdir(parents=True)
    per_split: dict[str, list[tuple[np.ndarray, np.ndarray, str]]] = {
        "all": [], "single": [], "multi": []
    }  # fmt: skip
    with (out_dir / "summary.csv").open("w", newline="") as handle:
        summary = csv.writer(handle)
        summary.writerow(["DMS_id", "coarse_selection_type", "n", "skipped", "spearman"])
        for assay in assays:
            scores = score_path(model, assay.wt, assay.mutants)
            with (out_dir / f"{assay.name}.csv").open("w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["mutated_sequence", "DMS_score", "n_deleted", "scisor_path"])
                for seq, y, d, s in zip(
                    assay.mutants, assay.scores, assay.n_deleted, scores, strict=True
                ):
                    writer.writerow([seq, y, int(d), f"{s:.6f}"])
            rho = spearman(scores, assay.scores)
            summary.writerow([assay.name, assay.coarse_selection_type, len(scores),
                              assay.skipped, f"{rho:.4f}"])  # fmt: skip
            single = assay.n_deleted == 1
            for split, mask in (("all", np.ones_like(single)), ("single", single),
                                ("multi", ~single)):  # fmt: skip
                if mask.sum() >= 2:
                    per_split[split].append(
                        (scores[mask], assay.scores[mask], assay.coarse_selection_type)
                    )
    return {
        split: {**proteingym_summary(items, n_boot=n_boot), "n_assays": float(len(items))}
        for split, items in per_split.items()
        if items
    }
