"""The promises every command keeps (issue 36), through ``main([...])`` in-process: outputs
checked before any work, Ctrl-C as one line with the finished assays kept and ``--resume``,
progress with ``--quiet``, a checkpoint ``fit --config tiny`` leaves for ``test``, ``--wt``
paths, finite numbers, 0644 files, and the package's own exports. Each test names what it did
on 11b2942 (before the commands moved onto :mod:`iclr26_common.outputs`)."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

import bio_scisor
import bio_scisor.proteingym
from bio_scisor.cli import main
from iclr26_common.outputs import PARTIAL_MARKER
from iclr26_common.testing import (
    assert_light_package,
    assert_one_line_error,
    nonblank_lines,
    run_main,
    shipped_configs,
)

from .conftest import cli_args

PROG = "bio-scisor: error: "


@pytest.fixture
def two_assays(tmp_path: Path, synth_dir: Path) -> Path:
    """A DMS_indels.csv reference of two assays (the synthetic one under two ids)."""
    folder = tmp_path / "two"
    folder.mkdir()
    (row,) = list(csv.DictReader((synth_dir / "DMS_indels.csv").open()))
    lines = ["DMS_id,DMS_filename,UniProt_ID,target_seq,coarse_selection_type"]
    for name in ("A_first", "B_second"):
        shutil.copy(synth_dir / "SYNTH_deletions.csv", folder / f"{name}.csv")
        lines.append(f"{name},{name}.csv,P_{name},{row['target_seq']},Activity")
    (folder / "DMS_indels.csv").write_text("\n".join(lines) + "\n")
    return folder


def _proteingym(ref: Path, ckpt: Path, out: Path, *extra: str) -> list[str]:
    return [
        "proteingym",
        "--reference",
        str(ref / "DMS_indels.csv"),
        "--dms-dir",
        str(ref),
        "--ckpt",
        str(ckpt),
        "--out",
        str(out),
        "--n-resamples",
        "199",
        *extra,
    ]


def test_outputs_are_checked_before_anything_is_read(
    tmp_path: Path, tiny_ckpt: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 `proteingym` read the reference and loaded the model before it looked at
    --out (a missing reference was the error), and a folder given as `score --out` was "exists
    (pass --overwrite ...)"; now the output is checked first, one line naming the option."""
    missing = tmp_path / "nothing_here"
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x\n")
    line = assert_one_line_error(
        main, _proteingym(missing, missing / "no.ckpt", a_file), capsys, prog=PROG
    )
    assert f"--out {a_file}: exists and is a file; give a folder" in line
    score = ["score", "--dms", str(missing / "d.csv"), "--wt", "MKTAY", "--ckpt", str(tiny_ckpt)]
    line = assert_one_line_error(main, [*score, "--out", str(tmp_path)], capsys, prog=PROG)
    assert f"--out {tmp_path}: is a folder; give a file name" in line
    line = assert_one_line_error(main, [*score, "--out", str(a_file)], capsys, prog=PROG)
    assert "exists; pass --overwrite to replace it" in line
    shrink = ["shrink", "--fasta", str(missing / "x.fasta"), "--pct", "10", "--ckpt", "no.ckpt"]
    line = assert_one_line_error(main, [*shrink, "--out", str(a_file)], capsys, prog=PROG)
    assert f"--out {a_file}: exists" in line
    # synth: a folder holding earlier results is refused unless --overwrite; nothing is left by
    # a refused run
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "old.txt").write_text("old\n")
    line = assert_one_line_error(main, ["synth", "--out", str(taken)], capsys, prog=PROG)
    assert "holds earlier results; pass --overwrite" in line
    assert sorted(p.name for p in taken.iterdir()) == ["old.txt"]
    small = ["--n", "20", "--n-multi", "2"]
    assert run_main(main, ["synth", "--out", str(taken), *small, "--overwrite"], capsys).code == 0
    assert (taken / "wt.fasta").is_file() and not (taken / PARTIAL_MARKER).exists()
    assert not missing.exists()


def test_proteingym_ctrl_c_keeps_finished_assays_and_resume_skips_them(
    tmp_path: Path,
    two_assays: Path,
    tiny_ckpt: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """On 11b2942 Ctrl-C in `proteingym` was a KeyboardInterrupt traceback, the folder looked
    like any other, and the rerun was refused ("exists; give a new output folder") with the
    finished assay lost. Now: one line, exit 130, the folder marked partial with the first
    assay's CSV in it; `--resume` scores only the second and gives what an uninterrupted run
    gives."""
    real = bio_scisor.proteingym.score_path
    calls: list[int] = []

    def interrupted(model, wt, mutants):
        calls.append(len(mutants))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(model, wt, mutants)

    out = tmp_path / "pg"
    monkeypatch.setattr(bio_scisor.proteingym, "score_path", interrupted)
    run = run_main(main, _proteingym(two_assays, tiny_ckpt, out, "--quiet"), capsys)
    assert run.code == 130 and "Traceback" not in run.err
    assert nonblank_lines(run.err) == ["bio-scisor: interrupted"]
    assert (out / PARTIAL_MARKER).is_file() and (out / "A_first.csv").is_file()
    assert not (out / "B_second.csv").exists() and not (out / "summary.csv").exists()

    line = assert_one_line_error(
        main, _proteingym(two_assays, tiny_ckpt, out, "--quiet"), capsys, prog=PROG
    )
    assert "partial results of an interrupted run; pass --resume" in line

    calls.clear()
    monkeypatch.setattr(
        bio_scisor.proteingym, "score_path", lambda *a: (calls.append(1), real(*a))[1]
    )
    run = run_main(main, _proteingym(two_assays, tiny_ckpt, out, "--quiet", "--resume"), capsys)
    assert run.code == 0, run.err
    assert len(calls) == 1  # the finished assay was read back, not scored again
    assert not (out / PARTIAL_MARKER).exists()
    fresh = tmp_path / "fresh"
    assert run_main(main, _proteingym(two_assays, tiny_ckpt, fresh, "--quiet"), capsys).code == 0
    for name in ("summary.csv", "summary.json", "A_first.csv", "B_second.csv"):
        assert (out / name).read_text() == (fresh / name).read_text(), name
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["DMS_id"] for r in rows] == ["A_first", "B_second"]
    assert set(json.loads((out / "summary.json").read_text())) == {"all", "single", "multi"}
    # a complete folder: --resume has nothing to resume, a plain rerun is refused
    line = assert_one_line_error(
        main, _proteingym(two_assays, tiny_ckpt, out, "--resume"), capsys, prog=PROG
    )
    assert "holds complete results, nothing to resume" in line


def test_progress_over_the_assays_and_quiet(
    tmp_path: Path, two_assays: Path, tiny_ckpt: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 `proteingym` said nothing while it scored, and `--quiet` was an unknown
    option (exit 2)."""
    run = run_main(main, _proteingym(two_assays, tiny_ckpt, tmp_path / "a"), capsys)
    assert run.code == 0 and "assays: 2/2" in run.err, run.err
    run = run_main(main, _proteingym(two_assays, tiny_ckpt, tmp_path / "b", "--quiet"), capsys)
    assert run.code == 0 and "assays:" not in run.err and run.err.strip() == "", run.err


def test_score_shows_progress_and_quiet_turns_it_off(
    tmp_path: Path, synth_dir: Path, tiny_ckpt: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 43a8cc5 `score` said nothing while it scored (minutes on a large assay with an ESM2
    checkpoint) and `--quiet` was an unknown option (exit 2). Now it shows progress on stderr
    (plain lines off a terminal) per deletion step of the path score and over the ELBO passes;
    `--quiet` silences it, and the scores are the same either way."""

    def score(out: Path, *extra: str):  # type: ignore[no-untyped-def]
        args = cli_args(
            "score",
            dms=synth_dir / "SYNTH_deletions.csv",
            wt=synth_dir / "wt.fasta",
            ckpt=tiny_ckpt,
            out=out,
            elbo_samples=1,
        )
        return run_main(main, [*args, *extra], capsys)

    loud = score(tmp_path / "loud.csv")
    assert loud.code == 0, loud.err
    steps = [line for line in loud.err.splitlines() if line.startswith("path score")]
    depth = max(int(r["n_deleted"]) for r in csv.DictReader((tmp_path / "loud.csv").open()))
    assert depth >= 2  # the synthetic assay has multi deletions: one bar per step
    for step in range(1, depth + 1):  # each step's bar ends done: N/N
        done = [line for line in steps if f"deletion step {step}/{depth}:" in line]
        assert done and done[-1].endswith("(done)"), loud.err
    assert any(line.startswith("ELBO score") for line in loud.err.splitlines()), loud.err
    assert "Spearman" in loud.out and "path score" not in loud.out  # stdout stays the result
    quiet = score(tmp_path / "quiet.csv", "--quiet")
    assert quiet.code == 0 and quiet.err.strip() == "", quiet.err
    assert (tmp_path / "quiet.csv").read_text() == (tmp_path / "loud.csv").read_text()


def test_output_files_are_0644_whatever_the_umask(
    tmp_path: Path, synth_dir: Path, tiny_ckpt: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 the files were opened with the process umask (0600 under `umask 077`); now
    they are written atomically with mode 0644."""
    old = os.umask(0o077)
    try:
        out = tmp_path / "scores.csv"
        args = ["score", "--dms", str(synth_dir / "SYNTH_deletions.csv"), "--wt"]
        args += [str(synth_dir / "wt.fasta"), "--ckpt", str(tiny_ckpt), "--out", str(out)]
        assert run_main(main, args, capsys).code == 0
        pg = tmp_path / "pg"
        assert run_main(main, _proteingym(synth_dir, tiny_ckpt, pg, "--quiet"), capsys).code == 0
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o644
    for path in pg.iterdir():
        assert path.stat().st_mode & 0o777 == 0o644, path


@pytest.mark.parametrize(
    ("wt", "expected"),
    [
        ("missing.fasta", "--wt missing.fasta: no such file"),
        ("data/wt", "--wt data/wt: no such file"),
        ("seqs.fa", "--wt seqs.fa: no such file"),
    ],
)
def test_wt_that_looks_like_a_missing_file_is_an_error_naming_it(
    tmp_path: Path, synth_dir: Path, tiny_ckpt: Path, capsys, wt: str, expected: str
) -> None:
    """On 11b2942 `--wt missing.fasta` was read as a sequence ("--wt: non-amino-acid letters
    '.'"); now it is a missing file, named."""
    args = ["score", "--dms", str(synth_dir / "SYNTH_deletions.csv"), "--wt", wt]
    args += ["--ckpt", str(tiny_ckpt), "--out", str(tmp_path / "o.csv")]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert expected in line
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize(
    ("option", "value"),
    [("--temperature", "inf"), ("--temperature", "nan"), ("--pct", "nan"), ("--pct", "inf")],
)
def test_numbers_refuse_nan_and_inf(tmp_path: Path, capsys, option: str, value: str) -> None:
    """On 11b2942 `shrink --temperature inf` was accepted (softmax over log q / inf)."""
    args = ["shrink", "--fasta", "x.fasta", "--pct", "10", "--ckpt", "c.ckpt"]
    args += ["--out", str(tmp_path / "o.fasta"), option, value]
    line = assert_one_line_error(main, args, capsys, prog="bio-scisor shrink: error: ")
    assert option in line and repr(value) in line


def test_tiny_fit_leaves_a_checkpoint_that_test_and_score_follow(
    tmp_path: Path, synth_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """`fit --config tiny` keeps its logger and checkpoint and shows Lightning's progress bar
    (11b2942's tiny.yaml turned the bar off), so `test --ckpt_path` and `score --ckpt` follow
    as the README shows, in the run's folder."""
    (tiny,) = [p for p in shipped_configs("bio_scisor") if p.stem == "tiny"]
    trainer = yaml.safe_load(tiny.read_text())["trainer"]
    for key in ("enable_progress_bar", "enable_checkpointing", "logger"):
        assert trainer.get(key, True) is not False, key
    root = ["--config", "tiny", "--trainer.default_root_dir", str(tmp_path / "runs")]
    run = run_main(main, ["fit", *root], capsys, cwd=tmp_path)
    assert run.code == 0, run.err[-2000:]
    (ckpt,) = sorted((tmp_path / "runs").rglob("*.ckpt"))
    assert ckpt.parent.name == "checkpoints" and (ckpt.parent.parent / "config.yaml").is_file()
    run = run_main(main, ["test", *root, "--ckpt_path", str(ckpt)], capsys, cwd=tmp_path)
    assert run.code == 0 and "test/loss" in run.out, run.err[-2000:]
    out = tmp_path / "scores.csv"
    args = ["score", "--dms", str(synth_dir / "SYNTH_deletions.csv"), "--wt"]
    args += [str(synth_dir / "wt.fasta"), "--ckpt", str(ckpt), "--out", str(out)]
    assert run_main(main, args, capsys).code == 0 and out.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "scores.csv"]


def test_the_package_exports_its_api_and_imports_cheaply() -> None:
    """On 11b2942 `bio_scisor` exported only `__version__` (`from bio_scisor import
    score_path` failed); the exports load on first use, so the import itself needs no torch."""
    assert_light_package(
        "bio_scisor",
        ["make_family", "score_reference", "ScisorLitModule"],
        defined_in={
            "score_path": "bio_scisor.scoring",
            "fit_scisor": "bio_scisor.lit_module",
        },
    )
