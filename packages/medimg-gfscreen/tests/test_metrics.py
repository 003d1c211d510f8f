from __future__ import annotations

import math

import numpy as np
import pytest

from medimg_gfscreen.metrics import case_metrics, dice, lesion_hits, nsd, summarize


def _masks():
    gt = np.zeros((20, 20, 10), bool)
    gt[2:5, 2:5, 2:4] = True  # lesion A, 18 voxels
    gt[12:15, 12:15, 5:7] = True  # lesion B
    pred = np.zeros_like(gt)
    pred[3:5, 3:5, 2:4] = True  # 8 voxels inside A
    return gt, pred


def test_dice_and_conventions() -> None:
    gt, pred = _masks()
    assert dice(pred, gt) == pytest.approx(2 * 8 / (8 + 36))
    empty = np.zeros_like(gt)
    assert dice(empty, empty) == 1.0  # healthy case, no false positive
    assert dice(pred, empty) == 0.0  # healthy case with a false positive


def test_lesion_hits_by_components() -> None:
    gt, pred = _masks()
    assert lesion_hits(pred, gt) == (1, 2)
    assert lesion_hits(pred, np.zeros_like(gt)) == (0, 0)


def test_nsd_perfect_and_empty() -> None:
    gt, _ = _masks()
    assert nsd(gt, gt, (1, 1, 3)) == pytest.approx(1.0)
    assert math.isnan(nsd(np.zeros_like(gt), gt, (1, 1, 3)))


def test_summarize_pools_lesions_and_healthy_false_positives() -> None:
    gt, pred = _masks()
    empty = np.zeros_like(gt)
    fp = np.zeros_like(gt)
    fp[0:4, 0:4, 0:2] = True  # 32 voxels on a healthy case
    cases = [
        case_metrics("a", pred, gt, (1, 1, 3)),
        case_metrics("b", gt, gt, (1, 1, 3)),
        case_metrics("h1", fp, empty, (1, 1, 3)),
        case_metrics("h2", empty, empty, (1, 1, 3)),
    ]
    s = summarize(cases, voxel_ml=0.003)
    assert s["lesion_recall"] == pytest.approx(3 / 4)
    assert s["case_recall"] == 1.0
    assert s["fp_voxels_healthy"] == pytest.approx(16.0)
    assert s["fp_case_rate_healthy"] == pytest.approx(0.5)
    assert s["n_lesions"] == 4
