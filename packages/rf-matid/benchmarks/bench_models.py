"""Train and inference throughput of the rf_matid baselines, as ratios to the MLP (named peer).

Every row is measured in the same run at L=2048 (protocol P1), batch 64, on the chosen device
(CPU by default); rf_matid (the paper's model) gets its three-channel input (frequency, Re, Im). "train" is forward + cross-entropy + backward + AdamW step; "infer" is an eval
forward under ``torch.inference_mode``. Rows are timed in interleaved rounds (median reported)
so that load from other processes hits every row alike. Rows that would not fit in memory at batch 64 are
trained in micro-batches with gradient accumulation (one optimizer step per 64 samples; none of
those models has BatchNorm, so this is the same computation); the table says so.

    uv run --frozen python packages/rf-matid/benchmarks/bench_models.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch.nn import functional as F

from rf_matid.model import build_model, count_parameters

PEER = "mlp"
NUM_CLASSES = 16


@dataclass(frozen=True)
class Row:
    label: str
    arch: str
    kwargs: dict[str, Any]
    train_micro_batch: int | None = None  # None: the whole batch at once


ROWS: tuple[Row, ...] = (
    Row("mlp (upstream defaults)", "mlp", {}),
    # the paper's model, upstream config (d_model 128, drop_rate 0.2): three-channel input; its
    # Transformer branch attends over every bin (2048 tokens, dropout > 0: attention maps are
    # materialised on CPU), so it trains in micro-batches of 4
    Row(
        "rf_matid (paper's model, upstream config)",
        "rf_matid",
        {"d_model": 128, "drop_rate": 0.2},
        train_micro_batch=4,
    ),
    Row("material_id (upstream defaults)", "material_id", {}),
    Row("resnet1d (upstream ResNet-50)", "resnet1d", {}),
    Row("bilstm (upstream defaults)", "bilstm", {}),
    # attention dropout > 0 materialises 2048x2048 attention maps on CPU: ~0.9 GB per sample
    Row("transformer1d (upstream defaults)", "transformer1d", {}, train_micro_batch=4),
    Row("transformer1d attention_dropout=0", "transformer1d", {"attention_dropout": 0.0}),
    Row("transformer1d patch_size=16", "transformer1d", {"patch_size": 16}),
    Row(
        "resnet1d blocks=(1,1,1,1) width=16", "resnet1d", {"blocks": (1, 1, 1, 1), "base_width": 16}
    ),
)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rate(step, samples_per_call: int, device: torch.device, min_seconds: float) -> float:
    """Samples/s of ``step()``: timed calls until ``min_seconds`` have passed (at least one)."""
    _sync(device)
    calls, start = 0, time.perf_counter()
    while True:
        step()
        _sync(device)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return calls * samples_per_call / elapsed


@dataclass
class Bench:
    """One row's model with its inference and training step closures."""

    row: Row
    parameters: int
    infer: Any
    train: Any
    infer_samples: int
    train_samples: int


def prepare(row: Row, batch: int, length: int, device: torch.device) -> Bench:
    torch.manual_seed(0)
    model = build_model(row.arch, num_classes=NUM_CLASSES, seq_len=length, **row.kwargs).to(device)
    x = torch.randn(batch, model.in_channels, length, device=device)
    if model.in_channels == 3:  # rf_matid: channel 0 is the bin frequency in GHz
        x[:, 0] = torch.linspace(4.0, 43.5, length, device=device)
    y = torch.randint(0, NUM_CLASSES, (batch,), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-2)
    micro = min(row.train_micro_batch or batch, batch)
    position = {"start": 0}

    def infer() -> None:
        model.eval()
        with torch.inference_mode():
            model(x)

    def train() -> None:
        # One micro-batch per call; the optimizer steps once a full batch is accumulated.
        model.train()
        start = position["start"]
        if start == 0:
            optimizer.zero_grad(set_to_none=True)
        chunk = slice(start, min(start + micro, batch))
        loss = F.cross_entropy(model(x[chunk]), y[chunk]) * (chunk.stop - chunk.start) / batch
        loss.backward()
        position["start"] = chunk.stop % batch
        if position["start"] == 0:
            optimizer.step()

    return Bench(row, count_parameters(model), infer, train, batch, micro)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="batch 8, one round of 0.3 s")
    parser.add_argument("--only", nargs="*", help="arch names to run (the MLP peer always runs)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.min_seconds, args.repeats = 8, 0.3, 1
    device = torch.device(args.device)
    rows = [r for r in ROWS if not args.only or r.arch in args.only or r.arch == PEER]
    benches = [prepare(row, args.batch, args.length, device) for row in rows]
    for bench in benches:  # untimed warm-up
        bench.infer()
        bench.train()
    # Rounds over all rows (rather than one row at a time) so that load from other processes
    # affects every row alike; each row reports its median over the rounds.
    rates: dict[str, list[tuple[float, float]]] = {b.row.label: [] for b in benches}
    for round_index in range(args.repeats):
        for bench in benches:
            infer = _rate(bench.infer, bench.infer_samples, device, args.min_seconds)
            train = _rate(bench.train, bench.train_samples, device, args.min_seconds)
            rates[bench.row.label].append((train, infer))
        print(f"round {round_index + 1}/{args.repeats} done", flush=True)
    results = [
        {
            **asdict(b.row),
            "parameters": b.parameters,
            "train_samples_per_s": statistics.median(t for t, _ in rates[b.row.label]),
            "infer_samples_per_s": statistics.median(i for _, i in rates[b.row.label]),
            "rounds": rates[b.row.label],
        }
        for b in benches
    ]
    peer = next(r for r in results if r["arch"] == PEER and not r["kwargs"])
    print(
        f"\nL={args.length}, batch {args.batch}, device {device}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeats} "
        f"rounds; peer: {peer['label']}\n"
    )
    print("| model | params | train samples/s | train × MLP | infer samples/s | infer × MLP |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        note = f" (train micro-batch {r['train_micro_batch']})" if r["train_micro_batch"] else ""
        print(
            f"| {r['label']}{note} | {r['parameters']:,} | {r['train_samples_per_s']:.2f} | "
            f"{r['train_samples_per_s'] / peer['train_samples_per_s']:.3f} | "
            f"{r['infer_samples_per_s']:.2f} | "
            f"{r['infer_samples_per_s'] / peer['infer_samples_per_s']:.3f} |"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "batch": args.batch,
                    "length": args.length,
                    "device": str(device),
                    "threads": torch.get_num_threads(),
                    "rows": results,
                },
                handle,
                indent=2,
            )
    return results


if __name__ == "__main__":
    main()
