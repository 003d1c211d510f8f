"""Planted-signal tests of ``llm_methods.bed.experiment.claims`` (issue 42): each claim holds on
a planted gain, fails on a planted loss, a null method (the baseline in BED's place) is not
held, and the controls (saturated world, too-weak likelihood table, unsolvable grid) make a
claim inconclusive, never "not held"."""

from __future__ import annotations

import numpy as np

from llm_methods.bed import experiment as ex

GAMES = 200


def _games(p: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).binomial(1, p, GAMES).astype(float)


def _world(bed: float, prompt: float, entropy: float, random: float = 0.7) -> dict:
    return {
        "bed": _games(bed, 1),
        "prompt_sim": _games(prompt, 2),
        "entropy": _games(entropy, 3),
        "random": _games(random, 4),
    }


def test_claims_hold_on_a_planted_gain() -> None:
    world = _world(0.95, 0.6, 0.3)
    a, c = ex.claims(world, world, table_auc=0.9, oracle_bed=1.0)
    assert [x.verdict for x in (a, c)] == ["held", "held"]
    assert a.effect is not None and a.effect.method == "paired bootstrap"


def test_claims_fail_on_a_planted_loss() -> None:
    world = _world(0.3, 0.9, 0.9)
    a, c = ex.claims(world, world, table_auc=0.9, oracle_bed=1.0)
    assert [x.verdict for x in (a, c)] == ["not held", "not held"]


def test_null_method_is_not_held() -> None:
    """BED replaced by the baseline: an exact zero gain is below the 1-pt threshold."""
    world = _world(0.9, 0.9, 0.3)
    world["prompt_sim"] = world["bed"].copy()
    world["entropy"] = world["bed"].copy()
    a, c = ex.claims(world, world, table_auc=0.9, oracle_bed=1.0)
    assert [x.verdict for x in (a, c)] == ["not held"] * 2
    assert a.effect is not None and a.effect.method == "exact"


def test_too_weak_model_is_inconclusive_not_not_held() -> None:
    """Issue 42: claim (b) (called (c) before the review) was coded "not held" from a failed
    control (AUC 0.57)."""
    world = _world(0.95, 0.6, 0.3)
    animals = {k: np.zeros(GAMES) for k in world}  # everything at 0: ranks nothing
    _, c = ex.claims(world, animals, table_auc=0.57, oracle_bed=1.0)
    assert c.verdict == "inconclusive"
    assert [p.name for p in c.failed_preconditions] == ["SmolLM2 table informative"]
    _, c = ex.claims(world, world, table_auc=0.9, oracle_bed=0.2)
    assert c.verdict == "inconclusive" and c.criterion_met is True


def test_saturated_world_makes_a_inconclusive() -> None:
    world = _world(0.95, 0.6, 0.3, random=0.99)
    a, _ = ex.claims(world, world, table_auc=0.9, oracle_bed=1.0)
    assert a.verdict == "inconclusive"


def test_bed_over_entropy_on_the_exact_world_is_not_a_claim() -> None:
    """Issue 42 review: BED over entropy-only on the exact world is designed into the world
    (``test_bed.py::test_entropy_only_is_built_to_waste_turns_on_vague_questions``): it is
    reported, not judged, so a planted entropy-only win there changes no verdict."""
    exact = _world(0.95, 0.6, 0.99)  # entropy-only beats BED on the exact world
    animals = _world(0.95, 0.6, 0.3)
    claims = ex.claims(exact, animals, table_auc=0.9, oracle_bed=1.0)
    assert [c.verdict for c in claims] == ["held", "held"]
    exact["entropy"] = exact["bed"].copy()  # and a tie there neither
    assert [c.verdict for c in ex.claims(exact, animals, 0.9, 1.0)] == ["held", "held"]


def test_reference_world_is_the_pre_registered_one() -> None:
    assert ex._n_vague(ex.REFERENCE_VAGUE_SHARE) == 24  # issue 28's world
    assert [ex._n_vague(s) for s in ex.VAGUE_SHARES] == [0, 10, 20, 30]
