"""Issue 36: a folder where a file is expected is reported as a folder (on 52aa8a9 ``score
--dms FOLDER`` read "no such file"), through the common ``iclr26_common.textio.input_file``."""

from __future__ import annotations

from pathlib import Path

import pytest

from bio_scisor.cli import main
from iclr26_common.testing import assert_one_line_error


@pytest.mark.parametrize(
    ("which", "make", "message"),
    [
        ("dms", "folder", "{path}: is a folder; give a file"),
        ("dms", "missing", "{path}: no such file"),
        ("ckpt", "folder", "{path}: is a folder; give a"),
    ],
)
def test_inputs_that_are_not_files(
    tmp_path: Path, tiny_ckpt, capsys, which: str, make: str, message: str
) -> None:
    paths = {"dms": tmp_path / "assay.csv", "ckpt": tiny_ckpt}
    if which == "dms" or make == "missing":
        paths["dms"].parent.mkdir(exist_ok=True)
    else:
        paths["dms"].write_text("mutated_sequence,DMS_score\nMKTA,1\n")
    bad = tmp_path / f"bad_{which}"
    if make == "folder":
        bad.mkdir()
    paths[which] = bad
    out = tmp_path / "o.csv"
    args = ["score", "--dms", str(paths["dms"]), "--wt", "MKTAY", "--ckpt", str(paths["ckpt"])]
    err = assert_one_line_error(main, [*args, "--out", str(out)], capsys, prog="bio-scisor")
    assert message.format(path=bad) in err and not out.exists()


def test_wt_that_is_a_folder(tmp_path: Path, tiny_ckpt, capsys, monkeypatch) -> None:
    """A fresh review of issue 36: ``--wt adir`` (an existing folder, no separator) was read as
    the residues "adir"."""
    monkeypatch.chdir(tmp_path)
    Path("a.csv").write_text("mutated_sequence,DMS_score\nMKTA,1\n")
    Path("adir").mkdir()
    args = ["score", "--dms", "a.csv", "--wt", "adir", "--ckpt", str(tiny_ckpt), "--out", "o.csv"]
    err = assert_one_line_error(main, args, capsys, prog="bio-scisor")
    assert "--wt adir: is a folder" in err and not Path("o.csv").exists()
