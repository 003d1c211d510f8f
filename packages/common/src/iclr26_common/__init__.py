"""Shared seeding, experiment registry, report writer and ``iclr26`` CLI of the iclr26 workspace."""

from importlib.metadata import PackageNotFoundError, version

from iclr26_common.registry import Experiment, LoadError, Result, discover
from iclr26_common.seeding import seed_everything

try:
    __version__ = version("iclr26-common")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["Experiment", "LoadError", "Result", "__version__", "discover", "seed_everything"]
