"""Reading a checkpoint file safely, with one-line errors.

Every package reads its checkpoints the same way: the file must exist, it is unpickled with
``torch.load(..., weights_only=True)`` only (no code in a checkpoint can run), and any
unpickling failure, whatever its type, means the user gave a file that is not a checkpoint of
the expected kind: one line naming the file. torch is imported lazily.
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["MODEL_KEY", "foreign_owner", "load_weights_only"]

#: The checkpoint key every iclr26 fit writes (:class:`iclr26_common.lightning.ModelStamp`): the
#: saving LightningModule's ``module.Class`` path.
MODEL_KEY = "iclr26_model"


def foreign_owner(payload: Any, package: str) -> tuple[str, str] | None:
    """``(owner, class path)`` when ``payload`` (a loaded checkpoint) names a model outside
    ``package`` (``"rf_matid"``, or a sub-package such as ``"llm_methods.perk"``), by its
    ``MODEL_KEY`` stamp or its hyper-parameters' ``_class_path``; ``None`` when it is
    ``package``'s or names no model. ``owner`` is the other package, to the depth of ``package``
    within one distribution (``llm_methods.remix``), else its top-level package (``rf_matid``)."""
    if not isinstance(payload, dict):
        return None
    hparams = payload.get("hyper_parameters")
    class_path = str((hparams or {}).get("_class_path") or "") if isinstance(hparams, dict) else ""
    class_path = class_path or str(payload.get(MODEL_KEY) or "")
    if not class_path or class_path.startswith(f"{package}."):
        return None
    same_top = class_path.split(".")[0] == package.split(".")[0]
    owner = ".".join(class_path.split(".")[: package.count(".") + 1 if same_top else 1])
    return owner, class_path


def load_weights_only(
    path: str | os.PathLike[str],
    what: str = "checkpoint",
    *,
    error: type[Exception] = ValueError,
    map_location: Any = "cpu",
    require_state_dict: bool = False,
    package: str | None = None,
) -> Any:
    """``torch.load(path, map_location=map_location, weights_only=True)`` with one-line errors.

    Args:
        path: the file.
        what: how messages name it ("checkpoint", "p0 file", "policy file").
        error: the exception class raised for an unreadable file (a package's own format error).
        map_location: passed to ``torch.load``.
        require_state_dict: the content must be a dict with a ``"state_dict"`` (a Lightning
            checkpoint); otherwise ``error``.
        package: the reading package (``"bio_scisor"``): a checkpoint that names another
            package's model (:func:`foreign_owner`) is ``error`` naming both.

    Raises:
        FileNotFoundError: ``"{path}: no such {what}"`` when ``path`` does not exist.
        IsADirectoryError: ``"{path}: is a folder; give a {what}"``.
        error: ``"{path}: not a readable {what} ({first line of the reason})"`` when unpickling
            fails, or ``"{path}: not a Lightning checkpoint (no 'state_dict')"``.
    """
    import torch

    from iclr26_common.textio import input_file

    path = input_file(path, what)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # unpickling errors come in many types
        raise error(f"{path}: not a readable {what} ({_reason(exc)})") from None
    if require_state_dict and (not isinstance(payload, dict) or "state_dict" not in payload):
        raise error(f"{path}: not a Lightning checkpoint (no 'state_dict')")
    foreign = foreign_owner(payload, package) if package else None
    if foreign is not None:
        raise error(
            f"{path}: a checkpoint of {foreign[0].replace('_', '-')} ({foreign[1]}), not of "
            f"{str(package).replace('_', '-')}"
        )
    return payload


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _reason(exc: Exception) -> str:
    """One readable line for why ``torch.load(weights_only=True)`` failed: for a refused pickle
    the line that names what was refused (torch's message is a paragraph of advice with terminal
    colour codes), else the exception's type and first line (e.g. ``KeyError: '101'`` for a text
    file, which a bare ``101`` did not explain)."""
    lines = [_ANSI.sub("", line).strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line]
    if lines and lines[0].startswith("Weights only load failed"):
        refused = [line[line.index("Unsupported") :] for line in lines if "Unsupported" in line]
        detail = (
            refused[0].split(" was not an allowed")[0]
            if refused
            else "it holds objects other than tensors and containers"
        )
        return f"refused by weights_only=True: {detail}"
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
