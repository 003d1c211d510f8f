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

The output folder goes through :func:`iclr26_common.outputs.check_out_folder` (checked before any
file is read; marked partial while the assays are scored). Each assay's CSV is written, atomically,
as soon as it is scored, so an interrupted run keeps the assays it finished, and a rerun with
``resume=True`` (``--resume``) reads them back instead of scoring them again. The summary is
computed from the scores as the CSVs hold them (6 decimals), so a resumed run gives the same
summary as an uninterrupted one.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
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
from iclr26_common.outputs import OutputFolder, check_out_folder, write_text
from iclr26_common.progress import progress

__all__ = ["csv_text", "score_clinical_reference", "score_reference"]


def csv_text(header: Sequence[object], rows: Sequence[Sequence[object]]) -> str:
    """A CSV file's text (``\\n`` line ends): what :func:`~iclr26_common.outputs.write_text`
    writes atomically with mode 0644."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def _out_folder(out_dir: str | Path | OutputFolder, overwrite: bool, resume: bool) -> OutputFolder:
    """``out_dir`` checked (:func:`~iclr26_common.outputs.check_out_folder`, option ``--out``),
    or the :class:`~iclr26_common.outputs.OutputFolder` the CLI already checked."""
    if isinstance(out_dir, OutputFolder):
        return out_dir
    return check_out_folder(out_dir, option="--out", overwrite=overwrite, resume=resume)


def _finished_scores(path: Path, mutants: Sequence[str], label: str) -> np.ndarray | None:
    """The ``scisor_path`` column of an assay CSV an interrupted run finished (written
    atomically: present means complete), when it lists exactly ``mutants``; else ``None``
    (scored again)."""
    if not path.is_file():
        return None
    try:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        if [r["mutated_sequence"] for r in rows] != list(mutants) or label not in rows[0]:
            return None
        return np.array([float(r["scisor_path"]) for r in rows], dtype=np.float64)
    except (KeyError, ValueError, IndexError, csv.Error):
        return None


def _scores(
    model: nn.Module,
    out: OutputFolder,
    name: str,
    wt: str,
    mutants: list[str],
    label: str,
    values: Sequence[object],
) -> np.ndarray:
    """One assay's path scores: read back from its CSV when a resumed run finished it, else
    scored and written (``mutated_sequence, <label>, n_deleted, scisor_path``) at once. The
    scores come back as the CSV holds them (6 decimals)."""
    path = out.path / f"{name}.csv"
    if out.resumed:
        done = _finished_scores(path, mutants, label)
        if done is not None:
            return done
    scores = np.array([float(f"{s:.6f}") for s in score_path(model, wt, mutants)])
    rows = [
        [seq, value, len(wt) - len(seq), f"{s:.6f}"]
        for seq, value, s in zip(mutants, values, scores, strict=True)
    ]
    write_text(path, csv_text(["mutated_sequence", label, "n_deleted", "scisor_path"], rows))
    return scores


def score_reference(
    model: nn.Module,
    reference: str | Path,
    dms_dir: str | Path,
    out_dir: str | Path | OutputFolder,
    on_non_deletion: str = "error",
    n_boot: int = 10_000,
    n_resamples: int = N_RESAMPLES,
    *,
    overwrite: bool = False,
    resume: bool = False,
    quiet: bool = True,
) -> dict[str, dict[str, object]]:
    """Score each assay of ``reference`` (files in ``dms_dir``) with :func:`score_path`.

    Writes ``out_dir/<DMS_id>.csv`` (mutated_sequence, DMS_score, n_deleted, scisor_path) as each
    assay finishes, then ``out_dir/summary.csv`` (one row per assay, its Spearman with a 95 %
    interval over its variants) and ``out_dir/summary.json`` (per split). ``out_dir`` follows
    :func:`~iclr26_common.outputs.check_out_folder`: new or empty, or with ``overwrite``; an
    interrupted run's folder is continued with ``resume`` (its finished assays are read back).
    Every file is read and checked before anything is scored or written. ``quiet=False`` shows
    progress over the assays on stderr. Returns {"all" | "single" | "multi":
    proteingym_summary(...)} ("spearman", "se", "by_type", "per_assay", "n_assays",
    "n_proteins") plus "interval" (an :class:`~iclr26_common.effects.Interval` over proteins, or
    ``None`` with too few) and "interval_n" (the proteins with a defined Spearman).
    ``n_resamples``: bootstrap resamples of the Spearman intervals.
    """
    out = _out_folder(out_dir, overwrite, resume)
    rows = read_reference(reference)
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
    per_split: dict[str, list[AssayScores]] = {"all": [], "single": [], "multi": []}
    summary_rows = []
    with out:
        for assay in progress(assays, description="assays", quiet=quiet):
            scores = _scores(
                model, out, assay.name, assay.wt, assay.mutants, "DMS_score", assay.scores
            )
            rho = assay_spearman(scores, assay.scores)
            interval = spearman_interval(scores, assay.scores, n_resamples=n_resamples)
            summary_rows.append(
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
        header = [
            "DMS_id",
            "UniProt_ID",
            "coarse_selection_type",
            "n",
            "skipped",
            "spearman",
            *interval_columns("spearman", None, 0, fmt=".3f"),
        ]
        write_text(out.path / "summary.csv", csv_text(header, summary_rows))
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
        _write_summary_json(out.path / "summary.json", result, "spearman")
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
    write_text(path, json.dumps(data, indent=1) + "\n")


def score_clinical_reference(
    model: nn.Module,
    reference: str | Path,
    data_dir: str | Path,
    out_dir: str | Path | OutputFolder,
    on_non_deletion: str = "error",
    n_boot: int = 10_000,
    n_resamples: int = N_RESAMPLES,
    *,
    overwrite: bool = False,
    resume: bool = False,
    quiet: bool = True,
) -> dict[str, object]:
    """Score ProteinGym's clinical indel set: every protein of ``reference``
    (``clinical_indels.csv``; variant files in ``data_dir``) with :func:`score_path`, the same
    scorer as the DMS indels; per protein the AUC of benign vs pathogenic
    (:func:`bio_scisor.metrics.clinical_auc`), then their average (``clinical_summary``).

    Writes ``out_dir/<DMS_id>.csv`` (mutated_sequence, DMS_bin_score, n_deleted, scisor_path) as
    each protein finishes, then ``out_dir/summary.csv`` (one row per protein, its AUC with a 95 %
    interval over its variants) and ``out_dir/summary.json``. ``out_dir``, ``overwrite``,
    ``resume`` and ``quiet`` as :func:`score_reference`. All files are read (and checked) before
    anything is scored or written. Returns ``clinical_summary``'s dict plus ``per_protein``
    ({DMS_id: AUC}), ``n_variants``, ``interval`` (the average AUC's 95 % interval over proteins,
    :func:`~iclr26_common.effects.mean_interval`; ``None`` under 2) and ``interval_n``.
    """
    out = _out_folder(out_dir, overwrite, resume)
    rows = read_clinical_reference(reference)
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
    per_protein: dict[str, float] = {}
    summary_rows = []
    with out:
        for assay in progress(assays, description="proteins", quiet=quiet):
            labels = ["Pathogenic" if bad else "Benign" for bad in assay.pathogenic]
            scores = _scores(
                model, out, assay.name, assay.wt, assay.mutants, "DMS_bin_score", labels
            )
            auc = clinical_auc(scores, assay.pathogenic)
            per_protein[assay.name] = auc
            n_path = int(assay.pathogenic.sum())
            interval = auc_interval(scores, assay.pathogenic, n_resamples=n_resamples)
            summary_rows.append(
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
        header = [
            "DMS_id",
            "n",
            "n_pathogenic",
            "n_benign",
            "skipped",
            "auc",
            *interval_columns("auc", None, 0, fmt=".3f"),
        ]
        write_text(out.path / "summary.csv", csv_text(header, summary_rows))
        from iclr26_common.effects import mean_interval

        defined = [v for v in per_protein.values() if not np.isnan(v)]
        try:
            average = mean_interval(defined, seed=INTERVAL_SEED, units="proteins", binary=False)
        except ValueError:  # fewer than 2 proteins with both labels
            average = None
        result = {
            **clinical_summary(list(per_protein.values()), n_boot=n_boot),
            "per_protein": per_protein,
            "n_variants": sum(len(a.mutants) for a in assays),
            "interval": average,
            "interval_n": len(defined),
        }
        _write_summary_json(out.path / "summary.json", {"all": result}, "auc")
    return result
