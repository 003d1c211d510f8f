"""Reading a checkpoint file safely, with one-line errors.

Every package reads its checkpoints the same way: the file must exist, it is unpickled with
``torch.load(..., weights_only=True)`` only (no code in a checkpoint can run), and any
unpickling failure, whatever its type, means the user gave a file that is not a checkpoint of
the expected kind: one line naming the file. torch is imported lazily.
"""

from __future__ import annotations

import os
import re
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
        raise error(f"{path}: not a readable {what} ({_reason(exc)})") from None
    if require_state_dict and (not isinstance(payload, dict) or "state_dict" not in payload):
        raise error(f"{path}: not a Lightning checkpoint (no 'state_dict')")
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
