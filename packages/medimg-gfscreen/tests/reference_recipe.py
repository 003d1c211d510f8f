"""Deterministic weights and input for the reference test against the official GF-Screen code.

Pure numpy / torch (no medimg_gfscreen import), so that the one-time script that ran the
official code (``reference_make_gfscreen.py``, in a scratch environment) and
``test_reference_gfscreen.py`` build the same weights for the same official key names and the
same input volume. :func:`official_args` and :func:`official_commit` are the command-line
preamble the ``reference_make_*.py`` scripts share.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

VOLUME_SHAPE = (120, 96, 80)  # four 96x96x64 tiles at overlap 0.75: x in {0, 24}, z in {0, 16}
VOLUME_SEED = 20260119


def _rng(key: str) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return np.random.default_rng(seed)


def recipe_tensor(key: str, like: torch.Tensor) -> torch.Tensor:
    """The value of the state-dict entry ``key`` (an official key name) shaped like ``like``:
    uniform draws seeded by the key's SHA-256, scaled per kind (variance-preserving weights,
    BatchNorm statistics near (0, 1), norm affine near (1, 0)); integer buffers (SwinUNETR's
    relative position index, BatchNorm's counters) keep ``like``'s own values."""
    if not like.is_floating_point():
        return like.clone()
    u = _rng(key).uniform(-1.0, 1.0, size=tuple(like.shape)).astype(np.float32)
    name = key.rsplit(".", 1)[-1]
    if name == "running_var":
        value = 1.0 + 0.5 * np.abs(u)
    elif name == "running_mean":
        value = 0.1 * u
    elif like.dim() <= 1:
        value = 1.0 + 0.1 * u if name == "weight" else 0.1 * u
    elif "relative_position_bias_table" in key:
        value = 0.02 * u
    else:
        fan_in = like.numel() // like.shape[0]
        value = u * np.float32(np.sqrt(3.0 / fan_in))
    return torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))


HEAD_SCALE = 100.0  # spreads the tiles' Glance logits apart (random features are alike)


def recipe_state_dict(official: dict[str, torch.Tensor], head_offset: float) -> dict:
    """Every entry of an official-layout state dict through :func:`recipe_tensor`; the Glance
    head's weight (``glance_model.layer.0.weight``) times :data:`HEAD_SCALE` and ``head_offset``
    on its "focus" logit bias (``glance_model.layer.0.bias[1]``), so that the gate (p > 0.9)
    selects some tiles and not others by a clear margin."""
    out = {key: recipe_tensor(key, value) for key, value in official.items()}
    out["glance_model.layer.0.weight"] = out["glance_model.layer.0.weight"] * HEAD_SCALE
    out["glance_model.layer.0.bias"] = out["glance_model.layer.0.bias"].clone()
    out["glance_model.layer.0.bias"][1] += head_offset
    return out


def reference_volume() -> np.ndarray:
    """``[X, Y, Z]`` float32 in [0.3, 0.9]: uniform noise and a bright block in the far tiles."""
    rng = np.random.default_rng(VOLUME_SEED)
    volume = rng.random(VOLUME_SHAPE, dtype=np.float32) * np.float32(0.2) + np.float32(0.3)
    volume[70:110, 30:70, 40:70] += np.float32(0.4)
    return volume


def volume_digest(volume: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(volume, dtype=np.float32).tobytes()).hexdigest()


def official_args(doc: str, out_help: str, *, threads: int = 1) -> argparse.Namespace:
    """The command line of a ``reference_make_*.py`` script (``doc``: its docstring, whose first
    line is the description): ``--official CHECKOUT``, ``--out FOLDER`` (``out_help``) and
    ``--threads`` (torch threads, default ``threads``). Sets torch's threads and puts the
    official checkout first on ``sys.path`` (its ``models`` package imports from there)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--official", type=Path, required=True, help="GF-Screen checkout")
    parser.add_argument("--out", type=Path, required=True, help=out_help)
    parser.add_argument("--threads", type=int, default=threads, help="torch threads")
    ns = parser.parse_args()
    torch.set_num_threads(ns.threads)
    sys.path.insert(0, str(ns.official.resolve()))
    return ns


def official_commit(official: Path, fallback: str | None = None) -> str:
    """The commit checked out in ``official`` (``git rev-parse HEAD``); ``fallback`` (the
    recorded commit) for an exported tree without git, else git's error propagates."""
    try:
        return subprocess.run(
            ["git", "-C", str(official), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        if fallback is None:
            raise
        return fallback  # an exported tree (git archive) of the recorded commit
