"""The dispersion experiments' pre-registered claims, decided by 95 % intervals
(:mod:`iclr26_common.effects`).

Thresholds (module constants, fixed before the runs they judge; issue 40):

  (a) ``binned Pearson r(D, PPL) <= CORR_R_MAX`` (−0.5): the whole bootstrap interval of the
      binned r (chunks resampled with replacement, then sorted by perplexity and binned as in
      the official ``step2``) at or below −0.5;
  (b) over the compared (model, layer) pairs, the kNN-LM keys of the sub-layer (attention or
      FFN output) with the higher pilot dispersion against the best fixed choice (always FFN or
      always attention, whichever is better on the same pairs): 100 x mean paired difference of
      log PPL ``<= -MIN_SUBLAYER_GAIN_PCT`` (1 %), the whole paired interval over pairs at or
      below it (review of issue 40: the old rate against a coin flip, ``>= 0.5``, held for a D
      random with respect to key quality when one sub-layer is always better). Only pairs
      where kNN-LM helps with one of the two keys count (else the keys cannot be compared);
      precondition: at least ``MIN_SUBLAYER_PAIRS`` such pairs;
  (c) for each push-away λ > 0: the held-out change of log perplexity against λ = 0, paired
      over held-out chunks and seeds (same chunks, same seeds, same initial weights), is
      ``<= -MIN_PPL_GAIN_PCT`` % (1 %): the whole interval at or below it. Precondition (the
      sanity check that used to be claim (d): the loss maximises D, so "D rises" is nearly
      tautological): the seed-mean held-out last-layer D at that λ is above λ = 0's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from iclr26_common import Claim, Precondition
from iclr26_common.effects import (
    Effect,
    paired_effect,
    statistic_interval,
    units_needed,
)

__all__ = [
    "CORR_R_MAX",
    "MIN_PPL_GAIN_PCT",
    "MIN_SUBLAYER_GAIN_PCT",
    "MIN_SUBLAYER_PAIRS",
    "correlation_claim",
    "pushaway_claim",
    "sublayer_claim",
    "sublayer_outcome",
]

CORR_R_MAX = -0.5
MIN_SUBLAYER_GAIN_PCT = 1.0
MIN_SUBLAYER_PAIRS = 8
MIN_PPL_GAIN_PCT = 1.0
#: bootstrap resamples of the binned r (each one sorts and bins all chunks)
CORR_RESAMPLES = 2000
MIN_BINS = 10


def correlation_claim(
    ppl: np.ndarray,
    dispersion: np.ndarray,
    bin_size: int,
    correlation: Callable[[np.ndarray, np.ndarray, int], float],
    *,
    model: str,
    seed: int = 0,
) -> Claim:
    """Claim (a) from per-chunk perplexities ``ppl`` [N] and last-layer dispersions [N]:
    ``correlation(ppl, d, bin_size)`` is the binned Pearson r (paper Sec. 3, Fig. 1), its
    interval a bootstrap over chunks (``statistic_interval``, paired: a chunk keeps its PPL and
    D). Precondition: at least ``MIN_BINS`` bins (a correlation over fewer says little)."""
    ppl = np.asarray(ppl, dtype=np.float64)
    dispersion = np.asarray(dispersion, dtype=np.float64)
    interval = statistic_interval(
        (ppl, dispersion),
        lambda p, d: correlation(p, d, bin_size),
        seed=seed,
        units="chunks",
        n_resamples=CORR_RESAMPLES,
    )
    n = len(ppl)
    estimate = interval.estimate
    if interval.method == "exact":
        effect_method, spread = "exact", 0.0
    else:
        effect_method = "bootstrap"
        spread = (interval.high - interval.low) / 2 / 1.96 * math.sqrt(n)
    effect = Effect(
        name=f"binned Pearson r(D, PPL), {model}",
        unit="",
        estimate=estimate,
        low=interval.low,
        high=interval.high,
        threshold=CORR_R_MAX,
        direction="<=",
        method=effect_method,
        n=n,
        units=f"chunks (sorted by PPL, bins of {bin_size})",
        paper=None,
        resample_seed=interval.resample_seed,
        spread=spread,
        n_needed=n
        if effect_method == "exact"
        else units_needed(spread, estimate, CORR_R_MAX, "<=", t_based=False),
    )
    n_bins = n // bin_size
    return Claim.test(
        text=f"Last-layer dispersion correlates negatively with perplexity (binned), {model}.",
        effect=effect,
        measured={"n_chunks": n, "n_bins": n_bins, "bin_size": bin_size},
        preconditions=[
            Precondition(
                "enough bins",
                f"number of bins >= {MIN_BINS}",
                {"n_bins": n_bins},
                n_bins >= MIN_BINS,
            )
        ],
    )


def sublayer_outcome(
    d_attn: float, d_ffn: float, ppl_attn: float, ppl_ffn: float, lm_ppl: float
) -> dict[str, Any]:
    """One (model, layer) pair of claim (b): which sub-layer the higher dispersion picks,
    whether its kNN-LM keys give the strictly lower perplexity (``won``), and whether kNN-LM
    helps with either key (``comparable``: min PPL < the LM's alone)."""
    pick, other = ("attn", "ffn") if d_attn >= d_ffn else ("ffn", "attn")
    ppl = {"attn": ppl_attn, "ffn": ppl_ffn}
    return {
        "d_attn": round(float(d_attn), 4),
        "d_ffn": round(float(d_ffn), 4),
        "ppl_attn": round(float(ppl_attn), 3),
        "ppl_ffn": round(float(ppl_ffn), 3),
        "lm_ppl": round(float(lm_ppl), 3),
        "picked": pick,
        "won": bool(ppl[pick] < ppl[other]),
        "comparable": bool(min(ppl.values()) < lm_ppl),
    }


def sublayer_claim(pairs: dict[str, dict[str, Any]], *, seed: int = 0) -> Claim:
    """Claim (b) from :func:`sublayer_outcome` rows keyed ``"MODEL/layer L"``, over the
    comparable pairs: ``100 * mean(log PPL(D's pick) - log PPL(best fixed choice))``, the best
    fixed choice being always-FFN or always-attention, whichever has the lower mean log PPL on
    the same pairs; paired interval over pairs (:func:`paired_effect`) against
    ``-MIN_SUBLAYER_GAIN_PCT``. A D that picks one type throughout scores exactly 0 and a D
    random with respect to quality scores above 0: neither holds (the old rate criterion
    against a coin flip let both hold; review of issue 40). Pairs share a model and text, so
    they are not independent: the interval treats them as if they were (README, Deviations)."""
    comparable = {k: v for k, v in pairs.items() if v["comparable"]}
    wins = sum(v["won"] for v in comparable.values())
    log_attn = np.log([float(v["ppl_attn"]) for v in comparable.values()])
    log_ffn = np.log([float(v["ppl_ffn"]) for v in comparable.values()])
    picked_ffn = np.array([v["picked"] == "ffn" for v in comparable.values()], dtype=bool)
    fixed = "ffn" if log_ffn.sum() <= log_attn.sum() else "attn"
    log_fixed = log_ffn if fixed == "ffn" else log_attn
    log_pick = np.where(picked_ffn, log_ffn, log_attn)
    name = (
        "kNN-LM log-PPL change, higher-D sub-layer's keys vs the best fixed sub-layer "
        f"(always {fixed})"
    )
    if len(comparable) >= 2:
        effect = paired_effect(
            log_pick,
            log_fixed,
            name=name,
            unit="% (100 x delta log PPL)",
            scale=100.0,
            threshold=-MIN_SUBLAYER_GAIN_PCT,
            direction="<=",
            seed=seed,
        )
    else:  # too few pairs for an interval: the precondition below fails, so inconclusive
        diff = float(100.0 * np.sum(log_pick - log_fixed))
        effect = Effect(
            name=name,
            unit="% (100 x delta log PPL)",
            estimate=diff,
            low=diff,
            high=diff,
            threshold=-MIN_SUBLAYER_GAIN_PCT,
            direction="<=",
            method="exact",
            n=max(1, len(comparable)),
            units="items",
        )
    return Claim.test(
        text="Picking the attention or FFN sub-layer output by its higher dispersion gives "
        "better kNN-LM keys than the best fixed sub-layer choice (over layers and models).",
        effect=effect,
        measured={
            "wins": wins,
            "comparable": len(comparable),
            "best_fixed": fixed,
            "picked_best_fixed": int(np.sum(picked_ffn == (fixed == "ffn"))),
            "fixed_wins": int(np.sum(log_fixed < np.where(fixed == "ffn", log_attn, log_ffn))),
            "pairs": pairs,
        },
        preconditions=[
            Precondition(
                "kNN-LM helps on enough layers",
                f">= {MIN_SUBLAYER_PAIRS} (model, layer) pairs with min(PPL(attn keys), "
                "PPL(FFN keys)) < PPL(LM alone)",
                {"comparable": len(comparable), "pairs": len(pairs)},
                len(comparable) >= MIN_SUBLAYER_PAIRS,
            )
        ],
    )


def pushaway_claim(
    lam: float,
    log_ppl: np.ndarray,
    log_ppl_zero: np.ndarray,
    d_last: Sequence[float],
    d_last_zero: Sequence[float],
) -> Claim:
    """Claim (c) at one λ > 0: ``log_ppl``/``log_ppl_zero`` [seeds, chunks] are the held-out
    chunks' log perplexities at λ and at λ = 0 (same seeds, chunks, initial weights), the effect
    ``100 · (mean log PPL(λ) − mean log PPL(0))`` (≈ % change of PPL) with the paired interval
    (the wider of a bootstrap over chunks and a t-interval over seeds); ``d_last``: per-seed
    held-out last-layer D at λ and at 0 (the sanity-check precondition)."""
    effect = paired_effect(
        np.asarray(log_ppl, dtype=np.float64),
        np.asarray(log_ppl_zero, dtype=np.float64),
        name=f"held-out log-PPL change, lambda={lam} vs 0",
        unit="% (100 x delta log PPL)",
        scale=100.0,
        threshold=-MIN_PPL_GAIN_PCT,
        direction="<=",
        seed=0,
    )
    d, d0 = float(np.mean(d_last)), float(np.mean(d_last_zero))
    return Claim.test(
        text=f"Push-away training (lambda={lam}) lowers held-out perplexity.",
        effect=effect,
        measured={
            "ppl": round(float(np.exp(np.mean(log_ppl))), 3),
            "ppl_lambda_0": round(float(np.exp(np.mean(log_ppl_zero))), 3),
        },
        preconditions=[
            Precondition(
                "push-away raised dispersion (sanity check)",
                f"seed-mean held-out last-layer D(lambda={lam}) > D(0)",
                {"d": round(d, 4), "d_lambda_0": round(d0, 4)},
                d > d0,
            )
        ],
    )
