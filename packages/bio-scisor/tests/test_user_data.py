"""What a user's own data needs (issues 37 and 38), through ``main([...])`` in-process: score
tables that keep the input's columns (ids first), the printed split summary written, a
score-vs-DMS scatter, a multi-record ``--wt`` FASTA refused or chosen from with ``--wt-id``,
and ProteinGym's ``X`` / trailing ``*`` residues skipped with a count or refused in one line.
Each test fails on d9942d3 (its docstring says how)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bio_scisor.cli import main
from iclr26_common.testing import assert_one_line_error, run_main

PROG = "bio-scisor: error: "
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def user_assay(tmp_path: Path, synth_dir: Path) -> Path:
    """The synthetic assay as a user's file: a ``mutant`` id column (not first), the measured
    columns, and a free-text column, in the user's order."""
    rows = _rows(synth_dir / "SYNTH_deletions.csv")
    path = tmp_path / "user.csv"
    lines = ["mutated_sequence,DMS_score,mutant,DMS_score_bin,note"]
    for i, row in enumerate(rows):
        lines.append(
            f"{row['mutated_sequence']},{row['DMS_score']},del{i:03d},{row['DMS_score_bin']},n{i}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _score(dms: Path, wt: str, ckpt: Path, out: Path, *extra: str) -> list[str]:
    return ["score", "--dms", str(dms), "--wt", wt, "--ckpt", str(ckpt), "--out", str(out), *extra]


def test_score_keeps_every_input_column_ids_first_and_plots(
    tmp_path: Path, synth_dir: Path, user_assay: Path, tiny_ckpt: Path, capsys
) -> None:
    """On d9942d3 `score` wrote only mutated_sequence, DMS_score, n_deleted, scisor_path (the
    `mutant` ids and the user's other columns were dropped, so rows joined only on the
    sequence) and had no plot (`--plot` was an unknown option, exit 2)."""
    out, plot = tmp_path / "scores.csv", tmp_path / "scatter.png"
    wt = str(synth_dir / "wt.fasta")
    run = run_main(main, _score(user_assay, wt, tiny_ckpt, out, "--plot", str(plot)), capsys)
    assert run.code == 0, run.err
    with out.open(newline="") as handle:
        header = next(csv.reader(handle))
    assert header == [
        "mutant",
        "mutated_sequence",
        "DMS_score",
        "DMS_score_bin",
        "note",
        "n_deleted",
        "scisor_path",
    ]
    given, scored = _rows(user_assay), _rows(out)
    assert [r["mutant"] for r in scored] == [f"del{i:03d}" for i in range(len(given))]
    for row, src in zip(scored, given, strict=True):  # the user's values, as given
        assert {k: row[k] for k in src} == src
        assert float(row["scisor_path"]) <= 0
    assert plot.read_bytes()[:8] == PNG_MAGIC and plot.stat().st_size > 2000
    assert str(plot) in run.out
    # the plot is an output like --out: an existing one is refused before any work
    line = assert_one_line_error(
        main,
        _score(user_assay, wt, tiny_ckpt, tmp_path / "b.csv", "--plot", str(plot)),
        capsys,
        prog=PROG,
    )
    assert f"--plot {plot}: exists; pass --overwrite" in line
    assert not (tmp_path / "b.csv").exists()
    # an input column the scores would overwrite is refused, naming the file
    clash = tmp_path / "clash.csv"
    clash.write_text(user_assay.read_text().replace(",note\n", ",scisor_path\n", 1))
    line = assert_one_line_error(
        main, _score(clash, wt, tiny_ckpt, tmp_path / "c.csv"), capsys, prog=PROG
    )
    assert str(clash) in line and "'scisor_path'" in line
    assert not (tmp_path / "c.csv").exists()


def test_proteingym_writes_the_split_summary_plots_and_keeps_ids(
    tmp_path: Path, synth_dir: Path, user_assay: Path, tiny_ckpt: Path, capsys
) -> None:
    """On d9942d3 the all/single/multi Spearman ± SE were printed only (summary.csv has one
    row per assay, summary.json no SE table), the per-assay CSV dropped the `mutant` ids, and
    no plot was written."""
    (ref,) = _rows(synth_dir / "DMS_indels.csv")
    folder = tmp_path / "assays"
    folder.mkdir()
    (folder / "USER_1.csv").write_text(user_assay.read_text())
    reference = tmp_path / "DMS_indels.csv"
    reference.write_text(
        "DMS_id,DMS_filename,UniProt_ID,target_seq,coarse_selection_type\n"
        f"USER_1,USER_1.csv,P_USER,{ref['target_seq']},Activity\n"
    )
    out = tmp_path / "pg"
    args = ["proteingym", "--reference", str(reference), "--dms-dir", str(folder)]
    args += ["--ckpt", str(tiny_ckpt), "--out", str(out), "--n-resamples", "199", "--quiet"]
    run = run_main(main, args, capsys)
    assert run.code == 0, run.err
    splits = _rows(out / "summary_splits.csv")
    assert [s["split"] for s in splits] == ["all", "single", "multi"]
    printed = {line.split()[0]: line for line in run.out.splitlines() if "Spearman" in line}
    for split in splits:  # the numbers the command printed
        assert f"Spearman {float(split['spearman']):+.3f}" in printed[split["split"]]
        assert split["n_assays"] == "1" and split["n_proteins"] == "1"
        assert float(split["se"]) == 0.0  # one protein: ProteinGym's SE is 0 (not printed)
        assert split["spearman_ci_method"] == "none" and split["spearman_n"] == "1"
    (assay,) = _rows(out / "summary.csv")
    assert float(splits[0]["spearman"]) == pytest.approx(float(assay["spearman"]), abs=1e-3)
    scored = _rows(out / "USER_1.csv")
    assert list(scored[0])[:5] == [
        "mutant",
        "mutated_sequence",
        "DMS_score",
        "DMS_score_bin",
        "note",
    ]
    assert scored[0]["mutant"] == "del000" and "scisor_path" in scored[0]
    assert (out / "USER_1.png").read_bytes()[:8] == PNG_MAGIC


def test_wt_fasta_with_two_records_is_refused_or_chosen_with_wt_id(
    tmp_path: Path, synth_dir: Path, tiny_ckpt: Path, capsys
) -> None:
    """On d9942d3 a `--wt` FASTA with two records silently used the first (here: a decoy, so
    every variant was "not a deletion of the wild type"), and `--wt-id` was unknown."""
    ((_, wt),) = _read_fasta(synth_dir / "wt.fasta")
    fasta = tmp_path / "two.fasta"
    fasta.write_text(f">decoy\n{'M' * 30}\n>target description\n{wt}\n")
    dms = synth_dir / "SYNTH_deletions.csv"
    line = assert_one_line_error(
        main, _score(dms, str(fasta), tiny_ckpt, tmp_path / "a.csv"), capsys, prog=PROG
    )
    assert f"--wt {fasta}: 2 records" in line and "--wt-id" in line and "decoy, target" in line
    assert not (tmp_path / "a.csv").exists()
    line = assert_one_line_error(
        main,
        _score(dms, str(fasta), tiny_ckpt, tmp_path / "a.csv", "--wt-id", "nope"),
        capsys,
        prog=PROG,
    )
    assert "--wt-id nope: no such record" in line
    chosen, given = tmp_path / "chosen.csv", tmp_path / "given.csv"
    run = run_main(main, _score(dms, str(fasta), tiny_ckpt, chosen, "--wt-id", "target"), capsys)
    assert run.code == 0, run.err
    assert run_main(main, _score(dms, wt, tiny_ckpt, given), capsys).code == 0
    assert chosen.read_text() == given.read_text()  # the record chosen is the wild type used


def _read_fasta(path: Path) -> list[tuple[str, str]]:
    records: list[list[str]] = []
    for line in path.read_text().splitlines():
        if line.startswith(">"):
            records.append([line[1:], ""])
        elif records:
            records[-1][1] += line.strip()
    return [(h, s) for h, s in records]


def test_x_and_stop_residues_are_refused_in_one_line_or_skipped_and_counted(
    tmp_path: Path, synth_dir: Path, user_assay: Path, tiny_ckpt: Path, capsys
) -> None:
    """On d9942d3 a ProteinGym row with `X` or a trailing `*` was an error with no way past it
    (`--skip-nonstandard` was unknown, exit 2) and the message named no position or remedy."""
    lines = user_assay.read_text().splitlines()
    seq2 = lines[2].split(",")[0]
    seq4 = lines[4].split(",")[0]
    lines[2] = lines[2].replace(seq2, seq2[:3] + "X" + seq2[4:], 1)  # data line 2: file line 3
    lines[4] = lines[4].replace(seq4, seq4 + "*", 1)  # file line 5, trailing stop
    dms = tmp_path / "download.csv"
    dms.write_text("\n".join(lines) + "\n")
    wt = str(synth_dir / "wt.fasta")
    out = tmp_path / "scores.csv"
    line = assert_one_line_error(main, _score(dms, wt, tiny_ckpt, out), capsys, prog=PROG)
    assert f"{dms}: line 3, field mutated_sequence: character 'X' at position 4" in line
    assert "--skip-nonstandard" in line and not out.exists()

    run = run_main(main, _score(dms, wt, tiny_ckpt, out, "--skip-nonstandard"), capsys)
    assert run.code == 0, run.err
    assert "skipped 2 rows whose sequence holds a non-standard character" in run.out
    scored = _rows(out)
    assert len(scored) == len(lines) - 1 - 2
    assert {"del001", "del003"}.isdisjoint(r["mutant"] for r in scored)
    skipped = _rows(tmp_path / "scores.skipped.csv")  # the count, written: each row, its line
    assert [(r["line"], r["mutant"]) for r in skipped] == [("3", "del001"), ("5", "del003")]
    assert skipped[0]["reason"] == "non-standard character 'X' at 4"
    assert skipped[1]["reason"].startswith("non-standard character '*'")

    # proteingym: the count per assay in summary.csv, the total printed
    (ref,) = _rows(synth_dir / "DMS_indels.csv")
    reference = tmp_path / "DMS_indels.csv"
    reference.write_text(
        "DMS_id,DMS_filename,UniProt_ID,target_seq,coarse_selection_type\n"
        f"DL,download.csv,P_DL,{ref['target_seq']},Activity\n"
    )
    args = ["proteingym", "--reference", str(reference), "--dms-dir", str(tmp_path)]
    args += ["--ckpt", str(tiny_ckpt), "--n-resamples", "199", "--quiet"]
    line = assert_one_line_error(main, [*args, "--out", str(tmp_path / "pg0")], capsys, prog=PROG)
    assert "line 3" in line and "'X'" in line and not (tmp_path / "pg0").exists()
    run = run_main(main, [*args, "--out", str(tmp_path / "pg"), "--skip-nonstandard"], capsys)
    assert run.code == 0, run.err
    (assay,) = _rows(tmp_path / "pg" / "summary.csv")
    assert assay["skipped_nonstandard"] == "2" and int(assay["n"]) == len(scored)
    assert "skipped 2 rows whose sequence holds a non-standard character" in run.out
