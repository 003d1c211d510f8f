"""Planted-number tests of ``llm_methods.mbok.experiment.claims`` (issue 27 review #8): each claim
can hold, fail, and (a) becomes inconclusive when its precondition (the Boolean optimiser
flipped weights) fails; and the tuning rule's constants are what the README records."""

from __future__ import annotations

from typing import Any

import pytest

from llm_methods.mbok import experiment as ex


def _measured(**over: Any) -> dict[str, Any]:
    m = {
        "mbok_k2_ppl": 100.0,
        "onebit_ste_ppl": 150.0,
        "mbok_k2_flips": 5000,
        "mbok_k2_flip_fraction": 3e-3,
        "mbok_k2_state_bytes_per_weight": 4.0,
        "onebit_ste_state_bytes_per_weight": 8.0,
        "mbok_k2_scales_only_ppl": 300.0,
        "mbok_k2_bits": 2.15,
        "onebit_ste_bits": 1.08,
    }
    m.update(over)
    return m


def test_both_claims_hold_on_planted_wins() -> None:
    a, b = ex.claims(_measured())
    assert (a.verdict, b.verdict) == ("held", "held")
    assert a.measured["ratio"] == pytest.approx(100 / 150)
    assert a.measured["mbok_k2_scales_only_ppl"] == 300.0  # the control is reported with (a)
    assert b.measured["ratio"] == pytest.approx(0.5)


def test_claims_fail_on_planted_losses() -> None:
    a, b = ex.claims(
        _measured(
            mbok_k2_ppl=176.2,
            onebit_ste_ppl=158.4,
            mbok_k2_state_bytes_per_weight=8.04,
            onebit_ste_state_bytes_per_weight=8.02,
        )
    )
    assert (a.verdict, b.verdict) == ("not held", "not held")
    a, _ = ex.claims(_measured(mbok_k2_ppl=150.0))  # ratio exactly 1.0 is not < 1.0
    assert a.verdict == "not held"


def test_claim_a_inconclusive_when_nothing_flipped() -> None:
    """A winning ratio from an optimiser that flipped (almost) nothing compares the SVID start
    with a trained OneBit: inconclusive, whatever the ratio says (kept as criterion_met)."""
    a, b = ex.claims(_measured(mbok_k2_flips=1, mbok_k2_flip_fraction=0.5 * ex.MIN_FLIP_FRACTION))
    assert a.verdict == "inconclusive" and a.criterion_met is True
    assert [p.name for p in a.failed_preconditions] == ["MBOK's Boolean optimiser flipped weights"]
    assert b.verdict == "held"  # (b) has no such precondition
    a, _ = ex.claims(_measured(mbok_k2_flip_fraction=ex.MIN_FLIP_FRACTION))  # boundary passes
    assert a.verdict == "held"


def test_tuning_grids_are_the_same_relative_grid_around_the_defaults() -> None:
    assert ex.BOOL_LR_GRID == pytest.approx((0.01 / 3, 0.01, 0.03))
    assert ex.LATENT_LR_GRID == pytest.approx((4e-4 / 3, 4e-4, 1.2e-3))
    ratios = [x / y for x, y in zip(ex.BOOL_LR_GRID, ex.LATENT_LR_GRID, strict=True)]
    assert max(ratios) == pytest.approx(min(ratios))


def test_metric_keys_match_what_claims_read() -> None:
    assert ex._key("MBOK K=2") == "mbok_k2" and ex._key("OneBit-STE") == "onebit_ste"
    assert ex._key("MBOK K=2 scales only") == "mbok_k2_scales_only"


def test_tune_applies_the_rule_lowest_validation_ppl_per_method(tiny, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The full run's tuning (review #3): every grid value of both methods is trained and scored
    on the validation batches, and the lowest validation perplexity is chosen."""
    import torch

    from llm_methods.mbok import distill

    monkeypatch.setattr(ex, "TUNE_STEPS", 2)
    monkeypatch.setattr(ex, "BOOL_LR_GRID", (0.01, 0.03, 3.0))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 300, (3, 2, 12), generator=g)
    batches = [{"input_ids": i, "attention_mask": torch.ones_like(i)} for i in ids]
    names = distill.select_linears(tiny.model, ["mlp.down_proj", "mlp.up_proj"], "all")
    out = ex.tune(tiny.model, batches[:2], batches[2:], names)
    for field in ("bool_lr", "latent_lr"):
        scores, grid = out[f"{field}_val_ppl"], out[f"{field}_grid"]
        assert len(scores) == len(grid) == 3 and len(set(scores)) > 1  # the values differ
        assert out[field] == grid[scores.index(min(scores))]
