"""Stored outputs (issue 29): the encoders, the propagation operators and the classify / ood
pipeline give the numbers stored in ``data/stored_outputs`` (made by its
``make_stored_outputs.py`` before the refactors), so a change that moves a number fails here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

STORED = Path(__file__).parent / "data" / "stored_outputs"
_spec = importlib.util.spec_from_file_location(
    "make_stored_outputs", STORED / "make_stored_outputs.py"
)
assert _spec is not None and _spec.loader is not None
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

ENCODERS = np.load(make.ENCODER_FILE)
PROPAGATION = np.load(make.PROPAGATION_FILE)
PIPELINE = json.loads(make.PIPELINE_FILE.read_text())
FLOAT32 = {"rtol": 1e-5, "atol": 1e-6}


def test_fixtures_are_small_and_complete() -> None:
    assert set(ENCODERS.files) == set(make.ENCODERS)
    assert len(PROPAGATION.files) == 2 * len(make.VARIANTS) * len(make.GRAPH_KS)
    assert set(PIPELINE) == set(make.PIPELINE_RUNS)
    for path in (make.ENCODER_FILE, make.PROPAGATION_FILE, make.PIPELINE_FILE, make.SIDECAR):
        assert path.stat().st_size < 200_000
    assert json.loads(make.SIDECAR.read_text())["command"] == make.COMMAND


@pytest.mark.parametrize("name", list(make.ENCODERS))
def test_encoder_outputs_are_the_stored_ones(name: str) -> None:
    _, _, points = make.ENCODERS[name]
    ours = make.build_encoder(name)(make.seeded_clouds(points))
    expected = torch.from_numpy(ENCODERS[name])
    assert ours.shape == expected.shape
    torch.testing.assert_close(ours.detach(), expected, **FLOAT32)


def test_checkpoint_encoder_gives_the_stored_outputs(tmp_path: Path) -> None:
    """An encoder read back from a ``fit``-style checkpoint (``load_encoder``) is the trained
    ``PointNet2Encoder`` itself: same seeded weights, same stored features."""
    from pointcloud_pgllm.lit_module import PointCloudClassifier
    from pointcloud_pgllm.model import encode, load_encoder

    _, kwargs, points = make.ENCODERS["pointnet2_tiny"]
    torch.manual_seed(make.MODEL_SEED)  # the encoder's weights are drawn first, as in the zoo
    module = PointCloudClassifier(num_classes=4, **kwargs)
    ckpt = tmp_path / "run.ckpt"
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, ckpt)
    ours = encode(load_encoder(str(ckpt)), make.seeded_clouds(points), device="cpu")
    torch.testing.assert_close(ours, torch.from_numpy(ENCODERS["pointnet2_tiny"]), **FLOAT32)


def test_propagation_outputs_are_the_stored_ones() -> None:
    ours = make.propagation_outputs()
    assert set(ours) == set(PROPAGATION.files)
    for key, value in ours.items():
        torch.testing.assert_close(
            torch.from_numpy(value), torch.from_numpy(PROPAGATION[key]), msg=key, **FLOAT32
        )


def _numeric(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return "." in value


def test_classify_and_ood_write_the_stored_numbers(tmp_path: Path) -> None:
    ours = make.pipeline_outputs(make.make_tree(tmp_path), tmp_path)
    for mode, stored in PIPELINE.items():
        rows, expected = ours[mode]["rows"], stored["rows"]
        assert rows[0] == expected[0] and len(rows) == len(expected), mode
        for row, want in zip(rows[1:], expected[1:], strict=True):
            text = [(a, b) for a, b in zip(row, want, strict=True) if not _numeric(b)]
            assert all(a == b for a, b in text), (mode, row, want)
            got = [float(a) for a, b in zip(row, want, strict=True) if _numeric(b)]
            np.testing.assert_allclose(got, [float(b) for b in want if _numeric(b)], atol=2e-6)
        assert set(ours[mode]["metrics"]) == set(stored["metrics"])
        for ablation, metrics in stored["metrics"].items():
            assert ours[mode]["metrics"][ablation] == pytest.approx(metrics, abs=1e-9), ablation
