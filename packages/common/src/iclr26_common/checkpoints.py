"""Reading a checkpoint file safely, with one-line errors.

Every package reads its checkpoints the same way: the file must exist, it is unpickled with
``torch.load(..., weights_only=True)`` only (no code in a checkpoint can run), and any
unpickling failure, whatever its type, means the user gave a file that is not a checkpoint of
the expected kind: one line naming the file. torch is imported lazily.

:func:`check_checkpoint_file` is the one check of a LightningCLI ``--ckpt_path`` (every
package's ``fit``/``validate``/``test``/``predict`` through :mod:`iclr26_common.lightning`): the
checkpoint must be one a fit here saved (its :data:`MODEL_KEY` stamp or ``_class_path``), of the
reading package and of the command's model class.
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = [
    "MODEL_KEY",
    "check_checkpoint_file",
    "foreign_owner",
    "load_weights_only",
    "model_class_path",
]

#: The checkpoint key every iclr26 fit writes (:class:`iclr26_common.lightning.ModelStamp`): the
#: saving LightningModule's ``module.Class`` path.
MODEL_KEY = "iclr26_model"


def model_class_path(payload: Any) -> str | None:
    """The ``module.Class`` path of the model a loaded checkpoint ``payload`` was saved from:
    its hyper-parameters' ``_class_path`` (the class LightningCLI builds from it), else its
    ``MODEL_KEY`` stamp; ``None`` when it names neither (a plain Lightning checkpoint, not
    written by an iclr26 fit)."""
    if not isinstance(payload, dict):
        return None
    hparams = payload.get("hyper_parameters")
    class_path = str((hparams or {}).get("_class_path") or "") if isinstance(hparams, dict) else ""
    return class_path or str(payload.get(MODEL_KEY) or "") or None


def foreign_owner(payload: Any, package: str) -> tuple[str, str] | None:
    """``(owner, class path)`` when ``payload`` (a loaded checkpoint) names a model outside
    ``package`` (``"rf_matid"``, or a sub-package such as ``"llm_methods.perk"``), by its
    ``MODEL_KEY`` stamp or its hyper-parameters' ``_class_path``; ``None`` when it is
    ``package``'s or names no model. ``owner`` is the other package, to the depth of ``package``
    within one distribution (``llm_methods.remix``), else its top-level package (``rf_matid``)."""
    class_path = model_class_path(payload)
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
    option: str | None = None,
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
        option: the command-line option that gave ``path`` (``"--policy"``, ``"--ckpt"``): every
            message then starts with it (``"--ckpt PATH: ..."``), as ``--ckpt_path``'s do.

    Raises:
        FileNotFoundError: ``"{path}: no such {what}"`` when ``path`` does not exist.
        IsADirectoryError: ``"{path}: is a folder; give a {what}"``.
        error: ``"{path}: not a readable {what} ({first line of the reason})"`` when unpickling
            fails, or ``"{path}: not a Lightning checkpoint (no 'state_dict')"``.
    """
    try:
        return _load_weights_only(path, what, error, map_location, require_state_dict, package)
    except (FileNotFoundError, IsADirectoryError, error) as exc:
        if option is None:
            raise
        raise type(exc)(f"{option} {exc}") from None


def _load_weights_only(
    path: str | os.PathLike[str],
    what: str,
    error: type[Exception],
    map_location: Any,
    require_state_dict: bool,
    package: str | None,
) -> Any:
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


def check_checkpoint_file(
    ckpt_path: str, *, package: str, model_class: type | None = None
) -> dict[str, Any] | None:
    """The content of the checkpoint ``--ckpt_path`` names, checked before LightningCLI reads
    its hyper-parameters (:class:`iclr26_common.lightning.CLI` calls it for every command),
    loaded with ``weights_only=True`` (no code in it runs). A
    :class:`~iclr26_common.cli_support.UsageError` naming the option, one line, for: a missing
    file or a folder; a file
    that is unreadable or not a Lightning checkpoint; a checkpoint that names no model (no
    ``MODEL_KEY`` stamp of an iclr26 fit, no ``_class_path``: a plain Lightning checkpoint);
    a checkpoint of another package's model; and, with ``model_class`` (the class the command
    builds, or the base class of subclass mode), one whose model is not that class or a
    subclass of it, or is a class ``package`` no longer has. ``None`` for Lightning's own names
    (``last``, ``best``, ``hpc``, ``registry``)."""
    if ckpt_path in ("last", "best", "hpc", "registry") or ckpt_path.startswith("registry:"):
        return None
    from iclr26_common.cli_support import UsageError

    try:
        payload = load_weights_only(ckpt_path, error=UsageError, require_state_dict=True)
    except (FileNotFoundError, IsADirectoryError, UsageError) as error:
        raise UsageError(f"--ckpt_path {error}") from None
    name = package.replace("_", "-")
    class_path = model_class_path(payload)
    if class_path is None:
        raise UsageError(
            f"--ckpt_path {ckpt_path}: not a checkpoint of {name}: it names no model (no "
            f"'{MODEL_KEY}' stamp, no hyper-parameter '_class_path'); give one that a {name} "
            "fit saved"
        )
    # a model given without subclass mode saves no ``_class_path``: the stamp says whose it is
    # ``package`` may be a sub-package (``llm_methods.perk``): the class must live under it.
    foreign = foreign_owner(payload, package)
    if foreign is not None:
        owner, class_path = foreign
        raise UsageError(
            f"--ckpt_path {ckpt_path}: a checkpoint of {owner.replace('_', '-')} "
            f"({class_path}), not of {name}"
        )
    if model_class is not None:
        saved = _import_class(class_path)  # a class of ``package`` itself: its own code
        if saved is None:
            raise UsageError(
                f"--ckpt_path {ckpt_path}: a checkpoint of {class_path}, which this version of "
                f"{name} does not have"
            )
        if not issubclass(saved, model_class):
            wanted = f"{model_class.__module__}.{model_class.__qualname__}"
            raise UsageError(
                f"--ckpt_path {ckpt_path}: a checkpoint of {class_path}, not of {wanted} (the "
                "model this command runs)"
            )
    return payload


def _import_class(class_path: str) -> type | None:
    """The class ``module.Qual.Name`` names, or ``None`` when it does not import."""
    import importlib

    parts = class_path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            node: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            node = getattr(node, attr, None)
        return node if isinstance(node, type) else None
    return None


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
