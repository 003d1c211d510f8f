"""Captioners: a text description of each support cloud (PGLLM's first stage).

In the paper PointLLM captions each sample ("What is this?" -> "This is an object of ...").
The offline default here, :class:`GeometricCaptioner`, describes measured properties of the cloud
and never sees a label: extents and aspect ratios, mirror symmetry, connected parts (DBSCAN in
open3d), supports touching the ground, flatness (seeded RANSAC planes), holes (enclosed empty
cells of the three axis projections) and the dominant primitive (RANSAC planes vs vertical
cylinders). Any object with ``caption(points [P, 3]) -> str`` can replace it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GeometricCaptioner", "describe", "measure"]

_GRID = 10  # cells per side of the projection occupancy grids
_DBSCAN_EPS = 0.09  # in units of the unit-sphere-normalised cloud
_PLANE_TOL = 0.02
_CYL_TOL = 0.025
_SUPPORT_EPS = 0.12  # DBSCAN radius separating legs in the bottom slab
_MIRROR_TOL = 0.045  # mean mirror-to-cloud distance counted as symmetric


def _horizontal_frame(points: np.ndarray) -> np.ndarray:
    """Cloud centred and turned about z so that x is the widest horizontal direction."""
    centred = points - points.mean(axis=0)
    cov = np.cov(centred[:, :2].T)
    _, vecs = np.linalg.eigh(cov)
    major = vecs[:, -1]
    rot = np.array([[major[0], major[1]], [-major[1], major[0]]])
    out = centred.copy()
    out[:, :2] = centred[:, :2] @ rot.T
    out[:, 2] -= out[:, 2].min()
    return out


def _chamfer_mirror(points: np.ndarray, axis: int) -> float:
    from scipy.spatial import cKDTree

    mirrored = points.copy()
    mirrored[:, axis] = 2 * np.median(points[:, axis]) - mirrored[:, axis]
    return float(cKDTree(points).query(mirrored)[0].mean())


def _holes(points: np.ndarray) -> int:
    """How many of the three axis projections show an enclosed empty region."""
    from scipy.ndimage import binary_fill_holes

    count = 0
    for axes in ((0, 2), (1, 2), (0, 1)):
        xy = points[:, axes]
        lo, span = xy.min(axis=0), np.ptp(xy, axis=0).clip(min=1e-6)
        cells = np.minimum((_GRID * (xy - lo) / span).astype(int), _GRID - 1)
        grid = np.zeros((_GRID, _GRID), dtype=bool)
        grid[cells[:, 0], cells[:, 1]] = True
        enclosed = binary_fill_holes(grid) & ~grid
        count += int(enclosed.sum() >= 2)
    return count


def _cylinder_fraction(points: np.ndarray, rng: np.random.Generator, trials: int = 64) -> float:
    """Best inlier fraction of a vertical-axis cylinder found by RANSAC on 3-point circles."""
    xy = points[:, :2]
    picks = rng.integers(0, len(xy), size=(trials, 3))
    a, b, c = xy[picks[:, 0]], xy[picks[:, 1]], xy[picks[:, 2]]
    d = 2 * (
        a[:, 0] * (b[:, 1] - c[:, 1])
        + b[:, 0] * (c[:, 1] - a[:, 1])
        + c[:, 0] * (a[:, 1] - b[:, 1])
    )
    ok = np.abs(d) > 1e-9
    if not ok.any():
        return 0.0
    a, b, c, d = a[ok], b[ok], c[ok], d[ok]
    sa, sb, sc = (a**2).sum(1), (b**2).sum(1), (c**2).sum(1)
    ux = (sa * (b[:, 1] - c[:, 1]) + sb * (c[:, 1] - a[:, 1]) + sc * (a[:, 1] - b[:, 1])) / d
    uy = (sa * (c[:, 0] - b[:, 0]) + sb * (a[:, 0] - c[:, 0]) + sc * (b[:, 0] - a[:, 0])) / d
    centre = np.stack([ux, uy], axis=1)
    radius = np.linalg.norm(a - centre, axis=1)
    keep = radius < 1.0
    if not keep.any():
        return 0.0
    dist = np.linalg.norm(xy[None, :, :] - centre[keep, None, :], axis=2)
    return float((np.abs(dist - radius[keep, None]) < _CYL_TOL).mean(axis=1).max())


def _ransac_plane(points: np.ndarray, rng: np.random.Generator, trials: int = 100) -> np.ndarray:
    """Inlier mask of the best plane among ``trials`` 3-point hypotheses (seeded numpy RANSAC;
    open3d's ``segment_plane`` runs its trials in parallel threads and is not reproducible)."""
    picks = rng.integers(0, len(points), size=(trials, 3))
    a, b, c = points[picks[:, 0]], points[picks[:, 1]], points[picks[:, 2]]
    normal = np.cross(b - a, c - a)
    norm = np.linalg.norm(normal, axis=1)
    ok = norm > 1e-9
    if not ok.any():
        return np.zeros(len(points), dtype=bool)
    normal = normal[ok] / norm[ok, None]
    dist = np.abs((points[None, :, :] - a[ok, None, :]) @ normal[:, :, None])[..., 0]
    inliers = dist < _PLANE_TOL
    return inliers[int(inliers.sum(axis=1).argmax())]


def measure(points: np.ndarray, seed: int = 0) -> dict[str, float]:
    """The measured properties of a cloud ``[P, 3]`` (z up, any scale) used by the captions."""
    from pointcloud_pgllm._open3d import o3d
    from pointcloud_pgllm._open3d import seed as o3d_seed

    lib = o3d()
    pts = _horizontal_frame(np.asarray(points, dtype=np.float64))
    pts = pts / max(float(np.ptp(pts, axis=0).max()), 1e-9)  # longest extent = 1
    width, depth, height = (float(v) for v in np.ptp(pts, axis=0))
    cloud = lib.geometry.PointCloud(lib.utility.Vector3dVector(pts))
    o3d_seed(seed)
    labels = np.asarray(cloud.cluster_dbscan(_DBSCAN_EPS, 5))
    sizes = np.bincount(labels[labels >= 0]) if (labels >= 0).any() else np.zeros(0)
    parts = int((sizes >= 0.03 * len(pts)).sum())
    bottom = pts[pts[:, 2] <= 0.06 * max(height, 1e-6) + pts[:, 2].min()]
    supports = 0
    if len(bottom) >= 5:
        flat = bottom.copy()
        flat[:, 2] = 0.0
        low = lib.geometry.PointCloud(lib.utility.Vector3dVector(flat))
        bl = np.asarray(low.cluster_dbscan(_SUPPORT_EPS, 3))
        sizes_b = np.bincount(bl[bl >= 0]) if (bl >= 0).any() else np.zeros(0)
        supports = int((sizes_b >= 0.08 * len(bottom)).sum())
    rng = np.random.default_rng(seed)
    remaining, fractions = pts, []
    for _ in range(3):
        if len(remaining) < 30:
            break
        inliers = _ransac_plane(remaining, rng)
        fractions.append(int(inliers.sum()) / len(pts))
        remaining = remaining[~inliers]
    z_mass = np.histogram(pts[:, 2], bins=3, range=(pts[:, 2].min(), pts[:, 2].max() + 1e-9))[
        0
    ] / len(pts)
    return {
        "width": width,
        "depth": depth,
        "height": height,
        "height_ratio": height / max(width, 1e-6),
        "depth_ratio": depth / max(width, 1e-6),
        "mirror_lr": _chamfer_mirror(pts, 0),
        "mirror_fb": _chamfer_mirror(pts, 1),
        "parts": float(parts),
        "supports": float(supports),
        "plane1": fractions[0] if fractions else 0.0,
        "planes3": float(sum(fractions)),
        "cylinder": _cylinder_fraction(pts, rng),
        "holes": float(_holes(pts)),
        "mass_bottom": float(z_mass[0]),
        "mass_top": float(z_mass[2]),
    }


def _bin(value: float, edges: tuple[float, ...], words: tuple[str, ...]) -> str:
    return words[int(np.searchsorted(edges, value))]


def describe(m: dict[str, float]) -> str:
    """The caption of measured properties ``m`` (from :func:`measure`), in words."""
    shape = _bin(
        m["height_ratio"],
        (0.3, 0.6, 1.2, 2.0),
        ("very flat", "low", "compact", "tall", "very tall"),
    )
    footprint = _bin(
        m["depth_ratio"], (0.12, 0.4, 0.8), ("sheet-like thin", "narrow", "rectangular", "square")
    )
    words = [f"A {shape} object with a {footprint} footprint"]
    sym = [
        name
        for name, key in (("left-right", "mirror_lr"), ("front-back", "mirror_fb"))
        if m[key] < 0.02
    ]
    words.append(f"mirror symmetric {' and '.join(sym)}" if sym else "asymmetric")
    parts = int(m["parts"])
    words.append(
        {0: "scattered points", 1: "one connected part", 2: "two separate parts"}.get(
            parts, "several separate parts"
        )
    )
    supports = int(m["supports"])
    words.append(
        {0: "no clear base", 1: "resting on a single base", 2: "standing on two supports"}.get(
            supports, "standing on four legs" if supports >= 4 else "standing on three supports"
        )
    )
    words.append(
        _bin(
            m["planes3"],
            (0.3, 0.6, 0.85),
            ("curved surfaces", "partly flat", "mostly flat panels", "made of flat boards"),
        )
    )
    if m["holes"] >= 1:
        words.append("with holes or openings" if m["holes"] < 2 else "with many openings")
    primitive = (
        "cylinder"
        if m["cylinder"] > max(0.35, m["plane1"])
        else "plane"
        if m["plane1"] > 0.2
        else "freeform"
    )
    words.append(f"dominant primitive {primitive}")
    if m["mass_top"] > 0.5:
        words.append("mass concentrated at the top")
    elif m["mass_bottom"] > 0.5:
        words.append("mass concentrated at the bottom")
    return ", ".join(words) + "."


@dataclass
class GeometricCaptioner:
    """Label-free captions from measured geometry: ``caption(points [P, 3]) -> str``."""

    seed: int = 0

    def caption(self, points: np.ndarray) -> str:
        return describe(measure(points, self.seed))

    def __call__(self, clouds, quiet: bool = True) -> list[str]:
        """Captions of clouds ``[N, P, 3]``; ``quiet=False`` shows progress on stderr."""
        from iclr26_common.progress import progress

        items = progress(clouds, description="captioning", total=len(clouds), quiet=quiet)
        return [self.caption(np.asarray(c)) for c in items]
