"""A fresh review of issue 36: ``atomistic-scaling sweep --config LATIN1.yaml`` was a
``UnicodeDecodeError`` traceback (jsonargparse); now one line through
``iclr26_common.cli_support.check_config_file``, like the LightningCLI commands."""

from __future__ import annotations

from pathlib import Path

from atomistic_scaling.cli import main
from iclr26_common.testing import assert_one_line_error


def test_a_sweep_config_that_is_not_utf8_is_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"widths: [8] # caf\xe9\n")
    out = tmp_path / "sweep"
    line = assert_one_line_error(main, ["sweep", "--config", str(bad), "--out", str(out)], capsys)
    assert f"--config {bad}: not UTF-8 text (byte 0xe9 at offset" in line, line
    assert not out.exists()
