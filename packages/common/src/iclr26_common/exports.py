"""Lazy public exports for a package's ``__init__`` (PEP 562 module ``__getattr__``/``__dir__``).

Every package exports its main classes from its top-level module but imports the submodule that
defines a name only when the name is first used, so ``import rf_matid`` stays cheap (torch and
Lightning load when a model is touched)::

    # rf_matid/__init__.py
    from iclr26_common.exports import distribution_version, lazy_exports

    __version__ = distribution_version("rf-matid")
    _EXPORTS = {"load_dataset": "rf_matid.io", "RFMatIDClassifier": "rf_matid.lit_module"}
    __all__ = ["__version__", *_EXPORTS]
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

Stdlib only (nothing heavy is imported).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = ["distribution_version", "lazy_exports", "moved_names"]


def distribution_version(distribution: str, fallback: str = "0+unknown") -> str:
    """The installed version of ``distribution`` (its project name, e.g. ``"rf-matid"``): a
    package's ``__version__``. ``fallback`` when it is not installed (a source tree on
    ``sys.path``)."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return fallback


def lazy_exports(
    module_name: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for module ``module_name``.

    ``exports`` maps each public name to the dotted submodule that defines it. The first access
    imports that submodule and caches the value in the module's globals, so later look-ups do not
    come back here; an unknown name raises ``AttributeError`` like a normal module.
    """
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(import_module(source), name)
        setattr(sys.modules[module_name], name, value)  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module_name])) | set(table))

    return __getattr__, __dir__


def moved_names(
    module_name: str, moved: Mapping[str, str], *, removed_in: str
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that keeps public names moved to another module importable for
    one minor version: ``from old import name`` still works, with a ``DeprecationWarning`` naming
    the new place and ``removed_in`` (e.g. ``"robotics-remac 0.6.0"``). The new module is
    imported on first use only, so the old module does not import it (no import cycle)::

        # robotics_remac/latency.py, after loop_latency moved to rollout.py
        __getattr__ = moved_names(__name__, {"loop_latency": "robotics_remac.rollout"},
                                  removed_in="robotics-remac 0.6.0")
    """
    import warnings

    table = dict(moved)

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        warnings.warn(
            f"{module_name}.{name} moved to {target}.{name}; the old place is removed in "
            f"{removed_in}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(import_module(target), name)

    return __getattr__
