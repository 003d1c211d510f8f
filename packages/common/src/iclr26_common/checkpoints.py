"""Reading a checkpoint file safely, with one-line errors.

Every package reads its checkpoints the same way: the file must exist, it is unpickled with
``torch.load(..., weights_only=True)`` only (no code in a checkpoint can run), and any
unpickling failure, whatever its type, means the user gave a file that is not a checkpoint of
the expected kind: one line naming the file. torch is imported lazily.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["load_weights_only"]


def load_weights_only(
    path: str | os.PathLike[str],
    what: str = "checkpoint",
    *,
    error: type[Exception] = ValueError,
    map_location: Any = "cpu",
    require_state_dict: bool = False,
) -> Any:
    """``torch.load(path, map_location=map_location, weights_only=True)`` with one-line errors.

    Args:
        path: the file.
        what: how messages name it ("checkpoint", "p0 file", "policy file").
        error: the exception class raised for an unreadable file (a package's own format error).
        map_location: passed to ``torch.load``.
        require_state_dict: the content must be a dict with a ``"state_dict"`` (a Lightning
            checkpoint); otherwise ``error``.

    Raises:
        FileNotFoundError: ``"{path}: no such {what}"`` when ``path`` is not a file.
        error: ``"{path}: not a readable {what} ({first line of the reason})"`` when unpickling
            fails, or ``"{path}: not a Lightning checkpoint (no 'state_dict')"``.
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # unpickling errors come in many types
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise error(f"{path}: not a readable {what} ({reason})") from None
    if require_state_dict and (not isinstance(payload, dict) or "state_dict" not in payload):
        raise error(f"{path}: not a Lightning checkpoint (no 'state_dict')")
    return payload
