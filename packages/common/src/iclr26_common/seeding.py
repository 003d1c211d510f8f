"""Seed every random number generator an experiment is likely to use.

With Lightning installed this is Lightning's ``seed_everything`` (one implementation for the
CLI and the experiments; it also exports ``PL_GLOBAL_SEED`` for Lightning's worker seeding),
plus ``PYTHONHASHSEED`` and the optional deterministic switches. Without it (the base install
has no torch) ``random`` and NumPy are seeded here. Importing this module imports nothing heavy.
"""

from __future__ import annotations

import os
import random

__all__ = ["seed_everything"]


def seed_everything(seed: int, deterministic: bool = False) -> int:
    """Seed ``random``, NumPy and PyTorch (CPU and all CUDA devices) with ``seed``.

    Through ``lightning.fabric.utilities.seed.seed_everything`` (quietly: no "Seed set" line)
    when Lightning is importable; otherwise NumPy and PyTorch are seeded only when importable. ``PYTHONHASHSEED`` is exported so that
    subprocesses (e.g. data-loader workers) hash strings reproducibly; it cannot change hashing
    in the already running interpreter. With ``deterministic=True`` PyTorch is also switched to
    deterministic algorithms (``warn_only=True``) and cuDNN autotuning is disabled.
    Returns ``seed``.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")

    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        from lightning.fabric.utilities.seed import seed_everything as lightning_seed
    except ImportError:
        lightning_seed = None
    if lightning_seed is not None:
        lightning_seed(seed, verbose=False)  # random, NumPy, torch (+ CUDA), PL_GLOBAL_SEED
    else:
        random.seed(seed)
        try:
            import numpy as np
        except ImportError:
            pass
        else:
            np.random.seed(seed)  # noqa: NPY002 - the legacy global RNG is what we must seed

    try:
        import torch
    except ImportError:
        pass
    else:
        if lightning_seed is None:
            torch.manual_seed(seed)  # also seeds every CUDA device
        if deterministic:
            # Required by cuBLAS for deterministic matmuls on CUDA >= 10.2.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
    return seed
