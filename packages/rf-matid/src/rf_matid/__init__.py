"""RF-MatID (ICLR 2026): RF material identification from wide-band S11.

Readers for the upstream folder/CSV format and Touchstone, frequency-allocation protocols,
splits, a physics-based synthetic generator and 1-D baselines. Heavy submodules (torch,
Lightning) are imported on use: ``from rf_matid.model import build_model``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rf-matid")
except PackageNotFoundError:  # pragma: no cover - source tree without installation
    __version__ = "0.0.0"
