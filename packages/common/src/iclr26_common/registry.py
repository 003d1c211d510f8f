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
    "BUDGET_S",
    "ENTRY_POINT_GROUP",
    "VERDICTS",
    "Claim",
    "EntryPointInfo",
    "Experiment",
    "LoadError",
    "Result",
    "derive_verdict",
    "discover",
    "entry_point_info",
    "find_entry_points",
    "is_valid_name",
]

ENTRY_POINT_GROUP = "iclr26.experiments"
VERDICTS = ("held", "not held")
# The time contract of every experiment on 2 CPU cores, counted from process start (imports
# included): a full run at most 10 minutes, a --quick run at most 60 seconds.
BUDGET_S = {"full": 600.0, "quick": 60.0}
Verdict = Literal["held", "not held"]

# Experiment names double as directory names under the reports folder.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_valid_name(name: str) -> bool:
    """True if ``name`` is a usable experiment name (a safe single path component)."""
    return isinstance(name, str) and _NAME_RE.fullmatch(name) is not None


def _verdict_of(passed: bool | str) -> Verdict:
    if isinstance(passed, str):
        if passed not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS!r}, got {passed!r}")
        return passed  # type: ignore[return-value]
    return "held" if bool(passed) else "not held"


@dataclass
class Claim:
    """One claim of a paper, judged by a criterion fixed in code before the run.

    ``text``: what the paper claims (one sentence). ``criterion``: the pre-registered rule, in
    words with its thresholds (e.g. "S1 test accuracy >= 0.80 (seed mean)"). ``measured``: the
    numbers the rule was applied to (JSON-serialisable). ``verdict``: "held" / "not held"; a bool
    is accepted (True -> "held").
    """

    text: str
    criterion: str
    measured: dict[str, Any]
    verdict: Verdict

    def __post_init__(self) -> None:
        for attr in ("text", "criterion"):
            value = getattr(self, attr)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Claim.{attr} must be a non-empty string")
        if not isinstance(self.measured, dict):
            raise TypeError(f"Claim.measured must be a dict, got {type(self.measured).__name__}")
        self.verdict = _verdict_of(self.verdict)

    @property
    def held(self) -> bool:
        return self.verdict == "held"

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "criterion": self.criterion,
            "measured": self.measured,
            "verdict": self.verdict,
        }


def derive_verdict(claims: Iterable[Claim]) -> Verdict:
    """The experiment's verdict from its claims: held only if every claim held."""
    claims = list(claims)
    if not claims:
        raise ValueError("cannot derive a verdict from an empty list of claims")
    return "held" if all(c.held for c in claims) else "not held"


@dataclass(kw_only=True)
class Result:
    """What an experiment's ``run`` returns: our numbers and, per claim, whether it held.

    Give ``claims`` (preferred: one :class:`Claim` per claim of the paper); the verdict is then
    derived (held only if all claims hold). ``verdict`` alone is the older single-verdict form;
    giving both requires them to agree.
    """

    summary: str  # one paragraph, with our numbers
    metrics: dict[str, Any]  # JSON-serialisable (numbers, strings, lists, nested dicts)
    seeds: list[int]
    scale: str  # the miniature scale that ran, e.g. "16 classes × 5 distances, 2 epochs"
    claims: list[Claim] = field(default_factory=list)
    verdict: Verdict | None = None
    table_markdown: str = ""
    plots: list[str] = field(default_factory=list)  # file names relative to out_dir
    details: str = ""  # extra markdown

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, dict):
            raise TypeError(f"Result.metrics must be a dict, got {type(self.metrics).__name__}")
        self.claims = list(self.claims)
        for claim in self.claims:
            if not isinstance(claim, Claim):
                raise TypeError(
                    f"Result.claims must hold Claim objects, got {type(claim).__name__}"
                )
        if self.verdict is not None and self.verdict not in VERDICTS:
            raise ValueError(
                f"Result.verdict must be one of {VERDICTS!r}, got {self.verdict!r} "
                "(an experiment that fails should raise, not return a verdict)"
            )
        if self.claims:
            derived = derive_verdict(self.claims)
            if self.verdict is not None and self.verdict != derived:
                raise ValueError(
                    f"Result.verdict {self.verdict!r} contradicts its claims (derived {derived!r}:"
                    " held only if every claim holds)"
                )
            self.verdict = derived
        elif self.verdict is None:
            raise ValueError("Result needs claims (preferred) or a verdict")
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


def _dist_version(ep: EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.version if dist is not None else None


@dataclass(frozen=True)
class EntryPointInfo:
    """What the metadata says about a registered experiment, read without importing it."""

    name: str
    value: str  # "module:attribute"
    distribution: str | None
    version: str | None  # the distribution's version
    problem: str | None = None  # e.g. the name is registered twice


def entry_point_info() -> dict[str, EntryPointInfo]:
    """Every registered experiment by name, from entry-point metadata only (nothing imported)."""
    out: dict[str, EntryPointInfo] = {}
    for name, eps in find_entry_points().items():
        ep = eps[0]
        problem = None
        if len(eps) > 1:
            where = ", ".join(f"{_dist_name(e) or '?'} ({e.value})" for e in eps)
            problem = f"entry point defined more than once: {where}"
        elif not is_valid_name(name):
            problem = f"invalid experiment name {name!r}"
        out[name] = EntryPointInfo(name, ep.value, _dist_name(ep), _dist_version(ep), problem)
    return out


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
