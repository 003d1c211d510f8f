"""Shared seeding, experiment registry, report writer and ``iclr26`` CLI of the iclr26 workspace."""

from importlib.metadata import PackageNotFoundError, version

from iclr26_common.effects import (
    Effect,
    bootstrap_effect,
    difference_effect,
    exact_effect,
    paired_effect,
    proportion_effect,
    t_effect,
)
from iclr26_common.registry import (
    Claim,
    Experiment,
    LoadError,
    Precondition,
    Result,
    derive_verdict,
    discover,
)
from iclr26_common.seeding import seed_everything

try:
    __version__ = version("iclr26-common")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "Claim",
    "Effect",
    "Experiment",
    "LoadError",
    "Precondition",
    "Result",
    "__version__",
    "bootstrap_effect",
    "derive_verdict",
    "difference_effect",
    "discover",
    "exact_effect",
    "paired_effect",
    "proportion_effect",
    "seed_everything",
    "t_effect",
]
