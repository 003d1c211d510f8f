"""rf-matid predict-files and rf_matid.predict: checkpoint -> class probabilities of new spectra."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_one_line_error
from rf_matid.cli import main, run_lightning_cli
from rf_matid.io import FREQ_DOMAIN_DIR, read_frequency_csv
from rf_matid.predict import load_predictor


@pytest.fixture(scope="module")
def p2_checkpoint(tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny CNN fitted for two batches on protocol P2 (700 bins), checkpoint written."""
    root = tmp_path_factory.mktemp("p2-run")
    run_lightning_cli(
        [
            "fit",
            "--config",
            "tiny",
            f"--data.init_args.data_dir={tiny_dataset}",
            "--data.init_args.protocol=P2",
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=2",
            "--trainer.limit_val_batches=1",
            "--trainer.enable_checkpointing=true",
            f"--trainer.default_root_dir={root}",
        ]
    )
    (checkpoint,) = root.glob("**/*.ckpt")
    return checkpoint


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def _one_line_error(
    capsys: pytest.CaptureFixture, args: list[str], skip_lightning_info: bool = False
) -> str:
    """``main(args)``: exit 2, one ``rf-matid: error: ...`` stderr line (Lightning's "INFO: "
    start-up lines left out when ``skip_lightning_info``)."""
    skip = (lambda line: line.startswith("INFO: ")) if skip_lightning_info else None
    return assert_one_line_error(main, args, capsys, prog="rf-matid: error: ", skip=skip)


def test_predictor_matches_the_training_pipeline(tiny_dataset: Path, p2_checkpoint: Path) -> None:
    """Raw S11 -> probabilities equals the data module's crop + whitening + model."""
    from rf_matid.data import RFMatIDDataModule

    predictor = load_predictor(p2_checkpoint)
    assert predictor.protocol == "P2" and predictor.seq_len == 700  # from the checkpoint
    datamodule = RFMatIDDataModule(str(tiny_dataset), protocol="P2", batch_size=8)
    assert list(predictor.class_names) == datamodule.class_names
    batch = next(iter(datamodule.test_dataloader()))
    with torch.no_grad():
        expected = predictor.module(batch["x"]).softmax(1).numpy()
    data = datamodule._load()
    indices = datamodule._datasets["test"].indices[:8]
    raw = np.asarray(data.x[indices])  # full 2048-bin sweep: the crop happens in the predictor
    probs = predictor.predict_proba(data.axis, raw)
    assert probs.shape == (8, 16)
    np.testing.assert_allclose(probs, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(predictor.predict_proba(data.axis, raw[0]), expected[0], rtol=1e-4)


def test_predictor_rejects_a_foreign_sweep(p2_checkpoint: Path) -> None:
    predictor = load_predictor(p2_checkpoint)
    freq = np.linspace(1e9, 40e9, 1001)
    with pytest.raises(ValueError, match="trained on 700"):
        predictor.predict_proba(freq, np.ones(1001, dtype=np.complex64))
    with pytest.raises(ValueError, match="complex"):
        predictor.predict_proba(freq, np.ones(1001))


def test_predict_files_on_position_folders(
    tiny_dataset: Path, p2_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "preds" / "preds.csv"
    out.parent.mkdir()
    assert (
        main(["predict-files", "--ckpt", str(p2_checkpoint), "--out", str(out), str(tiny_dataset)])
        == 0
    )
    assert sorted(out.parent.iterdir()) == [out]  # nothing else written
    header, rows = _read_csv(out)
    predictor = load_predictor(p2_checkpoint)
    assert header[:3] == ["file", "predicted", "label"]
    assert header[3:] == [f"prob_{name}" for name in predictor.class_names]
    assert len(rows) == 672
    probs = np.array([[float(row[c]) for c in header[3:]] for row in rows])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-4)
    predicted = [predictor.class_names[i] for i in probs.argmax(axis=1)]
    assert predicted == [row["predicted"] for row in rows]
    first = Path(rows[0]["file"])
    assert rows[0]["label"] == first.parent.name.split("-")[-3]
    freq, s11 = read_frequency_csv(first)
    np.testing.assert_allclose(probs[0], predictor.predict_proba(freq, s11), atol=2e-6)


def test_predict_files_on_unlabelled_csvs_and_s1p(
    tiny_dataset: Path, p2_checkpoint: Path, tmp_path: Path
) -> None:
    from rf_matid.touchstone import write_s1p

    sources = sorted(tiny_dataset.glob(f"{FREQ_DOMAIN_DIR}/*/*.csv"))[:3]
    folder = tmp_path / "field"
    folder.mkdir()
    for i, source in enumerate(sources):
        shutil.copy(source, folder / f"scan{i}.csv")
    freq, s11 = read_frequency_csv(sources[0])
    write_s1p(tmp_path / "scan.s1p", freq, s11)
    out = tmp_path / "preds.csv"
    main(
        [
            "predict-files",
            "--ckpt",
            str(p2_checkpoint),
            "--out",
            str(out),
            str(folder),
            str(tmp_path / "scan.s1p"),
        ]
    )
    header, rows = _read_csv(out)
    assert "label" not in header
    assert [Path(row["file"]).name for row in rows] == [
        "scan0.csv",
        "scan1.csv",
        "scan2.csv",
        "scan.s1p",
    ]
    from_csv = [float(rows[0][c]) for c in header[2:]]
    from_s1p = [float(rows[3][c]) for c in header[2:]]
    np.testing.assert_allclose(from_s1p, from_csv, atol=1e-4)


def test_predict_files_refuses_unknown_classes(
    tiny_dataset: Path, p2_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    source = next(tiny_dataset.glob(f"{FREQ_DOMAIN_DIR}/*/*.csv"))
    folder = tmp_path / "ms46131a-4To43.5GHz-2048-steel01-200mm-0deg"
    folder.mkdir()
    shutil.copy(source, folder / "0000.csv")
    out = tmp_path / "preds.csv"
    line = _one_line_error(
        capsys, ["predict-files", "--ckpt", str(p2_checkpoint), "--out", str(out), str(folder)]
    )
    assert "vocabulary mismatch" in line and "steel01" in line
    assert not out.exists()


def test_predict_files_does_not_overwrite(
    tiny_dataset: Path, p2_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "preds.csv"
    out.write_text("keep me\n")
    source = next(tiny_dataset.glob(f"{FREQ_DOMAIN_DIR}/*/*.csv"))
    args = ["predict-files", "--ckpt", str(p2_checkpoint), "--out", str(out), str(source)]
    assert "--overwrite" in _one_line_error(capsys, args)
    assert out.read_text() == "keep me\n"
    assert main([*args, "--overwrite"]) == 0
    assert out.read_text().startswith("file,predicted,label,prob_brick01")


def test_predict_files_errors_are_one_line(
    tiny_dataset: Path, p2_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = str(tmp_path / "p.csv")
    assert "does not exist" in _one_line_error(
        capsys, ["predict-files", "--ckpt", str(p2_checkpoint), "--out", out, str(tmp_path / "x")]
    )
    (tmp_path / "empty").mkdir()
    assert "no .csv or .s1p" in _one_line_error(
        capsys,
        ["predict-files", "--ckpt", str(p2_checkpoint), "--out", out, str(tmp_path / "empty")],
    )
    source = str(next(tiny_dataset.glob(f"{FREQ_DOMAIN_DIR}/*/*.csv")))
    assert "no.ckpt: no such checkpoint" in _one_line_error(
        capsys, ["predict-files", "--ckpt", str(tmp_path / "no.ckpt"), "--out", out, source]
    )
    (tmp_path / "bad.ckpt").write_bytes(b"not a checkpoint")
    assert "bad.ckpt: not a readable checkpoint (" in _one_line_error(
        capsys, ["predict-files", "--ckpt", str(tmp_path / "bad.ckpt"), "--out", out, source]
    )
    torch.save({"weights": torch.zeros(2)}, tmp_path / "plain.ckpt")  # readable, not Lightning's
    assert "plain.ckpt: not a Lightning checkpoint (no 'state_dict')" in _one_line_error(
        capsys, ["predict-files", "--ckpt", str(tmp_path / "plain.ckpt"), "--out", out, source]
    )
    # another model's Lightning checkpoint (other arguments, other weights): was a traceback
    other = {"state_dict": {"net.weight": torch.zeros(2, 2)}, "hyper_parameters": {"arch": "x"}}
    torch.save(other, tmp_path / "other.ckpt")
    assert "other.ckpt: not a checkpoint of an rf-matid classifier (" in _one_line_error(
        capsys, ["predict-files", "--ckpt", str(tmp_path / "other.ckpt"), "--out", out, source]
    )
    torch.save({**other, "hyper_parameters": {}}, tmp_path / "weights.ckpt")
    assert "weights.ckpt: not a checkpoint of an rf-matid classifier (" in _one_line_error(
        capsys, ["predict-files", "--ckpt", str(tmp_path / "weights.ckpt"), "--out", out, source]
    )
    # another package's checkpoint (its class path recorded): named, with both packages
    # (d875146: "unknown arch 'l1'" for an atomistic-scaling checkpoint)
    foreign = {**other, "hyper_parameters": {"_class_path": "atomistic_scaling.lit_module.X"}}
    torch.save(foreign, tmp_path / "foreign.ckpt")
    line = _one_line_error(
        capsys, ["predict-files", "--ckpt", str(tmp_path / "foreign.ckpt"), "--out", out, source]
    )
    assert (
        "foreign.ckpt: a checkpoint of atomistic-scaling (atomistic_scaling.lit_module.X)" in line
    )
    assert line.endswith("not of rf-matid"), line
    assert not Path(out).exists()


def test_predict_files_checkpoint_errors_name_the_option(
    p2_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A missing or truncated ``--ckpt`` is one line that starts with the option, as
    ``--ckpt_path``'s do (the review of issue 36: ``rf-matid: error: PATH: no such checkpoint``
    named the file only)."""
    source = tmp_path / "scan.s1p"
    source.write_text("# GHz S RI R 50\n4.0 0.1 0.2\n")
    out = str(tmp_path / "p.csv")
    missing = tmp_path / "no.ckpt"
    truncated = tmp_path / "cut.ckpt"
    truncated.write_bytes(p2_checkpoint.read_bytes()[:200])
    for ckpt, says in ((missing, "no such checkpoint"), (truncated, "not a readable checkpoint")):
        line = _one_line_error(
            capsys, ["predict-files", "--ckpt", str(ckpt), "--out", out, str(source)]
        )
        assert line.startswith(f"rf-matid: error: --ckpt {ckpt}: {says}"), line
    assert not Path(out).exists()


def test_test_subcommand_refuses_a_checkpoint_of_other_classes(
    tiny_time_dataset: Path, p2_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """16-class checkpoint on 3-class data: a named vocabulary error, not a tensor size error.

    The checkpoint is read by the Trainer, so Lightning's start-up lines ("INFO: GPU available")
    come first; the error itself is one line without a traceback.
    """
    line = _one_line_error(
        capsys,
        [
            "test",
            "--config",
            "tiny",
            f"--data.init_args.data_dir={tiny_time_dataset}",
            "--data.init_args.protocol=P2",
            f"--ckpt_path={p2_checkpoint}",
            f"--trainer.default_root_dir={tmp_path}",
        ],
        skip_lightning_info=True,
    )
    assert "class vocabulary mismatch" in line and "wood03" in line


def test_labelled_looking_folder_without_the_prefix_is_refused_as_in_fit(
    tiny_dataset: Path, p2_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Review of issue 22, #10: a folder ``<other prefix>-<class>-<d>mm-<a>deg`` was read as
    unlabelled without a word (its label dropped) while ``fit`` refuses the same folder."""
    from rf_matid.layout import RFMatIDFormatError
    from rf_matid.predict import collect_inputs

    source = next(tiny_dataset.glob(f"{FREQ_DOMAIN_DIR}/*/*.csv"))
    folder = tmp_path / "vna2-4To43.5GHz-2048-brick01-200mm-0deg"
    folder.mkdir()
    shutil.copy(source, folder / "0000.csv")
    with pytest.raises(RFMatIDFormatError, match=r"vna2-4To43\.5GHz-2048-brick01"):
        collect_inputs([folder])
    out = tmp_path / "preds.csv"
    line = _one_line_error(
        capsys, ["predict-files", "--ckpt", str(p2_checkpoint), "--out", str(out), str(folder)]
    )
    assert "vna2-4To43.5GHz-2048-brick01-200mm-0deg" in line and "prefix" in line
    assert not out.exists()
    plain = tmp_path / "scans-200mm"  # not a position folder: unlabelled, as before
    plain.mkdir()
    shutil.copy(source, plain / "0000.csv")
    assert [f.class_name for f in collect_inputs([plain])] == [None]
