"""The one place that imports open3d.

open3d's Linux wheel links against ``libusb-1.0.so.0`` (for its RealSense support), which minimal
machines lack; importing open3d there fails with ``OSError: libusb-1.0.so.0: cannot open shared
object file``. The PyPI package ``libusb-package`` ships that library: we load it with
``RTLD_GLOBAL`` before the first ``import open3d`` so the dynamic loader resolves the symbol from
it, with no system package needed. Import open3d only through :func:`o3d` (it is imported lazily,
so ``pointcloud-pgllm --help`` stays fast).
"""

from __future__ import annotations

import ctypes
import functools
from types import ModuleType

__all__ = ["o3d", "seed"]


@functools.cache
def o3d() -> ModuleType:
    """The ``open3d`` module, imported once after preloading libusb from ``libusb-package``."""
    try:
        import libusb_package

        library = libusb_package.get_library_path()
        if library is not None:
            ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    except (ImportError, OSError):  # pragma: no cover - then open3d finds a system libusb or fails
        pass
    import open3d

    open3d.utility.set_verbosity_level(open3d.utility.VerbosityLevel.Error)
    return open3d


def seed(value: int) -> None:
    """Seeds open3d's own generator (uniform mesh sampling, RANSAC plane fitting)."""
    o3d().utility.random.seed(int(value) % (2**31))
