"""Checks for settings groups: frozen dataclasses checked in ``__post_init__``, so that a bad value
is a one-line ``ValueError`` (:class:`SettingsError`) naming the class and the field
(``LoRASettings.rank must be > 0, got 0``), which the commands print as one line (exit 2).
Stdlib only::

    @dataclass(frozen=True)
    class OptimSettings:
        lr: float = 1e-3
        warmup_steps: int = 0

        def __post_init__(self) -> None:
            check_positive(self, "lr")
            check_non_negative(self, "warmup_steps")
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from iclr26_common.cli_support import UsageError

__all__ = [
    "SettingsError",
    "check_non_negative",
    "check_one_of",
    "check_positive",
    "check_probability",
]


class SettingsError(UsageError, ValueError):
    """A settings field out of range: a ``ValueError`` (what code building settings catches)
    and a :class:`~iclr26_common.cli_support.UsageError`, so a command prints it as one line
    (exit 2) although it is raised here, outside the package's own modules."""


def _check(owner: object, names: tuple[str, ...], ok: Callable[[Any], bool], what: str) -> None:
    for name in names:
        value = getattr(owner, name)
        if not ok(value):
            raise SettingsError(f"{type(owner).__name__}.{name} must be {what}, got {value!r}")


def check_positive(owner: object, *names: str) -> None:
    """Each field ``names`` of ``owner`` is > 0."""
    _check(owner, names, lambda v: v > 0, "> 0")


def check_non_negative(owner: object, *names: str) -> None:
    """Each field ``names`` of ``owner`` is >= 0."""
    _check(owner, names, lambda v: v >= 0, ">= 0")


def check_probability(owner: object, *names: str) -> None:
    """Each field ``names`` of ``owner`` is in [0, 1]."""
    _check(owner, names, lambda v: 0.0 <= v <= 1.0, "in [0, 1]")


def check_one_of(owner: object, name: str, known: Collection[Any]) -> None:
    """The field ``name`` of ``owner`` is one of ``known``."""
    _check(owner, (name,), lambda v: v in known, f"one of {list(known)}")
