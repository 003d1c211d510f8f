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

from iclr26_common.testing import assert_mutation_detected, assert_portable_close

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
# Tolerances: relative errors (iclr26_common.testing.relative_error: max |diff| / max |stored|),
# measured on an AMD EPYC (avx2 + avx512), 2026-12-06, over ATEN_CPU_CAPABILITY=default (with
# MKL_CBWR=COMPATIBLE), avx2, avx512, nothing set, one and two threads, and default with
# ONEDNN_MAX_CPU_ISA=SSE41 / OPENBLAS_CORETYPE=Prescott / NumPy's baseline kernels (the seeded
# clouds, features and scores come from NumPy's integer-based generators: the same bits on every
# CPU), each tolerance ~10x the largest:
# - encoders: 7.4e-7 (pointnet2_default; 5.7e-7 already with nothing set: the stored features
#   were recorded on another CPU), the others <= 2.4e-7;
# - propagation: 1.4e-7 (paper_k10_adjacency under default), the others <= 1e-7;
# - pipeline CSV numbers (written with 6 decimals): 8.2e-7, one last-digit flip (1e-6) of a
#   value at a rounding boundary; labels, predictions and metrics identical under every setting.
# Every mutation below moves the numbers by >= 0.11, > 10^4 x its tolerance.
ENCODER_TOL = 8e-6
PROPAGATION_TOL = 1.5e-6
PIPELINE_TOL = 8e-6


def _swap_axes(clouds: torch.Tensor) -> torch.Tensor:
    """The mutation of the encoder checks: (x, y, z) read as (z, y, x), a loader with another
    axis convention (ModelNet's meshes are y-up, others z-up)."""
    return clouds[..., [2, 1, 0]]


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
    clouds = make.seeded_clouds(points)
    ours = make.build_encoder(name)(clouds)
    expected = ENCODERS[name]
    assert ours.shape == expected.shape
    assert_portable_close(ours, expected, tol=ENCODER_TOL, what=name)
    swapped = make.build_encoder(name)(_swap_axes(clouds))
    assert_mutation_detected(swapped, expected, tol=ENCODER_TOL, what=f"{name}, axes swapped")


def test_checkpoint_encoder_gives_the_stored_outputs(tmp_path: Path) -> None:
    """An encoder read back from a ``fit``-style checkpoint (``load_encoder``) is the trained
    ``PointNet2Encoder`` itself: same seeded weights, same stored features."""
    from pointcloud_pgllm.lit_module import PointCloudClassifier
    from pointcloud_pgllm.model import encode, load_encoder

    _, kwargs, points = make.ENCODERS["pointnet2_tiny"]
    torch.manual_seed(make.MODEL_SEED)  # the encoder's weights are drawn first, as in the zoo
    module = PointCloudClassifier(num_classes=4, **kwargs)
    state = module.state_dict()
    expected = ENCODERS["pointnet2_tiny"]
    ckpt = tmp_path / "run.ckpt"
    torch.save({"state_dict": state, "hyper_parameters": dict(module.hparams)}, ckpt)
    ours = encode(load_encoder(str(ckpt)), make.seeded_clouds(points), device="cpu")
    assert_portable_close(ours, expected, tol=ENCODER_TOL, what="checkpoint encoder")
    # the defect this guards against: not the trained weights (here the first encoder weight of
    # the checkpoint zeroed, as a parameter that was not loaded)
    first = next(k for k in state if k.startswith("encoder.") and k.endswith("weight"))
    broken = tmp_path / "broken.ckpt"
    zeroed = {**state, first: torch.zeros_like(state[first])}
    torch.save({"state_dict": zeroed, "hyper_parameters": dict(module.hparams)}, broken)
    mutated = encode(load_encoder(str(broken)), make.seeded_clouds(points), device="cpu")
    assert_mutation_detected(mutated, expected, tol=ENCODER_TOL, what=f"{first} zeroed")


def test_propagation_outputs_are_the_stored_ones() -> None:
    ours = make.propagation_outputs()
    # the defect this guards against: features and scores of different nodes (the feature rows
    # rolled by one), which moves every graph and every propagated score
    mutated = make.propagation_outputs(roll_features=1)
    assert set(ours) == set(PROPAGATION.files)
    for key, value in ours.items():
        assert_portable_close(value, PROPAGATION[key], tol=PROPAGATION_TOL, what=key)
        assert_mutation_detected(
            mutated[key], PROPAGATION[key], tol=PROPAGATION_TOL, what=f"{key}, rows rolled"
        )


def _numeric(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return "." in value


def _numbers(rows: list[list[str]], like: list[list[str]]) -> np.ndarray:
    """The numeric cells of ``rows`` (where ``like`` has a number), as one array."""
    return np.array(
        [
            [float(a) for a, b in zip(row, want, strict=True) if _numeric(b)]
            for row, want in zip(rows[1:], like[1:], strict=True)
        ]
    )


def test_classify_and_ood_write_the_stored_numbers(tmp_path: Path) -> None:
    tree = make.make_tree(tmp_path)
    ours = make.pipeline_outputs(tree, tmp_path / "ours")
    # the defect this guards against: other inputs reach the scores (here one point fewer per
    # cloud, as an off-by-one in the sampler); its score columns move by >= 10x the tolerance
    fewer = [*make.PIPELINE_ARGS[:1], str(int(make.PIPELINE_ARGS[1]) - 1), *make.PIPELINE_ARGS[2:]]
    mutated = make.pipeline_outputs(tree, tmp_path / "mutated", args=fewer)
    for mode, stored in PIPELINE.items():
        rows, expected = ours[mode]["rows"], stored["rows"]
        assert rows[0] == expected[0] and len(rows) == len(expected), mode
        for row, want in zip(rows[1:], expected[1:], strict=True):
            # labels and predictions: discrete, the same on every CPU (no near-ties here)
            text = [(a, b) for a, b in zip(row, want, strict=True) if not _numeric(b)]
            assert all(a == b for a, b in text), (mode, row, want)
        numbers = _numbers(expected, expected)
        assert_portable_close(_numbers(rows, expected), numbers, tol=PIPELINE_TOL, what=mode)
        moved = _numbers(mutated[mode]["rows"], expected)
        assert_mutation_detected(moved, numbers, tol=PIPELINE_TOL, what=f"{mode}, one point less")
        # accuracies, AUROC and FPR95: ratios of counts and ranks, the same on every CPU
        assert set(ours[mode]["metrics"]) == set(stored["metrics"])
        for ablation, metrics in stored["metrics"].items():
            assert ours[mode]["metrics"][ablation] == pytest.approx(metrics, abs=1e-9), ablation
