"""Experiment registry: what an experiment is, what it returns, and how it is discovered.

A package registers an experiment by exposing an :class:`Experiment` object through an entry
point of the group ``iclr26.experiments`` whose name equals ``Experiment.name``::

    [project.entry-points."iclr26.experiments"]
    "rf-matid.benchmark" = "rf_matid.experiment:EXPERIMENT"
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.machinery
import json
import re
import sys
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import Any, Literal

from iclr26_common.effects import Effect

__all__ = [
    "BUDGET_S",
    "ENTRY_POINT_GROUP",
    "VERDICTS",
    "Claim",
    "EntryPointInfo",
    "Experiment",
    "LoadError",
    "Precondition",
    "Result",
    "derive_verdict",
    "discover",
    "entry_point_info",
    "find_entry_points",
    "imported_sources",
    "is_valid_name",
    "source_digest",
]

ENTRY_POINT_GROUP = "iclr26.experiments"
VERDICTS = ("held", "not held", "inconclusive")
# The time contract of every experiment on 2 CPU cores, counted from process start (imports
# included): a full run at most 10 minutes, a --quick run at most 60 seconds.
BUDGET_S = {"full": 600.0, "quick": 60.0}
Verdict = Literal["held", "not held", "inconclusive"]

# Experiment names double as directory names under the reports folder.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_valid_name(name: str) -> bool:
    """True if ``name`` is a usable experiment name (a safe single path component)."""
    return isinstance(name, str) and _NAME_RE.fullmatch(name) is not None


def _nonempty(owner: str, attr: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{owner}.{attr} must be a non-empty string")


@dataclass(frozen=True)
class Precondition:
    """A pre-registered positive control of a claim: can this setup test the claim at all?

    ``name``: what is checked, in a few words ("baseline learned"). ``criterion``: the rule with
    its threshold, fixed before the run ("acc(baseline) - acc(majority) >= 0.10").
    ``measured``: the number(s) it was applied to (a JSON value). ``passed``: the rule's outcome.
    A claim with a failed precondition is "inconclusive" (see :class:`Claim`).
    """

    name: str
    criterion: str
    measured: Any
    passed: bool

    def __post_init__(self) -> None:
        _nonempty("Precondition", "name", self.name)
        _nonempty("Precondition", "criterion", self.criterion)
        object.__setattr__(self, "passed", bool(self.passed))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "criterion": self.criterion,
            "measured": self.measured,
            "passed": self.passed,
        }


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning raised in :class:`Claim` at the code that built
    the claim (past ``__post_init__``, the dataclass ``__init__`` and :meth:`Claim.judge`)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (
        frame.f_globals.get("__name__") == __name__ or frame.f_code.co_filename == "<string>"
    ):
        frame, level = frame.f_back, level + 1
    return level


def _as_precondition(item: Precondition | Sequence[Any]) -> Precondition:
    if isinstance(item, Precondition):
        return item
    if isinstance(item, tuple | list) and len(item) == 4:
        return Precondition(*item)
    raise TypeError(
        "Claim.preconditions must hold Precondition objects or (name, criterion, measured, "
        f"passed) tuples, got {item!r:.80}"
    )


@dataclass
class Claim:
    """One claim of a paper, decided by a pre-registered criterion.

    **With an effect** (the way to write a claim, :meth:`test`): ``effect`` is an
    :class:`~iclr26_common.effects.Effect`, the quantity the criterion is about with its 95 %
    interval and the threshold; the verdict follows from the interval: "held" when it lies
    wholly on the holding side, "not held" when wholly on the other, "inconclusive" with
    ``reason="underpowered"`` when it straddles the threshold. ``criterion`` defaults to the
    effect's rule in words.

    ``preconditions``: pre-registered positive controls (:class:`Precondition` or ``(name,
    criterion, measured, passed)`` tuples): if any failed, the setup could not test the claim
    and the verdict is "inconclusive" with ``reason="control failed: NAME"``, whatever the
    interval or criterion says (kept as ``criterion_met``: True / False, None when
    underpowered). ``measured``: further numbers behind the claim (JSON, finite).

    **Without an effect** (deprecated; kept while the experiments move to effects):
    ``Claim(text, criterion, measured, verdict)`` with ``verdict`` a bool or "held" / "not held"
    decided on a point estimate; ``reason="point estimate"``.
    """

    text: str
    criterion: str | None = None
    measured: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict | bool | None = None
    preconditions: Sequence[Precondition | Sequence[Any]] = ()
    criterion_met: bool | None = None
    effect: Effect | None = None
    reason: str = field(default="", init=False)

    def __post_init__(self) -> None:
        _nonempty("Claim", "text", self.text)
        if self.effect is not None and not isinstance(self.effect, Effect):
            raise TypeError(f"Claim.effect must be an Effect, got {type(self.effect).__name__}")
        if self.criterion is None and self.effect is not None:
            self.criterion = self.effect.criterion()
        _nonempty("Claim", "criterion", self.criterion)
        if not isinstance(self.measured, dict):
            raise TypeError(f"Claim.measured must be a dict, got {type(self.measured).__name__}")
        if isinstance(self.preconditions, str | bytes | dict):
            raise TypeError("Claim.preconditions must be a list of Precondition")
        self.preconditions = [_as_precondition(p) for p in self.preconditions]
        failed = self.failed_preconditions
        if self.effect is not None:
            if self.verdict is not None or self.criterion_met is not None:
                raise ValueError(
                    "a Claim with an effect takes its verdict from the effect's interval: "
                    "give no verdict / criterion_met"
                )
            decision = self.effect.decide()
            self.criterion_met = None if decision == "underpowered" else decision == "held"
            reason = "interval" if decision != "underpowered" else "underpowered"
            verdict = "inconclusive" if decision == "underpowered" else decision
        elif self.verdict == "inconclusive" and failed and self.criterion_met is None:
            # not measured (:meth:`untested`): a failed control kept it from running
            verdict, reason = "inconclusive", ""
        else:
            warnings.warn(
                "a Claim decided on a point estimate (no effect) is deprecated and is removed "
                "in iclr26-common 0.10.0: give Claim.test(text=..., effect=...) with an "
                "interval (iclr26_common.effects)",
                DeprecationWarning,
                stacklevel=_caller_stacklevel(),
            )
            verdict = self.verdict
            if verdict is None:
                raise ValueError("a Claim without an effect needs a verdict")
            if isinstance(verdict, str) and verdict not in VERDICTS:
                raise ValueError(f"verdict must be one of {VERDICTS!r} or a bool, got {verdict!r}")
            if verdict == "inconclusive":
                if not failed:
                    raise ValueError(
                        "verdict 'inconclusive' needs a failed precondition naming the control; "
                        "give preconditions=[...] and the criterion's own outcome as the verdict"
                    )
            else:
                met = verdict == "held" if isinstance(verdict, str) else bool(verdict)
                if self.criterion_met is not None and bool(self.criterion_met) != met:
                    raise ValueError(
                        f"Claim.criterion_met={self.criterion_met!r} contradicts {verdict!r}"
                    )
                self.criterion_met = met
            verdict = "held" if self.criterion_met else "not held"
            reason = "point estimate"
        if failed:
            verdict = "inconclusive"
            reason = "control failed: " + ", ".join(p.name for p in failed)  # type: ignore[union-attr]
        self.verdict = verdict
        self.reason = reason

    @classmethod
    def test(
        cls,
        *,
        text: str,
        effect: Effect,
        preconditions: Sequence[Precondition | Sequence[Any]] = (),
        criterion: str | None = None,
        measured: dict[str, Any] | None = None,
    ) -> Claim:
        """The claim decided by ``effect``'s interval against its threshold, unless a
        precondition failed.

        Example, the effect and controls fixed in code before the run::

            from iclr26_common.effects import paired_effect

            Claim.test(
                text="The method beats the baseline by at least 2 points.",
                effect=paired_effect(
                    correct_method, correct_baseline,  # (seeds, items) 0/1 scores, same items
                    name="accuracy gain over the baseline", unit="pts", scale=100,
                    threshold=MIN_GAIN_PTS, direction=">=", seed=0, paper=4.1,
                ),
                preconditions=[
                    Precondition("baseline learned", "acc(baseline) >= 1.10 x majority",
                                 {"baseline": acc_b, "majority": acc_m}, acc_b >= 1.1 * acc_m),
                ],
            )
        """
        return cls(
            text,
            criterion,
            dict(measured or {}),
            None,
            preconditions,
            effect=effect,
        )

    @classmethod
    def untested(
        cls,
        *,
        text: str,
        criterion: str,
        preconditions: Sequence[Precondition | Sequence[Any]],
        measured: dict[str, Any] | None = None,
    ) -> Claim:
        """A claim whose effect could not be measured because a pre-registered control failed
        (e.g. the data it needs were not supplied): "inconclusive", reason "control failed:
        NAME", no effect and ``criterion_met`` None (the report says its criterion is
        "undecided", neither "met" nor "not met"). At least one precondition must have failed."""
        if not any(not _as_precondition(p).passed for p in preconditions):
            raise ValueError(
                "Claim.untested needs a failed precondition: a claim whose controls passed "
                "is measured (Claim.test)"
            )
        return cls(text, criterion, dict(measured or {}), "inconclusive", preconditions)

    @classmethod
    def judge(
        cls,
        *,
        text: str,
        criterion: str,
        measured: dict[str, Any],
        holds: bool,
        preconditions: Sequence[Precondition | Sequence[Any]] = (),
    ) -> Claim:
        """Deprecated: a claim decided on a point estimate (``holds``) unless a precondition
        failed. Use :meth:`test` with an effect and its interval."""
        return cls(text, criterion, measured, bool(holds), preconditions)

    @property
    def failed_preconditions(self) -> list[Precondition]:
        return [p for p in self.preconditions if not p.passed]  # type: ignore[union-attr]

    @property
    def held(self) -> bool:
        return self.verdict == "held"

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "criterion": self.criterion,
            "measured": self.measured,
            "verdict": self.verdict,
            "reason": self.reason,
            "criterion_met": self.criterion_met,
            "effect": None if self.effect is None else self.effect.to_dict(),
            "preconditions": [p.to_dict() for p in self.preconditions],  # type: ignore[union-attr]
        }


def derive_verdict(claims: Iterable[Claim]) -> Verdict:
    """The experiment's verdict from its claims: "held" only if every claim held; "not held" if
    any claim was not held (a claim that was tested and failed outweighs untestable ones);
    otherwise (some inconclusive, none not held) "inconclusive"."""
    verdicts = [c.verdict for c in claims]
    if not verdicts:
        raise ValueError("cannot derive a verdict from an empty list of claims")
    if all(v == "held" for v in verdicts):
        return "held"
    return "not held" if "not held" in verdicts else "inconclusive"


@dataclass(kw_only=True)
class Result:
    """What an experiment's ``run`` returns: our numbers and, per claim, its verdict.

    ``verdict`` is derived from ``claims`` (see :func:`derive_verdict`), never given.
    """

    summary: str  # one paragraph, with our numbers
    metrics: dict[str, Any]  # JSON-serialisable (numbers, strings, lists, nested dicts)
    seeds: list[int]
    scale: str  # the miniature scale that ran, e.g. "16 classes × 5 distances, 2 epochs"
    claims: list[Claim]
    table_markdown: str = ""
    plots: list[str] = field(default_factory=list)  # file names relative to out_dir
    details: str = ""  # extra markdown
    verdict: Verdict = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, dict):
            raise TypeError(f"Result.metrics must be a dict, got {type(self.metrics).__name__}")
        self.claims = list(self.claims)
        for claim in self.claims:
            if not isinstance(claim, Claim):
                raise TypeError(
                    f"Result.claims must hold Claim objects, got {type(claim).__name__}"
                )
        if not self.claims:
            raise ValueError("Result needs at least one Claim (its verdict is derived from them)")
        self.verdict = derive_verdict(self.claims)
        self.seeds = [int(s) for s in self.seeds]
        self.plots = [str(p) for p in self.plots]


@dataclass(frozen=True)
class Experiment:
    """A reproducible claim of one paper.

    ``run(quick, out_dir)`` performs the experiment (a smaller, faster version when ``quick``),
    writes its PNG plots into the existing directory ``out_dir`` and returns a :class:`Result`.
    ``distribution`` is filled in by :func:`discover` (the distribution that registered it).

    What ``iclr26 reproduce`` needs to pack experiments onto the cores (keyword-only):
    ``threads`` is how many torch threads ``run()`` can use: an int (1, the default, for most:
    tiny models gain nothing from intra-op threads), or ``"all"`` for every core it is given
    (one training process per thread, say). The runner gives it exactly that many
    (``OMP_NUM_THREADS``, ``torch.set_num_threads``) on as many cores of its own (CPU
    affinity), so ``run()`` must not raise the count itself. ``timing=True``: ``run()`` times
    something (a scan's speed, a latency): packed, it never shares a core and starts before the
    other non-exclusive ones; with ``-j`` (slots, not pinned) it runs alone. Its timed arms
    must alternate (interleaved repeats), so that load on other cores hits them alike.
    """

    name: str
    paper: str  # title + arXiv id
    claim: str
    run: Callable[[bool, Path], Result]
    distribution: str | None = field(default=None, compare=False)
    threads: int | Literal["all"] = field(default=1, kw_only=True)
    timing: bool = field(default=False, kw_only=True)

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
        threads = self.threads
        if threads != "all" and (type(threads) is not int or threads < 1):
            raise ValueError(f"Experiment.threads must be an int >= 1 or 'all', got {threads!r}")
        if type(self.timing) is not bool:
            raise ValueError(f"Experiment.timing must be True or False, got {self.timing!r}")


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

    @property
    def module(self) -> str:
        """The module that defines the Experiment (the part of ``value`` before ':')."""
        return self.value.partition(":")[0].strip()


def entry_point_info() -> dict[str, EntryPointInfo]:
    """Every registered experiment with a valid name, from entry-point metadata only (nothing
    imported). A name registered twice keeps its first entry; :func:`discover` reports it."""
    return {
        name: EntryPointInfo(name, eps[0].value, _dist_name(eps[0]), _dist_version(eps[0]))
        for name, eps in find_entry_points().items()
        if is_valid_name(name)
    }


# ---------------------------------------------------------------- what ran: source digest

#: Data files under an experiment's top-level package that count as its source (configs).
SOURCE_DATA_SUFFIXES = (".yaml", ".yml", ".json", ".toml")


def _package_roots(top: str) -> tuple[list[Path], Path | None]:
    """(search folders of the top-level package ``top``, or [] ; the file of a plain module).

    Found with ``PathFinder`` on ``sys.path``: nothing is imported or executed.
    """
    spec = importlib.machinery.PathFinder.find_spec(top)
    if spec is None:
        return [], None
    if spec.submodule_search_locations:
        return [Path(p).resolve() for p in spec.submodule_search_locations], None
    if spec.origin and Path(spec.origin).is_file():
        return [], Path(spec.origin).resolve()
    return [], None


def imported_sources(module: str) -> list[str]:
    """The ``.py`` files of ``module``'s top-level package imported in this process so far,
    relative to the package folder (sorted); ``[file name]`` when it is a plain module."""
    roots, single = _package_roots(module.partition(".")[0])
    if single is not None:
        return [single.name]
    found: set[str] = set()
    for mod in list(sys.modules.values()):
        path = getattr(mod, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        resolved = Path(path).resolve()
        for root in roots:
            if resolved.is_relative_to(root):
                found.add(resolved.relative_to(root).as_posix())
                break
    return sorted(found)


def _key_versions(distribution: str | None) -> dict[str, str | None]:
    names = ["iclr26-common", *([distribution] if distribution else []), "torch"]
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def source_digest(module: str, files: Sequence[str], distribution: str | None) -> str | None:
    """What ran, as one SHA-256: the experiment's source plus the versions that shape it.

    The rule (the ``--resume`` key): the module defining the Experiment, every ``files`` entry
    (the ``.py`` files of its top-level package that the worker had imported when ``run()``
    returned, see :func:`imported_sources`), every ``.yaml/.yml/.json/.toml`` file under that
    package's folder, every ``.py`` file of iclr26_common itself, and the installed versions of
    iclr26-common, ``distribution`` and torch.
    Shared helpers of the package count when the experiment imported them, other experiments'
    code does not. ``None`` when a listed file is gone (never resumable).
    """
    roots, single = _package_roots(module.partition(".")[0])
    digest = hashlib.sha256(json.dumps([module, _key_versions(distribution)]).encode())
    paths: dict[str, Path] = {}
    for rel in sorted(set(files)):
        candidates = [single] if single is not None and rel == single.name else []
        candidates += [root / rel for root in roots]
        found = next((p for p in candidates if p is not None and p.is_file()), None)
        if found is None:
            return None
        paths[rel] = found
    if not paths:
        return None
    for root in roots:
        for path in sorted(root.rglob("*")):
            rel_parts = path.relative_to(root).parts
            hidden = any(part.startswith(".") or part == "__pycache__" for part in rel_parts)
            if path.suffix in SOURCE_DATA_SUFFIXES and not hidden and path.is_file():
                paths.setdefault(path.relative_to(root).as_posix(), path)
    # iclr26-common's own code shapes every result (seeding, devices, claims); in an editable
    # checkout its version does not move when it changes, so its files are keyed too.
    common_roots, _ = _package_roots(__name__.partition(".")[0])
    for root in common_roots:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                paths.setdefault(f"<iclr26_common>/{path.relative_to(root).as_posix()}", path)
    for rel in sorted(paths):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(paths[rel].read_bytes()).digest())
    return digest.hexdigest()


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
