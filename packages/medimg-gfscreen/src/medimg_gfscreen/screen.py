"""Screen CT volumes with trained Focus + Glance weights and write lesion masks.

An image goes through the same deterministic chain as validation (RAS, 1x1x3 mm, HU window,
foreground crop, padding: :func:`medimg_gfscreen.transforms.infer_transforms`), is screened
glance-then-focus on the compute device with the whole-volume buffers on the CPU, and the uint8
mask is mapped back onto the input grid with MONAI ``Invertd`` (nearest neighbour, as upstream)
and written with MONAI ``SaveImage`` (the input's affine). Tile positions are reported in the
input's voxel indices and world (RAS mm) coordinates.

``screen_file`` does one image (the ``screen`` command; :func:`tiles_table` is its per-tile CSV);
:class:`MaskWriter` writes the masks of ``predict`` (a folder of images, no labels) and its
per-case table (:data:`CASES_FILE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from iclr26_common.checkpoints import load_weights_only
from medimg_gfscreen.io import GFScreenFormatError, case_name, check_case, read_nifti

__all__ = [
    "CASES_COLUMNS",
    "CASES_FILE",
    "TILE_COLUMNS",
    "MaskWriter",
    "invert_mask",
    "load_screen_module",
    "load_weights",
    "resolve_preprocessing",
    "save_mask",
    "screen_file",
    "tile_positions",
    "tiles_table",
]

#: ``screen``'s table: one row per tile (centre as input voxel index and world RAS mm, Glance's
#: p, whether Focus ran on it, the mask's lesion voxels inside the tile on the screening grid).
TILE_COLUMNS = (
    "case",
    "tile",
    "voxel_i",
    "voxel_j",
    "voxel_k",
    "world_x_mm",
    "world_y_mm",
    "world_z_mm",
    "glance_p",
    "selected",
    "tile_lesion_voxels",
)
#: ``predict``'s table in its output folder, one row per screened image.
CASES_FILE = "cases.csv"
CASES_COLUMNS = (
    "case",
    "image",
    "mask",
    "lesion_voxels",
    "selection_rate",
    "n_selected",
    "n_tiles",
)


def _csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def tiles_table(info: dict[str, Any]) -> str:
    """The CSV text of :func:`screen_file`'s tiles (:data:`TILE_COLUMNS`; coordinates to 0.1,
    p to 4 decimals, ``selected`` 1/0)."""
    rows = []
    for number, tile in enumerate(info["tiles"]):
        rows.append(
            [
                info["case"],
                number,
                *(f"{v:.1f}" for v in tile["voxel"]),
                *(f"{v:.1f}" for v in tile["world"]),
                f"{tile['p']:.4f}",
                int(bool(tile["selected"])),
                tile["lesion_voxels"],
            ]
        )
    return _csv_text(TILE_COLUMNS, rows)


def numpy_scalar_globals() -> list[Any]:
    """What ``torch.load(weights_only=True)`` must allow to read a pickled numpy scalar such as
    upstream's ``best_acc`` (``np.mean(...)``, a float64, saved beside the official
    ``state_dict``): numpy's scalar reconstructor under its numpy 1.x (``numpy.core``) and 2.x
    (``numpy._core``) names, ``np.dtype`` and the dtype classes of numpy's numeric scalars. No
    callable that could run code is allowed (still ``weights_only=True``)."""
    try:
        from numpy._core.multiarray import scalar  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import scalar

    dtypes = [
        np.float16,
        np.float32,
        np.float64,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.bool_,
    ]
    return [
        (scalar, "numpy.core.multiarray.scalar"),
        (scalar, "numpy._core.multiarray.scalar"),
        np.dtype,
        *(type(np.dtype(t)) for t in dtypes),
    ]


def _checkpoint_name(path: Path | str, option: str | None) -> str:
    """How a message names the checkpoint ``path``: ``--ckpt PATH`` when the command-line
    ``option`` gave it, ``checkpoint PATH`` otherwise."""
    return f"{option} {path}" if option else f"checkpoint {path}"


def load_weights(path: Path, option: str | None = None) -> dict[str, Any]:
    """Reads exported weights (``{focus, glance, hparams}``), a Lightning ``.ckpt`` or an official
    GF-Screen checkpoint (``{state_dict: {glance_model.*, segmentation_model.*}}``, see
    :mod:`medimg_gfscreen.official`), all with ``torch.load(weights_only=True)`` (numpy scalars
    allowed: upstream saves ``best_acc`` as a numpy float64); returns ``{focus, glance, hparams,
    preprocessing}``. ``preprocessing`` is what the training's data module used (``region``,
    ``prenormalized``) where the file records it: exported weights' ``preprocessing`` field, a
    Lightning checkpoint's ``datamodule_hyper_parameters``; empty for official checkpoints.
    ``option``: the command-line option that gave ``path`` (``"--ckpt"``); every error message
    then starts with it (``--ckpt PATH: no such checkpoint``)."""
    from medimg_gfscreen.official import from_official_state_dict, is_official_state_dict

    path = Path(path)
    with torch.serialization.safe_globals(numpy_scalar_globals()):
        payload = load_weights_only(
            path,
            "checkpoint",
            error=GFScreenFormatError,
            package="medimg_gfscreen",
            option=option,
        )
    if isinstance(payload, dict) and "focus" in payload and "glance" in payload:
        return {
            "focus": payload["focus"],
            "glance": payload["glance"],
            "hparams": dict(payload.get("hparams", {})),
            "preprocessing": _preprocessing(payload.get("preprocessing")),
        }
    if isinstance(payload, dict) and isinstance(payload.get("state_dict"), dict):
        state = payload["state_dict"]
        if is_official_state_dict(state):
            official = from_official_state_dict(state, where=str(path), option=option)
            return {**official, "preprocessing": {}}
        focus = {k[len("focus.") :]: v for k, v in state.items() if k.startswith("focus.")}
        glance = {k[len("glance.") :]: v for k, v in state.items() if k.startswith("glance.")}
        if focus and glance:
            return {
                "focus": focus,
                "glance": glance,
                "hparams": dict(payload.get("hyper_parameters", {})),
                "preprocessing": _preprocessing(payload.get("datamodule_hyper_parameters")),
            }
    raise GFScreenFormatError(
        f"{_checkpoint_name(path, option)} holds no Focus and Glance weights (fields 'focus' / "
        "'glance', "
        "'state_dict' with focus.* and glance.* keys, or an official GF-Screen 'state_dict')"
    )


PREPROCESSING_FIELDS = ("region", "prenormalized")


def _preprocessing(record: Any) -> dict[str, Any]:
    """The training's ``region`` / ``prenormalized`` out of a recorded mapping (tuples as lists)."""
    if not isinstance(record, dict):
        return {}
    out = {k: record[k] for k in PREPROCESSING_FIELDS if k in record}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def resolve_preprocessing(
    recorded: dict[str, Any],
    given: dict[str, Any],
    where: str,
    allow_mismatch: bool = False,
    option: str | None = None,
) -> dict[str, Any]:
    """``region`` / ``prenormalized`` for inference: a value given (not None) wins only where the
    checkpoint records none or equals it; a given value that differs from the recorded one is a
    :class:`GFScreenFormatError` unless ``allow_mismatch``. Unrecorded and not given: abdomen,
    not prenormalized (upstream's abdomen window). ``where``: the checkpoint's path, named after
    ``option`` (``--ckpt``) when given."""
    defaults = {"region": "abdomen", "prenormalized": False}
    out = {}
    for field in PREPROCESSING_FIELDS:
        value, known = given.get(field), recorded.get(field)
        if isinstance(value, tuple):
            value = list(value)
        if value is not None and known is not None and value != known and not allow_mismatch:
            raise GFScreenFormatError(
                f"{_checkpoint_name(where, option)} was trained with {field} {known!r}, not "
                f"{value!r}: leave it "
                "out to use the checkpoint's, or allow the mismatch (screen --allow-mismatch)"
            )
        out[field] = value if value is not None else known if known is not None else defaults[field]
    return out


def load_screen_module(
    path: Path,
    device: str = "cpu",
    weights: dict | None = None,
    option: str | None = None,
    **overrides: Any,
):
    """A :class:`GFScreenModule` with the checkpoint's architecture and weights, in eval mode
    (``weights``: what :func:`load_weights` returned for ``path``, to not read it twice).
    The stored hparams may be grouped (this code) or flat (checkpoints written before the
    grouping, official checkpoints): :func:`medimg_gfscreen.settings.module_kwargs` reads both;
    ``overrides`` are flat setting names (``overlap=0.5``) applied over them. ``option``: as
    :func:`load_weights`'s."""
    from medimg_gfscreen.lit_module import GFScreenModule
    from medimg_gfscreen.settings import module_kwargs

    weights = load_weights(path, option) if weights is None else weights
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        module = GFScreenModule(**module_kwargs({**weights["hparams"], **given}))
    except (TypeError, ValueError) as error:
        raise GFScreenFormatError(
            f"{_checkpoint_name(path, option)}: bad hparams: {error}"
        ) from None
    try:
        module.focus.load_state_dict(weights["focus"])
        module.glance.load_state_dict(weights["glance"])
    except RuntimeError as error:
        raise GFScreenFormatError(
            f"{_checkpoint_name(path, option)}: weights do not fit the recorded architecture: "
            f"{str(error).splitlines()[0]}"
        ) from None
    return module.to(torch.device(device)).eval()


def tile_positions(
    starts: Sequence[Sequence[int]],
    roi_size: Sequence[int],
    grid_affine: Any,
    source_affine: Any,
) -> list[tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """Tile centres as (input voxel index, world RAS mm): ``start + (roi - 1) / 2`` in the
    preprocessed grid, through that grid's affine (which MONAI updates through reorientation,
    resampling, cropping and padding) to world coordinates, then through the inverse of the input
    image's affine to its voxel indices."""
    grid = np.asarray(torch.as_tensor(grid_affine).double().cpu(), dtype=np.float64)
    to_voxel = np.linalg.inv(np.asarray(source_affine, dtype=np.float64))
    out = []
    for start in starts:
        centre = np.array([s + (r - 1) / 2 for s, r in zip(start, roi_size, strict=True)] + [1.0])
        world = grid @ centre
        voxel = to_voxel @ world
        out.append((tuple(float(v) for v in voxel[:3]), tuple(float(v) for v in world[:3])))
    return out


def invert_mask(mask: torch.Tensor, image: Any, transform: Any) -> Any:
    """The uint8 mask ``[X, Y, Z]`` of a preprocessed ``image`` (a MetaTensor carrying its
    transform record) mapped back onto the input grid with ``Invertd`` (nearest neighbour, as
    upstream); returns a ``[1, X', Y', Z']`` MetaTensor with the input's affine."""
    from monai.data import MetaTensor
    from monai.transforms import Invertd

    pred = MetaTensor(
        mask[None].float().cpu(),
        meta=dict(image.meta),
        applied_operations=list(image.applied_operations),
    )
    inverted = Invertd(keys="pred", transform=transform, orig_keys="image", nearest_interp=True)(
        {"pred": pred, "image": image}
    )["pred"]
    return inverted


def save_mask(mask: Any, path: Path) -> Path:
    """Writes a ``[1, X, Y, Z]`` MetaTensor mask as uint8 NIfTI at ``path`` with MONAI
    ``SaveImage`` (its affine; no resampling), atomically (a temporary file in the same folder,
    then ``os.replace``) with mode 0644: a mask is there whole or not at all."""
    import os

    from monai.data import FolderLayoutBase
    from monai.transforms import SaveImage

    from iclr26_common.outputs import FILE_MODE

    path = Path(path)
    suffix = ".nii.gz" if path.name.endswith(".nii.gz") else path.suffix
    partial = path.with_name(f".{path.name[: -len(suffix)]}.partial{suffix}")

    class _Exact(FolderLayoutBase):
        def filename(self, **kwargs: Any) -> Path:
            return partial

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        SaveImage(
            output_dtype=np.uint8,
            resample=False,
            separate_folder=False,
            print_log=False,
            folder_layout=_Exact(),
        )(mask.round().to(torch.uint8))
        os.chmod(partial, FILE_MODE)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def screen_file(
    image_path: Path,
    ckpt: Path,
    out: Path,
    device: str = "cpu",
    region: str | Sequence[float] | None = None,
    threshold: float | None = None,
    overlap: float | None = None,
    progress: bool = True,
    overwrite: bool = False,
    prenormalized: bool | None = None,
    check_hu: bool = True,
    allow_mismatch: bool = False,
    ckpt_option: str | None = None,
) -> dict[str, Any]:
    """Screens ``image_path`` and writes the uint8 mask to ``out``; returns the case name, the
    tiles (start in the preprocessed grid, centre as input voxel and world mm, p, selected,
    ``lesion_voxels``: the mask's voxels inside the tile on the screening grid), the selection
    rate, the number of lesion voxels (input grid) and the preprocessing used.

    ``region`` / ``prenormalized`` default to the training's, as the checkpoint records them
    (:func:`resolve_preprocessing`; a different value given is refused unless
    ``allow_mismatch``); ``check_hu=False`` skips the HU plausibility check and keeps the window.
    ``ckpt_option``: the command-line option that gave ``ckpt`` (``screen --ckpt``); errors about
    the checkpoint start with it (:func:`load_weights`).
    """
    from iclr26_common.outputs import check_out_file
    from medimg_gfscreen.inference import glance_focus_inference
    from medimg_gfscreen.transforms import infer_transforms

    image_path, out = Path(image_path), Path(out)
    check_out_file(out, option="--out", overwrite=overwrite)
    if not out.name.endswith((".nii.gz", ".nii")):
        raise GFScreenFormatError(f"--out {out}: must end with .nii.gz or .nii")
    name = case_name(image_path)
    check_case({"image": str(image_path), "name": name}, require_label=False)
    source = read_nifti(image_path, "image", name)
    weights = load_weights(ckpt, ckpt_option)
    given = {"region": region, "prenormalized": prenormalized}
    recorded = weights["preprocessing"]
    used = resolve_preprocessing(recorded, given, str(ckpt), allow_mismatch, ckpt_option)
    module = load_screen_module(ckpt, device, weights, ckpt_option, overlap=overlap)
    roi = module.roi_size
    transform = infer_transforms(
        used["region"], roi, module.hparams.spacing, used["prenormalized"], check_hu
    )
    image = transform({"image": str(image_path), "name": name})["image"]
    result = glance_focus_inference(
        image[None],
        module.glance,
        module.focus,
        roi,
        overlap=module.inference.overlap,
        threshold=module.inference.threshold if threshold is None else threshold,
        sw_batch_size=module.inference.sw_batch_size,
        progress=progress,
        sw_device=module.device,
        device="cpu",
        keep_probs=False,
    )
    mask = invert_mask(result.mask, image, transform)
    if tuple(mask.shape[1:]) != tuple(source.shape[:3]):
        raise RuntimeError(f"inverted mask shape {tuple(mask.shape)} != input {source.shape}")
    save_mask(mask, out)
    positions = tile_positions([t[0] for t in result.tiles], roi, image.affine, source.affine)
    grid = result.mask
    tiles = [
        {
            "start": start,
            "voxel": voxel,
            "world": world,
            "p": p,
            "selected": selected,
            "lesion_voxels": int(
                grid[tuple(slice(int(s), int(s) + int(r)) for s, r in zip(start, roi, strict=True))]
                .sum()
                .item()
            ),
        }
        for (start, p, selected), (voxel, world) in zip(result.tiles, positions, strict=True)
    ]
    return {
        "case": name,
        "tiles": tiles,
        "n_tiles": result.n_tiles,
        "n_selected": result.n_selected,
        "selection_rate": result.selection_rate,
        "lesion_voxels": int(mask.sum()),
        "out": str(out),
        "preprocessing": used,
        "recorded": sorted(weights["preprocessing"]),
    }


class MaskWriter(BasePredictionWriter):
    """Writes each ``predict`` mask to ``<data module output_dir>/<case>.nii.gz`` on the input's
    grid (``Invertd`` + ``SaveImage``, through a temporary name moved in place when the case is
    done: :func:`save_mask`) as soon as its image is screened, so an interrupted ``predict``
    keeps the masks it finished (``--resume`` skips them); the data module refuses to start when
    one exists, unless told to replace or skip them
    (:attr:`~medimg_gfscreen.data.GFScreenDataModule.existing_masks`).

    Each case is printed (lesion voxels, selection rate) and added to ``output_dir/cases.csv``
    (:data:`CASES_COLUMNS`, rewritten atomically after every case; ``cases.rank{R}.csv`` per
    process of a multi-process run); a resumed run keeps the rows of the masks kept."""

    def __init__(self) -> None:
        super().__init__(write_interval="batch")
        self.written: list[Path] = []
        self.rows: list[dict[str, str]] = []

    @staticmethod
    def table_path(trainer: Any) -> Path:
        name = CASES_FILE if trainer.world_size <= 1 else f"cases.rank{trainer.global_rank}.csv"
        return Path(trainer.datamodule.output_dir) / name

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """A resumed run starts from the rows of the masks it keeps; any other from none."""
        import csv

        self.rows = []
        path = self.table_path(trainer)
        if stage != "predict" or getattr(trainer.datamodule, "existing_masks", "") != "skip":
            return
        if path.is_file():
            with path.open(newline="") as handle:
                self.rows = [
                    row
                    for row in csv.DictReader(handle)
                    if row.get("mask") and (path.parent / row["mask"]).is_file()
                ]

    def _write_table(self, trainer: Any) -> None:
        from iclr26_common.outputs import write_text

        rows = [[row.get(c, "") for c in CASES_COLUMNS] for row in self.rows]
        write_text(self.table_path(trainer), _csv_text(CASES_COLUMNS, rows))

    def on_predict_end(self, trainer: Any, pl_module: Any) -> None:
        self._write_table(trainer)  # also when every case was resumed
        print(f"wrote {self.table_path(trainer)} ({len(self.rows)} cases)")

    def write_on_batch_end(
        self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx=0
    ) -> None:
        from monai.data import decollate_batch

        datamodule = trainer.datamodule
        transform = datamodule.infer_transform()
        paths = []
        n = len(prediction["masks"])
        rates = prediction.get("selection_rates") or [float("nan")] * n
        selected = prediction.get("n_selected") or [""] * n
        tiles = prediction.get("n_tiles") or [""] * n
        for k, (item, mask) in enumerate(
            zip(decollate_batch(batch), prediction["masks"], strict=True)
        ):
            path = Path(datamodule.output_dir) / f"{item['name']}.nii.gz"
            if path.exists() and getattr(datamodule, "existing_masks", "refuse") != "replace":
                raise FileExistsError(f"{path} exists; not replacing it (field 'output_dir')")
            inverted = invert_mask(mask, item["image"], transform)
            paths.append(save_mask(inverted, path))
            voxels = int(inverted.sum().item())
            source = getattr(item["image"], "meta", {}).get("filename_or_obj", "")
            self.rows = [r for r in self.rows if r.get("case") != str(item["name"])]
            self.rows.append(
                {
                    "case": str(item["name"]),
                    "image": str(source),
                    "mask": path.name,
                    "lesion_voxels": str(voxels),
                    "selection_rate": f"{rates[k]:.4f}",
                    "n_selected": str(selected[k]),
                    "n_tiles": str(tiles[k]),
                }
            )
            self._write_table(trainer)  # the finished cases survive an interrupt
            print(
                f"{item['name']}: {voxels} lesion voxels, selection rate "
                f"{100 * rates[k]:.1f} % ({selected[k]}/{tiles[k]} tiles); wrote {path}"
            )
        self.written += paths
        # the returned predictions keep the paths, not whole-volume masks
        prediction["masks"] = [str(path) for path in paths]
