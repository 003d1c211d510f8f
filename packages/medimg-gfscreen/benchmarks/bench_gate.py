"""Focus FLOPs and wall time per volume: glance-then-focus vs Focus on every tile (MONAI sliding
window, the named peer), measured in the same run at tile overlaps 0.25 / 0.5 / 0.75.

Two gates per overlap: the checkpoint's own threshold (0.9), and a threshold set from the
pooled Glance scores so that the paper's 16.7 % of tiles are selected (measures the machinery at
the paper's operating point, whatever the training reached). The goal (>= 5.7x fewer Focus FLOPs
at >= equal recall) only counts as met when at least one tile is selected and the sliding window
finds a lesion.

Weights: ``--ckpt`` (exported ``.pt`` or Lightning ``.ckpt``, e.g. the experiment's
``gfscreen_weights_seed0.pt``); without it a model is trained first at the experiment's quick
scale. Test volumes are freshly generated synthetic CT (``--n`` cases, seed 99) read through the
real MONAI pipeline. FLOPs come from ``torch.utils.flop_counter`` (one tile of each network x
tile counts); wall time is the median over volumes of one full pass, interleaved per volume so
that load from other processes hits both methods alike.

    uv run --no-sync python packages/medimg-gfscreen/benchmarks/bench_gate.py [--ckpt W.pt] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from medimg_gfscreen.data import GFScreenDataModule
from medimg_gfscreen.inference import count_flops, glance_focus_inference, sliding_window_focus
from medimg_gfscreen.metrics import case_metrics, summarize
from medimg_gfscreen.synth import generate_dataset

OVERLAPS = (0.25, 0.5, 0.75)
GOAL_FOCUS_REDUCTION = 5.7  # the paper's compute reduction
PAPER_SELECTION = 0.167  # the paper's selection rate


def _train_quick(root: Path) -> Path:
    from medimg_gfscreen import measurement
    from medimg_gfscreen.lit_module import GFScreenModule

    config = measurement.settings(quick=False)
    data = generate_dataset(
        root / "train",
        n_cases=config["n_train"] + 1,
        shape=measurement.VOLUME,
        seed=0,
        val_fraction=1 / (config["n_train"] + 1),
    )
    dm = GFScreenDataModule(
        str(data),
        roi_size=measurement.ROI,
        num_samples=4,
        batch_size=4,
        cache_dir=str(root / "cache"),
    )
    module = GFScreenModule(**measurement.MODEL_KW)
    measurement.make_trainer(config["epochs"]).fit(module, datamodule=dm)
    path = root / "weights.pt"
    torch.save(module.export_weights(), path)
    return path


def paper_size_flops() -> dict[str, float]:
    """FLOPs of one 96x96x64 tile through the paper-size networks (SwinUNETR-v2 feature 48,
    ResNet-18 Glance with stride-1 stem), counted on the meta device (nothing is computed)."""
    from torch.utils.flop_counter import FlopCounterMode

    from medimg_gfscreen.constants import PAPER_ROI
    from medimg_gfscreen.model import Glance, build_focus

    out = {}
    for name, net in (("focus", build_focus("swin_unetr")), ("glance", Glance("resnet18"))):
        net = net.to("meta").eval()
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            net(torch.zeros((1, 1, *PAPER_ROI), device="meta"))
        out[name] = counter.get_total_flops() / 1e9
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", type=Path, default=None)
    parser.add_argument("--n", type=int, default=8, help="test volumes")
    parser.add_argument("--quick", action="store_true", help="3 volumes, overlap 0.5 only")
    parser.add_argument("--json", type=Path, default=None)
    ns = parser.parse_args()
    from medimg_gfscreen.screen import load_screen_module

    overlaps = (0.5,) if ns.quick else OVERLAPS
    n = 3 if ns.quick else ns.n
    with tempfile.TemporaryDirectory(prefix="gfscreen-bench-") as scratch:
        root = Path(scratch)
        ckpt = ns.ckpt or _train_quick(root)
        module = load_screen_module(ckpt)
        roi = module.roi_size
        datalist = generate_dataset(
            root / "test", n_cases=n + 1, shape=(96, 96, 32), seed=99, val_fraction=n / (n + 1)
        )
        dm = GFScreenDataModule(str(datalist), roi_size=roi, cache_dir=str(root / "cache"))
        volumes = [(str(b["name"][0]), b["image"], b["label"][0, 0]) for b in dm.val_dataloader()]
        focus_tile, glance_tile = count_flops(module.focus, roi), count_flops(module.glance, roi)
        spacing = module.hparams.spacing
        rows = []
        plan = []
        for overlap in overlaps:
            scores = sorted(
                p
                for _, image, _ in volumes
                for _, p, _ in glance_focus_inference(
                    image, module.glance, module.focus, roi, overlap, 1.0
                ).tiles
            )
            quantile = scores[int((1 - PAPER_SELECTION) * (len(scores) - 1))]
            plan.append((overlap, "ckpt gate", float(module.inference.threshold)))
            plan.append((overlap, "16.7 % gate", float(quantile)))
        for overlap, gate_name, threshold in plan:
            sw_t, gf_t, sw_cases, gf_cases = [], [], [], []
            tiles = selected = 0
            for name, image, label in volumes:
                t0 = time.perf_counter()
                probs = sliding_window_focus(image, module.focus, roi, overlap)
                sw_t.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                result = glance_focus_inference(
                    image, module.glance, module.focus, roi, overlap, threshold
                )
                gf_t.append(time.perf_counter() - t0)
                tiles += result.n_tiles
                selected += result.n_selected
                sw_cases.append(case_metrics(name, probs[0].argmax(0), label, spacing))
                gf_cases.append(case_metrics(name, result.mask, label, spacing))
            sw, gf = summarize(sw_cases, 0.003), summarize(gf_cases, 0.003)
            row = {
                "overlap": overlap,
                "gate": f"{gate_name} (p > {threshold:.4f})",
                "tiles_per_volume": tiles / len(volumes),
                "selection_rate": selected / tiles,
                "sw_focus_gflops": tiles * focus_tile / len(volumes) / 1e9,
                "gf_focus_gflops": selected * focus_tile / len(volumes) / 1e9,
                "gf_glance_gflops": tiles * glance_tile / len(volumes) / 1e9,
                "sw_seconds": statistics.median(sw_t),
                "gf_seconds": statistics.median(gf_t),
                "sw_recall": sw["lesion_recall"],
                "gf_recall": gf["lesion_recall"],
            }
            row["focus_flop_ratio"] = tiles / selected if selected else float("inf")
            row["total_flop_ratio"] = row["sw_focus_gflops"] / (
                row["gf_focus_gflops"] + row["gf_glance_gflops"]
            )
            row["time_ratio"] = row["sw_seconds"] / row["gf_seconds"]
            rows.append(row)
    print(
        f"threads {torch.get_num_threads()}, {len(volumes)} volumes, ROI {roi}, "
        f"Focus tile {focus_tile / 1e9:.3f} GFLOP, Glance tile {glance_tile / 1e9:.3f} GFLOP"
    )
    print(
        "| overlap | gate | tiles/vol | selected | Focus GFLOP SW | Focus GFLOP GF | Focus x | total x "
        "| s/vol SW | s/vol GF | time x | recall SW | recall GF |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['overlap']} | {r['gate']} | {r['tiles_per_volume']:.1f} | {100 * r['selection_rate']:.1f} % "
            f"| {r['sw_focus_gflops']:.2f} | {r['gf_focus_gflops']:.2f} | "
            f"{r['focus_flop_ratio']:.1f} | {r['total_flop_ratio']:.1f} | {r['sw_seconds']:.2f} | "
            f"{r['gf_seconds']:.2f} | {r['time_ratio']:.1f} | {r['sw_recall']:.2f} | "
            f"{r['gf_recall']:.2f} |"
        )
        goal = (
            r["selection_rate"] > 0
            and r["sw_recall"] > 0
            and r["focus_flop_ratio"] >= GOAL_FOCUS_REDUCTION
            and r["gf_recall"] >= r["sw_recall"]
        )
        print(
            f"  goal (>= {GOAL_FOCUS_REDUCTION}x fewer Focus FLOPs at >= equal recall): "
            f"{'met' if goal else 'not met'}"
        )
    paper = paper_size_flops()
    implied = paper["focus"] / (PAPER_SELECTION * paper["focus"] + paper["glance"])
    print(
        f"paper sizes (96x96x64 tile): SwinUNETR-v2 f48 {paper['focus']:.1f} GFLOP, ResNet-18 "
        f"Glance {paper['glance']:.1f} GFLOP; at {100 * PAPER_SELECTION:.1f} % selection: Focus "
        f"{1 / PAPER_SELECTION:.1f}x fewer FLOPs, {implied:.2f}x fewer counting the Glance"
    )
    if ns.json:
        ns.json.write_text(json.dumps({"rows": rows, "paper_sizes_gflops": paper}, indent=2))


if __name__ == "__main__":
    main()
