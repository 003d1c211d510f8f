"""Peak memory of whole-volume inference: glance-focus with CPU buffers (mask only, and with
probabilities) against MONAI's ``sliding_window_inference`` (the named peer), on one large
preprocessed volume (default 350x300x120 voxels, the issue's example CT at 1x1x3 mm).

Each method runs in a fresh subprocess; its peak resident memory (``ru_maxrss``) minus the
resident memory just before the call (volume and networks already built) is the inference's
own peak: buffers plus the transient tile activations, which are the same for every method. The
gate selects every tile (threshold -1), the worst case for glance-focus and the same Focus work as
the sliding window. Small networks (UNet 4-32 channels, ResNet-18 4-32, stride-2 stem, GroupNorm)
at the paper's ROI 96x96x64 keep the compute small; the buffers do not depend on them. On a GPU,
``--device cuda`` runs the tiles there (``sw_device``) and reports ``torch.cuda.max_memory_
allocated`` too: glance-focus keeps the whole-volume buffers on the CPU, MONAI's default puts them
on the input's device.

    uv run --no-sync python packages/medimg-gfscreen/benchmarks/bench_memory.py [--shape 350,300,120]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

METHODS = ("sliding_window", "gated_probs", "gated_mask")
ROI = (96, 96, 64)


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def child(method: str, shape: tuple[int, int, int], overlap: float, device: str) -> dict:
    import torch

    from medimg_gfscreen.inference import glance_focus_inference, sliding_window_focus
    from medimg_gfscreen.model import Glance, build_focus

    torch.manual_seed(0)
    sw_device = torch.device(device)
    focus = build_focus("unet", unet_channels=(4, 8, 16, 32)).eval().to(sw_device)
    glance = Glance("resnet18", (4, 8, 16, 32), conv1_stride=2, norm="group").eval().to(sw_device)
    volume = torch.rand(1, 1, *shape)  # on the CPU, as a loader delivers it
    if sw_device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    base = _rss_mb()
    t0 = time.perf_counter()
    if method == "sliding_window":  # MONAI's default: buffers on the input's device
        out = sliding_window_focus(volume, focus, ROI, overlap, sw_device=sw_device)
        mask = out[0].argmax(0).to(torch.uint8)
    else:
        result = glance_focus_inference(
            volume,
            glance,
            focus,
            ROI,
            overlap,
            threshold=-1.0,
            sw_device=sw_device,
            device="cpu",
            keep_probs=method == "gated_probs",
        )
        mask = result.mask
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row = {
        "method": method,
        "peak_delta_mb": peak - base,
        "seconds": seconds,
        "mask_voxels": int(mask.sum()),
        "volume_mb": volume.numel() * 4 / 2**20,
    }
    if sw_device.type == "cuda":
        row["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="350,300,120")
    parser.add_argument("--overlap", type=float, default=0.5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--child", choices=METHODS, default=None)
    parser.add_argument("--json", default=None)
    ns = parser.parse_args()
    shape = tuple(int(v) for v in ns.shape.split(","))
    if ns.child:
        print(json.dumps(child(ns.child, shape, ns.overlap, ns.device)))
        return
    rows = []
    for method in METHODS:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                method,
                "--shape",
                ns.shape,
                "--overlap",
                str(ns.overlap),
                "--device",
                ns.device,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(
        f"volume {shape} ({rows[0]['volume_mb']:.0f} MB float32), ROI {ROI}, overlap "
        f"{ns.overlap}, tiles on {ns.device}, buffers on the CPU"
    )
    print("| method | peak memory over the start (MB) | seconds | mask voxels |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['method']} | {r['peak_delta_mb']:.0f} | {r['seconds']:.1f} | "
            f"{r['mask_voxels']} |"
        )
    if ns.json:
        with open(ns.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
