"""Writes the fixed inputs of the official-code reference runs from OUR generator (run with the
workspace's environment): ``python make_inputs.py OUT``.

- ``OUT/acc_inputs.json``: for ``official_acc_k10.npz``: Point-NN features (L2-normalised, as
  the pipeline normalises our encoder's features) of 48 meshes (the first 6 ID classes, 8 test
  meshes each, seed 2224, 512 points, sampling seed 0) and seeded random 40-class scores with
  +0.45 on the true class (a noisy scorer);
- ``OUT/pointnn_inputs.npz``: for ``official_pointnn.npz``: one airplane and one chair mesh
  (seed 2224) read at 512 and 1024 points (sampling seed 0).

The AUROC reference's inputs are drawn inside ``run_official.py auroc`` (seeded noise). This is
our driver code; no official code is in this folder. Then run ``run_official.py`` in a scratch
environment with the official checkout (see the ``*.README.md`` sidecars).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from pointcloud_pgllm.constants import MODELNET40_CLASSES
from pointcloud_pgllm.io import load_dataset
from pointcloud_pgllm.model import encode, load_encoder
from pointcloud_pgllm.synth import SYNTH_ID_CLASSES, generate_dataset

SEED = 2224


def acc_inputs(out: Path) -> None:
    classes = list(SYNTH_ID_CLASSES[:6])
    root = generate_dataset(
        out / "synth", classes, n_train=0, n_test=8, seed=SEED, glued_fraction=0.0
    )
    data = load_dataset(root, "test", n_points=512, seed=0)
    feats = encode(load_encoder("pointnn"), data.points, 16)
    feats = torch.nn.functional.normalize(feats, dim=1).numpy().astype(np.float32)
    labels40 = np.array([MODELNET40_CLASSES.index(data.class_names[i]) for i in data.labels])
    rng = np.random.default_rng(SEED)
    scores = rng.random((len(data), 40))
    scores[np.arange(len(data)), labels40] += 0.45
    payload = {
        "features": feats.astype(np.float64).tolist(),
        "label_names": [MODELNET40_CLASSES[i].replace("_", " ") for i in labels40],
        "scores_s0": scores.tolist(),
        "classes": classes,
    }
    (out / "acc_inputs.json").write_text(json.dumps(payload))
    print("acc inputs", feats.shape, "accuracy of S0", (scores.argmax(1) == labels40).mean())


def pointnn_inputs(out: Path) -> None:
    root = generate_dataset(
        out / "pnn_synth", ["chair", "airplane"], n_train=0, n_test=1, seed=SEED, glued_fraction=0.0
    )
    clouds = {
        f"clouds{n}": load_dataset(root, "test", n_points=n, seed=0).points for n in (512, 1024)
    }
    np.savez_compressed(out / "pointnn_inputs.npz", **clouds)
    print("point-nn inputs", {k: v.shape for k, v in clouds.items()})


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    acc_inputs(target)
    pointnn_inputs(target)
