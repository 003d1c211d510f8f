"""Issue 36: input files through the common ``iclr26_common.textio`` (52aa8a9: a folder given as
a point cloud or captions JSON read "no such file" or ``[Errno 21]``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pointcloud_pgllm.errors import PGLLMInputError
from pointcloud_pgllm.io import read_cloud_file, read_h5
from pointcloud_pgllm.pointllm_io import read_pointllm_captions


def test_folders_are_named_as_folders(tmp_path: Path) -> None:
    for read in (read_cloud_file, read_h5):
        with pytest.raises(IsADirectoryError, match=r": is a folder; give a file$"):
            read(tmp_path)
    with pytest.raises(IsADirectoryError, match=r": is a folder; give a captions JSON$"):
        read_pointllm_captions(tmp_path)


def test_captions_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "caps.json"
    path.write_bytes(b'{"results": [{"model_output": "caf\xe9"}]}')
    with pytest.raises(PGLLMInputError, match=r"caps\.json: not UTF-8 text \(byte 0xe9 at offset"):
        read_pointllm_captions(path)
