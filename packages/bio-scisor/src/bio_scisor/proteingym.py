"""Score every deletion assay listed in a ProteinGym ``DMS_indels.csv`` (or every protein of
the clinical indel set, ``clinical_indels.csv``) and summarise.

The summary is ProteinGym's own indel aggregation (:func:`bio_scisor.metrics.proteingym_summary`:
Spearman per assay, mean per (UniProt_ID, coarse_selection_type), per type, then across types;
bootstrap SE over proteins within types), for all, single and multi deletions. ProteinGym's
leaderboard scores every row of an indel assay; with ``on_non_deletion="skip"`` the insertions
are left out, so "all" is over the deletions only.

Beside each number a 95 % interval (:mod:`iclr26_common.effects`, resampling seed
:data:`~bio_scisor.metrics.INTERVAL_SEED`, recorded): per assay over its variants
(``summary.csv`` columns ``spearman_low/_high/_ci_method/_n/_resample_seed``, or ``auc_...``),
per split over the proteins (``summary.json``, ``spearman_interval``: ``Interval.to_dict()``, or
``null`` with too few proteins).
"""

from __future__ import annotations

import csv
import json
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
    INTERVAL_SEED,
    N_RESAMPLES,
    AssayScores,
    assay_spearman,
    auc_interval,
    clinical_auc,
    clinical_summary,
    proteingym_summary,
    spearman_interval,
    summary_interval,
)
from bio_scisor.scoring import score_path
from iclr26_common.effects import interval_columns

__all__ = ["score_clinical_reference", "score_reference"]


def score_reference(
    model: nn.Module,
    reference: str | Path,
    dms_dir: str | Path,
    out_dir: str | Path,
    on_non_deletion: str = "error",
    n_boot: int = 10_000,
    n_resamples: int = N_RESAMPLES,
) -> dict[str, dict[str, object]]:
    """Score each assay of ``reference`` (files in ``dms_dir``) with :func:`score_path`.

    Writes ``out_dir/<DMS_id>.csv`` (mutated_sequence, DMS_score, n_deleted, scisor_path),
    ``out_dir/summary.csv`` (one row per assay, its Spearman with a 95 % interval over its
    variants) and ``out_dir/summary.json`` (per split). ``out_dir`` must not exist yet. Returns
    {"all" | "single" | "multi": proteingym_summary(...)} ("spearman", "se", "by_type",
    "per_assay", "n_assays", "n_proteins") plus "interval" (an
    :class:`~iclr26_common.effects.Interval` over proteins, or ``None`` with too few) and
    "interval_n" (the proteins with a defined Spearman). ``n_resamples``: bootstrap resamples
    of the Spearman intervals.
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
            [
                "DMS_id",
                "UniProt_ID",
                "coarse_selection_type",
                "n",
                "skipped",
                "spearman",
                *interval_columns("spearman", None, 0, fmt=".3f"),
            ]
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
            interval = spearman_interval(scores, assay.scores, n_resamples=n_resamples)
            summary.writerow(
                [
                    assay.name,
                    uniprot[assay.name],
                    assay.coarse_selection_type,
                    len(scores),
                    assay.skipped,
                    f"{rho:.3f}",
                    *interval_columns("spearman", interval, len(scores), fmt=".3f").values(),
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
    result: dict[str, dict[str, object]] = {}
    for split, items in per_split.items():
        if not items:
            continue
        interval, n_units = summary_interval(items, n_resamples=n_resamples)
        result[split] = {
            **proteingym_summary(items, n_boot=n_boot),
            "interval": interval,
            "interval_n": n_units,
        }
    _write_summary_json(out_dir / "summary.json", result, "spearman")
    return result


def _write_summary_json(path: Path, result: dict, metric: str) -> None:
    """``{split: {metric, se, n_assays | n_proteins, <metric>_interval}}`` (the interval's
    ``to_dict()``, ``null`` with too few units)."""
    data = {}
    for split, values in result.items():
        interval = values["interval"]
        data[split] = {
            key: values[key]
            for key in (metric, "se", "by_type", "n_assays", "n_proteins", "n_variants")
            if key in values
        }
        data[split][f"{metric}_interval"] = None if interval is None else interval.to_dict()
        data[split][f"{metric}_interval_n"] = values["interval_n"]
        data[split][f"{metric}_resample_seed"] = INTERVAL_SEED
    path.write_text(json.dumps(data, indent=1) + "\n")


def score_clinical_reference(
    model: nn.Module,
    reference: str | Path,
    data_dir: str | Path,
    out_dir: str | Path,
    on_non_deletion: str = "error",
    n_boot: int = 10_000,
    n_resamples: int = N_RESAMPLES,
) -> dict[str, object]:
    """Score ProteinGym's clinical indel set: every protein of ``reference``
    (``clinical_indels.csv``; variant files in ``data_dir``) with :func:`score_path`, the same
    scorer as the DMS indels; per protein the AUC of benign vs pathogenic
    (:func:`bio_scisor.metrics.clinical_auc`), then their average (``clinical_summary``).

    Writes ``out_dir/<DMS_id>.csv`` (mutated_sequence, DMS_bin_score, n_deleted, scisor_path),
    ``out_dir/summary.csv`` (one row per protein, its AUC with a 95 % interval over its variants)
    and ``out_dir/summary.json``. ``out_dir`` must not exist yet. All files are read (and
    checked) before anything is scored or written. Returns ``clinical_summary``'s dict plus
    ``per_protein`` ({DMS_id: AUC}), ``n_variants``, ``interval`` (the average AUC's 95 %
    interval over proteins, :func:`~iclr26_common.effects.mean_interval`; ``None`` under 2) and
    ``interval_n``.
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
        summary.writerow(
            [
                "DMS_id",
                "n",
                "n_pathogenic",
                "n_benign",
                "skipped",
                "auc",
                *interval_columns("auc", None, 0, fmt=".3f"),
            ]
        )
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
            interval = auc_interval(scores, assay.pathogenic, n_resamples=n_resamples)
            summary.writerow(
                [
                    assay.name,
                    len(scores),
                    n_path,
                    len(scores) - n_path,
                    assay.skipped,
                    f"{auc:.3f}",
                    *interval_columns("auc", interval, len(scores), fmt=".3f").values(),
                ]
            )
    from iclr26_common.effects import mean_interval

    defined = [v for v in per_protein.values() if not np.isnan(v)]
    try:
        average = mean_interval(defined, seed=INTERVAL_SEED, units="proteins")
    except ValueError:  # fewer than 2 proteins with both labels
        average = None
    result = {
        **clinical_summary(list(per_protein.values()), n_boot=n_boot),
        "per_protein": per_protein,
        "n_variants": sum(len(a.mutants) for a in assays),
        "interval": average,
        "interval_n": len(defined),
    }
    _write_summary_json(out_dir / "summary.json", {"all": result}, "auc")
    return result
