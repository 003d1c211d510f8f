"""The miniature experiment's pre-registered claims (``robotics-remac.async``): thresholds, the
effects with their 95 % intervals, the preconditions and the claim texts, fixed before any run.
The measurement that feeds them is :func:`robotics_remac.experiment.measure`.

Every claim is decided by an interval (:meth:`iclr26_common.Claim.test`): held when the whole
95 % interval lies on the holding side of the threshold, not held when it lies wholly on the
other, inconclusive (underpowered) when it straddles it. The cells share their episodes
(evaluation seed 1, the same target motion, jumps and action noise for every method and delay),
so the success effects are **paired over episodes** (:func:`iclr26_common.effects.points_effect`,
0/1 per episode, in points):

  (a) naive's drop ``success(d=0) - success(d=4) >= NAIVE_DROP_MIN`` (10 points);
  (b) REMAC's drop is at most ``REMAC_DROP_RATIO_MAX`` (1/2) of naive's: the paired effect
      ``½·naive drop - REMAC drop >= 0`` (per episode ``½(n₀ - n₄) - (r₀ - r₄)``);
  (c) LoRA-only is within ``LORA_ONLY_GAP_MAX`` (5 points) of naive at d=4 on the same
      ``paired_episodes`` episodes: ``|LoRA-only - naive|`` within 5 points (equivalence);
  (d) merged REMAC's per-chunk latency is <= ``LATENCY_RATIO_MAX`` (1.05) x naive's, measured
      inside the asynchronous loop at the **upstream width** (``UPSTREAM_SIZES``) at every batch
      of ``LATENCY_BATCHES``: per batch the difference of mean log latencies (merged - naive,
      x100, "log-%"; unpaired, bootstrap over chunk boundaries) <= ``100·ln 1.05``; the claim
      takes the batch that decides it (a not-held batch first, then an underpowered one, else
      the one with the highest upper bound);
  (e) under a misestimated delay (true d=3, REMAC told d=2 and d=4) REMAC's mean success minus
      naive's at d=3 >= 0 (paired over episodes).

Preconditions (positive controls; a failed one makes the claim "inconclusive"): the base policy
learned (naive success at d=0 beats a zero-action controller on the same episodes by >=
``POLICY_LEARNED_MARGIN``, 25 points) for (a), (b), (c), (e); for (b) also REMAC learned (same
rule at d=0) and naive has a drop to halve (claim (a)'s interval held); for (c) also the base is
converged: continuing the base's plain flow-matching training for the finetune's epochs gains
less than ``CONTINUED_GAIN_MAX`` (5 points) at d=4 on the paired episodes (the whole paired
interval below +5 points), so that a LoRA-only gain would not just be more training (issue 38).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from iclr26_common import Claim, Precondition
from iclr26_common.effects import Effect, difference_effect, points_effect
from robotics_remac.settings import PolicySizes

__all__ = [
    "CLAIM_TEXTS",
    "CONTINUED_GAIN_MAX",
    "EXEC_HORIZON",
    "HORIZON",
    "LATENCY_BATCHES",
    "LATENCY_DELAY",
    "LATENCY_RATIO_MAX",
    "LORA_ONLY_GAP_MAX",
    "MEASURED_KEYS",
    "MISESTIMATE_ASSUMED",
    "MISESTIMATE_TRUE_DELAY",
    "NAIVE_DROP_MIN",
    "POLICY_LEARNED_MARGIN",
    "REMAC_DROP_RATIO_MAX",
    "RESAMPLE_SEED",
    "SAMPLE_KEYS",
    "UPSTREAM_SIZES",
    "claims",
    "drop",
    "effects",
    "latency_effects",
    "preconditions",
]

NAIVE_DROP_MIN = 0.10
REMAC_DROP_RATIO_MAX = 0.5
LORA_ONLY_GAP_MAX = 0.05
LATENCY_RATIO_MAX = 1.05
POLICY_LEARNED_MARGIN = 0.25  # precondition: success(d=0) - success(zero action) >= 25 points
CONTINUED_GAIN_MAX = 0.05  # precondition of (c): continued base training gains < 5 points
FLOAT_TOL = 1e-9  # thresholds are inclusive; 15/300 - 0 must count as exactly 5 points
MISESTIMATE_TRUE_DELAY = 3
MISESTIMATE_ASSUMED = (2, 4)
LATENCY_BATCHES = (1, 8, 32)
LATENCY_DELAY = 2  # the delay REMAC is merged for and the loop runs at for claim (d)
HORIZON = 8  # chunk length H
#: execution horizon e: the one value valid for every d in 0..4 with H = 8 (max(1, d) <= e <= H - d)
EXEC_HORIZON = 4
#: The official ``model_async_lora.ModelConfig`` widths (channel_dim 256, channel_hidden_dim
#: 512, token_hidden_dim 64, num_layers 4): claim (d) is timed at this width.
UPSTREAM_SIZES = PolicySizes(channels=256, hidden=512, token_hidden=64, depth=4)
RESAMPLE_SEED = 0  # the bootstrap's resampling seed of every effect
PTS = 100.0  # 0/1 successes -> points

#: The per-episode / per-boundary samples the effects are computed from (``measure`` fills them):
#: 0/1 successes on the evaluation episodes (``{method}_d{d}``, ``remac_d3_told{a}``), on the
#: paired episodes of claim (c) at d=4 (``paired_*``), and in-loop latencies in seconds
#: (``latency_{naive,remac_merged}_b{B}``).
SAMPLE_KEYS = (
    "naive_d0",
    "naive_d3",
    "naive_d4",
    "remac_d0",
    "remac_d4",
    *(f"remac_d{MISESTIMATE_TRUE_DELAY}_told{a}" for a in MISESTIMATE_ASSUMED),
    "paired_lora_only",
    "paired_naive",
    "paired_continued",
    *(f"latency_{n}_b{b}" for n in ("naive", "remac_merged") for b in LATENCY_BATCHES),
)


def drop(curve: dict[int, float]) -> float:
    """Success at d=0 minus success at d=4."""
    return curve[0] - curve[4]


def _paired(a: np.ndarray, b: np.ndarray, name: str, threshold: float, direction: str) -> Effect:
    return points_effect(
        a,
        b,
        name=name,
        threshold=threshold,
        direction=direction,  # type: ignore[arg-type]
        seed=RESAMPLE_SEED,
    )


def latency_effects(s: Mapping[str, np.ndarray]) -> dict[int, Effect]:
    """Claim (d) per batch: ``100·(mean ln latency(merged) - mean ln latency(naive))`` with its
    unpaired bootstrap interval over chunk boundaries, against ``100·ln LATENCY_RATIO_MAX``."""
    out = {}
    for b in LATENCY_BATCHES:
        out[b] = difference_effect(
            np.log(s[f"latency_remac_merged_b{b}"]),
            np.log(s[f"latency_naive_b{b}"]),
            name=f"log latency ratio merged REMAC / naive at batch {b}",
            unit="log-%",
            scale=PTS,
            threshold=PTS * math.log(LATENCY_RATIO_MAX),
            direction="<=",
            units="chunk boundaries per arm",
            seed=RESAMPLE_SEED,
        )
    return out


def _deciding(per_batch: dict[int, Effect]) -> Effect:
    """The batch that decides an every-batch claim: a not-held one, else an underpowered one,
    else the highest upper bound (all held)."""
    rank = {"not held": 0, "underpowered": 1, "held": 2}
    return min(per_batch.values(), key=lambda e: (rank[e.decide()], -e.high))


def effects(s: Mapping[str, np.ndarray]) -> dict[str, Effect]:
    """The effect of each claim from the samples (keys :data:`SAMPLE_KEYS`)."""
    n0, n3, n4, r0, r4 = (
        s[k] for k in ("naive_d0", "naive_d3", "naive_d4", "remac_d0", "remac_d4")
    )
    told = [s[f"remac_d{MISESTIMATE_TRUE_DELAY}_told{a}"] for a in MISESTIMATE_ASSUMED]
    return {
        "naive_drops": _paired(n0, n4, "naive drop d=0->4", PTS * NAIVE_DROP_MIN, ">="),
        "remac_flatter": _paired(
            REMAC_DROP_RATIO_MAX * (n0 - n4),
            r0 - r4,
            f"{REMAC_DROP_RATIO_MAX:g} x naive drop - REMAC drop (d=0->4)",
            0.0,
            ">=",
        ),
        "lora_only_like_naive": _paired(
            s["paired_lora_only"],
            s["paired_naive"],
            "LoRA-only - naive at d=4",
            PTS * LORA_ONLY_GAP_MAX,
            "within",
        ),
        "latency": _deciding(latency_effects(s)),
        "misestimate": _paired(
            np.mean(told, axis=0),
            n3,
            f"REMAC told {list(MISESTIMATE_ASSUMED)} - naive at true d={MISESTIMATE_TRUE_DELAY}",
            0.0,
            ">=",
        ),
    }


CLAIM_TEXTS = {
    "naive_drops": "Naive asynchronous execution loses success as the delay grows (the failure "
    "REMAC targets exists in this task).",
    "remac_flatter": "REMAC's success-vs-delay curve is much flatter than naive's.",
    "lora_only_like_naive": "LoRA finetuning alone (no mask) gives no gain over naive.",
    "latency": "After merging LoRA, REMAC costs no extra inference time per chunk.",
    "misestimate": "REMAC stays robust when the delay it is told is off by one step.",
}
MEASURED_KEYS = {
    "naive_drops": ("naive_d0", "naive_d4", "naive_drop"),
    "remac_flatter": ("remac_d0", "remac_d4", "remac_drop", "naive_drop"),
    "lora_only_like_naive": (
        "lora_only_d4_paired",
        "naive_d4_paired",
        "continued_d4_paired",
        "paired_episodes",
    ),
    "latency": (
        *(f"latency_ratio_b{b}" for b in LATENCY_BATCHES),
        "naive_latency_ms_b1",
        "remac_merged_latency_ms_b1",
        "latency_ratio",
    ),
    "misestimate": ("remac_misestimated", "naive_d3"),
}


def _learned(who: str, key: str, m: Mapping[str, float]) -> Precondition:
    margin = m[key] - m["zero_action_d0"]
    return Precondition(
        f"{who} learned",
        f"{who} success(d=0) - zero-action success(d=0) >= {100 * POLICY_LEARNED_MARGIN:.0f} "
        "points (same episodes)",
        {key: round(m[key], 4), "zero_action_d0": round(m["zero_action_d0"], 4)},
        margin >= POLICY_LEARNED_MARGIN - FLOAT_TOL,
    )


def continued_gain(s: Mapping[str, np.ndarray]) -> Effect:
    """The control of claim (c): continued plain training of the base minus the base at d=4 on
    the paired episodes, against ``CONTINUED_GAIN_MAX`` (the whole interval below it passes)."""
    return _paired(
        s["paired_continued"],
        s["paired_naive"],
        "continued base training - base at d=4",
        PTS * CONTINUED_GAIN_MAX,
        "<=",
    )


def preconditions(
    m: Mapping[str, float], s: Mapping[str, np.ndarray], eff: Mapping[str, Effect] | None = None
) -> dict[str, list[Precondition]]:
    """The pre-registered controls of each claim (module docstring): whether it *can* be tested."""
    eff = effects(s) if eff is None else eff
    base = _learned("base policy (naive)", "naive_d0", m)
    naive = eff["naive_drops"]
    naive_drop = Precondition(
        "naive has a drop to halve",
        f"claim (a)'s interval held: naive drop >= {100 * NAIVE_DROP_MIN:.0f} points",
        {"naive_drop_pts": round(naive.estimate, 2), "low": round(naive.low, 2)},
        naive.decide() == "held",
    )
    cont = continued_gain(s)
    converged = Precondition(
        "base converged",
        f"continued plain training of the base for the finetune's epochs gains < "
        f"{100 * CONTINUED_GAIN_MAX:.0f} points at d=4 (whole 95 % paired interval below)",
        {
            "gain_pts": round(cont.estimate, 2),
            "low": round(cont.low, 2),
            "high": round(cont.high, 2),
        },
        cont.decide() == "held" and cont.high < cont.threshold,
    )
    return {
        "naive_drops": [base],
        "remac_flatter": [base, _learned("REMAC", "remac_d0", m), naive_drop],
        "lora_only_like_naive": [base, converged],
        "latency": [],
        "misestimate": [base],
    }


def claims(m: Mapping[str, float], s: Mapping[str, np.ndarray]) -> list[Claim]:
    """The five claims decided by their effects' intervals (``m``: the point numbers reported
    with each claim, :data:`MEASURED_KEYS` and ``zero_action_d0``; ``s``: :data:`SAMPLE_KEYS`)."""
    eff = effects(s)
    controls = preconditions(m, s, eff)
    return [
        Claim.test(
            text=CLAIM_TEXTS[k],
            effect=effect,
            preconditions=controls[k],
            measured={x: round(float(m[x]), 4) for x in MEASURED_KEYS[k]},
        )
        for k, effect in eff.items()
    ]
