"""Per-chunk inference latency of every sampler, as ratios against naive sampling (same run).

    uv run python packages/robotics-remac/benchmarks/bench_latency.py [--batch 1] [--repeats 200]

Latency does not depend on the weights, so the policies are untrained, at the experiment's size
(``robotics_remac.experiment.POLICY_SIZES``) or, with ``--upstream-width``, the official one
(``experiment_claims.UPSTREAM_SIZES``); REMAC gets non-zero LoRA weights. All samplers are
timed interleaved in one loop (median of ``--repeats``), so machine load hits them alike.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import asdict

import torch

from robotics_remac.experiment import HORIZON, POLICY_SIZES
from robotics_remac.experiment_claims import UPSTREAM_SIZES
from robotics_remac.model import FlowPolicy, LoRALinear, add_lora, merge_lora
from robotics_remac.sampling import (
    bid_sample,
    euler_sample,
    prefix_preserved_sample,
    rtc_sample,
    training_time_rtc_sample,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--delay", type=int, default=2)
    parser.add_argument("--exec-horizon", type=int, default=4)
    parser.add_argument(
        "--upstream-width",
        action="store_true",
        help="time the official width (256/512/64/4, claim (d) since issue 38) instead",
    )
    ns = parser.parse_args()
    sizes = UPSTREAM_SIZES if ns.upstream_width else POLICY_SIZES
    torch.manual_seed(0)
    base = FlowPolicy(**asdict(sizes)).eval()
    remac = add_lora(FlowPolicy(**asdict(sizes))).eval()
    for layer in remac.modules():
        if isinstance(layer, LoRALinear):
            torch.nn.init.normal_(layer.lora_B, std=0.1)
    d, e = ns.delay, ns.exec_horizon
    merged = merge_lora(remac, d)  # low-rank prefix correction (claim (d)'s merge)
    stacked = merge_lora(remac, d, split="stacked")  # one matmul over [W; W + ΔW]
    obs = torch.randn(ns.batch, 8)
    prefix = torch.randn(ns.batch, HORIZON, 2)
    samplers = {
        "naive (Euler, 5 steps)": lambda: euler_sample(base, obs),
        # the prefix-preserved sampler on the plain base: the sampler's own cost, no LoRA/split
        "prefix-preserved, base": lambda: prefix_preserved_sample(
            base, obs, prefix, d, use_mask=False
        ),
        "REMAC merged": lambda: prefix_preserved_sample(merged, obs, prefix, d, use_mask=False),
        "REMAC merged, stacked": lambda: prefix_preserved_sample(
            stacked, obs, prefix, d, use_mask=False
        ),
        "REMAC unmerged": lambda: prefix_preserved_sample(remac, obs, prefix, d),
        "training-time RTC": lambda: training_time_rtc_sample(base, obs, prefix, d),
        "RTC (guidance)": lambda: rtc_sample(base, obs, prefix, d, e),
        "BID (16 samples)": lambda: bid_sample(base, obs, prefix, d, e),
    }
    times: dict[str, list[float]] = {k: [] for k in samplers}
    for fn in samplers.values():
        for _ in range(5):
            fn()
    for _ in range(ns.repeats):
        for name, fn in samplers.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    ref = statistics.median(times["naive (Euler, 5 steps)"])
    print(
        f"batch {ns.batch}, d={d}, e={e}, torch threads {torch.get_num_threads()}, "
        f"mixer {asdict(sizes)}"
    )
    print(f"{'sampler':26s} {'median ms':>10s} {'x naive':>8s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:26s} {1000 * med:10.3f} {med / ref:8.2f}")


if __name__ == "__main__":
    main()
