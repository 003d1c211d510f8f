"""Readers for the point-cloud formats of the paper's datasets, and an OFF writer.

- ModelNet40 OFF meshes (``ModelNet40/<class>/{train,test}/<class>_XXXX.off``), including the
  ~1 % of files whose header glues the counts to ``OFF`` (``OFF1046 900 0``); points are sampled
  uniformly on the surface with open3d.
- The PointNet HDF5 release (``ply_data_{train,test}*.h5``: ``data`` [N, 2048, 3], ``label``
  [N, 1]) and ScanObjectNN h5 (``data``, ``label``, optional ``mask``), via h5py.
- PLY / PCD / XYZ point clouds via open3d.

Every reader raises :class:`~pointcloud_pgllm.errors.PGLLMInputError` naming the file and the
field for bad input (bad counts, empty clouds, NaN coordinates, missing h5 keys).
"""

from __future__ import annotations

import io
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from iclr26_common.textio import input_file
from pointcloud_pgllm.constants import DEFAULT_N_POINTS
from pointcloud_pgllm.errors import PGLLMInputError

__all__ = [
    "CLOUD_SUFFIXES",
    "PointCloudSet",
    "check_points",
    "load_dataset",
    "normalize_cloud",
    "read_cloud_file",
    "read_h5",
    "read_off",
    "resample",
    "sample_mesh",
    "shared_source_files",
    "write_off",
]

CLOUD_SUFFIXES = (".ply", ".pcd", ".xyz", ".xyzn", ".pts")
_OFF_GLUED = re.compile(r"^OFF\s*(\S.*)$")


@dataclass
class PointCloudSet:
    """Clouds of one split: ``points`` [N, P, 3] float32 (centred, unit sphere), ``labels`` [N]
    int64 indices into ``class_names`` (-1 when unknown), ``sources`` one string per cloud."""

    points: np.ndarray
    labels: np.ndarray
    class_names: list[str]
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.points.shape[0])

    def subset(self, index: np.ndarray) -> PointCloudSet:
        index = np.asarray(index, dtype=np.int64)
        return PointCloudSet(
            self.points[index],
            self.labels[index],
            list(self.class_names),
            [self.sources[i] for i in index] if self.sources else [],
        )


def check_points(points: np.ndarray, source: str, what: str = "points") -> np.ndarray:
    """[P, 3] finite float array with P >= 1, else an error naming ``source`` and the field."""
    points = np.asarray(points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise PGLLMInputError(f"{source}: {what} must have shape [P, 3], got {points.shape}")
    if points.shape[0] == 0:
        raise PGLLMInputError(f"{source}: empty point cloud ({what} has 0 points)")
    bad = ~np.isfinite(points).all(axis=1)
    if bad.any():
        raise PGLLMInputError(
            f"{source}: {what} has {int(bad.sum())} non-finite (NaN/inf) coordinates, first at "
            f"point {int(np.argmax(bad))}"
        )
    return points.astype(np.float64, copy=False)


def _fast_off_body(
    body: list[tuple[int, str]], n_vertices: int, n_faces: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Vectorised parse of well-formed rows (x y z / 3 i j k), or None to take the slow path."""
    try:  # numpy's C loadtxt checks that every row has the same number of columns
        vertices = np.loadtxt(
            io.StringIO("\n".join(ln for _, ln in body[:n_vertices])), dtype=np.float64, ndmin=2
        )
        if n_faces == 0:
            faces = np.zeros((0, 4), dtype=np.int64)
        else:
            text = "\n".join(ln for _, ln in body[n_vertices:])
            faces = np.loadtxt(io.StringIO(text), dtype=np.int64, ndmin=2)
    except ValueError:
        return None
    if vertices.shape != (n_vertices, 3) or (n_faces and faces.shape != (n_faces, 4)):
        return None  # extra columns, polygons or short rows: the slow path handles or names them
    faces = faces.reshape(n_faces, 4)
    if not np.isfinite(vertices).all():
        return None
    if n_faces and (
        (faces[:, 0] != 3).any() or faces[:, 1:].min() < 0 or faces[:, 1:].max() >= n_vertices
    ):
        return None
    return vertices, faces[:, 1:].copy()


def read_off(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Vertices [V, 3] float64 and triangles [F, 3] int64 of an OFF mesh.

    Accepts ModelNet40's malformed header ``OFF1046 900 0`` (counts glued to ``OFF``). Polygons
    with more than three vertices are fan-triangulated. Raises :class:`PGLLMInputError` naming
    the file and line for a bad header, bad counts, non-numeric or missing rows, indices out of
    range or NaN coordinates.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii", errors="strict")
    except UnicodeDecodeError:
        raise PGLLMInputError(f"{path}: not an ASCII OFF file") from None
    lines = [(n + 1, ln.strip()) for n, ln in enumerate(text.splitlines())]
    lines = [(n, ln) for n, ln in lines if ln and not ln.startswith("#")]
    if not lines:
        raise PGLLMInputError(f"{path}: empty file (expected an OFF header)")
    first_no, first = lines[0]
    match = _OFF_GLUED.match(first)
    if first == "OFF":
        if len(lines) < 2:
            raise PGLLMInputError(f"{path}: line {first_no}: OFF header without counts")
        count_no, count_line = lines[1]
        body = lines[2:]
    elif match:  # 'OFF1046 900 0': the counts glued to the keyword
        count_no, count_line = first_no, match.group(1)
        body = lines[1:]
    else:
        raise PGLLMInputError(f"{path}: line {first_no}: expected 'OFF' header, got {first[:40]!r}")
    try:
        counts = [int(tok) for tok in count_line.split()]
    except ValueError:
        raise PGLLMInputError(
            f"{path}: line {count_no}: counts must be integers 'vertices faces edges', "
            f"got {count_line[:40]!r}"
        ) from None
    if len(counts) < 2 or counts[0] < 1 or counts[1] < 0:
        raise PGLLMInputError(
            f"{path}: line {count_no}: bad counts {count_line!r} (need vertices >= 1, faces >= 0)"
        )
    n_vertices, n_faces = counts[0], counts[1]
    if len(body) < n_vertices + n_faces:
        raise PGLLMInputError(
            f"{path}: header says {n_vertices} vertices + {n_faces} faces but the file has only "
            f"{len(body)} data rows"
        )
    if len(body) > n_vertices + n_faces:
        extra_no = body[n_vertices + n_faces][0]
        raise PGLLMInputError(
            f"{path}: line {extra_no}: more rows than the header's {n_vertices} vertices + "
            f"{n_faces} faces"
        )
    fast = _fast_off_body(body, n_vertices, n_faces)
    if fast is not None:
        return fast
    # slow path: row by row, to name the first bad line
    vertices = np.empty((n_vertices, 3), dtype=np.float64)
    for i, (line_no, line) in enumerate(body[:n_vertices]):
        parts = line.split()
        try:
            if len(parts) < 3:
                raise ValueError
            vertices[i] = [float(p) for p in parts[:3]]
        except ValueError:
            raise PGLLMInputError(
                f"{path}: line {line_no}: vertex {i} needs 3 numbers, got {line[:40]!r}"
            ) from None
    check_points(vertices, f"{path}", "vertices")
    triangles: list[list[int]] = []
    for j, (line_no, line) in enumerate(body[n_vertices:]):
        try:
            parts = [int(p) for p in line.split()]
        except ValueError:
            raise PGLLMInputError(
                f"{path}: line {line_no}: face {j} must be integers 'k i1 ... ik'"
            ) from None
        if not parts or parts[0] < 3 or len(parts) < parts[0] + 1:
            raise PGLLMInputError(
                f"{path}: line {line_no}: face {j} must be 'k i1 ... ik' with k >= 3"
            )
        idx = parts[1 : parts[0] + 1]
        if min(idx) < 0 or max(idx) >= n_vertices:
            raise PGLLMInputError(
                f"{path}: line {line_no}: face {j} has a vertex index outside 0..{n_vertices - 1}"
            )
        triangles.extend([idx[0], idx[t], idx[t + 1]] for t in range(1, len(idx) - 1))
    return vertices, np.asarray(triangles, dtype=np.int64).reshape(-1, 3)


def write_off(
    path: str | Path, vertices: np.ndarray, triangles: np.ndarray, *, glued: bool = False
) -> Path:
    """Writes an OFF mesh; ``glued=True`` writes ModelNet40's malformed ``OFF<V> <F> 0`` header."""
    path = Path(path)
    head = (
        f"OFF{len(vertices)} {len(triangles)} 0\n"
        if glued
        else f"OFF\n{len(vertices)} {len(triangles)} 0\n"
    )
    vert = "\n".join(f"{x:.6f} {y:.6f} {z:.6f}" for x, y, z in np.asarray(vertices, dtype=float))
    tri = "\n".join(f"3 {a} {b} {c}" for a, b, c in np.asarray(triangles, dtype=np.int64))
    path.write_text(head + vert + "\n" + tri + ("\n" if len(triangles) else ""), encoding="ascii")
    return path


def normalize_cloud(points: np.ndarray) -> np.ndarray:
    """Centred at the centroid and scaled into the unit sphere (as ModelNet loaders do)."""
    points = np.asarray(points, dtype=np.float64)
    centred = points - points.mean(axis=0, keepdims=True)
    radius = float(np.sqrt((centred**2).sum(axis=1)).max())
    return centred / radius if radius > 0 else centred


def resample(points: np.ndarray, n_points: int, rng: np.random.Generator) -> np.ndarray:
    """Exactly ``n_points`` rows: a random subset, or all rows plus random repeats."""
    count = points.shape[0]
    if count == n_points:
        return points
    if count > n_points:
        return points[rng.choice(count, n_points, replace=False)]
    extra = rng.choice(count, n_points - count, replace=True)
    return np.concatenate([points, points[extra]], axis=0)


def sample_mesh(
    vertices: np.ndarray, triangles: np.ndarray, n_points: int, seed: int, source: str = "mesh"
) -> np.ndarray:
    """``n_points`` points sampled uniformly (area-weighted) on the surface with open3d."""
    from pointcloud_pgllm._open3d import o3d
    from pointcloud_pgllm._open3d import seed as o3d_seed

    lib = o3d()
    if len(triangles) == 0:  # a vertex-only OFF: use the vertices as the cloud
        return resample(check_points(vertices, source), n_points, np.random.default_rng(seed))
    mesh = lib.geometry.TriangleMesh(
        lib.utility.Vector3dVector(np.asarray(vertices, dtype=np.float64)),
        lib.utility.Vector3iVector(np.asarray(triangles, dtype=np.int32)),
    )
    if mesh.get_surface_area() <= 0:
        raise PGLLMInputError(f"{source}: mesh has zero surface area (degenerate faces)")
    o3d_seed(seed)
    return np.asarray(mesh.sample_points_uniformly(number_of_points=n_points).points)


def read_cloud_file(path: str | Path) -> np.ndarray:
    """Points [P, 3] of a PLY / PCD / XYZ point cloud (open3d), or of an OFF mesh's vertices."""
    path = input_file(path)
    if path.suffix.lower() == ".off":
        return read_off(path)[0]
    if path.suffix.lower() not in CLOUD_SUFFIXES:
        raise PGLLMInputError(
            f"{path}: unknown point-cloud suffix (known: .off, {', '.join(CLOUD_SUFFIXES)})"
        )
    from pointcloud_pgllm._open3d import o3d

    cloud = o3d().io.read_point_cloud(str(path))
    return check_points(np.asarray(cloud.points), str(path))


def read_h5(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``data`` [N, P, >=3] (xyz kept), ``label`` [N] int64 and the optional ScanObjectNN
    ``mask`` [N, P] of a PointNet / ScanObjectNN HDF5 file."""
    import h5py

    path = input_file(path)
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise PGLLMInputError(f"{path}: not a readable HDF5 file ({error})") from None
    with handle:
        for key in ("data", "label"):
            if key not in handle:
                raise PGLLMInputError(
                    f"{path}: HDF5 file has no '{key}' dataset (keys: {sorted(handle.keys())})"
                )
        data = np.asarray(handle["data"][...], dtype=np.float64)
        label = np.asarray(handle["label"][...])
        mask = np.asarray(handle["mask"][...]) if "mask" in handle else None
    if data.ndim == 3 and data.shape[1] in (3, 6) and data.shape[2] > 6:
        # channel-first [N, C, P] (e.g. [N, 3, 2048]): read as P points, never as C points
        print(
            f"{path}: 'data' has shape {data.shape}, read as channel-first [N, C, P] and "
            f"transposed to [N, {data.shape[2]}, {data.shape[1]}]",
            file=sys.stderr,
        )
        data = data.transpose(0, 2, 1)
    if data.ndim != 3 or data.shape[2] < 3:
        raise PGLLMInputError(f"{path}: 'data' must have shape [N, P, 3], got {data.shape}")
    data = data[:, :, :3]
    label = label.reshape(label.shape[0], -1)[:, 0] if label.ndim > 1 else label
    if label.shape[0] != data.shape[0]:
        raise PGLLMInputError(
            f"{path}: 'label' has {label.shape[0]} rows but 'data' has {data.shape[0]}"
        )
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise PGLLMInputError(f"{path}: 'data' holds an empty point cloud (shape {data.shape})")
    bad = ~np.isfinite(data).all(axis=(1, 2))
    if bad.any():
        raise PGLLMInputError(
            f"{path}: 'data' sample {int(np.argmax(bad))} has NaN/inf coordinates"
        )
    if not np.issubdtype(label.dtype, np.integer):
        raise PGLLMInputError(f"{path}: 'label' must be integers, got {label.dtype}")
    if mask is not None and mask.shape[:2] != data.shape[:2]:
        raise PGLLMInputError(f"{path}: 'mask' has shape {mask.shape}, 'data' {data.shape}")
    return data, label.astype(np.int64), mask


def _read_names(path: Path) -> list[str]:
    names = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if len(set(names)) != len(names):
        raise PGLLMInputError(f"{path}: class names are not unique")
    return names


def _finish(
    clouds: list[np.ndarray],
    labels: list[int],
    names: list[str],
    sources: list[str],
    n_points: int,
    seed: int,
) -> PointCloudSet:
    rng = np.random.default_rng(seed)
    points = np.stack([normalize_cloud(resample(c, n_points, rng)) for c in clouds]).astype(
        np.float32
    )
    return PointCloudSet(points, np.asarray(labels, dtype=np.int64), names, sources)


def _load_h5_files(
    files: list[Path],
    names_file: Path | None,
    n_points: int,
    seed: int,
    classes: list[str] | None = None,
) -> PointCloudSet:
    clouds: list[np.ndarray] = []
    labels: list[int] = []
    sources: list[str] = []
    for file in files:
        data, label, _ = read_h5(file)
        clouds.extend(data)
        labels.extend(int(v) for v in label)
        sources.extend(f"{file}#{i}" for i in range(len(label)))
    if names_file is not None and names_file.is_file():
        names = _read_names(names_file)
    else:
        names = [f"class_{i}" for i in range(max(labels) + 1)]
    bad = [v for v in labels if not 0 <= v < len(names)]
    if bad:
        where = names_file if names_file is not None and names_file.is_file() else files[0]
        raise PGLLMInputError(f"{where}: label {bad[0]} has no class name ({len(names)} names)")
    if classes is not None:  # keep only the named classes; their order defines the labels
        missing = [c for c in classes if c not in names]
        if missing:
            raise PGLLMInputError(
                f"{files[0]}: class {missing[0]!r} is not in the file's classes "
                f"({', '.join(names)})"
            )
        old_to_new = {names.index(c): i for i, c in enumerate(classes)}
        keep = [i for i, v in enumerate(labels) if v in old_to_new]
        if not keep:
            raise PGLLMInputError(f"{files[0]}: no cloud of the classes {', '.join(classes)}")
        if len(keep) < len(labels):  # nothing is dropped silently (issue 22 review, #11)
            print(
                f"{files[0]}: kept {len(keep)} of {len(labels)} items (classes: "
                f"{', '.join(classes)})",
                file=sys.stderr,
            )
        clouds = [clouds[i] for i in keep]
        sources = [sources[i] for i in keep]
        labels = [old_to_new[labels[i]] for i in keep]
        names = list(classes)
    return _finish(clouds, labels, names, sources, n_points, seed)


def load_dataset(
    path: str | Path,
    split: str = "test",
    *,
    n_points: int = DEFAULT_N_POINTS,
    seed: int = 0,
    classes: list[str] | None = None,
    quiet: bool = True,
) -> PointCloudSet:
    """One split of a dataset, as normalised clouds of ``n_points`` points.

    ``path`` is a ModelNet-style OFF tree (``<class>/<split>/*.off``; PLY/PCD/XYZ files there are
    read too), a folder of the PointNet HDF5 release (``ply_data_<split>*.h5`` and
    ``shape_names.txt``), or one ``.h5`` file (ScanObjectNN; a ``shape_names.txt`` next to it
    names the classes). A single file holds one split and is read whole: ``split`` names nothing
    there, so classify / ood (CLI and API) never fit a scorer on it unless it is given separately
    (``--train-data``).
    ``classes`` fixes the class list (its order defines the labels); clouds of other classes
    are skipped, and a name in it that the data lacks is an error. ``quiet=False`` shows
    progress over the files of an OFF tree on stderr.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    if path.is_file():
        return _load_h5_files([path], path.parent / "shape_names.txt", n_points, seed, classes)
    h5_files = sorted(path.glob(f"ply_data_{split}*.h5"))
    if h5_files:
        return _load_h5_files(h5_files, path / "shape_names.txt", n_points, seed, classes)
    found = sorted(p.name for p in path.iterdir() if (p / split).is_dir())
    if not found:
        raise PGLLMInputError(
            f"{path}: no '<class>/{split}/' folders and no 'ply_data_{split}*.h5' files"
        )
    names = list(classes) if classes is not None else found
    missing = [c for c in names if c not in found]
    if missing:
        raise PGLLMInputError(
            f"{path}: class {missing[0]!r} has no '{missing[0]}/{split}/' folder (found: {', '.join(found)})"
        )
    from iclr26_common.progress import progress

    clouds: list[np.ndarray] = []
    labels: list[int] = []
    sources: list[str] = []
    todo = [
        (label, k, file)
        for label, name in enumerate(names)
        for k, file in enumerate(
            sorted(
                f
                for f in (path / name / split).iterdir()
                if f.suffix.lower() in (".off", *CLOUD_SUFFIXES)
            )
        )
    ]
    for label, k, file in progress(todo, description=f"reading {split} clouds", quiet=quiet):
        if file.suffix.lower() == ".off":
            vertices, triangles = read_off(file)
            cloud = sample_mesh(vertices, triangles, n_points, seed * 100003 + k, str(file))
        else:
            cloud = read_cloud_file(file)
        clouds.append(cloud)
        labels.append(label)
        sources.append(str(file))
    if not clouds:
        raise PGLLMInputError(f"{path}: no .off/.ply/.pcd/.xyz files under '<class>/{split}/'")
    return _finish(clouds, labels, names, sources, n_points, seed)


def _source_file(source: str) -> Path:
    """The file of a source string: ``<file>#<row>`` (HDF5 rows, captions items) or ``<file>``."""
    head, sep, tail = source.rpartition("#")
    return Path(head if sep and tail.isdigit() else source).resolve()


def shared_source_files(first: list[str], second: list[str]) -> list[Path]:
    """The resolved files that sources of both lists come from, sorted (sources as in
    :class:`PointCloudSet`: ``<file>#<row>`` or ``<file>``); empty when the two are disjoint."""
    return sorted({_source_file(s) for s in first} & {_source_file(s) for s in second})
