from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bio_scisor.io import (
    ScisorFormatError,
    is_deletion_of,
    read_clinical_reference,
    read_dms_indels,
    read_reference,
    read_sequences,
    write_fasta,
)

WT = "MKTAYIAKQR"


def test_fasta_a2m_and_stockholm_give_unaligned_records(tmp_path: Path) -> None:
    write_fasta(tmp_path / "x.fasta", [("a", "ACDE"), ("b", "KLMN")])
    (tmp_path / "x.a2m").write_text(">a\nAC-de\n>b\nKL.MN\n")
    (tmp_path / "x.sto").write_text("# STOCKHOLM 1.0\na ACD-E\nb AC-KE\n//\n")
    assert read_sequences(tmp_path / "x.fasta") == [("a", "ACDE"), ("b", "KLMN")]
    assert read_sequences(tmp_path / "x.a2m") == [("a", "ACDE"), ("b", "KLMN")]
    assert [s for _, s in read_sequences(tmp_path / "x.sto")] == ["ACDE", "ACKE"]


def test_more_than_100_records_and_long_sequences_are_kept(tmp_path: Path) -> None:
    records = [(f"s{i}", "A" * (1200 if i == 0 else 5)) for i in range(150)]
    write_fasta(tmp_path / "many.fasta", records)
    assert len(read_sequences(tmp_path / "many.fasta")) == 150  # upstream kept 100, dropped >1000
    with pytest.raises(ScisorFormatError, match=r"record 1 \(s0\): length 1200 exceeds max_len"):
        read_sequences(tmp_path / "many.fasta", max_len=1000)


@pytest.mark.parametrize(
    ("text", "match"),
    [(">a\nACDB\n", "non-amino-acid letters 'B'"), (">a\n\n>b\nAC\n", "record 1 .*empty")],
)
def test_bad_sequences_name_file_and_record(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.fasta"
    path.write_text(text)
    with pytest.raises(ScisorFormatError, match=match) as info:
        read_sequences(path)
    assert "bad.fasta" in str(info.value)


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text(">a\nAC\n")
    with pytest.raises(ScisorFormatError, match="unknown sequence format"):
        read_sequences(tmp_path / "x.txt")
    with pytest.raises(FileNotFoundError):
        read_sequences(tmp_path / "none.fasta")


def _csv(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "assay.csv"
    path.write_text(body)
    return path


def test_read_dms_indels(tmp_path: Path) -> None:
    path = _csv(
        tmp_path, "mutated_sequence,DMS_score,DMS_score_bin\nMKTAYIAKR,0.5,1\nMKAYIQR,-1.0,0\n"
    )
    assay = read_dms_indels(path, WT, coarse_selection_type="Activity")
    assert assay.mutants == ["MKTAYIAKR", "MKAYIQR"]
    np.testing.assert_array_equal(assay.n_deleted, [1, 3])
    np.testing.assert_array_equal(assay.score_bin, [1, 0])


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("mutated_sequence,score\nMKTAYIAKR,1\n", r"missing column\(s\) \['DMS_score'\]"),
        ("mutated_sequence,DMS_score\nMKTAYIAKR,abc\n", "line 2, field DMS_score: not a number"),
        ("mutated_sequence,DMS_score\nMKTAYIAKR,nan\n", "not a finite number"),
        (
            "mutated_sequence,DMS_score\nMKTAYIAKQRW,1\n",
            "line 2, field mutated_sequence: not a del",
        ),
        (
            "mutated_sequence,DMS_score\nMKTAYIAKX,1\n",
            "line 2, field mutated_sequence: character 'X' at position 9",
        ),
        ("mutated_sequence,DMS_score\n,1\n", "line 2, field mutated_sequence: empty"),
        ("mutated_sequence,DMS_score\n", "no deletion variants"),
    ],
)
def test_bad_dms_rows(tmp_path: Path, body: str, match: str) -> None:
    with pytest.raises(ScisorFormatError, match=match):
        read_dms_indels(_csv(tmp_path, body), WT)


def test_every_csv_reader_names_a_non_utf8_byte(tmp_path: Path) -> None:
    """Issue 36: the CSV readers opened files without an encoding (a UnicodeDecodeError
    traceback); now one line naming the file, the byte and its offset."""
    path = tmp_path / "latin1.csv"
    path.write_bytes("mutated_sequence,DMS_score\nMKTAYIAKR,0.5\n# caf\u00e9\n".encode("latin-1"))
    for read in (lambda p: read_dms_indels(p, WT), read_reference, read_clinical_reference):
        with pytest.raises(ScisorFormatError) as info:
            read(path)
        assert str(info.value) == (
            f"{path}: not UTF-8 text (byte 0xe9 at offset 46); save it as UTF-8"
        )


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffmutated_sequence,DMS_score\nMKTAYIAKR,0.5\n".encode())
    assert read_dms_indels(path, WT).mutants == ["MKTAYIAKR"]


def test_non_deletions_can_be_skipped_and_counted(tmp_path: Path) -> None:
    path = _csv(tmp_path, "mutated_sequence,DMS_score\nMKTAYIAKQRW,1\nMKTAYIAK,2\n")
    assay = read_dms_indels(path, WT, on_non_deletion="skip")
    assert assay.mutants == ["MKTAYIAK"] and assay.skipped == 1


def test_reference_file(tmp_path: Path) -> None:
    path = tmp_path / "DMS_indels.csv"
    path.write_text(
        "DMS_id,DMS_filename,UniProt_ID,target_seq,coarse_selection_type\n"
        "A,A.csv,P1_HUMAN,mkta,Activity\n"
    )
    assert read_reference(path)[0]["target_seq"] == "MKTA"
    path.write_text("DMS_id,target_seq\nA,MKTA\n")
    with pytest.raises(ScisorFormatError, match="DMS_filename"):
        read_reference(path)
    # ProteinGym's aggregation needs the protein of each assay
    path.write_text("DMS_id,DMS_filename,target_seq,coarse_selection_type\nA,A.csv,MKTA,Activity\n")
    with pytest.raises(ScisorFormatError, match="UniProt_ID"):
        read_reference(path)


def test_is_deletion_of() -> None:
    assert is_deletion_of("ACE", "ACDE") and not is_deletion_of("ACDE", "ACDE")
    assert not is_deletion_of("AEC", "ACDE")
