"""Stored-output tests that pass on any CPU: compare a computation with the reference numbers a
package keeps under ``tests/data`` by one scaled error, prove the tolerance would catch a defect,
and record the reference (with a sidecar saying what made it). Re-exported by
:mod:`iclr26_common.testing`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "assert_mutation_detected",
    "assert_portable_close",
    "regenerate_main",
    "relative_error",
    "write_stored_outputs",
]


def _as_float64(value: Any) -> Any:
    import numpy as np

    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


def relative_error(actual: Any, expected: Any) -> float:
    """``max |actual - expected| / max |expected|``: the largest deviation scaled by the
    magnitude of the stored values (one scale for the whole array, so entries near zero do not
    blow up). Arrays (NumPy, torch, nested lists) of the same shape; a stored array of zeros is
    compared absolutely. Float32 kernels differ between CPUs (ATen's ISA dispatch, MKL/oneDNN
    paths, reduction order), so stored outputs are compared by this scaled error, never by a
    fixed ``atol`` on values of any size."""
    import numpy as np

    a, e = _as_float64(actual), _as_float64(expected)
    if a.shape != e.shape:
        raise AssertionError(f"shape {a.shape} differs from the stored {e.shape}")
    if a.size == 0:
        return 0.0
    if not (np.isfinite(a).all() and np.isfinite(e).all()):
        same = np.array_equal(a, e, equal_nan=True)
        return 0.0 if same else float("inf")
    scale = float(np.abs(e).max())
    return float(np.abs(a - e).max() / (scale if scale > 0 else 1.0))


def write_stored_outputs(
    npz: str | os.PathLike[str],
    arrays: Mapping[str, Any],
    sidecar: Mapping[str, Any],
    *,
    sidecar_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Record a stored-outputs test's reference: ``arrays`` into the compressed ``npz`` (its
    folder created) and ``sidecar`` (what made them: versions, seeds, the command) as indented
    JSON at ``sidecar_path`` (default: ``npz`` with ``.json``). Prints what it wrote and
    returns the sidecar's path."""
    import json

    import numpy as np

    npz = Path(npz)
    npz.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(npz, **arrays)
    side = Path(sidecar_path) if sidecar_path is not None else npz.with_suffix(".json")
    side.write_text(json.dumps(sidecar, indent=1) + "\n")
    print(f"wrote {npz} ({npz.stat().st_size} bytes) and {side}")
    return side


def regenerate_main(regenerate: Callable[[], Any], argv: Sequence[str] | None = None) -> None:
    """The ``__main__`` of a stored-outputs test module: ``python test_stored_outputs.py
    --regenerate`` runs ``regenerate()`` with one torch thread (the recorded setting); any other
    arguments end with a usage line (exit 1)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args != ["--regenerate"]:
        raise SystemExit(f"usage: {sys.argv[0]} --regenerate")
    import torch

    torch.set_num_threads(1)
    regenerate()


def assert_portable_close(actual: Any, expected: Any, *, tol: float, what: str = "") -> float:
    """Assert ``relative_error(actual, expected) <= tol`` and return the error.

    ``tol`` is a stated margin above the largest difference measured across CPUs
    (``ATEN_CPU_CAPABILITY=default|avx2|avx512``, ``MKL_CBWR=COMPATIBLE``); say in the test which
    spread it covers and pair it with :func:`assert_mutation_detected`."""
    err = relative_error(actual, expected)
    label = f"{what}: " if what else ""
    assert err <= tol, f"{label}relative error {err:.3g} > tolerance {tol:.3g}"
    return err


def assert_mutation_detected(
    mutated: Any, expected: Any, *, tol: float, factor: float = 10.0, what: str = ""
) -> float:
    """Assert the output of a mutated computation (inputs shuffled, a weight zeroed, a formula
    changed) lies at least ``factor`` times the tolerance away from the stored one: the
    tolerance of :func:`assert_portable_close` still catches the defect it guards against.
    Returns the mutation's relative error."""
    err = relative_error(mutated, expected)
    label = f"{what}: " if what else ""
    assert err >= factor * tol, (
        f"{label}the mutation moves the output by {err:.3g}, less than {factor:g} x the "
        f"tolerance {tol:.3g}: the tolerance would hide it"
    )
    return err
