from __future__ import annotations

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
from iclr26_common.testing import registered_experiment


def _seed(
    rho: dict[str, tuple[float, float]],
    keep: tuple[float, float],
    t: tuple[float, float],
    loss: tuple[float, float] = (1.0, 2.0),
) -> dict:
    """rho: method -> (single, multi); keep: (SCISOR, random); t: (SCISOR, AR batched);
    loss: held-out (SCISOR, uniform)."""
    return {
        "rho": {
            m: {"all": 0.9, "single": rho.get(m, (0.0, 0.0))[0], "multi": rho.get(m, (0.0, 0.0))[1]}
            for m in METHODS
        },
        "heldout_loss": {"scisor": loss[0], "uniform": loss[1]},
        "shrink": {
            str(p): {"scisor_motifs": keep[0], "random_motifs": keep[1]} for p in SHRINK_PCTS
        },
        "timing": {"scisor_s": t[0], "ar_batched_s": t[1], "ar_l_passes_s": 10 * t[1]},
    }


def test_registered_under_the_entry_point_group() -> None:
    assert registered_experiment("bio-scisor.deletions") is EXPERIMENT
    assert isinstance(EXPERIMENT, Experiment) and "2511.07390" in EXPERIMENT.paper


GOOD = {"scisor_path": (0.6, 0.5), "ar_lm": (0.5, 0.4), "hmm": (0.4, 0.45)}


@pytest.mark.parametrize(
    ("rho", "keep", "t", "loss", "expected"),
    [
        (GOOD, (0.9, 0.5), (0.01, 1.0), (1.0, 2.0), ("held", "held", "held")),
        # (a) fails on multi only; (c) 5x against the batched AR LM (50x against batch 1)
        (
            {**GOOD, "hmm": (0.4, 0.55)},
            (0.9, 0.5),
            (0.01, 0.05),
            (1.0, 2.0),
            ("not held", "held", "not held"),
        ),
        # (a) fails on single only; (b) equal retention is not "more"
        (
            {**GOOD, "ar_lm": (0.7, 0.4)},
            (0.5, 0.5),
            (0.01, 0.1),
            (1.0, 2.0),
            ("not held", "not held", "held"),
        ),
        # controls: no baseline carries signal on multi; random keeps every motif
        (
            {**GOOD, "ar_lm": (0.5, 0.05), "hmm": (0.4, 0.0)},
            (1.0, 1.0),
            (0.01, 1.0),
            (1.0, 2.0),
            ("inconclusive", "inconclusive", "held"),
        ),
        # control: SCISOR's held-out loss is not below 0.9 x the uniform denoiser's
        (GOOD, (0.9, 0.5), (0.01, 1.0), (1.9, 2.0), ("inconclusive", "held", "held")),
    ],
)
def test_verdict_rules(rho, keep, t, loss, expected) -> None:
    per_seed = [_seed(rho, keep, t, loss), _seed(rho, keep, t, loss)]
    claim_list = claims(per_seed)
    assert [c.verdict for c in claim_list] == list(expected)
    assert claim_list[2].measured["speedup"] == pytest.approx(t[1] / t[0])
    assert str(SPEEDUP_MIN) in claim_list[2].criterion and "batches" in claim_list[2].criterion
    assert "single" in claim_list[0].criterion and "multi" in claim_list[0].criterion
    overall = (
        "held"
        if all(e == "held" for e in expected)
        else ("not held" if "not held" in expected else "inconclusive")
    )
    assert derive_verdict(claim_list) == overall


def test_scale() -> None:
    assert len(settings(False)["seeds"]) >= 2 and settings(True)["seeds"] == [0]
    assert settings(False)["steps"] > settings(True)["steps"]


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path) -> None:
    result = EXPERIMENT.run(True, tmp_path)
    assert len(result.claims) == 3 and (tmp_path / "deletions.png").is_file()
    assert set(result.metrics["spearman"]["single"]) == set(METHODS)
