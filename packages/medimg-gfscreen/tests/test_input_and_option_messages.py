"""Messages for bad input and options, each through ``main([...])``: a datalist that is not UTF-8 was a 55-line ``UnicodeDecodeError``
(rc 1); a folder given as the datalist read "does not exist"; ``predict --overwrite --resume``
replaced the masks (rc 0) where every other command refuses the pair; ``export --ckpt`` /
``screen --ckpt`` with another package's checkpoint said "PATH: ..." without the option
(defects a review of issue 36 found, 2026-12-07)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iclr26_common.checkpoints import MODEL_KEY
from iclr26_common.testing import assert_one_line_error
from medimg_gfscreen.cli import main

PROG = "medimg-gfscreen: error: "


def _fit(datalist: Path, tmp_path: Path) -> list[str]:
    return [
        "fit",
        "--config",
        "tiny",
        f"--data.init_args.datalist={datalist}",
        f"--trainer.default_root_dir={tmp_path / 'run'}",
    ]


def test_datalist_not_utf8_or_a_folder_is_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe\x80{}\n")
    line = assert_one_line_error(main, _fit(bad, tmp_path), capsys, prog=PROG)
    assert line == f"{PROG}{bad}: not UTF-8 text (byte 0xff at offset 0); save it as UTF-8"
    folder = tmp_path / "existdir"
    folder.mkdir()
    line = assert_one_line_error(main, _fit(folder, tmp_path), capsys, prog=PROG)
    assert line == f"{PROG}{folder}: is a folder; give a datalist file"
    line = assert_one_line_error(main, _fit(tmp_path / "gone.json", tmp_path), capsys, prog=PROG)
    assert line == f"{PROG}{tmp_path / 'gone.json'}: no such datalist file"
    assert not (tmp_path / "run").exists()


def test_datalist_command_reads_dataset_json_as_utf8(tmp_path: Path, capsys) -> None:
    """``datalist FOLDER`` with a ``dataset.json`` that is not UTF-8, or not JSON: one line."""
    folder = tmp_path / "msd"
    folder.mkdir()
    (folder / "dataset.json").write_bytes(b'{"training": []}\xff\n')
    args = ["datalist", str(folder), "--out", str(tmp_path / "dl.json")]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert line.startswith(f"{PROG}{folder / 'dataset.json'}: not UTF-8 text (byte 0xff at")
    (folder / "dataset.json").write_text("{not json")
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert line.startswith(f"{PROG}{folder / 'dataset.json'}: not valid JSON")
    assert not (tmp_path / "dl.json").exists()


@pytest.mark.parametrize("where", ["command line", "config file"])
def test_predict_refuses_overwrite_with_resume(
    predict_args, tmp_path: Path, where: str, capsys
) -> None:
    """Before any model or image is read, the masks left as they were, whether both flags are
    typed or come from a ``--config`` YAML."""
    masks = tmp_path / "masks"
    masks.mkdir()
    (masks / "a.nii.gz").write_bytes(b"earlier mask")
    if where == "command line":
        extra = ["--overwrite", "--resume"]
    else:
        config = tmp_path / "both.yaml"
        config.write_text("overwrite: true\nresume: true\n")
        extra = ["--config", str(config)]
    args = predict_args(tmp_path / "no_images", masks, tmp_path / "run", *extra)
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert "--overwrite" in line and "--resume" in line, line
    assert (masks / "a.nii.gz").read_bytes() == b"earlier mask"
    assert not (tmp_path / "run").exists()


def test_checkpoint_errors_of_export_and_screen_name_the_option(
    tmp_path: Path, synth_dir: Path, capsys
) -> None:
    """As ``--ckpt_path``'s: ``--ckpt PATH: a checkpoint of rf-matid (...), not of
    medimg-gfscreen``; a missing file and a folder too. Errors about the image stay as they
    were."""
    foreign = tmp_path / "rf.ckpt"
    torch.save({"state_dict": {}, MODEL_KEY: "rf_matid.lit_module.RFMatIDModule"}, foreign)
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    cases = [
        (
            foreign,
            "a checkpoint of rf-matid (rf_matid.lit_module.RFMatIDModule), not of medimg-gfscreen",
        ),
        (tmp_path / "missing.pt", "no such checkpoint"),
        (tmp_path, "is a folder; give a checkpoint"),
    ]
    for ckpt, says in cases:
        export = ["export", "--ckpt", str(ckpt), "--out", str(tmp_path / "f4.pt")]
        screen = ["screen", str(image), "--ckpt", str(ckpt), "--out", str(tmp_path / "m.nii.gz")]
        for args in (export, [*screen, "--quiet"]):
            line = assert_one_line_error(main, args, capsys, prog=PROG)
            assert line == f"{PROG}--ckpt {ckpt}: {says}", line
    assert not (tmp_path / "f4.pt").exists() and not (tmp_path / "m.nii.gz").exists()
    missing_image = tmp_path / "ct.nii.gz"
    args = [
        "screen",
        str(missing_image),
        "--ckpt",
        str(foreign),
        "--out",
        str(tmp_path / "m.nii.gz"),
    ]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert not line.startswith(f"{PROG}--ckpt"), line


def test_checkpoint_messages_name_the_option_only_when_one_gave_the_file(
    tmp_path: Path, tiny_weights: Path, synth_dir: Path, capsys
) -> None:
    """The option travels into the loader (``load_weights(path, option=)``), not prefixed after
    the fact: the Python API keeps ``checkpoint PATH``/``PATH: ...``, the command ``--ckpt
    PATH ...``, for every message about the file (a file without weights, an official
    ``state_dict`` with stray keys, hyperparameters the module refuses)."""
    from medimg_gfscreen.io import GFScreenFormatError
    from medimg_gfscreen.official import to_official_state_dict
    from medimg_gfscreen.screen import load_screen_module, load_weights

    empty = tmp_path / "empty.pt"
    torch.save({"something": torch.zeros(1)}, empty)
    tiny = torch.load(tiny_weights, weights_only=True)
    official = tmp_path / "official.pt"
    state = to_official_state_dict(tiny["focus"], tiny["glance"]) | {"stray.weight": torch.ones(1)}
    torch.save({"epoch": 1, "state_dict": state}, official)
    bad_hparams = tmp_path / "bad.pt"
    torch.save({**tiny, "hparams": {**tiny["hparams"], "roi_size": "not a size"}}, bad_hparams)
    cases = [
        (empty, f"checkpoint {empty} holds no Focus and Glance weights"),
        (official, f"{official}: official state_dict has unexpected keys ['stray.weight']"),
        (bad_hparams, f"checkpoint {bad_hparams}: bad hparams"),
    ]
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    for path, says in cases:
        with pytest.raises(GFScreenFormatError) as error:
            load_screen_module(path)
        assert str(error.value).startswith(says), error.value
        with pytest.raises(GFScreenFormatError) as error:
            load_screen_module(path, option="--weights")
        named = says.removeprefix("checkpoint ")
        assert str(error.value).startswith(f"--weights {named}"), error.value
        args = ["screen", str(image), "--ckpt", str(path), "--out", str(tmp_path / "m.nii.gz")]
        line = assert_one_line_error(main, [*args, "--quiet"], capsys, prog=PROG)
        assert line.startswith(f"{PROG}--ckpt {named}"), line
    with pytest.raises(FileNotFoundError, match=f"^{tmp_path / 'gone.pt'}: no such checkpoint"):
        load_weights(tmp_path / "gone.pt")


def test_synth_into_an_interrupted_folder_offers_overwrite_not_resume(
    tmp_path: Path, capsys
) -> None:
    """``synth`` has no ``--resume``; its folder check (``check_out_folder`` called directly)
    took the resumable default and told the user to "pass --resume", an option ``synth``
    refuses. Through common's ``check_output_options`` the hint is ``--overwrite`` alone."""
    from iclr26_common.outputs import PARTIAL_MARKER

    folder = tmp_path / "cut"
    folder.mkdir()
    (folder / PARTIAL_MARKER).write_text("")
    (folder / "synth_000_0000.nii.gz").write_bytes(b"half")
    line = assert_one_line_error(main, ["synth", "--out", str(folder)], capsys, prog=PROG)
    assert line == (
        f"{PROG}--out {folder}: holds the partial results of an interrupted run; pass "
        "--overwrite to start again"
    ), line


def test_screen_table_follows_the_outs_overwrite_rule(
    tmp_path: Path, tiny_weights: Path, synth_dir: Path, capsys
) -> None:
    """``--table`` is checked by the same rule as ``--out`` (before any work) and replaced by the
    same ``--overwrite``."""
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    out, table = tmp_path / "m.nii.gz", tmp_path / "t.csv"
    table.write_text("earlier\n")
    args = ["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out), "--quiet"]
    line = assert_one_line_error(main, [*args, "--table", str(table)], capsys, prog=PROG)
    assert line == f"{PROG}--table {table}: exists; pass --overwrite to replace it", line
    assert not out.exists() and table.read_text() == "earlier\n"
    assert main([*args, "--table", str(table), "--overwrite"]) == 0
    assert out.is_file() and table.read_text().startswith("case,tile")
