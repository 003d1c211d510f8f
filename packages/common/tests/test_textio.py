"""iclr26_common.textio: the one way every reader opens a user's input file."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from iclr26_common.textio import decode_utf8, input_file, read_text


class FormatError(ValueError):
    pass


def test_a_folder_is_not_reported_as_missing(tmp_path: Path) -> None:
    """Issue 36: a folder given where a file is expected read "no such file" (52aa8a9)."""
    with pytest.raises(IsADirectoryError, match=r": is a folder; give a world file$"):
        input_file(tmp_path, "world file")
    with pytest.raises(FileNotFoundError, match=r"nope\.json: no such world file$"):
        input_file(tmp_path / "nope.json", "world file")
    (tmp_path / "w.json").write_text("{}")
    assert input_file(tmp_path / "w.json") == tmp_path / "w.json"


def test_text_that_is_not_utf8_names_file_byte_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("naïve".encode("latin-1"))
    with pytest.raises(FormatError) as caught:
        read_text(path, error=FormatError)
    assert str(caught.value) == f"{path}: not UTF-8 text (byte 0xef at offset 2); save it as UTF-8"


def test_gzip_and_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "t.txt.gz"
    path.write_bytes(gzip.compress("\ufeffzürich\n".encode()))
    assert read_text(path) == "zürich\n"  # decompressed, the BOM of a Windows editor dropped
    with pytest.raises(ValueError, match="not UTF-8 text"):  # the raw gzip bytes
        read_text(path, gzip_suffix=False)
    (tmp_path / "bad.gz").write_bytes(b"not gzip")
    with pytest.raises(FormatError, match=r"bad\.gz: not a readable gzip file"):
        read_text(tmp_path / "bad.gz", error=FormatError)


def test_decode_names_where_the_bytes_came_from() -> None:
    with pytest.raises(
        ValueError, match=r"^a\.zip:b\.txt: not UTF-8 text \(byte 0xff at offset 1\)"
    ):
        decode_utf8(b"a\xffb", "a.zip:b.txt")


def test_a_checkpoint_of_another_package_is_named_outside_lightningcli(tmp_path: Path) -> None:
    """A fresh review of issue 36: ``bio-scisor shrink --ckpt <rf-matid checkpoint>`` said "not a
    bio-scisor Lightning checkpoint (another model's? ...)", although the checkpoint names its
    model. ``load_weights_only(package=...)`` names both packages, by the stamp or by
    ``_class_path``; a checkpoint naming no model (an exported or official one) passes."""
    torch = pytest.importorskip("torch")  # iclr26-common alone (no [lightning] extra) has none

    from iclr26_common.checkpoints import MODEL_KEY, load_weights_only

    stamped = tmp_path / "rf.ckpt"
    torch.save({"state_dict": {}, MODEL_KEY: "rf_matid.lit_module.RFMatIDClassifier"}, stamped)
    with pytest.raises(FormatError) as caught:
        load_weights_only(stamped, error=FormatError, package="bio_scisor")
    assert str(caught.value) == (
        f"{stamped}: a checkpoint of rf-matid (rf_matid.lit_module.RFMatIDClassifier), "
        "not of bio-scisor"
    )
    sibling = tmp_path / "remix.ckpt"
    hparams = {"_class_path": "llm_methods.remix.lit_module.ReMixModule"}
    torch.save({"state_dict": {}, "hyper_parameters": hparams}, sibling)
    with pytest.raises(FormatError, match=r"a checkpoint of llm-methods\.remix .* not of llm-me"):
        load_weights_only(sibling, error=FormatError, package="llm_methods.perk")
    assert load_weights_only(sibling, error=FormatError, package="llm_methods.remix")
    plain = tmp_path / "plain.pt"
    torch.save({"weights": torch.zeros(2)}, plain)
    assert load_weights_only(plain, error=FormatError, package="bio_scisor")["weights"].shape == (
        2,
    )


def test_a_reader_keeps_its_own_error_class(tmp_path: Path) -> None:
    """A reader whose API promises its own error (llm-methods' ``LMError``) keeps it for a missing
    file and a folder, with the same messages."""
    with pytest.raises(FormatError, match=r"x\.jsonl: no such file$"):
        input_file(tmp_path / "x.jsonl", error=FormatError)
    with pytest.raises(FormatError, match=r": is a folder; give a file$"):
        input_file(tmp_path, error=FormatError)
