"""Issue 22: PointLLM's real outputs (the captions JSON of ``eval_modelnet_cls.py`` and a features
``.npy``) feed ``classify`` / ``ood``; every field relied on is checked, bad input is one line
naming the file and the field (exit 2)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from iclr26_common.testing import assert_one_line_error
from pointcloud_pgllm.cli import main
from pointcloud_pgllm.constants import MODELNET40_CLASSES
from pointcloud_pgllm.errors import PGLLMInputError
from pointcloud_pgllm.pointllm_io import read_features, read_pointllm_captions

# PointLLM's label names (modelnet40_shape_names_modified.txt: spaces, not underscores).
WORDS = {
    "airplane": "wings fuselage jet engines tail",
    "flower pot": "pot soil round planter rim",
    "chair": "seat backrest armrest cushion",
    "table": "flat tabletop wooden surface",
}


def write_pointllm(folder: Path, n_per_class: int, seed: int) -> tuple[Path, Path]:
    """``ModelNet_classification_prompt0.json`` and ``features.npy`` in the published layout
    (eval_modelnet_cls.py: ``json.dump({"prompt", "results": [...]}, indent=2)``)."""
    rng = np.random.default_rng(seed)
    results, feats = [], []
    centres = rng.normal(size=(len(WORDS), 32)) * 3.0
    for k in range(n_per_class * len(WORDS)):
        c = k % len(WORDS)
        name = list(WORDS)[c]
        noise = " ".join(rng.choice(["grey", "small", "model", "object", "3D", "simple"], 3))
        results.append(
            {
                "object_id": k,
                "ground_truth": MODELNET40_CLASSES.index(name.replace(" ", "_")),
                "model_output": f"This is a {noise} {WORDS[name]}.",
                "label_name": name,
            }
        )
        feats.append(centres[c] + rng.normal(size=32))
    folder.mkdir(parents=True, exist_ok=True)
    captions = folder / "ModelNet_classification_prompt0.json"
    captions.write_text(json.dumps({"prompt": "What is this?", "results": results}, indent=2))
    features = folder / "features.npy"
    np.save(features, np.asarray(feats, dtype=np.float32))
    return captions, features


@pytest.fixture(scope="module")
def pointllm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pointllm")
    test_json, test_npy = write_pointllm(root / "test", 6, seed=0)
    train_json, _ = write_pointllm(root / "train", 5, seed=1)
    return {"captions": test_json, "features": test_npy, "train": train_json}


def pointllm_args(
    pointllm: dict[str, Path],
    *extra: str,
    command: str = "classify",
    captions: Path | None = None,
    features: Path | None = None,
) -> list[str]:
    """``COMMAND --captions C --features F --train-data T *extra`` on the fixture's PointLLM
    outputs (``captions`` / ``features``: another file in that place)."""
    return [
        command,
        "--captions",
        str(captions or pointllm["captions"]),
        "--features",
        str(features or pointllm["features"]),
        "--train-data",
        str(pointllm["train"]),
        *extra,
    ]


def test_published_layout_reads_with_modelnet40_labels(pointllm: dict[str, Path]) -> None:
    data = read_pointllm_captions(pointllm["captions"])
    assert data.class_names == list(MODELNET40_CLASSES)
    assert len(data) == 24
    # "flower pot" (PointLLM) is ModelNet40's class 15 "flower_pot"; items cycle through WORDS
    assert data.labels[:4].tolist() == [0, 15, 8, 33]
    assert data.captions[1].endswith("pot soil round planter rim.")
    assert read_features(pointllm["features"], len(data)).shape == (24, 32)
    subset = read_pointllm_captions(pointllm["captions"], ["chair", "flower_pot"])
    assert subset.labels[:4].tolist() == [-1, 1, 0, -1]


def _mutate(path: Path, tmp_path: Path, change) -> Path:  # type: ignore[no-untyped-def]
    payload = json.loads(path.read_text())
    change(payload)
    out = tmp_path / "bad.json"
    out.write_text(json.dumps(payload))
    return out


BAD_JSON = {
    "results": (lambda p: p.pop("results"), "field 'results'"),
    "order": (lambda p: p["results"][2].update(object_id=5), "results[2].object_id"),
    "caption": (lambda p: p["results"][3].update(model_output=None), "results[3].model_output"),
    "label": (lambda p: p["results"][4].pop("label_name"), "results[4].label_name"),
    "truth": (lambda p: p["results"][1].update(ground_truth=3), "results[1].ground_truth"),
}


@pytest.mark.parametrize("case", sorted(BAD_JSON))
def test_bad_captions_json_is_one_line_naming_file_and_field(
    case: str, pointllm: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    change, field = BAD_JSON[case]
    bad = _mutate(pointllm["captions"], tmp_path, change)
    with pytest.raises(PGLLMInputError, match=field.replace("[", r"\[").replace("]", r"\]")):
        read_pointllm_captions(bad)
    args = pointllm_args(pointllm, "--out", str(tmp_path / "o"), captions=bad)
    line = assert_one_line_error(main, args, capsys)
    assert str(bad) in line and field in line


def test_bad_features_are_one_line_naming_the_file(
    pointllm: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    good = np.load(pointllm["features"])
    cases = {
        "rows.npy": (good[:-1], "23 rows"),
        "nan.npy": (np.where(np.arange(24)[:, None] == 7, np.nan, good), "row 7"),
        "flat.npy": (good.reshape(-1), "shape [N, D]"),
        "objects.npy": (np.array([None] * 24, dtype=object), "not a plain .npy"),
    }
    for name, (array, words) in cases.items():
        path = tmp_path / name
        np.save(path, array, allow_pickle=True)
        args = pointllm_args(pointllm, "--out", str(tmp_path / "o"), features=path)
        line = assert_one_line_error(main, args, capsys)
        assert str(path) in line and words in line, (name, line)
    fake = tmp_path / "fake.npy"
    fake.write_text("[[0.1 0.2]]")
    with pytest.raises(PGLLMInputError, match="no NumPy header"):
        read_features(fake, 24)
    text = tmp_path / "concat_f_values_MN.txt"
    text.write_text(str(good))
    with pytest.raises(PGLLMInputError, match=r"\.npy"):
        read_features(text, 24)


def test_classify_runs_on_pointllm_outputs(pointllm: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cls"
    args = pointllm_args(pointllm, "--out", str(out))
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["captions"] == str(pointllm["captions"]) and metrics["data"] is None
    assert metrics["n_clouds"] == 24 and metrics["classes"] == list(MODELNET40_CLASSES)
    # the captions carry their class words, so the scorer (fitted on the train JSON) is right
    assert metrics["metrics"]["none"]["accuracy"] > 0.9
    rows = list(csv.DictReader((out / "predictions.csv").open()))
    assert [r["source"] for r in rows[:2]] == [f"{pointllm['captions']}#{i}" for i in (0, 1)]
    assert rows[1]["label"] == "flower_pot"
    # --classes keeps those items and their own feature rows
    sub = tmp_path / "sub"
    assert main([*args[:-1], str(sub), "--classes", "chair,table", "--graph-k", "3"]) == 0
    rows = list(csv.DictReader((sub / "predictions.csv").open()))
    assert [r["source"].split("#")[1] for r in rows[:3]] == ["2", "3", "6"]


def test_features_may_be_an_array(pointllm: dict[str, Path]) -> None:
    """From Python, PointLLM's features can be an array ``[N, D]``: the same numbers as its
    ``.npy`` file; a wrong shape is one line naming the field."""
    from pointcloud_pgllm.api import PipelineOptions, classify

    options = PipelineOptions(train_data=pointllm["train"])
    from_file = classify(
        captions=pointllm["captions"], features=pointllm["features"], options=options
    )
    array = np.load(pointllm["features"])
    from_array = classify(captions=pointllm["captions"], features=array, options=options)
    for ablation, scores in from_file.scores.items():
        np.testing.assert_array_equal(from_array.scores[ablation], scores)
    assert from_array.settings["features"] == "<array 24x32>"
    with pytest.raises(PGLLMInputError, match=r"^features: need a numeric array \[24, D\]"):
        classify(captions=pointllm["captions"], features=array[:23], options=options)


def test_ood_runs_on_pointllm_outputs(pointllm: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "ood"
    extra = ["--id-classes", "airplane,chair", "--out", str(out)]
    assert main(pointllm_args(pointllm, *extra, command="ood")) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["graph_k"] == 3 and metrics["classes"] == ["airplane", "chair"]
    assert {"auroc", "fpr95", "accuracy"} <= set(metrics["metrics"]["both"])


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--data", "somewhere"], "exclude each other"),
        (["--drop-features"], "go together"),
        (["--drop-train"], "--train-data"),
        (["--train-is-eval"], "never see the evaluation labels"),
    ],
)
def test_pointllm_inputs_misused_are_refused(
    extra: list[str],
    words: str,
    pointllm: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    args = pointllm_args(pointllm, "--out", str(tmp_path / "o"))
    if extra[0] == "--drop-features":
        del args[3:5]  # --features F
    elif extra[0] == "--drop-train":
        del args[5:7]  # --train-data T
    elif extra[0] == "--train-is-eval":
        args[6] = str(pointllm["captions"])
    else:
        args += extra
    line = assert_one_line_error(main, args, capsys)
    assert words in line


def _unlabelled(path: Path, tmp_path: Path) -> Path:
    payload = json.loads(path.read_text())
    for item in payload["results"]:
        del item["label_name"], item["ground_truth"]
    out = tmp_path / "unlabelled.json"
    out.write_text(json.dumps(payload))
    return out


def test_unlabelled_captions_are_scored_against_classes(
    pointllm: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Review of issue 22, #5: before the fix --classes dropped every unlabelled item ("no
    item's label_name is one of --classes") and without it the class list was empty."""
    captions = _unlabelled(pointllm["captions"], tmp_path)
    args = pointllm_args(pointllm, "--graph-k", "3", captions=captions)
    out = tmp_path / "cls"
    assert main([*args, "--classes", "chair,table", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_clouds"] == 24 and metrics["classes"] == ["chair", "table"]
    assert metrics["metrics"] == {}  # no labels, no accuracy
    rows = list(csv.DictReader((out / "predictions.csv").open()))
    assert len(rows) == 24 and {r["label"] for r in rows} == {""}
    assert {r["predicted"] for r in rows} <= {"chair", "table"}
    assert "kept" not in capsys.readouterr().err  # nothing was left out
    line = assert_one_line_error(main, [*args, "--out", str(tmp_path / "o2")], capsys)
    assert "label_name" in line and "--classes" in line and "unlabelled.json" in line


def test_classes_dropping_captions_says_how_many(
    pointllm: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Review of issue 22, #11: before the fix the 12 items of other classes went silently."""
    extra = ["--classes", "chair,table", "--graph-k", "3", "--out", str(tmp_path / "o")]
    assert main(pointllm_args(pointllm, *extra)) == 0
    err = capsys.readouterr().err
    assert f"{pointllm['captions']}: kept 12 of 24 items (--classes)" in err


def test_pointllm_features_are_raw_by_default_as_in_the_official_scripts(
    pointllm: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of issue 22, #1: ACC.py / AUROC.py fit the k-NN on PointLLM's raw features; before
    the fix the CLI always L2-normalised them (graph and guidance neighbours)."""
    import pointcloud_pgllm.pipeline as pipeline

    seen: dict[str, list] = {"graph": [], "guidance": []}
    build, nearest = pipeline.build_graph, pipeline.nearest_neighbours

    def spy_build(feats, *a, **k):  # type: ignore[no-untyped-def]
        seen["graph"].append(feats.norm(dim=1).numpy().copy())
        return build(feats, *a, **k)

    def spy_nearest(feats, *a, **k):  # type: ignore[no-untyped-def]
        seen["guidance"].append(feats.norm(dim=1).numpy().copy())
        return nearest(feats, *a, **k)

    monkeypatch.setattr(pipeline, "build_graph", spy_build)
    monkeypatch.setattr(pipeline, "nearest_neighbours", spy_nearest)
    raw = np.linalg.norm(np.load(pointllm["features"]), axis=1)
    assert raw.min() > 2.0  # the fixture's features are far from unit norm
    args = pointllm_args(pointllm)
    for extra, expected, flag in (([], raw, False), (["--normalize"], np.ones_like(raw), True)):
        out = tmp_path / f"o{len(extra)}"
        assert main([*args, *extra, "--out", str(out)]) == 0
        for stage in ("graph", "guidance"):
            np.testing.assert_allclose(seen[stage].pop(), expected, rtol=1e-5)
        assert json.loads((out / "metrics.json").read_text())["normalize"] is flag
