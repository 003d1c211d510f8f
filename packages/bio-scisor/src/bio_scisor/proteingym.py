"""Score every deletion assay listed in a ProteinGym ``DMS_indels.csv`` (or every protein of
the clinical indel set, ``clinical_indels.csv``) and summarise.

The summary is ProteinGym's own indel aggregation (:func:`bio_scisor.metrics.proteingym_summary`:
Spearman per assay, mean per (UniProt_ID, coarse_selection_type), per type, then across types;
bootstrap SE over proteins within types), for all, single and multi deletions. ProteinGym's
leaderboard scores every row of an indel assay; with ``on_non_deletion="skip"`` the insertions
are left out, so "all" is over the deletions only.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from torch import nn

from bio_scisor.io import (
    read_clinical_indels,
    read_clinical_reference,
    read_dms_indels,
    read_reference,
)
from bio_scisor.metrics import (
    AssayScores,
    assay_spearman,
    clinical_auc,
    clinical_summary,
    proteingym_summary,
)
from bio_scisor.scoring import score_path

__all__ = ["score_clinical_reference", "score_reference"]


def score_reference(
    model: nn.Module,
    reference: str | Path,
    dms_dir: str | Path,
    out_dir: str | Path,
    on_non_deletion: str = "error",
    n_boot: int = 10_000,
) -> dict[str, dict[str, object]]:
    """Score each assay of ``reference`` (files in ``dms_dir``) with :func:`score_path`.

    Writes ``out_dir/<DMS_id>.csv`` (mutated_sequence, DMS_score, n_deleted, scisor_path) and
    ``out_dir/summary.csv`` (one row per assay). ``out_dir`` must not exist yet. Returns
    {"all" | "single" | "multi": proteingym_summary(...)} ("spearman", "se", "by_type",
    "per_assay", "n_assays", "n_proteins").
    """
    rows = read_reference(reference)
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists; give a new output folder")
    uniprot = {row["DMS_id"]: row["UniProt_ID"] for row in rows}
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
    per_split: dict[str, list[AssayScores]] = {"all": [], "single": [], "multi": []}
    with (out_dir / "summary.csv").open("w", newline="") as handle:
        summary = csv.writer(handle)
        summary.writerow(
            ["DMS_id", "UniProt_ID", "coarse_selection_type", "n", "skipped", "spearman"]
        )
        for assay in assays:
            scores = score_path(model, assay.wt, assay.mutants)
            with (out_dir / f"{assay.name}.csv").open("w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["mutated_sequence", "DMS_score", "n_deleted", "scisor_path"])
                for seq, y, d, s in zip(
                    assay.mutants, assay.scores, assay.n_deleted, scores, strict=True
                ):
                    writer.writerow([seq, y, int(d), f"{s:.6f}"])
            rho = assay_spearman(scores, assay.scores)
            summary.writerow(
                [
                    assay.name,
                    uniprot[assay.name],
                    assay.coarse_selection_type,
                    len(scores),
                    assay.skipped,
                    f"{rho:.3f}",
                ]
            )
            single = assay.n_deleted == 1
            for split, mask in (
                ("all", np.ones_like(single)),
                ("single", single),
                ("multi", ~single),
            ):
                if mask.sum() >= 2:
                    per_split[split].append(
                        AssayScores(
                            scores[mask],
                            assay.scores[mask],
                            assay.coarse_selection_type,
                            uniprot[assay.name],
                        )
                    )
    return {
        split: proteingym_summary(items, n_boot=n_boot)
        for split, items in per_split.items()
        if items
    }


def score_clinical_reference(
    model: nn.Module,
    reference: str | Path,
    data_dir: str | Path,
    out_dir: str | Path,
    on_non_deletion: str = "error",
    n_boot: int = 10_000,
) -> dict[str, object]:
    """Score ProteinGym's clinical indel set: every protein of ``reference``
    (``clinical_indels.csv``; variant files in ``data_dir``) with :func:`score_path`, the same
    scorer as the DMS indels; per protein the AUC of benign vs pathogenic
    (:func:`bio_scisor.metrics.clinical_auc`), then their average (``clinical_summary``).

    Writes ``out_dir/<DMS_id>.csv`` (mutated_sequence, DMS_bin_score, n_deleted, scisor_path) and
    ``out_dir/summary.csv`` (one row per protein). ``out_dir`` must not exist yet. All files are
    read (and checked) before anything is scored or written. Returns ``clinical_summary``'s dict
    plus ``per_protein`` ({DMS_id: AUC}) and ``n_variants``.
    """
    rows = read_clinical_reference(reference)
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists; give a new output folder")
    assays = [
        read_clinical_indels(
            Path(data_dir) / row["DMS_filename"],
            row["target_seq"],
            name=row["DMS_id"],
            sequence_column=row["mutated_sequence_column"],
            on_non_deletion=on_non_deletion,
        )
        for row in rows
    ]
    out_dir.mkdir(parents=True)
    per_protein: dict[str, float] = {}
    with (out_dir / "summary.csv").open("w", newline="") as handle:
        summary = csv.writer(handle)
        summary.writerow(["DMS_id", "n", "n_pathogenic", "n_benign", "skipped", "auc"])
        for assay in assays:
            scores = score_path(model, assay.wt, assay.mutants)
            with (out_dir / f"{assay.name}.csv").open("w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["mutated_sequence", "DMS_bin_score", "n_deleted", "scisor_path"])
                for seq, bad, d, s in zip(
                    assay.mutants, assay.pathogenic, assay.n_deleted, scores, strict=True
                ):
                    label = "Pathogenic" if bad else "Benign"
                    writer.writerow([seq, label, int(d), f"{s:.6f}"])
            auc = clinical_auc(scores, assay.pathogenic)
            per_protein[assay.name] = auc
            n_path = int(assay.pathogenic.sum())
            summary.writerow(
                [assay.name, len(scores), n_path, len(scores) - n_path, assay.skipped, f"{auc:.3f}"]
            )
    return {
        **clinical_summary(list(per_protein.values()), n_boot=n_boot),
        "per_protein": per_protein,
        "n_variants": sum(len(a.mutants) for a in assays),
    }
