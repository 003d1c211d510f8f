"""Readers and writers: FASTA / A2M / Stockholm (biopython SeqIO) and ProteinGym indel CSVs.

Every bad input raises :class:`ScisorFormatError` naming the file and the record, line or field.
Nothing is dropped silently (upstream keeps only the first 100 FASTA records and skips sequences
over 1000 residues; here a ``max_len`` that a sequence exceeds is an error).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bio_scisor.constants import AMINO_ACIDS
from iclr26_common.textio import input_file, read_text

__all__ = [
    "ClinicalAssay",
    "DeletionAssay",
    "ScisorFormatError",
    "check_sequence",
    "encode",
    "is_deletion_of",
    "read_clinical_indels",
    "read_clinical_reference",
    "read_dms_indels",
    "read_reference",
    "read_sequences",
    "write_dms_indels",
    "write_fasta",
]

_INDEX = {a: i for i, a in enumerate(AMINO_ACIDS)}
FORMATS = {
    ".fasta": "fasta",
    ".fa": "fasta",
    ".faa": "fasta",
    ".fas": "fasta",
    ".a2m": "a2m",
    ".a3m": "a2m",
    ".sto": "stockholm",
    ".stk": "stockholm",
    ".stockholm": "stockholm",
}
DMS_COLUMNS = ("mutated_sequence", "DMS_score")
REFERENCE_COLUMNS = ("DMS_id", "DMS_filename", "UniProt_ID", "target_seq", "coarse_selection_type")
# ProteinGym's clinical_indels.csv (one row per ClinVar protein): the fields relied on; the
# optional ``mutated_sequence_column`` names the sequence column of the variant file.
CLINICAL_REFERENCE_COLUMNS = ("DMS_id", "DMS_filename", "target_seq")
CLINICAL_LABEL_COLUMN = "DMS_bin_score"
CLINICAL_LABELS = {"pathogenic": True, "benign": False}


class ScisorFormatError(ValueError):
    """Bad input data; the message names the file and the record or field."""


def check_sequence(seq: str, where: str) -> str:
    """Return ``seq`` if it is a non-empty string of the 20 standard residues, else raise."""
    if not seq:
        raise ScisorFormatError(f"{where}: empty sequence")
    bad = sorted({c for c in seq if c not in _INDEX})
    if bad:
        raise ScisorFormatError(
            f"{where}: non-amino-acid letters {''.join(bad)!r} (allowed: {AMINO_ACIDS})"
        )
    return seq


def encode(seq: str, where: str = "sequence") -> np.ndarray:
    """Residue string -> int64 token array (after :func:`check_sequence`)."""
    check_sequence(seq, where)
    return np.fromiter((_INDEX[c] for c in seq), dtype=np.int64, count=len(seq))


def read_sequences(
    path: str | Path, fmt: str | None = None, max_len: int | None = None, header: bool = False
) -> list[tuple[str, str]]:
    """Unaligned ``(name, sequence)`` records of a FASTA, A2M/A3M or Stockholm file.

    ``name`` is the record id, or with ``header=True`` the whole header line (id and
    description, as upstream's shrink script keeps it).

    Alignment gaps (``-``, ``.``) are removed and insert-state lower case is upper-cased, so an
    MSA yields its unaligned members. ``fmt`` defaults to the file suffix. Raises
    :class:`ScisorFormatError` for an unknown format, a file with no records, an empty or
    non-amino-acid sequence, or one longer than ``max_len``.
    """
    from Bio import SeqIO

    path = input_file(path)
    fmt = fmt or FORMATS.get(path.suffix.lower())
    if fmt not in ("fasta", "a2m", "stockholm"):
        raise ScisorFormatError(
            f"{path}: unknown sequence format (suffix {path.suffix!r}); "
            f"use one of {sorted(FORMATS)} or pass fmt='fasta'|'a2m'|'stockholm'"
        )
    records: list[tuple[str, str]] = []
    try:
        parsed = list(SeqIO.parse(str(path), "fasta" if fmt == "a2m" else fmt))
    except ValueError as error:
        raise ScisorFormatError(f"{path}: not a valid {fmt} file ({error})") from None
    for number, record in enumerate(parsed, start=1):
        seq = str(record.seq).replace("-", "").replace(".", "").upper()
        where = f"{path}: record {number} ({record.id})"
        check_sequence(seq, where)
        if max_len is not None and len(seq) > max_len:
            raise ScisorFormatError(f"{where}: length {len(seq)} exceeds max_len={max_len}")
        name = record.id
        if header and record.description and record.description != "<unknown description>":
            name = record.description
        records.append((name, seq))
    if not records:
        raise ScisorFormatError(f"{path}: no {fmt} records")
    return records


def write_fasta(path: str | Path, records: Iterable[tuple[str, str]], width: int = 60) -> Path:
    """Write ``(name, sequence)`` records as FASTA (``width`` residues a line), atomically with
    mode 0644 (:func:`iclr26_common.outputs.write_text`)."""
    from iclr26_common.outputs import write_text

    lines = []
    for name, seq in records:
        lines.append(f">{name}\n")
        lines.extend(seq[i : i + width] + "\n" for i in range(0, len(seq), width))
    return write_text(path, "".join(lines))


def is_deletion_of(mutant: str, wt: str) -> bool:
    """True when ``mutant`` is ``wt`` with one or more residues removed (a proper subsequence)."""
    if len(mutant) >= len(wt):
        return False
    it = iter(wt)
    return all(c in it for c in mutant)


@dataclass
class DeletionAssay:
    """One ProteinGym indel assay restricted to deletions of its wild type."""

    name: str
    wt: str
    mutants: list[str]
    scores: np.ndarray  # (N,) DMS_score
    score_bin: np.ndarray | None = None  # (N,) DMS_score_bin when present
    coarse_selection_type: str = "unknown"
    skipped: int = 0  # rows that were not deletions (only with on_non_deletion="skip")
    #: rows whose sequence holds a non-standard character (X, a trailing *; only with
    #: on_nonstandard="skip")
    skipped_nonstandard: int = 0
    #: the input's header and its kept rows as read (one per mutant; ids such as ``mutant``
    #: included), so outputs keep every input column
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    #: the rows left out, as ``(line, reason, row)``: what the CLI writes beside its output
    skipped_rows: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    n_deleted: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.n_deleted = np.array([len(self.wt) - len(m) for m in self.mutants], dtype=np.int64)


def _float(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ScisorFormatError(f"{where}: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise ScisorFormatError(f"{where}: not a finite number: {text!r}")
    return value


def _read_csv(path: Path, required: Sequence[str]) -> tuple[list[str], list[tuple[str, dict]]]:
    """Header and ``(where, row)`` of every data row of a CSV file with a header line.

    One-line errors: a missing file, bytes that are not UTF-8 (naming the byte and its offset),
    a header lacking a ``required`` column. ``where`` is ``"FILE: line N"`` (the header is
    line 1), for the callers' field errors.
    """
    text = read_text(path, error=ScisorFormatError, gzip_suffix=False)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = list(reader.fieldnames or [])
    missing = [c for c in required if c not in columns]
    if missing:
        raise ScisorFormatError(f"{path}: missing column(s) {missing} (has {columns})")
    rows = [(f"{path}: line {line}", row) for line, row in enumerate(reader, start=2)]
    return columns, rows


def _check_on_non_deletion(on_non_deletion: str, name: str = "on_non_deletion") -> None:
    if on_non_deletion not in ("error", "skip"):
        raise ValueError(f"{name} must be 'error' or 'skip', got {on_non_deletion!r}")


def _first_nonstandard(seq: str) -> tuple[int, str] | None:
    """``(1-based position, character)`` of the first character of ``seq`` that is not one of
    the 20 standard residues (ProteinGym's ``X``, a trailing ``*``), or ``None``."""
    for position, char in enumerate(seq, start=1):
        if char not in _INDEX:
            return position, char
    return None


def _keep_deletion(seq: str, wt: str, on_non_deletion: str, where: str) -> bool:
    """True when ``seq`` is a deletion of ``wt``; otherwise False (``"skip"``) or a one-line
    error naming ``where`` (``"error"``)."""
    if is_deletion_of(seq, wt):
        return True
    if on_non_deletion == "skip":
        return False
    raise ScisorFormatError(
        f"{where}: not a deletion of the wild type (length {len(seq)} vs {len(wt)})"
    )


def read_dms_indels(
    path: str | Path,
    wt: str,
    name: str | None = None,
    coarse_selection_type: str = "unknown",
    on_non_deletion: str = "error",
    on_nonstandard: str = "error",
) -> DeletionAssay:
    """Read a ProteinGym indel CSV (``mutated_sequence``, ``DMS_score``[, ``DMS_score_bin``]).

    Every ``mutated_sequence`` must be a deletion of ``wt``; otherwise raise (default) or skip and
    count it (``on_non_deletion="skip"``; ProteinGym indel assays also hold insertions). A
    sequence holding a character other than the 20 standard residues (real downloads carry ``X``
    and a trailing ``*``) raises naming the file, line and character (default), or is skipped
    and counted (``on_nonstandard="skip"``, ``skipped_nonstandard``). Every input column is kept
    (``columns``, ``rows``: the kept rows as read), and the skipped rows are listed
    (``skipped_rows``).
    """
    path = Path(path)
    _check_on_non_deletion(on_non_deletion)
    _check_on_non_deletion(on_nonstandard, "on_nonstandard")
    check_sequence(wt, f"{path}: wild type")
    columns, rows = _read_csv(path, DMS_COLUMNS)
    has_bin = "DMS_score_bin" in columns
    mutants, scores, bins, skipped, nonstandard = [], [], [], 0, 0
    kept: list[dict[str, str]] = []
    left_out: list[tuple[int, str, dict[str, str]]] = []
    for line, (where, row) in enumerate(rows, start=2):
        seq = (row["mutated_sequence"] or "").strip().upper()
        bad = _first_nonstandard(seq)
        if bad is not None:
            position, char = bad
            if on_nonstandard == "skip":
                nonstandard += 1
                left_out.append((line, f"non-standard character {char!r} at {position}", row))
                continue
            raise ScisorFormatError(
                f"{where}, field mutated_sequence: character {char!r} at position {position} "
                f"is not one of the 20 standard residues ({AMINO_ACIDS}); --skip-nonstandard "
                "skips and counts such rows"
            )
        check_sequence(seq, f"{where}, field mutated_sequence")
        if not _keep_deletion(seq, wt, on_non_deletion, f"{where}, field mutated_sequence"):
            skipped += 1
            left_out.append((line, "not a deletion of the wild type", row))
            continue
        mutants.append(seq)
        kept.append(row)
        scores.append(_float(row["DMS_score"] or "", f"{where}, field DMS_score"))
        if has_bin:
            bins.append(_float(row["DMS_score_bin"] or "", f"{where}, field DMS_score_bin"))
    if not mutants:
        raise ScisorFormatError(f"{path}: no deletion variants")
    return DeletionAssay(
        name=name or path.stem,
        wt=wt,
        mutants=mutants,
        scores=np.array(scores, dtype=np.float64),
        score_bin=np.array(bins, dtype=np.float64) if has_bin else None,
        coarse_selection_type=coarse_selection_type,
        skipped=skipped,
        skipped_nonstandard=nonstandard,
        columns=columns,
        rows=kept,
        skipped_rows=left_out,
    )


def write_dms_indels(
    path: str | Path, mutants: Sequence[str], scores: Sequence[float], bin_threshold: float
) -> Path:
    """Write a ProteinGym-format indel CSV (no ``mutant`` column, as upstream for indels),
    atomically with mode 0644."""
    from iclr26_common.outputs import write_text

    lines = ["mutated_sequence,DMS_score,DMS_score_bin\n"]
    for seq, score in zip(mutants, scores, strict=True):
        lines.append(f"{seq},{score:.6f},{int(score >= bin_threshold)}\n")
    return write_text(path, "".join(lines))


def read_reference(path: str | Path) -> list[dict[str, str]]:
    """Rows of a ProteinGym ``DMS_indels.csv`` reference file (validated columns and sequences)."""
    path = Path(path)
    rows = []
    for where, row in _read_csv(path, REFERENCE_COLUMNS)[1]:
        seq = (row["target_seq"] or "").strip().upper()
        check_sequence(seq, f"{where}, field target_seq")
        rows.append({**row, "target_seq": seq})
    if not rows:
        raise ScisorFormatError(f"{path}: no reference rows")
    return rows


def read_clinical_reference(path: str | Path) -> list[dict[str, str]]:
    """Rows of ProteinGym's ``clinical_indels.csv`` (``DMS_id``, ``DMS_filename``, ``target_seq``
    and, when present, ``mutated_sequence_column``), every field relied on checked: ids non-empty
    and unique, file names non-empty and plain (no folder part), valid target sequences."""
    path = Path(path)
    rows, seen = [], set()
    for where, row in _read_csv(path, CLINICAL_REFERENCE_COLUMNS)[1]:
        dms_id = (row["DMS_id"] or "").strip()
        if not dms_id:
            raise ScisorFormatError(f"{where}, field DMS_id: empty")
        if dms_id in seen:
            raise ScisorFormatError(f"{where}, field DMS_id: {dms_id!r} listed twice")
        seen.add(dms_id)
        filename = (row["DMS_filename"] or "").strip()
        if not filename or Path(filename).name != filename or filename in (".", ".."):
            raise ScisorFormatError(
                f"{where}, field DMS_filename: need a plain file name, got {filename!r}"
            )
        seq = (row["target_seq"] or "").strip().upper()
        check_sequence(seq, f"{where}, field target_seq")
        column = (row.get("mutated_sequence_column") or "mutated_sequence").strip()
        if not column:
            raise ScisorFormatError(f"{where}, field mutated_sequence_column: empty")
        rows.append(
            {
                **row,
                "DMS_id": dms_id,
                "DMS_filename": filename,
                "target_seq": seq,
                "mutated_sequence_column": column,
            }
        )
    if not rows:
        raise ScisorFormatError(f"{path}: no reference rows")
    return rows


@dataclass
class ClinicalAssay:
    """The deletion variants of one ProteinGym clinical protein with their ClinVar labels."""

    name: str
    wt: str
    mutants: list[str]
    pathogenic: np.ndarray  # (N,) bool, from DMS_bin_score
    skipped: int = 0  # rows that were not deletions (only with on_non_deletion="skip")
    skipped_nonstandard: int = 0  # rows with X, * ... (only with on_nonstandard="skip")
    n_deleted: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.n_deleted = np.array([len(self.wt) - len(m) for m in self.mutants], dtype=np.int64)


def read_clinical_indels(
    path: str | Path,
    wt: str,
    name: str | None = None,
    sequence_column: str = "mutated_sequence",
    on_non_deletion: str = "error",
    on_nonstandard: str = "error",
) -> ClinicalAssay:
    """Read one ProteinGym clinical indel file: ``sequence_column`` (the reference's
    ``mutated_sequence_column``) and ``DMS_bin_score`` (``Pathogenic`` or ``Benign``). Rows that
    are not deletions of ``wt`` raise (default) or are skipped and counted (``"skip"``); rows
    whose sequence holds ``X``, ``*`` or another non-standard character likewise
    (``on_nonstandard``, as :func:`read_dms_indels`)."""
    path = Path(path)
    _check_on_non_deletion(on_non_deletion)
    _check_on_non_deletion(on_nonstandard, "on_nonstandard")
    check_sequence(wt, f"{path}: wild type")
    mutants, labels, skipped, nonstandard = [], [], 0, 0
    for where, row in _read_csv(path, (sequence_column, CLINICAL_LABEL_COLUMN))[1]:
        seq = (row[sequence_column] or "").strip().upper()
        bad = _first_nonstandard(seq)
        if bad is not None:
            if on_nonstandard == "skip":
                nonstandard += 1
                continue
            raise ScisorFormatError(
                f"{where}, field {sequence_column}: character {bad[1]!r} at position {bad[0]} "
                f"is not one of the 20 standard residues ({AMINO_ACIDS}); --skip-nonstandard "
                "skips and counts such rows"
            )
        check_sequence(seq, f"{where}, field {sequence_column}")
        label = (row[CLINICAL_LABEL_COLUMN] or "").strip()
        if label.lower() not in CLINICAL_LABELS:
            raise ScisorFormatError(
                f"{where}, field {CLINICAL_LABEL_COLUMN}: expected 'Pathogenic' or 'Benign', "
                f"got {label!r}"
            )
        if not _keep_deletion(seq, wt, on_non_deletion, f"{where}, field {sequence_column}"):
            skipped += 1
            continue
        mutants.append(seq)
        labels.append(CLINICAL_LABELS[label.lower()])
    if not mutants:
        raise ScisorFormatError(f"{path}: no deletion variants")
    return ClinicalAssay(
        name=name or path.stem,
        wt=wt,
        mutants=mutants,
        pathogenic=np.array(labels, dtype=bool),
        skipped=skipped,
        skipped_nonstandard=nonstandard,
    )
