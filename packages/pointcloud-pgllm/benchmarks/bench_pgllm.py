"""PGLLM speed benchmarks, each a ratio against a named peer measured in the same run.

    uv run --no-sync python packages/pointcloud-pgllm/benchmarks/bench_pgllm.py [--smollm2]

0. OFF reading: ours (vectorised, glued-header aware) vs open3d ``read_triangle_mesh`` (peer);
1. encoder clouds/s: training-free Point-NN (default and experiment sizes) vs the trainable
   PointNet++-style encoder (peer), inference, one torch thread;
2. graph build: ours (torch top-k + PyG ``to_undirected``) vs the official operator built with
   sklearn (peer): ``NearestNeighbors`` k-NN, knn = exp(-d) with diagonal 1, W = knn + knnᵀ
   (diagonal 2), D = row sums of knn (``ACC.py`` / ``AUROC.py``, as sparse matrices);
3. propagation (a = 0.5, T = 5) vs sklearn ``LabelSpreading`` on the same affinity (peer);
4. end to end: queries/s of plain scoring (peer) vs the full PGLLM ladder step (graph + guided
   scoring + propagation) with the offline TF-IDF scorer; ``--smollm2`` adds the SmolLM2
   likelihood scorer on a few queries.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from iclr26_common.timing import best_time


def bench_off(n_vertices: int) -> None:
    import tempfile
    from pathlib import Path

    from pointcloud_pgllm._open3d import o3d
    from pointcloud_pgllm.io import read_off, write_off

    lib = o3d()
    rng = np.random.default_rng(0)
    v = rng.normal(size=(n_vertices, 3))
    f = rng.integers(0, n_vertices, size=(2 * n_vertices, 3))
    with tempfile.TemporaryDirectory() as tmp:
        plain = write_off(Path(tmp) / "plain.off", v, f)
        glued = write_off(Path(tmp) / "glued.off", v, f, glued=True)
        t_ref = best_time(lambda: lib.io.read_triangle_mesh(str(plain)))
        t_ours = best_time(lambda: read_off(plain))
        glued_vertices = len(lib.io.read_triangle_mesh(str(glued)).vertices)
        ours_glued = len(read_off(glued)[0])
    print(f"\n## 0. OFF reading ({n_vertices} vertices, {2 * n_vertices} triangles)")
    print("| reader | ms | x open3d |\n|---|---:|---:|")
    print(f"| open3d read_triangle_mesh (peer) | {1e3 * t_ref:.1f} | 1.00 |")
    print(f"| pointcloud_pgllm.io.read_off | {1e3 * t_ours:.1f} | {t_ref / t_ours:.2f} |")
    print(
        f"glued header 'OFF{n_vertices} ...': open3d read {glued_vertices} vertices, ours {ours_glued}"
    )


def bench_encoders(n: int) -> None:
    from pointcloud_pgllm.model import PointNet2Encoder, PointNN, encode

    print(f"\n## 1. Encoder inference, {n} clouds, 1 thread")
    print("| encoder | points | clouds/s | x PointNet++ |\n|---|---:|---:|---:|")
    torch.manual_seed(0)
    rows = []
    for name, enc, p in [
        ("PointNet2Encoder (64,128,256) (peer)", PointNet2Encoder(), 1024),
        ("PointNN 4 stages, 72-d, k=32 (Point-NN size)", PointNN(4, 72, 32), 1024),
        ("PointNN default (4, 36, 16)", PointNN(4, 36, 16), 1024),
        ("PointNN experiment (3, 24, 16)", PointNN(3, 24, 16), 512),
    ]:
        x = torch.randn(n, p, 3)
        rows.append((name, p, n / best_time(lambda e=enc, x=x: encode(e, x), 2)))
    for name, p, rate in rows:
        print(f"| {name} | {p} | {rate:.1f} | {rate / rows[0][2]:.2f} |")


def bench_graph(sizes: list[int], dim: int, k: int) -> None:
    import scipy.sparse as sp
    from sklearn.neighbors import NearestNeighbors

    from pointcloud_pgllm.graph import build_graph, dense_adjacency

    def official(xn: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
        """ACC.py / AUROC.py's W and D (sparse): knn rows exp(-d) of the K nearest others."""
        a = NearestNeighbors(n_neighbors=k + 1).fit(xn).kneighbors_graph(None, k, "distance")
        a.data = np.exp(-a.data)
        knn = a + sp.identity(xn.shape[0], format="csr")  # np.fill_diagonal(knn, 1.0)
        return (knn + knn.T).tocsr(), np.asarray(knn.sum(axis=1)).ravel()

    x = torch.nn.functional.normalize(torch.randn(300, dim), dim=1)
    w_ref, d_ref = official(x.numpy())
    g = build_graph(x, k, "official")
    same = np.allclose(w_ref.toarray(), dense_adjacency(g).numpy(), atol=1e-5) and np.allclose(
        d_ref, g.degree.numpy(), atol=1e-5
    )
    print(
        f"\n## 2. Graph build (official operator, K={k}, D={dim}; same W and D as the peer: {same})"
    )
    print("| N | sklearn official W, D (peer) ms | ours ms | x sklearn |\n|---:|---:|---:|---:|")
    for n in sizes:
        x = torch.nn.functional.normalize(torch.randn(n, dim), dim=1)
        xn = x.numpy()
        t_ref = best_time(lambda xn=xn: official(xn))
        t_ours = best_time(lambda x=x: build_graph(x, k, "official"))
        print(f"| {n} | {1e3 * t_ref:.1f} | {1e3 * t_ours:.1f} | {t_ref / t_ours:.2f} |")


def bench_propagation(sizes: list[int], classes: int, k: int) -> None:
    from sklearn.semi_supervised import LabelSpreading

    from pointcloud_pgllm.graph import build_graph, dense_adjacency, propagate

    print(f"\n## 3. Propagation (a=0.5, T=5, C={classes}) vs sklearn LabelSpreading (max_iter=30)")
    print("| N | LabelSpreading (peer) ms | ours ms | x sklearn |\n|---:|---:|---:|---:|")
    for n in sizes:
        x = torch.nn.functional.normalize(torch.randn(n, 64), dim=1)
        g = build_graph(x, k, "official")
        w = dense_adjacency(g).double().numpy()
        y = np.random.default_rng(0).integers(0, classes, n)
        y[n // 2 :] = -1
        s0 = torch.rand(n, classes)
        t_ref = best_time(
            lambda w=w, y=y: LabelSpreading(kernel=lambda a, b: w, alpha=0.5).fit(
                np.zeros((len(y), 1)), y
            )
        )
        t_ours = best_time(lambda g=g, s0=s0: propagate(s0, g))
        print(f"| {n} | {1e3 * t_ref:.1f} | {1e3 * t_ours:.2f} | {t_ref / t_ours:.1f} |")


def bench_end_to_end(n_per_class: int, smollm2: bool) -> None:
    from pointcloud_pgllm.captions import GeometricCaptioner
    from pointcloud_pgllm.model import PointNN, encode
    from pointcloud_pgllm.pipeline import pgllm_scores
    from pointcloud_pgllm.scorers import TfidfScorer
    from pointcloud_pgllm.synth import synthetic_clouds

    train = synthetic_clouds(n_per_class=n_per_class, n_points=512, seed=0)
    test = synthetic_clouds(n_per_class=n_per_class, n_points=512, seed=1)
    cap = GeometricCaptioner()
    t = time.perf_counter()
    captions = cap(test.points)
    t_cap = time.perf_counter() - t
    t = time.perf_counter()
    feats = encode(PointNN(3, 24, 16), test.points)
    t_enc = time.perf_counter() - t
    scorer = TfidfScorer().fit(cap(train.points), train.labels, train.class_names)
    n = len(test)
    print(f"\n## 4. End to end, {n} queries (13 classes), TF-IDF scorer")
    print(
        f"captioning {n / t_cap:.1f} clouds/s, Point-NN encoding {n / t_enc:.1f} clouds/s (both shared by every ablation)"
    )
    t_plain = best_time(
        lambda: pgllm_scores(feats, captions, scorer, test.class_names, ablations=("none",))
    )
    t_full = best_time(
        lambda: pgllm_scores(feats, captions, scorer, test.class_names, ablations=("both",))
    )
    print("| step | ms | queries/s | x plain |\n|---|---:|---:|---:|")
    print(f"| plain scoring (none; peer) | {1e3 * t_plain:.1f} | {n / t_plain:.0f} | 1.00 |")
    print(
        f"| guidance + propagation (both) | {1e3 * t_full:.1f} | {n / t_full:.0f} | {t_full / t_plain:.2f} |"
    )
    total_plain = t_cap + t_enc + t_plain
    total_full = t_cap + t_enc + t_full
    print(
        f"whole pipeline incl. captions + encoder: plain {n / total_plain:.1f} q/s, PGLLM {n / total_full:.1f} q/s "
        f"(overhead {100 * (total_full / total_plain - 1):.1f} %)"
    )
    if smollm2:
        from pointcloud_pgllm.graph import nearest_neighbours
        from pointcloud_pgllm.pipeline import make_queries
        from pointcloud_pgllm.scorers import LikelihoodScorer

        lm = LikelihoodScorer()
        m = 8
        plain_q = make_queries(captions[:m])
        idx, _ = nearest_neighbours(torch.nn.functional.normalize(feats, dim=1), 3)
        guided_q = make_queries(captions, idx.numpy())[:m]
        lm.score(plain_q[:1], test.class_names)  # warm-up + calibration baseline
        t_p = best_time(lambda: lm.score(plain_q, test.class_names), 1)
        t_g = best_time(lambda: lm.score(guided_q, test.class_names), 1)
        print(
            f"| SmolLM2 likelihood, plain ({m} queries) | {1e3 * t_p:.0f} | {m / t_p:.2f} | 1.00 |"
        )
        print(
            f"| SmolLM2 likelihood, guided prompt | {1e3 * t_g:.0f} | {m / t_g:.2f} | {t_g / t_p:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smollm2", action="store_true", help="also time the SmolLM2 scorer")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument(
        "--only",
        type=lambda v: {int(s) for s in v.split(",")},
        default=None,
        help="comma-separated section numbers to run (default: all)",
    )
    ns = parser.parse_args()
    torch.set_num_threads(1)
    run = ns.only or {0, 1, 2, 3, 4}
    sizes = [500, 2000] if ns.quick else [1000, 4000]
    if 0 in run:
        bench_off(5000 if ns.quick else 50_000)
    if 1 in run:
        bench_encoders(16 if ns.quick else 64)
    if 2 in run:
        bench_graph(sizes, 576, 10)
    if 3 in run:
        bench_propagation(sizes, 40, 10)
    if 4 in run:
        bench_end_to_end(4 if ns.quick else 10, ns.smollm2)


if __name__ == "__main__":
    main()
