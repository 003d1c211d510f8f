"""Folders built once into a cache, safe against concurrent builders and interrupted builds.

:func:`build_once` fills a temporary sibling of the target and renames it into place (atomic
on one filesystem). A folder counts as built only when its marker file exists, so a build that
died half-way is never read; if another process finished first, its folder is kept and ours is
discarded. :func:`recipe_digest` names a folder after the settings that produced it, so that a
change of recipe builds a new folder instead of reusing a stale one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iclr26_common.outputs import publish

__all__ = ["build_once", "cache_root", "recipe_digest"]


def cache_root() -> Path:
    """The one cache folder of the workspace: ``$ICLR26_CACHE``, else ``$XDG_CACHE_HOME/iclr26``,
    else ``~/.cache/iclr26``. Every package caches under it (never inside a user's data folder)."""
    if os.environ.get("ICLR26_CACHE"):
        return Path(os.environ["ICLR26_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iclr26"


def recipe_digest(recipe: Any, chars: int = 12) -> str:
    """First ``chars`` hex digits of the SHA-256 of a dataclass or mapping, as sorted JSON."""
    data = dataclasses.asdict(recipe) if dataclasses.is_dataclass(recipe) else dict(recipe)
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def build_once(
    target: Path,
    marker: str,
    fill: Callable[[Path], str],
    *,
    rebuild: bool = False,
) -> Path:
    """Return ``target``, calling ``fill(staging)`` first unless ``target/marker`` exists.

    ``fill`` writes the folder's content into ``staging`` and returns the marker file's text.
    ``rebuild=True`` replaces an existing folder. The staging folder is removed whatever happens.
    """
    target = Path(target)
    if (target / marker).is_file() and not rebuild:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        text = fill(staging)
        (staging / marker).write_text(text)
        # mkdtemp makes the folder private and safetensors its weights 0600: the cache is
        # readable like any other
        publish(staging)
        if rebuild and target.exists():
            shutil.rmtree(target)
        try:
            os.replace(staging, target)  # atomic; fails if another process already placed it
        except OSError:
            if (target / marker).is_file():
                return target  # another process finished first: keep its folder
            shutil.rmtree(target, ignore_errors=True)  # a stale, unmarked folder
            os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
