"""Shared seeding, experiment registry, report writer and ``iclr26`` CLI of the iclr26 workspace."""

from iclr26_common.effects import (
    Effect,
    bootstrap_effect,
    difference_effect,
    exact_effect,
    paired_effect,
    points_effect,
    proportion_effect,
    t_effect,
)
from iclr26_common.exports import distribution_version
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

__version__ = distribution_version("iclr26-common")

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
    "points_effect",
    "proportion_effect",
    "seed_everything",
    "t_effect",
]
