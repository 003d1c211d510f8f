"""Diagnosis of the separability control on the large-lesion case (issue 37, fifth follow-up;
README, "Diagnosis of the CE-only Glance on large lesions"): why does a Glance trained by
cross-entropy alone not separate lesion tiles where a fixed filter does?

The volumes are those of ``pilot_testbed.py large_no_mimics`` (lesions 8-12 mm, no mimics, 32
training cases of seed 0, the shared 16 test volumes), written once through
``measurement._datamodule``. Two tasks, each with the miniature Glance (``measurement.MODEL_KW``
unless ``--stride`` / ``--norm`` / ``--widths`` say otherwise), AdamW at the experiment's lr and
weight decay, batches of 8 + 8:

* ``control``: the control itself, ``control.separability`` (seed 0: grid tiles of the training
  volumes drawn from seed 2000), with ``--flatten`` as its ``inputs`` and ``--stride`` /
  ``--norm`` / ``--widths`` as its ``glance_settings``: the tile AUROC on the test volumes and
  on the training volumes (before 2026-12-08 this script copied the control's training loop;
  ``pilot_testbed.py large_no_mimics --flatten`` runs the same function at the experiment's
  steps);
* ``spheres``: planted spheres (radius 8-12 voxels in-plane, a third in z, +-0.10-0.14) in flat
  noise N(0.55, 0.04) (``--background flat``) or in lesion-free tiles of the healthy training
  volumes, centred on soft tissue (``--background real``); AUROC on 256 new tiles.

``--flatten`` sets every voxel below 0.3 or above 0.8 (air, the bone ring) to the body's level
0.5, in training and in scoring: a diagnostic of what stops the Glance, not a design. One JSON
line: the balanced CE over the first and last 80 steps, the AUROCs and the CPU seconds.

    OMP_NUM_THREADS=1 .venv/bin/python packages/medimg-gfscreen/benchmarks/diagnose_control.py \\
        control --flatten
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


from pilot_testbed import VARIANTS, flatten


class Flattened(torch.nn.Module):
    """A Glance that scores flattened tiles (for ``glance_tile_scores``)."""

    def __init__(self, glance: torch.nn.Module) -> None:
        super().__init__()
        self.glance = glance

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.glance(flatten(x))


def large_lesion_case(use):
    """``use(dm, train_volumes, test_volumes)`` on the large-lesion case's data module (written
    once, as ``pilot_testbed.py large_no_mimics`` writes it), inside its scratch folder."""
    from iclr26_common import seed_everything
    from medimg_gfscreen import measurement as m

    testbed, negatives, pos, neg, _ = VARIANTS["large_no_mimics"]
    with tempfile.TemporaryDirectory(prefix="gfscreen-diagnose-") as scratch:
        seed_everything(0)
        dm = m._datamodule(0, m.settings(quick=False), Path(scratch), testbed, negatives, pos, neg)

        def plain(volumes):
            return [
                (n, torch.as_tensor(i).clone(), torch.as_tensor(lab).clone())
                for n, i, lab in volumes
            ]

        return use(dm, plain(m._volumes(dm, dm.train_key)), plain(m._volumes(dm)))


def spheres(generator, tiles, images, background: str, n: int = 16):
    """``n`` tiles, every second one with a planted sphere; labels 1 for those."""
    grid = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), torch.arange(16.0), indexing="ij")
    xs, ys = [], []
    for k in range(n):
        if background == "real":
            v, s, _ = tiles[int(torch.randint(len(tiles), (), generator=generator))]
            x = images[v][0][(slice(None), *s)].float().clone()
        else:
            x = 0.55 + 0.04 * torch.randn(1, 32, 32, 16, generator=generator)
        if k % 2:
            for _ in range(50):  # a centre on soft tissue
                cx, cy = torch.randint(0, 32, (2,), generator=generator).tolist()
                cz = int(torch.randint(0, 16, (), generator=generator))
                if abs(float(x[0, cx, cy, cz]) - 0.55) < 0.1:
                    break
            r = 8 + 4 * float(torch.rand((), generator=generator))
            ball = (grid[0] - cx) ** 2 + (grid[1] - cy) ** 2 + (3 * (grid[2] - cz)) ** 2 <= r * r
            sign = 1.0 if float(torch.rand((), generator=generator)) < 0.5 else -1.0
            x[0][ball] += sign * (0.1 + 0.04 * float(torch.rand((), generator=generator)))
        xs.append(x)
        ys.append(k % 2)
    return torch.stack(xs), torch.tensor(ys)


def main(argv: list[str] | None = None) -> int:
    from dataclasses import replace

    from medimg_gfscreen import measurement as m

    g = m.MODEL_KW["glance"]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", choices=("control", "spheres"))
    parser.add_argument("--steps", type=int, default=None, help="control 640, spheres 320")
    parser.add_argument("--background", choices=("flat", "real"), default="real")
    parser.add_argument("--flatten", action="store_true")
    parser.add_argument("--stride", type=int, default=g.conv1_stride)
    parser.add_argument("--norm", default=g.norm)
    parser.add_argument("--widths", default=",".join(str(w) for w in g.widths))
    args = parser.parse_args(argv)
    steps = args.steps or (640 if args.task == "control" else 320)
    widths = tuple(int(w) for w in args.widths.split(","))
    settings = replace(g, widths=widths, conv1_stride=args.stride, norm=args.norm)
    out = {k: v for k, v in vars(args).items()} | {"steps": steps}
    t0 = time.process_time()
    if args.task == "control":
        result = large_lesion_case(
            lambda dm, train, test: m.separability(
                dm,
                test,
                steps,
                0,
                inputs=flatten if args.flatten else None,
                glance_settings=settings,
            )
        )
        out["loss_first_80"], out["loss_last_80"] = result["loss_first_80"], result["loss_last_80"]
        out["test_tile_auroc"], out["train_tile_auroc"] = (
            result["auroc"],
            result["train_tile_auroc"],
        )
    else:
        out |= large_lesion_case(
            lambda dm, train, test: planted_spheres(args, settings, steps, train)
        )
    out["cpu_s"] = time.process_time() - t0
    print(json.dumps(out), flush=True)
    return 0


def planted_spheres(args, settings, steps: int, train) -> dict[str, float]:
    """The ``spheres`` task: a fresh Glance (seed 2000, as the control's) trained by the
    balanced CE on planted spheres, then its AUROC on 256 new tiles."""
    from iclr26_common import seed_everything
    from medimg_gfscreen import measurement as m
    from medimg_gfscreen.control import grid_tiles, tile_auroc
    from medimg_gfscreen.model import Glance, glance_ce_loss

    seed_everything(2000)
    glance = Glance(
        settings.backbone, settings.widths, conv1_stride=settings.conv1_stride, norm=settings.norm
    )
    optim = m.MODEL_KW["optim"]
    optimizer = torch.optim.AdamW(glance.parameters(), lr=optim.lr, weight_decay=optim.weight_decay)
    healthy = [v for v in train if not v[2].any()]
    tiles, images = grid_tiles(healthy, m.ROI, m.OVERLAP), [i for _, i, _ in healthy]
    generator = torch.Generator().manual_seed(1)
    losses = []
    glance.train()
    for _ in range(steps):
        x, y = spheres(generator, tiles, images, args.background)
        loss = glance_ce_loss(glance(flatten(x) if args.flatten else x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    glance.eval()
    scorer = Flattened(glance) if args.flatten else glance
    x, y = spheres(torch.Generator().manual_seed(5), tiles, images, args.background, 256)
    with torch.no_grad():
        p = torch.softmax(scorer(x), 1)[:, 1]
    return {
        "loss_first_80": sum(losses[:80]) / len(losses[:80]),
        "loss_last_80": sum(losses[-80:]) / len(losses[-80:]),
        "auroc": tile_auroc(p.tolist(), (y == 1).tolist()),
    }


if __name__ == "__main__":
    raise SystemExit(main())
