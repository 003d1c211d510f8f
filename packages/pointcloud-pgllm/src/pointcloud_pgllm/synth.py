"""Synthetic ModelNet-like shapes: procedural classes built from open3d primitives.

Each class is a random assembly of boxes, cylinders, cones, spheres and tori with random
proportions and part counts, plus vertex noise, so that pairs of classes are confusable (chair /
stool, cup / bottle / vase, table / desk, bed / sofa / bench, bookshelf / dresser, curtain /
door). :func:`generate_dataset` writes the ModelNet40 tree
``<root>/<class>/{train,test}/<class>_XXXX.off`` (about 1 % of files with ModelNet's malformed
``OFF<V> <F> 0`` header, as in the real release). The 13 ID classes carry ModelNet40's MN1 names
(airplane ... desk); :data:`SYNTH_OOD_CLASSES` are MN2/MN3 names, the OOD set of the miniature
protocol. z is up.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pointcloud_pgllm.io import write_off

__all__ = [
    "SYNTH_CLASSES",
    "SYNTH_ID_CLASSES",
    "SYNTH_OOD_CLASSES",
    "foreign_entries",
    "generate_dataset",
    "make_mesh",
    "remove_generated",
    "synthetic_clouds",
]

Mesh = tuple[np.ndarray, np.ndarray]  # vertices [V, 3], triangles [F, 3]


def _o3d():
    from pointcloud_pgllm._open3d import o3d

    return o3d()


def _arrays(mesh) -> Mesh:
    return np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.triangles, dtype=np.int64)


def box(center, size) -> Mesh:
    """Axis-aligned box with the given centre and (x, y, z) size."""
    v, t = _arrays(_o3d().geometry.TriangleMesh.create_box(*map(float, size)))
    return v - np.asarray(size, dtype=float) / 2 + np.asarray(center, dtype=float), t


def cylinder(center, radius: float, height: float, axis: str = "z", res: int = 16) -> Mesh:
    """Cylinder centred at ``center`` along ``axis``."""
    v, t = _arrays(
        _o3d().geometry.TriangleMesh.create_cylinder(float(radius), float(height), res, 1)
    )
    return _axis(v, axis) + np.asarray(center, dtype=float), t


def cone(base_center, radius: float, height: float, res: int = 16) -> Mesh:
    """Cone with its base centred at ``base_center``, tip up (+z)."""
    v, t = _arrays(_o3d().geometry.TriangleMesh.create_cone(float(radius), float(height), res, 1))
    return v + np.asarray(base_center, dtype=float), t


def sphere(center, radius: float, res: int = 10) -> Mesh:
    v, t = _arrays(_o3d().geometry.TriangleMesh.create_sphere(float(radius), res))
    return v + np.asarray(center, dtype=float), t


def torus(center, radius: float, tube: float) -> Mesh:
    """Torus in the xy plane."""
    v, t = _arrays(_o3d().geometry.TriangleMesh.create_torus(float(radius), float(tube), 20, 8))
    return v + np.asarray(center, dtype=float), t


def _axis(v: np.ndarray, axis: str) -> np.ndarray:
    if axis == "x":
        return v[:, [2, 1, 0]]
    if axis == "y":
        return v[:, [0, 2, 1]]
    return v


def _merge(parts: list[Mesh]) -> Mesh:
    vertices, triangles, offset = [], [], 0
    for v, t in parts:
        vertices.append(v)
        triangles.append(t + offset)
        offset += len(v)
    return np.concatenate(vertices), np.concatenate(triangles)


def _legs(
    r: np.random.Generator,
    w: float,
    d: float,
    h: float,
    z0: float = 0.0,
    thick: float | None = None,
    round_legs: bool | None = None,
) -> list[Mesh]:
    thick = thick if thick is not None else r.uniform(0.04, 0.08)
    round_legs = bool(r.random() < 0.5) if round_legs is None else round_legs
    parts = []
    for sx in (-1, 1):
        for sy in (-1, 1):
            c = (sx * (w / 2 - thick), sy * (d / 2 - thick), z0 + h / 2)
            parts.append(cylinder(c, thick / 2, h) if round_legs else box(c, (thick, thick, h)))
    return parts


# --- ID classes (ModelNet40's MN1 names) -------------------------------------------------------


def _airplane(r):
    length, span = r.uniform(1.6, 2.2), r.uniform(1.5, 2.2)
    body_r = r.uniform(0.08, 0.13)
    nose_v, nose_t = cone((0, 0, 0), body_r, 0.3)
    nose = (nose_v[:, [2, 1, 0]] + [length / 2, 0, 0], nose_t[:, ::-1])  # tip along +x
    parts = [cylinder((0, 0, 0), body_r, length, "x"), nose]
    parts.append(box((r.uniform(-0.1, 0.15), 0, 0), (r.uniform(0.25, 0.4), span, 0.03)))
    parts.append(box((-length / 2 + 0.1, 0, 0), (0.15, span * r.uniform(0.3, 0.45), 0.02)))
    parts.append(box((-length / 2 + 0.1, 0, 0.15), (0.15, 0.02, 0.3)))
    return parts


def _bathtub(r):
    w, d, h, t = r.uniform(1.4, 1.8), r.uniform(0.6, 0.8), r.uniform(0.45, 0.6), 0.05
    return [
        box((0, 0, t / 2), (w, d, t)),
        box((0, d / 2, h / 2), (w, t, h)),
        box((0, -d / 2, h / 2), (w, t, h)),
        box((w / 2, 0, h / 2), (t, d, h)),
        box((-w / 2, 0, h / 2), (t, d, h)),
    ]


def _bed(r):
    w, d = r.uniform(1.0, 1.5), r.uniform(1.8, 2.1)
    hm = r.uniform(0.35, 0.5)
    parts = [box((0, 0, hm / 2), (w, d, hm))]
    parts.append(box((0, -d / 2, r.uniform(0.45, 0.6)), (w, 0.06, r.uniform(0.9, 1.2))))
    if r.random() < 0.6:
        parts.append(box((0, -d / 2 + 0.25, hm + 0.05), (w * 0.8, 0.3, 0.1)))  # pillow
    return parts


def _bench(r):
    w, d, h = r.uniform(1.4, 2.0), r.uniform(0.35, 0.5), r.uniform(0.4, 0.5)
    parts = [box((0, 0, h), (w, d, 0.06))]
    parts += [box((sx * (w / 2 - 0.1), 0, h / 2), (0.06, d, h)) for sx in (-1, 1)]
    if r.random() < 0.5:
        parts.append(box((0, d / 2, h + 0.25), (w, 0.04, 0.2)))  # low back rail
    return parts


def _bookshelf(r):
    w, d, h = r.uniform(0.8, 1.2), r.uniform(0.3, 0.4), r.uniform(1.6, 2.0)
    n = int(r.integers(3, 6))
    parts = [box((sx * w / 2, 0, h / 2), (0.04, d, h)) for sx in (-1, 1)]
    parts.append(box((0, d / 2, h / 2), (w, 0.02, h)))
    parts += [box((0, 0, k * h / n + 0.02), (w, d, 0.04)) for k in range(n + 1)]
    return parts


def _bottle(r):
    rad, h = r.uniform(0.12, 0.18), r.uniform(0.6, 0.9)
    neck_r, neck_h = rad * r.uniform(0.3, 0.45), r.uniform(0.2, 0.35)
    return [
        cylinder((0, 0, h / 2), rad, h),
        cone((0, 0, h), rad, neck_h * 0.8),
        cylinder((0, 0, h + neck_h * 0.6), neck_r, neck_h),
    ]


def _bowl(r):
    rad = r.uniform(0.4, 0.6)
    v, t = sphere((0, 0, 0), rad, 14)
    keep_v = v[:, 2] <= rad * r.uniform(0.0, 0.2)
    keep_t = keep_v[t].all(axis=1)
    new_index = np.cumsum(keep_v) - 1
    return [(v[keep_v] + [0, 0, rad], new_index[t[keep_t]])]


def _car(r):
    length, w, h = r.uniform(1.8, 2.3), r.uniform(0.8, 1.0), r.uniform(0.35, 0.45)
    wheel = r.uniform(0.15, 0.2)
    parts = [box((0, 0, wheel + h / 2), (length, w, h))]
    parts.append(box((r.uniform(-0.2, 0.1), 0, wheel + h + 0.15), (length * 0.5, w * 0.9, 0.3)))
    for sx in (-1, 1):
        for sy in (-1, 1):
            parts.append(cylinder((sx * length * 0.32, sy * w / 2, wheel), wheel, 0.12, "y"))
    return parts


def _chair(r):
    w, d, h = r.uniform(0.45, 0.6), r.uniform(0.45, 0.6), r.uniform(0.42, 0.5)
    parts = _legs(r, w, d, h)
    parts.append(box((0, 0, h), (w, d, 0.05)))
    back = r.uniform(0.4, 0.6)
    parts.append(box((0, d / 2 - 0.025, h + back / 2), (w, 0.05, back)))
    return parts


def _cone(r):
    rad, h = r.uniform(0.3, 0.5), r.uniform(0.6, 1.2)
    parts = [cone((0, 0, 0.02), rad, h)]
    if r.random() < 0.5:  # traffic-cone base
        parts.append(box((0, 0, 0.01), (rad * 2.4, rad * 2.4, 0.03)))
    return parts


def _cup(r):
    rad, h = r.uniform(0.2, 0.3), r.uniform(0.35, 0.5)
    v, t = torus((0, 0, 0), h * 0.25, 0.03)
    handle = (v[:, [0, 2, 1]] + [rad + h * 0.15, 0, h / 2], t)
    return [cylinder((0, 0, h / 2), rad, h), handle]


def _curtain(r):
    w, h, n = r.uniform(1.2, 2.0), r.uniform(1.6, 2.2), int(r.integers(6, 12))
    amp = r.uniform(0.04, 0.1)
    xs = np.linspace(-w / 2, w / 2, 4 * n + 1)
    zs = np.array([0.0, h])
    grid = np.array([(x, amp * np.sin(2 * np.pi * n * (x + w / 2) / w), z) for z in zs for x in xs])
    m = len(xs)
    tri = [[i, i + 1, m + i] for i in range(m - 1)] + [
        [i + 1, m + i + 1, m + i] for i in range(m - 1)
    ]
    return [(grid, np.asarray(tri)), cylinder((0, 0, h + 0.03), 0.02, w * 1.1, "x")]


def _desk(r):
    w, d, h = r.uniform(1.2, 1.6), r.uniform(0.6, 0.8), r.uniform(0.72, 0.78)
    side = r.uniform(0.3, 0.45)
    parts = [box((0, 0, h), (w, d, 0.05)), box((-w / 2 + side / 2, 0, h / 2), (side, d * 0.95, h))]
    parts.append(box((w / 2 - 0.03, 0, h / 2), (0.05, d * 0.95, h)))
    return parts


# --- OOD classes (MN2 / MN3 names) --------------------------------------------------------------


def _door(r):
    w, h = r.uniform(0.8, 1.0), r.uniform(1.9, 2.1)
    return [box((0, 0, h / 2), (w, 0.05, h)), sphere((w * 0.38, 0.06, h * 0.48), 0.035, 6)]


def _dresser(r):
    w, d, h = r.uniform(0.9, 1.3), r.uniform(0.45, 0.55), r.uniform(0.8, 1.1)
    n = int(r.integers(3, 5))
    parts = [box((0, 0, h / 2 + 0.05), (w, d, h))]
    parts += [
        box((0, -d / 2 - 0.01, 0.05 + (k + 0.5) * h / n), (w * 0.9, 0.02, h / n * 0.8))
        for k in range(n)
    ]
    return parts


def _lamp(r):
    h, shade = r.uniform(1.0, 1.6), r.uniform(0.2, 0.3)
    parts = [cylinder((0, 0, 0.02), r.uniform(0.15, 0.2), 0.04), cylinder((0, 0, h / 2), 0.02, h)]
    v, t = cone((0, 0, 0), shade, shade * 1.2)
    parts.append((v * [1, 1, -1] + [0, 0, h + shade * 0.6], t[:, ::-1]))
    return parts


def _monitor(r):
    w, h = r.uniform(0.9, 1.3), r.uniform(0.55, 0.75)
    return [
        box((0, 0, 0.3 + h / 2), (w, 0.05, h)),
        box((0, 0.05, 0.15), (0.06, 0.04, 0.3)),
        box((0, 0.05, 0.01), (0.4, 0.25, 0.02)),
    ]


def _piano(r):
    w, d, h = r.uniform(1.4, 1.6), r.uniform(0.5, 0.6), r.uniform(1.1, 1.3)
    return [
        box((0, 0, h / 2), (w, d * 0.5, h)),
        box((0, -d * 0.4, 0.72), (w * 0.95, d * 0.4, 0.08)),
        *_legs(r, w * 0.95, d * 0.3, 0.7, thick=0.06, round_legs=False)[:2],
    ]


def _sofa(r):
    w, d, h = r.uniform(1.6, 2.2), r.uniform(0.8, 0.95), r.uniform(0.4, 0.5)
    arm = r.uniform(0.15, 0.25)
    return [
        box((0, 0, h / 2), (w, d, h)),
        box((0, d / 2 - 0.1, h + 0.25), (w, 0.2, 0.5)),
        box((-w / 2 + arm / 2, 0, h + 0.1), (arm, d, 0.2)),
        box((w / 2 - arm / 2, 0, h + 0.1), (arm, d, 0.2)),
    ]


def _stairs(r):
    n, w = int(r.integers(4, 8)), r.uniform(0.8, 1.2)
    step_d, step_h = r.uniform(0.25, 0.3), r.uniform(0.15, 0.2)
    return [
        box((0, k * step_d, (k + 1) * step_h / 2), (w, step_d, (k + 1) * step_h)) for k in range(n)
    ]


def _stool(r):
    w, h = r.uniform(0.35, 0.5), r.uniform(0.45, 0.7)
    if r.random() < 0.5:
        return [*_legs(r, w, w, h), box((0, 0, h), (w, w, 0.05))]
    return [*_legs(r, w, w, h, round_legs=True), cylinder((0, 0, h), w / 2, 0.05)]


def _table(r):
    w, d, h = r.uniform(1.0, 1.8), r.uniform(0.7, 1.0), r.uniform(0.7, 0.78)
    return [*_legs(r, w, d, h), box((0, 0, h), (w, d, 0.05))]


def _vase(r):
    rad, h = r.uniform(0.15, 0.25), r.uniform(0.5, 0.8)
    return [sphere((0, 0, h * 0.35), rad * 1.4, 12), cylinder((0, 0, h * 0.7), rad * 0.6, h * 0.6)]


_BUILDERS: dict[str, Callable[[np.random.Generator], list[Mesh]]] = {
    "airplane": _airplane,
    "bathtub": _bathtub,
    "bed": _bed,
    "bench": _bench,
    "bookshelf": _bookshelf,
    "bottle": _bottle,
    "bowl": _bowl,
    "car": _car,
    "chair": _chair,
    "cone": _cone,
    "cup": _cup,
    "curtain": _curtain,
    "desk": _desk,
    "door": _door,
    "dresser": _dresser,
    "lamp": _lamp,
    "monitor": _monitor,
    "piano": _piano,
    "sofa": _sofa,
    "stairs": _stairs,
    "stool": _stool,
    "table": _table,
    "vase": _vase,
}
SYNTH_ID_CLASSES = tuple(list(_BUILDERS)[:13])  # MN1 names: airplane ... desk
SYNTH_OOD_CLASSES = tuple(list(_BUILDERS)[13:])
SYNTH_CLASSES = SYNTH_ID_CLASSES + SYNTH_OOD_CLASSES
VERTEX_NOISE = 0.006  # vertex jitter, in units of the shape's size


def make_mesh(name: str, rng: np.random.Generator) -> Mesh:
    """One random instance of class ``name``: vertices [V, 3] and triangles [F, 3].

    The parts are merged, scaled by a random anisotropic factor (±10 % per axis), jittered
    (``VERTEX_NOISE``) and turned by a small random yaw (±10°).
    """
    if name not in _BUILDERS:
        raise ValueError(f"unknown synthetic class {name!r}; known: {', '.join(SYNTH_CLASSES)}")
    vertices, triangles = _merge(_BUILDERS[name](rng))
    vertices = vertices * rng.uniform(0.9, 1.1, size=3)
    scale = float(np.ptp(vertices, axis=0).max())
    vertices = vertices + rng.normal(0.0, VERTEX_NOISE * scale, size=vertices.shape)
    yaw = np.deg2rad(rng.uniform(-10, 10))
    rot = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    return vertices @ rot.T, triangles


def generate_dataset(
    out: str | Path,
    classes: list[str] | tuple[str, ...] | None = None,
    *,
    n_train: int = 20,
    n_test: int = 10,
    seed: int = 0,
    glued_fraction: float = 0.01,
) -> Path:
    """Writes ``out/<class>/{train,test}/<class>_XXXX.off`` (numbered 0001.. across both splits,
    as ModelNet40 does; each file mode 0644) and returns ``out``. ``out`` must not hold files
    already (the partial marker of :func:`iclr26_common.outputs.check_out_folder` aside)."""
    from iclr26_common.outputs import FILE_MODE, PARTIAL_MARKER

    out = Path(out)
    if out.exists() and any(p.name != PARTIAL_MARKER for p in out.iterdir()):
        raise FileExistsError(f"{out}: exists and is not empty; choose a new folder")
    names = list(classes) if classes is not None else list(SYNTH_CLASSES)
    for name in names:
        if name not in _BUILDERS:
            raise ValueError(f"unknown synthetic class {name!r}; known: {', '.join(SYNTH_CLASSES)}")
    for c, name in enumerate(names):
        rng = np.random.default_rng([seed, c])
        index = 0
        for split, count in (("train", n_train), ("test", n_test)):
            folder = out / name / split
            folder.mkdir(parents=True, exist_ok=True)
            for _ in range(count):
                index += 1
                vertices, triangles = make_mesh(name, rng)
                glued = bool(rng.random() < glued_fraction)
                path = folder / f"{name}_{index:04d}.off"
                write_off(path, vertices, triangles, glued=glued)
                os.chmod(path, FILE_MODE)  # an ordinary output file whatever the umask
    return out


def foreign_entries(out: str | Path) -> list[str]:
    """The entries of ``out`` that :func:`generate_dataset` does not write (anything but
    folders named after a synthetic class and the partial marker), sorted: ``synth
    --overwrite`` refuses such a folder rather than mix a new dataset with other data."""
    from iclr26_common.outputs import PARTIAL_MARKER

    return sorted(
        p.name
        for p in Path(out).iterdir()
        if p.name != PARTIAL_MARKER and not (p.is_dir() and p.name in SYNTH_CLASSES)
    )


def remove_generated(out: str | Path) -> None:
    """Remove the class folders an earlier :func:`generate_dataset` wrote into ``out``
    (``synth --overwrite``)."""
    import shutil

    for name in SYNTH_CLASSES:
        if (Path(out) / name).is_dir():
            shutil.rmtree(Path(out) / name)


def synthetic_clouds(
    classes: list[str] | tuple[str, ...] | None = None,
    n_per_class: int = 10,
    n_points: int = 1024,
    seed: int = 0,
):
    """In-memory synthetic clouds (no files): a :class:`~pointcloud_pgllm.io.PointCloudSet`
    whose source of each cloud is ``synthetic:<class>:seed<seed>:<i>`` (``i``: its index within
    its class), unique per cloud and across the seeds of the splits."""
    from pointcloud_pgllm.io import PointCloudSet, normalize_cloud, sample_mesh

    names = list(classes) if classes is not None else list(SYNTH_ID_CLASSES)
    clouds, labels, sources = [], [], []
    for c, name in enumerate(names):
        rng = np.random.default_rng([seed, c, 7])
        for i in range(n_per_class):
            vertices, triangles = make_mesh(name, rng)
            clouds.append(
                normalize_cloud(sample_mesh(vertices, triangles, n_points, seed * 7919 + i, name))
            )
            labels.append(c)
            sources.append(f"synthetic:{name}:seed{seed}:{i}")
    points = np.stack(clouds).astype(np.float32)
    return PointCloudSet(points, np.asarray(labels, dtype=np.int64), names, sources)
