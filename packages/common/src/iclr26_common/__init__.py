"""Shared seeding, experiment registry, report writer and ``iclr26`` CLI of the iclr26 workspace."""

from importlib.metadata import PackageNotFoundError, version

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
    "Experiment",
    "LoadError",
    "Precondition",
    "Result",
    "__version__",
    "derive_verdict",
    "discover",
    "seed_everything",
]
