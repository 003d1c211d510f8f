"""Seeded outputs of the encoders, the propagation operators and the classify / ood pipeline,
stored so that a refactor that changes a number is caught (issue 29; checked by
``tests/test_stored_outputs.py``, which computes the same outputs with the functions below).

Regenerate (only when a change of numbers is intended, and say so in the change log)::

    OMP_NUM_THREADS=1 .venv/bin/python \
        packages/pointcloud-pgllm/tests/data/stored_outputs/make_stored_outputs.py

It writes, next to this file:

- ``encoder_outputs.npz``: features ``[BATCH, D]`` of each :data:`ENCODERS` entry (``PointNN``
  at its default and a small size; ``PointNet2Encoder`` at its default and the ``tiny`` config's
  size, weights drawn after ``torch.manual_seed(MODEL_SEED)``) on seeded clouds ``[BATCH, P, 3]``
  (standard normal from ``numpy.random.default_rng(CLOUD_SEED)``), in eval mode, through
  ``model.encode``;
- ``propagation_outputs.npz``: for each graph variant of :data:`VARIANTS` and K of
  :data:`GRAPH_KS`, the dense W ``[N, N]`` of ``build_graph`` on seeded features ``[N, D]``
  (``default_rng(FEATURE_SEED)``) and ``propagate`` (a = 0.5, T = 5) of seeded softmax scores
  ``[N, C]`` (``default_rng(SCORE_SEED)``);
- ``pipeline_outputs.json``: what ``pointcloud-pgllm classify`` and ``ood`` (tfidf scorer,
  PointNN, ``--n-points 128 --graph-k 4``) write on a synthetic OFF tree (:data:`TREE`): the
  CSV rows (source reduced to the file name) and the metrics of every ablation;
- ``stored_outputs.json``: the settings above, the torch / numpy versions and this command.

Computed on the CPU in float32, one torch thread.
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ENCODER_FILE = HERE / "encoder_outputs.npz"
PROPAGATION_FILE = HERE / "propagation_outputs.npz"
PIPELINE_FILE = HERE / "pipeline_outputs.json"
SIDECAR = HERE / "stored_outputs.json"
COMMAND = (
    "OMP_NUM_THREADS=1 .venv/bin/python "
    "packages/pointcloud-pgllm/tests/data/stored_outputs/make_stored_outputs.py"
)

CLOUD_SEED = 0
MODEL_SEED = 1
BATCH = 3
# name -> (class name in pointcloud_pgllm.model, constructor arguments, points per cloud)
ENCODERS = {
    "pointnn_default": ("PointNN", {}, 256),
    "pointnn_small": ("PointNN", {"n_stages": 3, "embed_dim": 24, "k": 8}, 128),
    "pointnet2_default": ("PointNet2Encoder", {}, 512),
    "pointnet2_tiny": (
        "PointNet2Encoder",
        {"widths": (16, 32), "k": 8, "n_centres": (32, 8)},
        64,
    ),
}

FEATURE_SEED = 2
SCORE_SEED = 3
N_NODES, FEATURE_DIM, N_CLASSES = 24, 8, 5
VARIANTS = ("official", "symmetric", "paper")
GRAPH_KS = (10, 3)

# the synthetic tree of the pipeline outputs and the two command lines run on it
TREE = {
    "classes": ["airplane", "bottle", "chair", "cup", "stool", "table"],
    "n_train": 5,
    "n_test": 3,
    "seed": 1,
    "glued_fraction": 0.25,
}
PIPELINE_ARGS = ["--n-points", "128", "--graph-k", "4"]
PIPELINE_RUNS = {
    "classify": ["classify"],
    "ood": ["ood", "--id-classes", "chair,cup,airplane"],
}
CSV_FILES = {"classify": "predictions.csv", "ood": "ood_scores.csv"}


def seeded_clouds(n_points: int):  # -> torch.Tensor
    """``[BATCH, n_points, 3]`` float32 standard normal clouds of ``default_rng(CLOUD_SEED)``."""
    import torch

    rng = np.random.default_rng(CLOUD_SEED)
    return torch.from_numpy(rng.standard_normal((BATCH, n_points, 3)).astype(np.float32))


def build_encoder(name: str):  # -> torch.nn.Module
    """Encoder ``name`` of :data:`ENCODERS`, its weights (if any) drawn after
    ``torch.manual_seed(MODEL_SEED)``."""
    import torch

    from pointcloud_pgllm import model

    cls, kwargs, _ = ENCODERS[name]
    torch.manual_seed(MODEL_SEED)
    return getattr(model, cls)(**kwargs)


def encoder_outputs() -> dict[str, np.ndarray]:
    """``{name: features [BATCH, D]}`` for every encoder of :data:`ENCODERS`."""
    from pointcloud_pgllm.model import encode

    return {
        name: encode(build_encoder(name), seeded_clouds(points), device="cpu").numpy()
        for name, (_, _, points) in ENCODERS.items()
    }


def propagation_inputs():  # -> tuple[torch.Tensor, torch.Tensor]
    """Seeded features ``[N, D]`` and softmax scores ``[N, C]`` (float32)."""
    import torch

    feats = np.random.default_rng(FEATURE_SEED).standard_normal((N_NODES, FEATURE_DIM))
    logits = np.random.default_rng(SCORE_SEED).standard_normal((N_NODES, N_CLASSES))
    scores = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return torch.from_numpy(feats.astype(np.float32)), torch.from_numpy(scores.astype(np.float32))


def propagation_outputs(roll_features: int = 0) -> dict[str, np.ndarray]:
    """``{"<variant>_k<K>_adjacency": W [N, N], "<variant>_k<K>_propagated": S_T [N, C]}``
    (``roll_features``: the feature rows rolled by that many nodes first, the test's mutation
    check; 0 for the stored outputs)."""
    from pointcloud_pgllm.graph import build_graph, dense_adjacency, propagate

    feats, scores = propagation_inputs()
    feats = feats.roll(roll_features, dims=0)
    out = {}
    for variant in VARIANTS:
        for k in GRAPH_KS:
            graph = build_graph(feats, k, variant)
            out[f"{variant}_k{k}_adjacency"] = dense_adjacency(graph).numpy()
            out[f"{variant}_k{k}_propagated"] = propagate(scores, graph).numpy()
    return out


def make_tree(root: Path) -> Path:
    """The synthetic OFF tree :data:`TREE` under ``root``."""
    from pointcloud_pgllm.synth import generate_dataset

    return generate_dataset(
        root / "tree", TREE["classes"], **{k: v for k, v in TREE.items() if k != "classes"}
    )


def read_run(out: Path, mode: str) -> dict:
    """What a classify / ood run wrote to ``out``: ``{"rows": CSV rows with the source reduced
    to its file name, "metrics": {ablation: {metric: value}}}``."""
    with open(out / CSV_FILES[mode], newline="") as handle:
        rows = list(csv.reader(handle))
    for row in rows[1:]:
        row[0] = Path(row[0]).name
    metrics = json.loads((out / "metrics.json").read_text())["metrics"]
    return {"rows": rows, "metrics": metrics}


def pipeline_outputs(tree: Path, work: Path, args: list[str] = PIPELINE_ARGS) -> dict[str, dict]:
    """``{mode: read_run(...)}`` of the :data:`PIPELINE_RUNS` on ``tree`` through the CLI, with
    the common ``args`` (the stored ones by default; the test's mutation check passes others)."""
    from pointcloud_pgllm.cli import main

    out = {}
    for mode, run_args in PIPELINE_RUNS.items():
        folder = work / mode
        code = main([*run_args, "--data", str(tree), *args, "--out", str(folder)])
        if code != 0:
            raise RuntimeError(f"pointcloud-pgllm {mode} exited with {code}")
        out[mode] = read_run(folder, mode)
    return out


def main() -> int:
    import torch

    torch.set_num_threads(1)
    np.savez_compressed(ENCODER_FILE, **encoder_outputs())
    np.savez_compressed(PROPAGATION_FILE, **propagation_outputs())
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = pipeline_outputs(make_tree(Path(tmp)), Path(tmp))
    PIPELINE_FILE.write_text(json.dumps(pipeline, indent=1) + "\n")
    sidecar = {
        "command": COMMAND,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cloud_seed": CLOUD_SEED,
        "model_seed": MODEL_SEED,
        "batch": BATCH,
        "encoders": {k: [c, dict(a), p] for k, (c, a, p) in ENCODERS.items()},
        "feature_seed": FEATURE_SEED,
        "score_seed": SCORE_SEED,
        "nodes_dim_classes": [N_NODES, FEATURE_DIM, N_CLASSES],
        "graph_variants": list(VARIANTS),
        "graph_ks": list(GRAPH_KS),
        "tree": TREE,
        "pipeline_args": PIPELINE_ARGS,
        "pipeline_runs": PIPELINE_RUNS,
    }
    SIDECAR.write_text(json.dumps(sidecar, indent=1) + "\n")
    for path in (ENCODER_FILE, PROPAGATION_FILE, PIPELINE_FILE, SIDECAR):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
