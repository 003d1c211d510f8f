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
    DeletionAssay,
    ScisorFormatError,
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

__all__ = [
    "ID_COLUMNS",
    "csv_text",
    "score_clinical_reference",
    "score_reference",
    "table_columns",
    "variant_table",
]

#: Input columns that identify a variant (ProteinGym's ``mutant``): written first in every
#: score table, so the scores join on the user's ids, not only on the sequence.
ID_COLUMNS = ("mutant",)


def csv_text(header: Sequence[object], rows: Sequence[Sequence[object]]) -> str:
    """A CSV file's text (``\\n`` line ends): what :func:`~iclr26_common.outputs.write_text`
    writes atomically with mode 0644."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def table_columns(
    assay: DeletionAssay, scores: Sequence[str], source: str | Path
) -> tuple[list[str], list[str]]:
    """(the input columns in output order: ids first, then the file's order; the added
    columns ``n_deleted`` and ``scores``). An input column with an added column's name is a
    one-line error naming ``source``: checked before any work, never overwritten."""
    inputs = list(assay.columns) or ["mutated_sequence", "DMS_score"]
    ordered = [c for c in ID_COLUMNS if c in inputs] + [c for c in inputs if c not in ID_COLUMNS]
    added = ["n_deleted", *scores]
    clash = [c for c in added if c in inputs]
    if clash:
        raise ScisorFormatError(
            f"{source}: has column(s) {clash}, which the scores table adds; rename them"
        )
    return ordered, added


def variant_table(
    assay: DeletionAssay, scores: dict[str, Sequence[str]], source: str | Path
) -> tuple[list[str], list[list[object]]]:
    """Header and rows of a per-variant score table: every input column of ``assay`` as read
    (the id columns :data:`ID_COLUMNS` first, then the file's order), ``n_deleted``, then the
    ``scores`` columns (formatted text, one value per mutant). An input column with the name
    of an added one is a one-line error naming ``source`` (never overwritten)."""
    ordered, added = table_columns(assay, list(scores), source)
    raw = assay.rows or [
        {"mutated_sequence": m, "DMS_score": str(v)}
        for m, v in zip(assay.mutants, assay.scores, strict=True)
    ]
    rows = [
        [row.get(c) or "" for c in ordered] + [int(n), *(scores[c][i] for c in scores)]
        for i, (row, n) in enumerate(zip(raw, assay.n_deleted, strict=True))
    ]
    return [*ordered, *added], rows


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
        read = [(r["mutated_sequence"] or "").strip().upper() for r in rows]
        if read != list(mutants) or label not in rows[0]:
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
    assay: DeletionAssay | None = None,
    source: str | Path = "",
) -> np.ndarray:
    """One assay's path scores: read back from its CSV when a resumed run finished it, else
    scored and written at once: with a DMS ``assay``, every input column (ids first, see
    :func:`variant_table`), ``n_deleted``, ``scisor_path``, and its score-vs-DMS scatter
    ``<name>.png``; else ``mutated_sequence, <label>, n_deleted, scisor_path``. The scores come
    back as the CSV holds them (6 decimals)."""
    path = out.path / f"{name}.csv"
    plot = out.path / f"{name}.png"
    done = _finished_scores(path, mutants, label) if out.resumed else None
    if done is not None:
        scores = done
    else:
        scores = np.array([float(f"{s:.6f}") for s in score_path(model, wt, mutants)])
        if assay is None:
            header = ["mutated_sequence", label, "n_deleted", "scisor_path"]
            rows = [
                [seq, value, len(wt) - len(seq), f"{s:.6f}"]
                for seq, value, s in zip(mutants, values, scores, strict=True)
            ]
        else:
            header, rows = variant_table(
                assay, {"scisor_path": [f"{s:.6f}" for s in scores]}, source
            )
        write_text(path, csv_text(header, rows))
    if assay is not None and (done is None or not plot.is_file()):
        from bio_scisor.plots import scatter_png
        from iclr26_common.outputs import write_bytes

        write_bytes(plot, scatter_png(assay.scores, {"scisor_path": scores}, assay.n_deleted, name))
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
    on_nonstandard: str = "error",
) -> dict[str, dict[str, object]]:
    """Score each assay of ``reference`` (files in ``dms_dir``) with :func:`score_path`.

    Writes ``out_dir/<DMS_id>.csv`` (every column of the assay file, ids such as ``mutant``
    first, then n_deleted, scisor_path) and its scatter ``<DMS_id>.png`` as each assay finishes,
    then ``out_dir/summary.csv`` (one row per assay, its Spearman with a 95 % interval over its
    variants; ``skipped`` non-deletions, ``skipped_nonstandard`` rows with X/* with
    ``on_nonstandard="skip"``), ``out_dir/summary_splits.csv`` (all / single / multi: the
    printed Spearman, ProteinGym SE and interval over proteins) and ``out_dir/summary.json``. ``out_dir`` follows
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
    sources = [Path(dms_dir) / row["DMS_filename"] for row in rows]
    assays = [
        read_dms_indels(
            source,
            row["target_seq"],
            name=row["DMS_id"],
            coarse_selection_type=row["coarse_selection_type"],
            on_non_deletion=on_non_deletion,
            on_nonstandard=on_nonstandard,
        )
        for source, row in zip(sources, rows, strict=True)
    ]
    for source, assay in zip(sources, assays, strict=True):  # column clashes: before any work
        table_columns(assay, ["scisor_path"], source)
    source_of = {assay.name: source for source, assay in zip(sources, assays, strict=True)}
    per_split: dict[str, list[AssayScores]] = {"all": [], "single": [], "multi": []}
    summary_rows = []
    with out:
        for assay in progress(assays, description="assays", quiet=quiet):
            scores = _scores(
                model,
                out,
                assay.name,
                assay.wt,
                assay.mutants,
                "DMS_score",
                assay.scores,
                assay,
                source_of[assay.name],
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
                    assay.skipped_nonstandard,
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
            "skipped_nonstandard",
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
        _write_splits_csv(out.path / "summary_splits.csv", result)
        _write_summary_json(out.path / "summary.json", result, "spearman")
    return result


def _write_splits_csv(path: Path, result: dict[str, dict[str, object]]) -> None:
    """One row per split (all / single / multi): the Spearman and ProteinGym SE the command
    prints, the assays and proteins, and the 95 % interval over the proteins."""
    header = ["split", "spearman", "se", "n_assays", "n_proteins"]
    rows = []
    for split, values in result.items():
        interval = interval_columns("spearman", values["interval"], values["interval_n"], ".3f")
        if not rows:
            header += list(interval)
        rows.append(
            [
                split,
                f"{values['spearman']:.3f}",
                f"{values['se']:.3f}",
                values["n_assays"],
                values["n_proteins"],
                *interval.values(),
            ]
        )
    write_text(path, csv_text(header, rows))


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
    on_nonstandard: str = "error",
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
            on_nonstandard=on_nonstandard,
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
                    assay.skipped_nonstandard,
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
            "skipped_nonstandard",
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
