"""``pointcloud-pgllm predict`` writes its predictions (issue 39): ``predictions.csv`` in the run
folder, one row per cloud of the predict split with the cloud's id (``source``), its label, the
predicted class and every class probability. At HEAD d9942d3 ``predict --config tiny
--ckpt_path ...`` exited 0 and the run folder held only ``config.yaml``: both tests fail there
(no ``predictions.csv``)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_one_line_error, run_main
from pointcloud_pgllm.cli import PROG, main


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_predict_from_a_checkpoint_writes_every_clouds_prediction(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``fit --config tiny`` then ``predict --ckpt_path``: ``predictions.csv`` next to the
    predict run's ``config.yaml`` holds the checkpoint's softmax on every test cloud, in order,
    with its source and label."""
    from pointcloud_pgllm.data import PointCloudDataModule
    from pointcloud_pgllm.lit_module import PointCloudClassifier

    fit = run_main(
        main, ["fit", "--config", "tiny", f"--trainer.default_root_dir={tmp_path / 'fit'}"], capsys
    )
    assert fit.code == 0, fit.err[-3000:]
    (checkpoint,) = (tmp_path / "fit").rglob("*.ckpt")
    args = ["predict", "--config", "tiny", f"--ckpt_path={checkpoint}"]
    run = run_main(main, [*args, f"--trainer.default_root_dir={tmp_path / 'predict'}"], capsys)
    assert run.code == 0, run.err[-3000:]
    version = tmp_path / "predict" / "lightning_logs" / "version_0"
    assert {"config.yaml", "predictions.csv"} <= {p.name for p in version.iterdir()}
    assert f"wrote {version / 'predictions.csv'} (26 clouds)" in run.out
    rows = _rows(version / "predictions.csv")

    model = PointCloudClassifier.load_from_checkpoint(checkpoint, map_location="cpu").eval()
    names = list(model.hparams.class_names)
    data = PointCloudDataModule(n_points=128, batch_size=8, synthetic_per_class=3)  # tiny's
    data.setup("predict")
    with torch.no_grad():
        expected = torch.softmax(model(data.test_set.points), dim=-1).numpy()
    assert len(rows) == len(expected) == 26  # 13 classes x 2 test clouds
    assert [int(r["row"]) for r in rows] == list(range(26))
    assert [r["source"] for r in rows] == data._test.sources
    # one id per cloud (issue 39 review: every row read "synthetic:<class>"): the test split is
    # generated with seed + 1 = 1 (tiny's seed 0), 2 clouds per class
    assert len({r["source"] for r in rows}) == 26
    assert rows[0]["source"] == f"synthetic:{names[0]}:seed1:0"
    assert rows[1]["source"] == f"synthetic:{names[0]}:seed1:1"
    assert [r["label"] for r in rows] == [names[i] for i in data._test.labels]
    probs = np.array([[float(r[f"prob_{c}"]) for c in names] for r in rows])
    np.testing.assert_allclose(probs, expected, atol=1e-6)  # written with 6 decimals
    assert [r["predicted"] for r in rows] == [names[i] for i in expected.argmax(1)]


def test_predict_names_clouds_read_from_files_and_overwrites_only_when_asked(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Clouds read from an OFF tree keep their file as id; a second ``predict`` into the same
    run folder is one line naming the file and ``--overwrite`` (the workspace rule,
    :func:`iclr26_common.lightning.check_prediction_file`), before the model is built, and the
    file stays as it was; ``predict --overwrite`` replaces it. At 43a8cc5 the refusal read
    ``PATH: exists; predict never overwrites a file`` and ``--overwrite`` was an unknown option
    (issue 36)."""
    from pointcloud_pgllm.io import load_dataset

    args = [
        "predict",
        "--config",
        "tiny",
        f"--data.init_args.data_dir={small_tree}",
        "--trainer.logger=false",  # the run folder is default_root_dir
        f"--trainer.default_root_dir={tmp_path}",
    ]
    run = run_main(main, args, capsys)
    assert run.code == 0, run.err[-3000:]
    path = tmp_path / "predictions.csv"
    rows = _rows(path)
    test = load_dataset(small_tree, "test", n_points=128, seed=0)
    assert [r["source"] for r in rows] == test.sources and len(rows) == 18
    assert all(Path(r["source"]).suffix == ".off" for r in rows)
    assert [r["label"] for r in rows] == [test.class_names[i] for i in test.labels]
    for r in rows:
        probs = [float(v) for k, v in r.items() if k.startswith("prob_")]
        assert len(probs) == 6 and sum(probs) == pytest.approx(1.0, abs=1e-5)
    before = path.read_bytes()
    line = assert_one_line_error(main, args, capsys, drop_earlier=True)
    assert line == f"{PROG}: error: predict: {path}: exists; pass --overwrite to replace it"
    assert path.read_bytes() == before
    path.write_text("stale\n")
    again = run_main(main, [*args, "--overwrite"], capsys)
    assert again.code == 0, again.err[-3000:]
    assert _rows(path) == rows  # the same clouds and probabilities, the stale file replaced
