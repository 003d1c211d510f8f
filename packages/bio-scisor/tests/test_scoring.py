from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from bio_scisor.io import encode
from bio_scisor.scoring import generate, score_path, shrink, shrink_positions


def _log_q(model, seq: str, s: int) -> np.ndarray:
    tokens = torch.from_numpy(encode(seq))[None]
    with torch.no_grad():
        return model(tokens, torch.tensor([len(seq)]), torch.tensor([s]))[0].double().numpy()


def _brute_path(model, wt: str, mutant: str) -> float:
    """Sum over every ordered sequence of d single deletions (no merging of equal children)."""
    d = len(wt) - len(mutant)
    total = 0.0

    def walk(seq: str, r: int, logp: float) -> None:
        nonlocal total
        if r == d:
            total += math.exp(logp) if seq == mutant else 0.0
            return
        log_q = _log_q(model, seq, d - r)
        for k in range(len(seq)):
            walk(seq[:k] + seq[k + 1 :], r + 1, logp + log_q[k])

    walk(wt, 0, 0.0)
    return math.log(total)


def test_single_deletion_sums_over_a_run(model) -> None:
    wt = "ACKKKDE"
    log_q = _log_q(model, wt, 1)
    got = score_path(model, wt, ["ACKKDE", "CKKKDE"])
    assert got[0] == pytest.approx(np.logaddexp.reduce(log_q[2:5]))  # any of the three K's
    assert got[1] == pytest.approx(log_q[0])


@pytest.mark.parametrize("mutant", ["ACDE", "ADEF", "CDKF", "AKF"])
def test_multi_deletion_path_matches_brute_force(model, mutant: str) -> None:
    wt = "ACDKEF" if mutant != "AKF" else "ACKDKF"
    assert score_path(model, wt, [mutant])[0] == pytest.approx(_brute_path(model, wt, mutant))


def test_score_path_rejects_non_deletions(model) -> None:
    with pytest.raises(ValueError, match="not a deletion"):
        score_path(model, "ACDE", ["ACDEF"])


def test_shrink_removes_ceil_pct(model) -> None:
    wt = "ACDEFGHIKLMNPQRSTVWY"
    gen = torch.Generator().manual_seed(0)
    for pct, k in [(10, 2), (12.5, 3), (30, 6)]:
        out = shrink(model, wt, pct, 1.0, gen)
        assert len(out) == len(wt) - k
        assert "".join(c for c in wt if c in out) == out  # a subsequence of the input
    assert shrink(model, wt, 20, 0.0) == shrink(model, wt, 20, 0.0)  # top-1 is deterministic
    with pytest.raises(ValueError, match="pct"):
        shrink(model, wt, 100)


def test_shrink_reports_the_deleted_positions(model) -> None:
    wt = "ACDEFGHIKLMNPQRSTVWYACDEF"
    out, deleted = shrink_positions(model, wt, 20, 1.0, torch.Generator().manual_seed(3))
    assert len(deleted) == 5 and deleted == sorted(set(deleted))
    assert "".join(c for i, c in enumerate(wt) if i not in deleted) == out


def test_generate_from_scratch(model) -> None:
    seq, times = generate(model, 12, torch.Generator().manual_seed(0), t_max=0.3)
    assert len(seq) == 12 and set(seq) <= set("ACDEFGHIKLMNPQRSTVWY")
    assert all(a >= b for a, b in itertools.pairwise([0.3, *times])) and len(times) >= 1
