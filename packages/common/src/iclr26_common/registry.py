"""Experiment registry: what an experiment is, what it returns, and how it is discovered.

A package registers an experiment by exposing an :class:`Experiment` object through an entry
point of the group ``iclr26.experiments`` whose name equals ``Experiment.name``::

    [project.entry-points."iclr26.experiments"]
    "rf-matid.benchmark" = "rf_matid.experiment:EXPERIMENT"
"""

from __future__ import annotations

import dataclasses
import re
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "ENTRY_POINT_GROUP",
    "VERDICTS",
    "Experiment",
    "LoadError",
    "Result",
    "discover",
    "find_entry_points",
    "is_valid_name",
]

ENTRY_POINT_GROUP = "iclr26.experiments"
VERDICTS = ("held", "not held")
Verdict = Literal["held", "not held"]

# Experiment names double as directory names under the reports folder.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_valid_name(name: str) -> bool:
    """True if ``name`` is a usable experiment name (a safe single path component)."""
    return isinstance(name, str) and _NAME_RE.fullmatch(name) is not None


@dataclass
class Result:
    """What an experiment's ``run`` returns: our numbers and whether the claim held."""

    verdict: Verdict
    summary: str  # one paragraph, with our numbers
    metrics: dict[str, Any]  # JSON-serialisable (numbers, strings, lists, nested dicts)
    seeds: list[int]
    scale: str  # the miniature scale that ran, e.g. "16 classes × 5 distances, 2 epochs"
    table_markdown: str = ""
    plots: list[str] = field(default_factory=list)  # file names relative to out_dir
    details: str = ""  # extra markdown

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(
                f"Result.verdict must be one of {VERDICTS!r}, got {self.verdict!r} "
                "(an experiment that fails should raise, not return a verdict)"
            )
        if not isinstance(self.metrics, dict):
            raise TypeError(f"Result.metrics must be a dict, got {type(self.metrics).__name__}")
        self.seeds = [int(s) for s in self.seeds]
        self.plots = [str(p) for p in self.plots]


@dataclass(frozen=True)
class Experiment:
    """A reproducible claim of one paper.

    ``run(quick, out_dir)`` performs the experiment (a smaller, faster version when ``quick``),
    writes its PNG plots into the existing directory ``out_dir`` and returns a :class:`Result`.
    ``distribution`` is filled in by :func:`discover` (the distribution that registered it).
    """

    name: str
    paper: str  # title + arXiv id
    claim: str
    run: Callable[[bool, Path], Result]
    distribution: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not is_valid_name(self.name):
            raise ValueError(
                f"Experiment.name {self.name!r} is invalid: use letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        for attr in ("paper", "claim"):
            if not isinstance(getattr(self, attr), str) or not getattr(self, attr).strip():
                raise ValueError(f"Experiment.{attr} must be a non-empty string")
        if not callable(self.run):
            raise TypeError("Experiment.run must be callable as run(quick, out_dir) -> Result")


@dataclass(frozen=True)
class LoadError:
    """An entry point that could not be turned into an :class:`Experiment`."""

    name: str
    message: str  # one line
    details: str = ""  # traceback text, when there is one

    def __str__(self) -> str:
        return f"{self.name}: {self.message}"


def find_entry_points() -> dict[str, list[EntryPoint]]:
    """Entry points of :data:`ENTRY_POINT_GROUP` by name, sorted by name; nothing is imported."""
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, []).append(ep)
    return dict(sorted(found.items()))


def _load(name: str, eps: list[EntryPoint]) -> Experiment | LoadError:
    if len(eps) > 1:
        where = ", ".join(f"{_dist_name(ep) or '?'} ({ep.value})" for ep in eps)
        return LoadError(name, f"entry point defined more than once: {where}")
    ep = eps[0]
    try:
        obj = ep.load()
    except (Exception, SystemExit) as exc:
        return LoadError(
            name,
            f"cannot load {ep.value!r}: {type(exc).__name__}: {exc}",
            traceback.format_exc(),
        )
    if not isinstance(obj, Experiment):
        return LoadError(
            name, f"{ep.value!r} is a {type(obj).__name__}, not an iclr26_common Experiment"
        )
    if obj.name != name:
        return LoadError(
            name, f"entry point name {name!r} differs from Experiment.name {obj.name!r}"
        )
    return dataclasses.replace(obj, distribution=_dist_name(ep))


def _dist_name(ep: EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else None


def discover(names: Iterable[str] | None = None) -> dict[str, Experiment | LoadError]:
    """Load the registered experiments (all, or only ``names``), sorted by name.

    Never raises for a broken registration: an entry point that fails to import, is not an
    :class:`Experiment`, or whose name differs from ``Experiment.name`` (and a requested name
    that is not registered) becomes a :class:`LoadError`.
    """
    found = find_entry_points()
    wanted = sorted(found) if names is None else sorted(set(names))
    out: dict[str, Experiment | LoadError] = {}
    for name in wanted:
        if name in found:
            out[name] = _load(name, found[name])
        else:
            known = ", ".join(found) or "none"
            out[name] = LoadError(name, f"no experiment named {name!r} (registered: {known})")
    return out
