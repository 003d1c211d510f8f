"""Screen one CT volume with trained Focus + Glance weights and write the lesion mask.

The image is preprocessed like training (RAS, 1x1x3 mm, HU window; no foreground crop), screened
with glance-then-focus, and the averaged softmax is mapped back onto the input grid with MONAI
``Invertd`` (the inverse of padding, resampling and reorientation); the mask is the argmax there
and is written with the input's affine and header (uint8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_gfscreen.io import GFScreenFormatError, case_name, check_case, read_nifti

__all__ = ["load_screen_module", "load_weights", "screen_file"]


def load_weights(path: Path) -> dict[str, Any]:
    """Reads exported weights (``{focus, glance, hparams}``) or a Lightning ``.ckpt``, both with
    ``torch.load(weights_only=True)``; returns ``{focus, glance, hparams}``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise GFScreenFormatError(
            f"checkpoint {path} cannot be read with torch.load(weights_only=True): "
            f"{str(error).splitlines()[0]}"
        ) from None
    if isinstance(payload, dict) and "focus" in payload and "glance" in payload:
        return {"focus": payload["focus"], "glance": payload["glance"],
                "hparams": dict(payload.get("hparams", {}))}  # fmt: skip
    if isinstance(payload, dict) and "state_dict" in payload:
        state = payload["state_dict"]
        focus = {k[len("focus.") :]: v for k, v in state.items() if k.startswith("focus.")}
        glance = {k[len("glance.") :]: v for k, v in state.items() if k.startswith("glance.")}
        if focus and glance:
            return {"focus": focus, "glance": glance,
                    "hparams": dict(payload.get("hyper_parameters", {}))}  # fmt: skip
    raise GFScreenFormatError(
        f"checkpoint {path} holds no Focus and Glance weights (fields 'focus' / 'glance' or "
        "'state_dict' with focus.* and glance.* keys)"
    )


def load_screen_module(path: Path, device: str = "cpu", **overrides: Any):
    """A :class:`GFScreenModule` with the checkpoint's architecture and weights, in eval mode."""
    import inspect

    from medimg_gfscreen.lit_module import GFScreenModule

    weights = load_weights(path)
    allowed = set(inspect.signature(GFScreenModule.__init__).parameters) - {"self"}
    hparams = {k: v for k, v in weights["hparams"].items() if k in allowed}
    hparams.update({k: v for k, v in overrides.items() if v is not None})
    module = GFScreenModule(**hparams)
    try:
        module.focus.load_state_dict(weights["focus"])
        module.glance.load_state_dict(weights["glance"])
    except RuntimeError as error:
        raise GFScreenFormatError(
            f"checkpoint {path}: weights do not fit the recorded architecture: "
            f"{str(error).splitlines()[0]}"
        ) from None
    return module.to(torch.device(device)).eval()


def screen_file(
    image_path: Path,
    ckpt: Path,
    out: Path,
    device: str = "cpu",
    region: str = "abdomen",
    threshold: float | None = None,
    overlap: float | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Screens ``image_path`` and writes the uint8 mask to ``out``; returns the tile scores and
    the selection rate."""
    import nibabel as nib
    from monai.data import MetaTensor
    from monai.transforms import Invertd

    from medimg_gfscreen.transforms import infer_transforms

    image_path, out = Path(image_path), Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; not overwriting it (use --overwrite)")
    if not out.name.endswith((".nii.gz", ".nii")):
        raise GFScreenFormatError(f"output {out} must end with .nii.gz or .nii")
    name = case_name(image_path)
    check_case({"image": str(image_path), "name": name}, require_label=False)
    source = read_nifti(image_path, "image", name)
    module = load_screen_module(ckpt, device, overlap=overlap)
    roi = module.roi_size
    transform = infer_transforms(region, roi, module.hparams.spacing)
    data = transform({"image": str(image_path)})
    image = data["image"]
    batch = image[None].to(module.device)
    with torch.no_grad():
        result = module.screen(batch, threshold=threshold, progress=progress)
    probs = MetaTensor(
        result.probs[0].cpu(), meta=image.meta, applied_operations=image.applied_operations
    )
    inverted = Invertd(keys="pred", transform=transform, orig_keys="image", nearest_interp=False)(
        {"pred": probs, "image": image}
    )["pred"]
    mask = torch.as_tensor(inverted).argmax(0).numpy().astype(np.uint8)
    if mask.shape != tuple(source.shape):
        raise RuntimeError(f"inverted mask shape {mask.shape} != input shape {source.shape}")
    header = source.header.copy()
    header.set_data_dtype(np.uint8)
    header.set_slope_inter(1.0, 0.0)
    out.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(mask, source.affine, header=header), str(out))
    return {
        "tiles": result.tiles,
        "n_tiles": result.n_tiles,
        "n_selected": result.n_selected,
        "selection_rate": result.selection_rate,
        "lesion_voxels": int(mask.sum()),
        "out": str(out),
    }
