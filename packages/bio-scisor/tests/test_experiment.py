from __future__ import annotations

import importlib.metadata

import pytest

from bio_scisor.experiment import (
    EXPERIMENT,
    METHODS,
    SHRINK_PCTS,
    SPEEDUP_MIN,
    claims,
    settings,
)
from iclr26_common import Experiment, derive_verdict


def _seed(rho: dict[str, float], keep: tuple[float, float], t: tuple[float, float]) -> dict:
    return {
        "rho": {m: {"all": rho.get(m, 0.0), "single": 0.0, "multi": 0.0} for m in METHODS},
        "shrink": {
            str(p): {"scisor_motifs": keep[0], "random_motifs": keep[1]} for p in SHRINK_PCTS
        },
        "timing": {"scisor_s": t[0], "ar_l_passes_s": t[1]},
    }


def test_registered_under_the_entry_point_group() -> None:
    (entry,) = [
        ep for ep in importlib.metadata.entry_points(group="iclr26.experiments")
        if ep.name == "bio-scisor.deletions"
    ]  # fmt: skip
    assert entry.load() is EXPERIMENT
    assert isinstance(EXPERIMENT, Experiment) and "2511.07390" in EXPERIMENT.paper


@pytest.mark.parametrize(
    ("rho", "keep", "t", "expected"),
    [
        ({"scisor_path": 0.6, "ar_lm": 0.5, "hmm": 0.4}, (0.9, 0.5), (0.01, 1.0), (1, 1, 1)),
        ({"scisor_path": 0.6, "ar_lm": 0.5, "hmm": 0.7}, (0.9, 0.5), (0.01, 1.0), (0, 1, 1)),
        ({"scisor_path": 0.6, "ar_lm": 0.6, "hmm": 0.6}, (0.5, 0.5), (0.01, 0.1), (1, 0, 1)),
        ({"scisor_path": 0.1, "ar_lm": 0.5, "hmm": 0.4}, (0.9, 0.5), (0.01, 0.05), (0, 1, 0)),
    ],
)
def test_verdict_rules(rho, keep, t, expected) -> None:
    per_seed = [_seed(rho, keep, t), _seed(rho, keep, t)]
    claim_list = claims(per_seed)
    assert [c.held for c in claim_list] == [bool(e) for e in expected]
    assert derive_verdict(claim_list) == ("held" if all(expected) else "not held")
    assert claim_list[2].measured["speedup"] == pytest.approx(t[1] / t[0])
    assert str(SPEEDUP_MIN) in claim_list[2].criterion


def test_scale() -> None:
    assert len(settings(False)["seeds"]) >= 2 and settings(True)["seeds"] == [0]
    assert settings(False)["steps"] > settings(True)["steps"]


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path) -> None:
    result = EXPERIMENT.run(True, tmp_path)
    assert len(result.claims) == 3 and (tmp_path / "deletions.png").is_file()
    assert set(result.metrics["spearman_all"]) == set(METHODS)
