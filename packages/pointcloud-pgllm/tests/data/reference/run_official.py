"""Runs the official code once on fixed inputs and records the numbers the reference tests
compare with (``tests/test_reference_pgllm.py``). Our driver code only: the official files are
imported from a checkout given on the command line, never copied here. Run it in a scratch
environment outside the workspace (numpy, scikit-learn, torch; see the ``*.README.md``
sidecars for versions):

    python run_official.py acc     PGLLM_CHECKOUT    INPUTS OUT   # official_acc_k10.npz
    python run_official.py auroc   PGLLM_CHECKOUT    OUT          # official_auroc_k3.json
    python run_official.py pointnn POINTNN_CHECKOUT  INPUTS OUT   # official_pointnn.npz

``PGLLM_CHECKOUT``: handsome999KK/PGLLM at a93a4547e5f223596d9a0caab20cdfa95d45ea79;
``POINTNN_CHECKOUT``: ZrrSkywalker/Point-NN at a85bfc365258a2c65a5f6ac289537b4d7a7cec0f;
``INPUTS``: the folder ``make_inputs.py`` wrote.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import types
from argparse import Namespace
from pathlib import Path

import numpy as np


def write_features_text(path: Path, features: np.ndarray) -> None:
    """Features in the official text form (``[[...]]`` blocks, one per row, split over two
    lines), which the official ``read_matrices_from_file`` parses."""
    with open(path, "w") as handle:
        for row in features.astype(np.float64):
            values = [repr(float(v)) for v in row]
            half = len(values) // 2
            handle.write("[[" + " ".join(values[:half]) + "\n  " + " ".join(values[half:]) + "]]\n")


def load_module(name: str, path: Path, patches: list[tuple[str, str]] = ()) -> types.ModuleType:
    """The official file as a module; each ``(old, new)`` patch must occur exactly once."""
    source = path.read_text()
    for old, new in patches:
        assert source.count(old) == 1, f"patch target not found once in {path}: {old!r}"
        source = source.replace(old, new)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


# ACC.py as released does not compile (a line-continuation backslash after fill_diagonal) and
# hard-codes the 2468 ModelNet40 test clouds; these two changes only (sidecar).
ACC_PATCHES = [
    ("np.fill_diagonal(knn_matrix, 1.0) \\", "np.fill_diagonal(knn_matrix, 1.0)"),
    ("np.zeros((2468, 2468))", "np.zeros((point_features.shape[0], point_features.shape[0]))"),
    ("np.arange(2468).repeat(10)", "np.arange(point_features.shape[0]).repeat(10)"),
]


def run_acc(checkout: Path, inputs: Path, out: Path) -> None:
    inp = json.loads((inputs / "acc_inputs.json").read_text())
    features = np.asarray(inp["features"], dtype=np.float32)
    scores = np.asarray(inp["scores_s0"], dtype=np.float64)
    write_features_text(out / "features.txt", features)
    results = [
        {"object_id": i, "model_output": "", "label_name": n}
        for i, n in enumerate(inp["label_names"])
    ]
    (out / "pointllm.json").write_text(json.dumps({"prompt": "What is this?", "results": results}))
    llm = [{"object_id": i, "score": s.tolist()} for i, s in enumerate(scores)]
    (out / "llm.json").write_text(json.dumps(llm))
    mod = load_module("ACC", checkout / "Pointllm" / "ACC.py", ACC_PATCHES)
    captured: dict = {}

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        if frame.f_code is not mod.main.__code__:
            return None

        def local(frame, event, arg):  # type: ignore[no-untyped-def]
            if event == "return":
                captured.update(frame.f_locals)
            return local

        return local

    random.seed(0)  # ACC.py breaks argmax ties with random
    sys.settrace(tracer)
    mod.main(
        Namespace(
            features_path=str(out / "features.txt"),
            LLM_results_path=str(out / "llm.json"),
            PointLLM_results_path=str(out / "pointllm.json"),
        )
    )
    sys.settrace(None)
    parsed = mod.read_matrices_from_file(str(out / "features.txt")).numpy()
    assert np.array_equal(parsed, features), "features did not round-trip"
    np.savez_compressed(
        out / "official_acc_k10.npz",
        features=features,
        scores_s0=scores,
        label_names=np.array(inp["label_names"]),
        true_labels=np.array(captured["true_labels"]),
        propagated=np.asarray(captured["Y_array"], dtype=np.float32),
        predictions=np.array(captured["pre"]),
        accuracy=np.float64(captured["acc"]),
        k=10,
        alpha=captured["a"],
        steps=captured["n"],
    )
    print("acc", captured["acc"])


def run_auroc(checkout: Path, out: Path) -> None:
    rng = np.random.default_rng(2201)
    n, d = 40, 8
    features = (0.3 * rng.normal(size=(n, d))).astype(np.float32)
    scores = rng.random(n)
    mn1 = ["airplane", "bathtub", "bed", "bench", "bookshelf"]
    mn2 = ["door", "dresser", "flower pot", "guitar", "lamp"]
    names = [mn1[i % 5] for i in range(20)] + [mn2[i % 5] for i in range(20)]
    names = [names[i] for i in rng.permutation(n)]
    write_features_text(out / "features.txt", features)
    (out / "pointllm.json").write_text(json.dumps({"results": [{"label_name": x} for x in names]}))
    (out / "llm.json").write_text(json.dumps([{"score": float(s)} for s in scores]))
    mod = load_module("AUROC", checkout / "Pointllm" / "AUROC.py")
    captured: dict = {}
    real = mod.roc_auc_score

    def spy(y, s):  # type: ignore[no-untyped-def]
        captured["labels"] = [int(v) for v in y]
        captured["score"] = np.asarray(s, dtype=np.float64).reshape(-1).tolist()
        captured["auroc"] = float(real(y, s))
        return captured["auroc"]

    mod.roc_auc_score = spy
    mod.main(
        Namespace(
            features_path=str(out / "features.txt"),
            PointLLM_results_path=str(out / "pointllm.json"),
            dataset_split="MN1",
            LLM_results_path=str(out / "llm.json"),
        )
    )
    parsed = mod.read_matrices_from_file(str(out / "features.txt")).numpy()
    assert np.array_equal(parsed, features), "features did not round-trip"
    payload = {
        "features": features.astype(np.float64).tolist(),
        "scores_s0": scores.tolist(),
        "is_id": captured["labels"],
        "propagated": captured["score"],
        "auroc": captured["auroc"],
        "k": 3,
        "alpha": 0.5,
        "steps": 5,
    }
    (out / "official_auroc_k3.json").write_text(json.dumps(payload))
    print("auroc", captured["auroc"])


def farthest_point_sample(xyz, m):  # type: ignore[no-untyped-def]
    """CPU stand-in for pointnet2_ops' CUDA kernel: start at point 0, then the point farthest
    (squared distance) from the chosen set."""
    import torch

    b, n, _ = xyz.shape
    index = torch.zeros(b, m, dtype=torch.int32)
    dist = torch.full((b, n), 1e10)
    far = torch.zeros(b, dtype=torch.long)
    for i in range(m):
        index[:, i] = far
        dist = torch.minimum(dist, ((xyz - xyz[torch.arange(b), far][:, None]) ** 2).sum(-1))
        far = dist.argmax(-1)
    return index


def run_pointnn(checkout: Path, inputs: Path, out: Path) -> None:
    import torch

    utils = types.ModuleType("pointnet2_ops.pointnet2_utils")
    utils.furthest_point_sample = farthest_point_sample
    ops = types.ModuleType("pointnet2_ops")
    ops.pointnet2_utils = utils
    sys.modules.update({"pointnet2_ops": ops, "pointnet2_ops.pointnet2_utils": utils})
    torch.Tensor.cuda = lambda self, *a, **k: self  # PosE calls torch.arange(...).cuda()
    package = types.ModuleType("models")
    package.__path__ = [str(checkout / "models")]
    sys.modules["models"] = package
    spec = importlib.util.spec_from_file_location(
        "models.point_nn", checkout / "models" / "point_nn.py"
    )
    point_nn = importlib.util.module_from_spec(spec)
    sys.modules["models.point_nn"] = point_nn
    spec.loader.exec_module(point_nn)
    torch.set_num_threads(1)
    clouds_in = np.load(inputs / "pointnn_inputs.npz")
    result = {}
    for name, clouds, (stages, dim, k) in (
        ("small", clouds_in["clouds512"], (3, 24, 16)),
        ("official", clouds_in["clouds1024"], (4, 72, 90)),
    ):
        net = point_nn.Point_NN(
            input_points=clouds.shape[1],
            num_stages=stages,
            embed_dim=dim,
            k_neighbors=k,
            alpha=1000,
            beta=100,
        ).eval()
        with torch.no_grad():
            feats = net(torch.from_numpy(clouds).permute(0, 2, 1)).numpy()
        result.update(
            {
                f"{name}_clouds": clouds,
                f"{name}_features": feats,
                f"{name}_config": np.array([stages, dim, k]),
            }
        )
        print(name, feats.shape)
    np.savez_compressed(out / "official_pointnn.npz", **result)


if __name__ == "__main__":
    mode, checkout, *rest = sys.argv[1:]
    target = Path(rest[-1])
    target.mkdir(parents=True, exist_ok=True)
    if mode == "acc":
        run_acc(Path(checkout), Path(rest[0]), target)
    elif mode == "auroc":
        run_auroc(Path(checkout), target)
    elif mode == "pointnn":
        run_pointnn(Path(checkout), Path(rest[0]), target)
    else:
        raise SystemExit(f"unknown mode {mode!r}: acc, auroc or pointnn")
