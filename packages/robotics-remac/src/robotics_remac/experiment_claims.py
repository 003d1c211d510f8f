"""The miniature experiment's pre-registered claims (``robotics-remac.async``): thresholds, the
verdict rule, the preconditions and the claim texts, fixed before any run. The measurement that
feeds them is :func:`robotics_remac.experiment.measure`.

  (a) naive async success drops from d=0 to d=4 by >= ``NAIVE_DROP_MIN`` (10 points);
  (b) REMAC's drop is at most ``REMAC_DROP_RATIO_MAX`` (1/2) of naive's;
  (c) LoRA-only is within ``LORA_ONLY_GAP_MAX`` (5 points) of naive at d=4: the 95 % CI of the
      paired difference (both on the same ``paired_episodes`` episodes) lies inside ±5 points;
  (d) REMAC's per-chunk latency after merging LoRA is <= ``LATENCY_RATIO_MAX`` (1.05) x naive's,
      measured inside the asynchronous loop (observation to committed chunk, median over
      boundaries) at every batch size of ``LATENCY_BATCHES`` (1, 8, 32);
  (e) under a misestimated delay (true d=3, REMAC told d=2 and d=4) REMAC's mean success is at
      least naive's at d=3.

Preconditions (positive controls; a failed one makes the claim "inconclusive"): the base policy
learned (naive success at d=0 beats a zero-action controller on the same episodes by >=
``POLICY_LEARNED_MARGIN``, 25 points) for (a), (b), (c), (e); for (b) also REMAC learned (same
rule at d=0) and naive has a drop to halve (>= ``NAIVE_DROP_MIN``); for (c) also the paired CI
decides (it lies inside the ±5-point band or wholly outside it).
"""

from __future__ import annotations

from iclr26_common import Claim, Precondition

__all__ = [
    "CLAIM_TEXTS",
    "CRITERIA",
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
    "claims",
    "drop",
    "preconditions",
    "verdict_checks",
]

NAIVE_DROP_MIN = 0.10
REMAC_DROP_RATIO_MAX = 0.5
LORA_ONLY_GAP_MAX = 0.05
LATENCY_RATIO_MAX = 1.05
POLICY_LEARNED_MARGIN = 0.25  # precondition: success(d=0) - success(zero action) >= 25 points
FLOAT_TOL = 1e-9  # thresholds are inclusive; 15/300 - 0 must count as exactly 5 points
MISESTIMATE_TRUE_DELAY = 3
MISESTIMATE_ASSUMED = (2, 4)
LATENCY_BATCHES = (1, 8, 32)
LATENCY_DELAY = 2  # the delay REMAC is merged for and the loop runs at for claim (d)


def drop(curve: dict[int, float]) -> float:
    """Success at d=0 minus success at d=4."""
    return curve[0] - curve[4]


def verdict_checks(m: dict[str, float]) -> dict[str, bool]:
    """The pre-registered checks on the measured numbers (see the module docstring)."""
    naive_drop, remac_drop = m["naive_drop"], m["remac_drop"]

    def le(a: float, b: float) -> bool:  # inclusive, robust to float error in count ratios
        return a <= b + FLOAT_TOL

    return {
        "naive_drops": le(NAIVE_DROP_MIN, naive_drop),
        "remac_flatter": naive_drop > 0 and le(remac_drop, REMAC_DROP_RATIO_MAX * naive_drop),
        "lora_only_like_naive": le(-LORA_ONLY_GAP_MAX, m["paired_ci_low"])
        and le(m["paired_ci_high"], LORA_ONLY_GAP_MAX),
        "latency": le(m["latency_ratio"], LATENCY_RATIO_MAX),
        "misestimate": le(m["naive_d3"], m["remac_misestimated"]),
    }


CLAIM_TEXTS = {
    "naive_drops": "Naive asynchronous execution loses success as the delay grows (the failure "
    "REMAC targets exists in this task).",
    "remac_flatter": "REMAC's success-vs-delay curve is much flatter than naive's.",
    "lora_only_like_naive": "LoRA finetuning alone (no mask) gives no gain over naive.",
    "latency": "After merging LoRA, REMAC costs no extra inference time per chunk.",
    "misestimate": "REMAC stays robust when the delay it is told is off by one step.",
}
CRITERIA = {
    "naive_drops": f"naive success(d=0) - success(d=4) >= {100 * NAIVE_DROP_MIN:.0f} points",
    "remac_flatter": f"REMAC drop (d=0 -> 4) <= {REMAC_DROP_RATIO_MAX} x naive drop (naive drop > 0)",
    "lora_only_like_naive": "95 % CI of the paired difference LoRA-only(d=4) - naive(d=4) (same "
    f"episodes) inside +-{100 * LORA_ONLY_GAP_MAX:.0f} points",
    "latency": f"merged REMAC per-chunk latency in the async loop <= {LATENCY_RATIO_MAX} x "
    f"naive's (median over boundaries, d={LATENCY_DELAY}) at every batch of {list(LATENCY_BATCHES)}",
    "misestimate": f"mean REMAC success at true d={MISESTIMATE_TRUE_DELAY} told d in "
    f"{list(MISESTIMATE_ASSUMED)} >= naive success at d={MISESTIMATE_TRUE_DELAY}",
}
MEASURED_KEYS = {
    "naive_drops": ("naive_d0", "naive_d4", "naive_drop"),
    "remac_flatter": ("remac_d0", "remac_d4", "remac_drop", "naive_drop"),
    "lora_only_like_naive": (
        "lora_only_d4_paired",
        "naive_d4_paired",
        "paired_diff",
        "paired_ci_low",
        "paired_ci_high",
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


def _learned(who: str, key: str, m: dict[str, float]) -> Precondition:
    margin = m[key] - m["zero_action_d0"]
    return Precondition(
        f"{who} learned",
        f"{who} success(d=0) - zero-action success(d=0) >= {100 * POLICY_LEARNED_MARGIN:.0f} "
        "points (same episodes)",
        {key: round(m[key], 4), "zero_action_d0": round(m["zero_action_d0"], 4)},
        margin >= POLICY_LEARNED_MARGIN - FLOAT_TOL,
    )


def preconditions(m: dict[str, float]) -> dict[str, list[Precondition]]:
    """The pre-registered controls of each claim (module docstring): whether it *can* be tested."""
    base = _learned("base policy (naive)", "naive_d0", m)
    naive_drop = Precondition(
        "naive has a drop to halve",
        f"naive success(d=0) - success(d=4) >= {100 * NAIVE_DROP_MIN:.0f} points",
        {"naive_drop": round(m["naive_drop"], 4)},
        m["naive_drop"] >= NAIVE_DROP_MIN - FLOAT_TOL,
    )
    gap, lo, hi = LORA_ONLY_GAP_MAX, m["paired_ci_low"], m["paired_ci_high"]
    decides = Precondition(
        "the paired CI decides",
        f"95 % CI of the paired difference inside +-{100 * gap:.0f} points or wholly outside "
        "that band",
        {"paired_ci_low": round(lo, 4), "paired_ci_high": round(hi, 4)},
        (-gap - FLOAT_TOL <= lo and hi <= gap + FLOAT_TOL) or lo > gap or hi < -gap,
    )
    return {
        "naive_drops": [base],
        "remac_flatter": [base, _learned("REMAC", "remac_d0", m), naive_drop],
        "lora_only_like_naive": [base, decides],
        "latency": [],
        "misestimate": [base],
    }


def claims(m: dict[str, float]) -> list[Claim]:
    checks, controls = verdict_checks(m), preconditions(m)
    return [
        Claim.judge(
            text=CLAIM_TEXTS[k],
            criterion=CRITERIA[k],
            measured={x: round(m[x], 4) for x in MEASURED_KEYS[k]},
            holds=held,
            preconditions=controls[k],
        )
        for k, held in checks.items()
    ]
