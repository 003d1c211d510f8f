"""Issue 36: ``eval --policy FOLDER`` read "no such policy checkpoint" on 52aa8a9; the common
``load_weights_only`` now says it is a folder."""

from __future__ import annotations

from pathlib import Path

from iclr26_common.testing import assert_one_line_error
from robotics_remac.cli import main


def test_policy_that_is_a_folder(tmp_path: Path, capsys) -> None:
    args = ["eval", "--policy", str(tmp_path), "--delays", "0", "--out", str(tmp_path / "ev")]
    err = assert_one_line_error(main, args, capsys)
    assert f"{tmp_path}: is a folder; give a policy checkpoint" in err
    assert not (tmp_path / "ev").exists()
