"""Issue 39: ``classify`` / ``ood`` warn when ``--graph-k`` is not below the smallest class's
cloud count (at HEAD d9942d3 such a K silently degraded the result: none 0.76 vs both 0.35 on 2
clouds per class), and ``ood`` writes a ROC plot (none at HEAD d9942d3). Every test here fails
there."""

from __future__ import annotations

import stat
import warnings
from pathlib import Path

import pytest

from iclr26_common.testing import run_main
from pointcloud_pgllm.api import PipelineOptions, classify
from pointcloud_pgllm.cli import main
from pointcloud_pgllm.errors import PGLLMWarning


def test_graph_k_at_the_class_size_warns_and_keeps_k(small_tree: Path) -> None:
    """small_tree has 3 test clouds per class: K = 3 warns (and is used as given: warn, not
    cap, since capping by the labels would let them into the predictions); K = 2 does not."""
    with pytest.warns(PGLLMWarning, match=r"--graph-k 3 is not below the 3 clouds of the"):
        result = classify(small_tree, options=PipelineOptions(n_points=128, graph_k=3))
    assert result.settings["graph_k"] == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", PGLLMWarning)
        classify(small_tree, options=PipelineOptions(n_points=128, graph_k=2))


def test_cli_prints_the_graph_k_warning_as_one_line(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = ["classify", "--data", str(small_tree), "--n-points", "128", "--quiet"]
    run = run_main(main, [*args, "--graph-k", "4", "--out", str(tmp_path / "a")], capsys)
    assert run.code == 0, run.err
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pointcloud-pgllm: warning: --graph-k 4 is"), (
        run.err
    )
    assert "give --graph-k 2 or less" in lines[0]
    run = run_main(main, [*args, "--graph-k", "2", "--out", str(tmp_path / "b")], capsys)
    assert run.code == 0 and run.err.strip() == "", run.err


def test_ood_writes_a_roc_plot_that_classify_overwrite_removes(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from matplotlib.image import imread

    out = tmp_path / "run"
    common = ["--data", str(small_tree), "--n-points", "128", "--graph-k", "2", "--quiet"]
    ood = ["ood", *common, "--id-classes", "chair,cup", "--out", str(out)]
    run = run_main(main, ood, capsys)
    assert run.code == 0, run.err
    roc = out / "roc.png"
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "ood_scores.csv", "roc.png"]
    # the "wrote" line names every file written (issue 39 review: roc.png was not named)
    wrote = [line for line in run.out.splitlines() if line.startswith("wrote ")]
    assert wrote == [f"wrote {out / 'ood_scores.csv'}, {out / 'metrics.json'} and {roc}"], run.out
    assert roc.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert stat.S_IMODE(roc.stat().st_mode) == 0o644
    height, width = imread(roc).shape[:2]
    assert width > 300 and height > 300
    # classify --overwrite into the same folder leaves no stale ood plot behind
    run = run_main(main, ["classify", *common, "--out", str(out), "--overwrite"], capsys)
    assert run.code == 0, run.err
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "predictions.csv"]
    wrote = [line for line in run.out.splitlines() if line.startswith("wrote ")]
    assert wrote == [f"wrote {out / 'predictions.csv'} and {out / 'metrics.json'}"], run.out


def test_roc_plot_draws_one_curve_per_ablation(tmp_path: Path) -> None:
    import numpy as np

    from pointcloud_pgllm.results import PGLLMResult, plot_roc

    labels = np.array([0, 1, -1, -1, 0, -1])
    scores = {a: np.eye(2)[[0, 1, 0, 1, 0, 1]] * 0.8 + 0.1 for a in ("none", "both")}
    result = PGLLMResult(
        mode="ood",
        sources=[f"s{i}" for i in range(6)],
        labels=labels,
        class_names=["a", "b"],
        scores=scores,
        metrics={"none": {"auroc": 0.5}, "both": {"auroc": 0.5}},
        timings_s={},
        captions=[""] * 6,
        features=np.zeros((6, 2)),
    )
    path = plot_roc(result, tmp_path / "roc.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
