"""Claim (d)'s measurement for the miniature experiment: per-chunk latency inside the
asynchronous loop of naive sampling, merged REMAC and unmerged REMAC, at the official width
(:data:`~robotics_remac.experiment_claims.UPSTREAM_SIZES`; issue 38: the trained miniature's 32
channels timed Python overhead, not the matmuls a deployment waits for)."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch

from robotics_remac.experiment_claims import (
    EXEC_HORIZON,
    HORIZON,
    LATENCY_BATCHES,
    LATENCY_DELAY,
    UPSTREAM_SIZES,
)

__all__ = ["latency_metrics", "measure_latency", "upstream_width_policies"]


def latency_metrics(latencies: dict[str, dict[int, np.ndarray]]) -> dict[str, float]:
    """Claim (d)'s numbers from :func:`robotics_remac.rollout.loop_latency` output (keys
    ``naive``, ``remac_merged`` and optionally ``remac_unmerged``): per batch ``B`` the median
    per-chunk latency ``{name}_latency_ms_bB`` and ``latency_ratio_bB`` = merged REMAC / naive;
    ``latency_ratio`` is the largest ratio over the batches (the claim must hold at each)."""
    out: dict[str, float] = {}
    for name, per_batch in latencies.items():
        for b, values in per_batch.items():
            out[f"{name}_latency_ms_b{b}"] = 1000 * float(np.median(values))
    ratios = [
        out[f"remac_merged_latency_ms_b{b}"] / out[f"naive_latency_ms_b{b}"]
        for b in latencies["naive"]
    ]
    for b, ratio in zip(latencies["naive"], ratios, strict=True):
        out[f"latency_ratio_b{b}"] = ratio
    out["latency_ratio"] = max(ratios)
    return out


def upstream_width_policies(seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A base policy and its REMAC (masked LoRA, rank 4) at the official width
    (:data:`~robotics_remac.experiment_claims.UPSTREAM_SIZES`), randomly initialised with LoRA
    ``B`` drawn non-zero (a trained REMAC's update is non-zero): latency does not depend on the
    weights' values, only on the shapes and the merged structure."""
    import copy

    from robotics_remac.model import FlowPolicy, LoRALinear, add_lora

    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        base = FlowPolicy(horizon=HORIZON, **asdict(UPSTREAM_SIZES)).eval()
        remac = add_lora(copy.deepcopy(base)).eval()
    with torch.no_grad():
        for layer in remac.modules():
            if isinstance(layer, LoRALinear):
                layer.lora_B.copy_(0.01 * torch.randn(layer.lora_B.shape, generator=gen))
    return base, remac


def measure_latency(
    chunks: int,
    batches: tuple[int, ...] = LATENCY_BATCHES,
    delay: int = LATENCY_DELAY,
    policies: tuple[torch.nn.Module, torch.nn.Module] | None = None,
) -> tuple[dict[str, float], dict[str, dict[int, np.ndarray]]]:
    """Claim (d): per-chunk latency inside the asynchronous loop (``rollout`` at ``d = delay``,
    ``e = EXEC_HORIZON``) of naive sampling with the base, prefix-preserved sampling with REMAC
    merged for ``delay`` and with REMAC unmerged, at each batch size (>= ``chunks`` boundaries
    each, whole rollouts alternating between the three). The merge is :func:`~robotics_remac.
    model.merge_lora`'s default, the low-rank prefix correction (the cheapest exact merge, what a
    merged deployment would run; the stacked ``SplitLinear`` before the review of issue 38).
    ``policies``: ``(base, remac)``,
    default :func:`upstream_width_policies` (the official width; issue 38). Returns
    (:func:`latency_metrics`, the per-boundary latencies in seconds)."""
    from robotics_remac.model import merge_lora
    from robotics_remac.rollout import loop_latency, make_chunker

    base, remac = upstream_width_policies() if policies is None else policies
    chunkers = {
        "naive": make_chunker("euler", base),
        "remac_merged": make_chunker("prefix_zeros", merge_lora(remac, delay)),
        "remac_unmerged": make_chunker("prefix_zeros", remac),
    }
    lat = loop_latency(chunkers, batches, chunks, delay, HORIZON, EXEC_HORIZON)
    return latency_metrics(lat), lat
