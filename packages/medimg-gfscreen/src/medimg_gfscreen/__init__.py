"""medimg-gfscreen: see README.md."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("medimg-gfscreen")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
