"""ProteinGym's clinical indel set through the same scorer and CLI as the DMS indels.

The files are written here in the published layout: the reference's header is the one of
``reference_files/clinical_indels.csv`` (OATML-Markslab/ProteinGym at f35cfd4); the per-protein
variant files carry ``mutated_sequence`` and ``DMS_bin_score`` (Pathogenic / Benign), the columns
ProteinGym's clinical files use (its clinical baselines read the first and write the second).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from bio_scisor.cli import main
from bio_scisor.io import ScisorFormatError, read_clinical_indels, read_clinical_reference
from bio_scisor.metrics import clinical_auc, clinical_summary

from .conftest import cli_args

HEADER = (
    "DMS_id,DMS_filename,target_seq,mutated_sequence_column,MSA_start,MSA_end,MSA_filename,"
    "weight_file_name,dataset"
)


def write_reference(path: Path, proteins: dict[str, str]) -> Path:
    lines = [HEADER] + [
        f"{pid},{pid}.csv,{wt},mutated_sequence,1.0,{float(len(wt))},{pid}.a2m,{pid}.npy,ClinVar"
        for pid, wt in proteins.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_variants(path: Path, pid: str, wt: str, rows: list[tuple[str, str]]) -> Path:
    """One clinical protein file: index column, protein, protein_sequence, mutated_sequence,
    DMS_bin_score."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["", "protein", "protein_sequence", "mutated_sequence", "DMS_bin_score"])
        for i, (seq, label) in enumerate(rows):
            writer.writerow([i, pid, wt, seq, label])
    return path


WT = "MKTAYIAKQR"


def test_reader_in_the_published_layout(tmp_path: Path) -> None:
    ref = write_reference(tmp_path / "clinical_indels.csv", {"NP_000007.1": WT.lower()})
    (row,) = read_clinical_reference(ref)
    assert row["target_seq"] == WT and row["mutated_sequence_column"] == "mutated_sequence"
    rows = [
        ("MKTYIAKQR", "Pathogenic"),
        ("MKTAYIAKR", "Benign"),
        ("MKTAAYIAKQR", "Benign"),
        ("MKTAYIAKQ", "benign"),
    ]
    path = write_variants(tmp_path / "NP_000007.1.csv", "NP_000007.1", WT, rows)
    with pytest.raises(ScisorFormatError, match=r"line 4, field mutated_sequence: not a deletion"):
        read_clinical_indels(path, WT)
    assay = read_clinical_indels(path, WT, on_non_deletion="skip")
    assert assay.skipped == 1 and assay.mutants == ["MKTYIAKQR", "MKTAYIAKR", "MKTAYIAKQ"]
    assert assay.pathogenic.tolist() == [True, False, False]
    assert assay.n_deleted.tolist() == [1, 1, 1]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("DMS_id,DMS_filename\nA,A.csv\n", "missing column(s) ['target_seq']"),
        (HEADER + "\n,A.csv,MKTA,mutated_sequence,1,4,a,a,ClinVar\n", "field DMS_id: empty"),
        (
            HEADER + "\nA,A.csv,MKTA,mutated_sequence,1,4,a,a,ClinVar\n"
            "A,B.csv,MKTA,mutated_sequence,1,4,a,a,ClinVar\n",
            "line 3, field DMS_id",
        ),
        (HEADER + "\nA,../A.csv,MKTA,mutated_sequence,1,4,a,a,ClinVar\n", "field DMS_filename"),
        (HEADER + "\nA,A.csv,MK1A,mutated_sequence,1,4,a,a,ClinVar\n", "field target_seq"),
        (HEADER + "\n", "no reference rows"),
    ],
)
def test_reference_errors_name_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "clinical_indels.csv"
    path.write_text(text)
    with pytest.raises(ScisorFormatError) as info:
        read_clinical_reference(path)
    message = str(info.value)
    assert str(path) in message and field in message and "\n" not in message


@pytest.mark.parametrize(
    ("rows", "column", "field"),
    [
        (
            [("MKTYIAKQR", "Likely pathogenic")],
            "mutated_sequence",
            "line 2, field DMS_bin_score: expected 'Pathogenic' or 'Benign'",
        ),
        ([("MKTYIAKQR", "")], "mutated_sequence", "field DMS_bin_score"),
        ([("MKT*YIAKQR", "Benign")], "mutated_sequence", "line 2, field mutated_sequence"),
        ([("MKTYIAKQR", "Benign")], "sequence", "missing column(s) ['sequence']"),
    ],
)
def test_variant_file_errors_name_file_and_field(
    tmp_path: Path, rows: list, column: str, field: str
) -> None:
    path = write_variants(tmp_path / "P.csv", "P", WT, rows)
    with pytest.raises(ScisorFormatError) as info:
        read_clinical_indels(path, WT, sequence_column=column)
    message = str(info.value)
    assert str(path) in message and field in message and "\n" not in message
    text = path.read_text().replace("DMS_bin_score", "DMS_score")  # a DMS file is not clinical
    path.write_text(text)
    with pytest.raises(ScisorFormatError, match=r"missing column\(s\).*DMS_bin_score"):
        read_clinical_indels(path, WT, sequence_column=column)


def test_auc_by_hand() -> None:
    # benign {3, 2} vs pathogenic {2, 1}: pairs 1 + 1 + 1/2 + 1 = 3.5 of 4
    assert clinical_auc(np.array([3.0, 2.0, 2.0, 1.0]), np.array([0, 1, 0, 1], bool)) == 0.875
    assert clinical_auc(np.array([1.0, 2.0]), np.array([0, 1], bool)) == 0.0
    assert np.isnan(clinical_auc(np.array([1.0, 2.0]), np.array([1, 1], bool)))
    summary = clinical_summary([0.5, float("nan"), 1.0], n_boot=200)
    assert summary["auc"] == 0.75 and summary["n_proteins"] == 2 and summary["se"] > 0


def _deletions(wt: str, n: int) -> list[str]:
    return [wt[:i] + wt[i + 1 :] for i in range(0, len(wt), max(1, len(wt) // n))][:n]


def test_clinical_set_through_the_cli_with_planted_labels(
    tmp_path: Path, family, tiny_module, tiny_ckpt, capsys: pytest.CaptureFixture
) -> None:
    """Labels planted from the model's own path scores: the lowest-scored half pathogenic gives
    AUC 1 per protein, the reverse gives 0 (the score's direction is 'higher = fitter')."""
    from bio_scisor.scoring import score_path

    wt = family.wt
    mutants = _deletions(wt, 8)
    scores = score_path(tiny_module.denoiser, wt, mutants)
    order = np.argsort(scores)
    low = set(order[: len(order) // 2].tolist())
    for planted, expected in (("low", 1.0), ("high", 0.0)):
        root = tmp_path / planted
        root.mkdir()
        ref = write_reference(root / "clinical_indels.csv", {"NP_1.1": wt, "NP_2.1": wt})
        for pid in ("NP_1.1", "NP_2.1"):
            rows = [
                (m, "Pathogenic" if (i in low) == (planted == "low") else "Benign")
                for i, m in enumerate(mutants)
            ]
            rows.append((wt + "A", "Benign"))  # an insertion: skipped
            write_variants(root / f"{pid}.csv", pid, wt, rows)
        out = root / "scores"
        args = cli_args(
            "proteingym",
            benchmark="clinical",
            reference=ref,
            dms_dir=root,
            ckpt=tiny_ckpt,
            out=out,
            skip_non_deletions=True,
        )
        assert main(args) == 0
        printed = capsys.readouterr().out
        assert f"clinical AUC {expected:.3f}" in printed and "2 proteins" in printed
        summary = list(csv.DictReader((out / "summary.csv").open()))
        assert [r["DMS_id"] for r in summary] == ["NP_1.1", "NP_2.1"]
        assert all(float(r["auc"]) == expected and r["skipped"] == "1" for r in summary)
        assert all(int(r["n_pathogenic"]) == len(low) for r in summary)
        # planted: both proteins at the same AUC, so the average's interval has zero width and
        # is exact; 8 variants per protein are too few for a per-protein interval
        assert "95 % (exact, n=2 proteins)" in printed
        assert all(r["auc_ci_method"] == "none" and r["auc_n"] == "8" for r in summary)
        average = json.loads((out / "summary.json").read_text())["all"]["auc_interval"]
        assert average["method"] == "exact" and average["low"] == average["high"] == expected
        per = list(csv.DictReader((out / "NP_1.1.csv").open()))
        assert [r["mutated_sequence"] for r in per] == mutants


def test_clinical_cli_errors_are_one_line(
    tmp_path: Path, family, tiny_ckpt, capsys: pytest.CaptureFixture
) -> None:
    from iclr26_common.testing import assert_one_line_error

    wt = family.wt
    ref = write_reference(tmp_path / "clinical_indels.csv", {"NP_1.1": wt})
    write_variants(tmp_path / "NP_1.1.csv", "NP_1.1", wt, [(wt[1:], "Uncertain")])
    args = cli_args(
        "proteingym",
        benchmark="clinical",
        reference=ref,
        dms_dir=tmp_path,
        ckpt=tiny_ckpt,
        out=tmp_path / "o",
    )
    line = assert_one_line_error(main, args, capsys, prog="bio-scisor: error: ")
    assert "NP_1.1.csv" in line and "DMS_bin_score" in line
    assert not (tmp_path / "o").exists()  # every file is checked before anything is written
