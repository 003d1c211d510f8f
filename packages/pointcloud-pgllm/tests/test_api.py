"""The Python API (``pointcloud_pgllm.api``): classify / detect_ood return the numbers the CLI
writes, reject bad input with one-line ``PGLLMInputError``s, and take a scorer object."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from pointcloud_pgllm.api import PipelineOptions, classify, detect_ood
from pointcloud_pgllm.cli import main
from pointcloud_pgllm.errors import PGLLMInputError, PGLLMUsageError
from pointcloud_pgllm.results import write_results

OPTIONS = PipelineOptions(n_points=128)
CLI_OPTIONS = ["--n-points", "128"]
ID_CLASSES = ["chair", "cup", "airplane"]


def _written(out: Path, name: str) -> tuple[list[list[str]], dict]:
    with open(out / name, newline="") as handle:
        rows = list(csv.reader(handle))
    return rows, json.loads((out / "metrics.json").read_text())


def _same_as_written(result, rows: list[list[str]], payload: dict, n_fixed: int) -> None:
    """The API's result carries exactly the numbers the CLI wrote."""
    assert payload["metrics"] == result.metrics  # JSON round-trips floats exactly
    settings = {k: v for k, v in payload.items() if k not in ("metrics", "timings_s")}
    assert settings == result.settings
    assert [r[0] for r in rows[1:]] == result.sources
    assert [r[2] for r in rows[1:]] == result.predicted()
    assert [r[3] for r in rows[1:]] == result.predicted("none")
    written = np.array([[float(v) for v in r[n_fixed:]] for r in rows[1:]])
    np.testing.assert_allclose(written, result.scores["both"], atol=5e-7, rtol=0)


def test_classify_returns_what_the_cli_writes(small_tree: Path, tmp_path: Path) -> None:
    result = classify(small_tree, options=OPTIONS)
    assert main(["classify", "--data", str(small_tree), *CLI_OPTIONS, "--out", str(tmp_path)]) == 0
    rows, payload = _written(tmp_path, "predictions.csv")
    assert len(result) == 18 and result.scores["both"].shape == (18, 6)
    assert result.settings["graph_k"] == payload["graph_k"] == 10  # ACC.py's K by default
    assert set(result.metrics) == {"none", "guidance", "propagation", "both"}
    assert result.features.shape == (18, 72 * 16) and len(result.captions) == 18
    _same_as_written(result, rows, payload, n_fixed=4)
    # the Python result written by the writer is the CLI's file, row for row
    api_rows, _ = _written(write_results(result, tmp_path / "api")[0].parent, "predictions.csv")
    assert api_rows == rows


def test_detect_ood_returns_what_the_cli_writes(small_tree: Path, tmp_path: Path) -> None:
    result = detect_ood(small_tree, id_classes=ID_CLASSES, options=OPTIONS)
    args = ["ood", "--data", str(small_tree), *CLI_OPTIONS, "--id-classes", ",".join(ID_CLASSES)]
    assert main([*args, "--out", str(tmp_path)]) == 0
    rows, payload = _written(tmp_path, "ood_scores.csv")
    assert result.settings["graph_k"] == payload["graph_k"] == 3  # AUROC.py's K by default
    assert result.class_names == ID_CLASSES and int((result.labels < 0).sum()) == 9
    assert set(result.metrics["both"]) == {"accuracy", "auroc", "fpr95"}
    _same_as_written(result, rows, payload, n_fixed=6)
    written_id = np.array([float(r[4]) for r in rows[1:]])
    np.testing.assert_allclose(written_id, result.id_score(), atol=5e-7, rtol=0)
    assert [r[1] for r in rows[1:]].count("OOD") == 9


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: PipelineOptions(scorer="http"), "--scorer http needs --base-url and --model"),
        (lambda: PipelineOptions(graph="radius"), "--graph: 'radius'"),
        (lambda: classify(), "give --data, or --captions with --features"),
        (lambda: classify("x", captions="c.json", features="f.npy"), "exclude each other"),
        (lambda: classify(captions="c.json"), "--captions and --features go together"),
        (lambda: detect_ood("x"), "give one of --id-classes and --id-split"),
        (lambda: detect_ood("x", id_split="MN9"), "--id-split: 'MN9'"),
        (
            lambda: detect_ood("x", id_split="MN1", ood_score="single-probability"),
            "--ood-score single-probability needs --scorer http",
        ),
    ],
)
def test_bad_options_raise_one_line_usage_errors(make, needle: str) -> None:  # type: ignore[no-untyped-def]
    """Option problems are PGLLMUsageError (the CLI prints them as its subcommand's usage
    error)."""
    with pytest.raises(PGLLMUsageError) as info:
        make()
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_alpha_keeps_the_propagation_wording() -> None:
    """``alpha must be ...`` as graph.propagate said it (the CLI's line before api.py)."""
    with pytest.raises(PGLLMInputError) as info:
        PipelineOptions(alpha=1.5)
    assert str(info.value) == "alpha must be in [0, 1], got 1.5"
    assert not isinstance(info.value, PGLLMUsageError)


def test_fewer_than_two_classes_is_refused_before_the_scorer(
    small_tree: Path, tmp_path: Path
) -> None:
    """One class used to reach sklearn's "at least 2 classes" ValueError in the tfidf fit."""
    with pytest.raises(PGLLMUsageError, match=r"^--id-classes: give at least 2 distinct"):
        detect_ood(small_tree, id_classes=["chair"], options=OPTIONS)
    with pytest.raises(PGLLMUsageError, match=r"^--classes: give at least 2 distinct"):
        classify(small_tree, classes=["chair"], options=OPTIONS)
    from pointcloud_pgllm.synth import generate_dataset

    one = generate_dataset(tmp_path / "one", ["chair"], n_train=2, n_test=3, seed=0)
    with pytest.raises(PGLLMInputError) as info:
        classify(one, options=PipelineOptions(n_points=64, graph_k=1, guidance_k=1))
    assert str(info.value) == f"{one}: holds 1 class (chair); recognition needs at least 2"
    assert not isinstance(info.value, PGLLMUsageError)  # a data error: the top-level line


def test_bad_data_raises_one_line_input_errors(small_tree: Path) -> None:
    with pytest.raises(PGLLMInputError, match="'sofa' is not in") as info:
        detect_ood(small_tree, id_classes=["chair", "sofa"], options=OPTIONS)
    assert "--id-classes" in str(info.value) and not isinstance(info.value, PGLLMUsageError)
    with pytest.raises(PGLLMInputError, match=r"must be in 1\.\.17 for 18 clouds"):
        classify(small_tree, options=PipelineOptions(n_points=128, graph_k=18))


class FirstClassScorer:
    """Scores every item 1.0 for the first class, 0.0 for the others."""

    def score(self, queries, class_names):  # type: ignore[no-untyped-def]
        out = np.zeros((len(queries), len(class_names)))
        out[:, 0] = 1.0
        return out


def test_a_scorer_object_replaces_the_named_one(small_tree: Path) -> None:
    result = classify(small_tree, options=OPTIONS, scorer=FirstClassScorer())
    assert result.settings["scorer"] == "FirstClassScorer"
    assert set(result.predicted("none")) == {"airplane"}  # the scorer's answers, unrefined
    assert result.metrics["none"]["accuracy"] == pytest.approx(3 / 18)


def test_writer_checks_every_output_before_writing_any(small_tree: Path, tmp_path: Path) -> None:
    """A metrics.json already in the folder stops the run before predictions.csv is written
    (the CLI used to write the CSV first and fail on the JSON); since issue 36 the folder is
    checked as a whole (:func:`iclr26_common.outputs.check_out_folder`): earlier results need
    ``overwrite``."""
    from iclr26_common.outputs import OutputError

    result = classify(small_tree, options=OPTIONS, scorer=FirstClassScorer())
    (tmp_path / "metrics.json").write_text("mine")
    with pytest.raises(OutputError, match=r"holds earlier results; pass --overwrite"):
        write_results(result, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]
    assert (tmp_path / "metrics.json").read_text() == "mine"
    csv_path, json_path = write_results(result, tmp_path, overwrite=True)
    assert json.loads(json_path.read_text())["scorer"] == "FirstClassScorer"
    assert len(csv_path.read_text().splitlines()) == 19
