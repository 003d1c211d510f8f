"""Issue 36: ``eval --policy FOLDER`` read "no such policy checkpoint" on 52aa8a9; the common
``load_weights_only`` now says it is a folder. The review of issue 36 (19:08 UTC, 2026-12-07)
found a non-UTF-8 ``meta/episodes.jsonl`` or ``meta/info.json`` a 39-line
``UnicodeDecodeError`` and ``eval --policy <rf-matid checkpoint>`` a line without the option."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from iclr26_common.testing import assert_one_line_error
from robotics_remac.cli import main

PROG = "robotics-remac: error: "


def test_policy_that_is_a_folder(tmp_path: Path, capsys) -> None:
    args = ["eval", "--policy", str(tmp_path), "--delays", "0", "--out", str(tmp_path / "ev")]
    err = assert_one_line_error(main, args, capsys)
    assert f"--policy {tmp_path}: is a folder; give a policy checkpoint" in err
    assert not (tmp_path / "ev").exists()


def test_a_checkpoint_of_another_package_names_the_option(tmp_path: Path, capsys) -> None:
    """As ``--ckpt_path`` does: ``--policy PATH: a checkpoint of rf-matid (...), not of
    robotics-remac`` (the review: no option); a truncated file too."""
    from iclr26_common.checkpoints import MODEL_KEY

    foreign = tmp_path / "rf.ckpt"
    torch.save({"state_dict": {}, MODEL_KEY: "rf_matid.lit_module.RFMatIDModule"}, foreign)
    args = ["eval", "--policy", str(foreign), "--delays", "0", "--out", str(tmp_path / "ev")]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert line == (
        f"{PROG}--policy {foreign}: a checkpoint of rf-matid "
        "(rf_matid.lit_module.RFMatIDModule), not of robotics-remac"
    )
    trunc = tmp_path / "trunc.ckpt"
    trunc.write_bytes(foreign.read_bytes()[:300])
    args[2] = str(trunc)
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert line.startswith(f"{PROG}--policy {trunc}: not a readable policy checkpoint (")
    assert not (tmp_path / "ev").exists()


@pytest.mark.parametrize("name", ["episodes.jsonl", "info.json"])
def test_metadata_that_is_not_utf8_is_one_line(
    tmp_path: Path, demo_dir: Path, name: str, capsys
) -> None:
    data = shutil.copytree(demo_dir, tmp_path / "rc")
    meta = data / "meta" / name
    meta.write_bytes(b"\xff\xfe\x80abc\n" + meta.read_bytes())
    args = ["eval", "--policy", str(tmp_path / "none.pt"), "--data", str(data)]
    args += ["--method", "remac", "--out", str(tmp_path / "y5")]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert line == f"{PROG}{meta}: not UTF-8 text (byte 0xff at offset 0); save it as UTF-8"
    assert not (tmp_path / "y5").exists()
