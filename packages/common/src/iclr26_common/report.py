"""Write an experiment's ``result.json`` + ``report.md``, and read them back.

The reports folder's ``index.md`` over these results is written by :mod:`iclr26_common.index`.

``result.json`` is strict JSON (``allow_nan=False``): a claim or precondition whose measured
values are not finite cannot be judged, so :func:`nonfinite_claims` names them and the worker
writes an error result; a non-finite *metric* is written as the string ``"NaN"``, ``"Infinity"``
or ``"-Infinity"`` and listed under ``nonfinite_metrics`` (and in ``report.md``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import tempfile
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path
from typing import Any, Literal

from iclr26_common.effects import format_effect
from iclr26_common.progress import format_duration
from iclr26_common.registry import BUDGET_S, Experiment, Result

__all__ = [
    "INCONCLUSIVE_KINDS",
    "SCHEMA_VERSION",
    "STATUSES",
    "atomic_write_text",
    "claim_counts",
    "claim_kind",
    "claim_tally",
    "format_duration",
    "md_cell",
    "mode_dir",
    "nonfinite_claims",
    "read_result",
    "strict_json",
    "verdict_text",
    "write_result",
]

STATUSES = ("held", "not held", "inconclusive", "error")
#: The two kinds of inconclusive claim: a pre-registered control failed (the setup could not
#: test the claim), or the interval straddles the threshold (more units would decide it).
INCONCLUSIVE_KINDS = ("inconclusive (control failed)", "inconclusive (underpowered)")
Status = Literal["held", "not held", "inconclusive", "error"]
# 2: per-claim verdicts, wall time from process start, device, run id, distribution version.
# 3: "inconclusive" and claim preconditions; devices / threads used by run() (lists); the
#    source digest (--resume key); strict JSON, non-finite metrics as strings.
# 4: per claim an ``effect`` (estimate, 95 % interval, threshold, direction, method, n, units,
#    n_needed) and the verdict's ``reason`` ("interval", "underpowered", "control failed: NAME",
#    or "point estimate" for a claim without an effect).
SCHEMA_VERSION = 4

_VERDICT_LINES = {
    "held": "**Verdict: held at this scale**",
    "not held": "**Verdict: not held at this scale**",
    "inconclusive": "**Verdict: inconclusive at this scale** (a pre-registered control failed, "
    "or an interval straddles its threshold)",
    "error": "**Error**",
}
_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def mode_dir(out: Path, quick: bool) -> Path:
    """The folder of one mode's results under the reports folder ``out``: ``out/full`` or
    ``out/quick``, so a quick run never replaces a full result (nor the other way round)."""
    return Path(out) / ("quick" if quick else "full")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory + ``os.replace``.

    Readers see either the old file or the complete new one, never a partial write.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):  # NumPy arrays and scalars, torch tensors
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"{type(obj).__name__} value {obj!r:.80} is not JSON-serialisable")


def strict_json(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """``value`` as plain JSON data (NumPy / torch values converted) with every non-finite float
    replaced by ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``, and the dotted paths of those
    (``a.b[2]``). Raises ``TypeError`` for values that are not JSON-serialisable."""
    value = json.loads(json.dumps(value, default=_json_default))
    found: list[str] = []

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, float) and not math.isfinite(node):
            found.append(where or "(value)")
            return _NONFINITE.get(node, "NaN")
        if isinstance(node, dict):
            return {k: walk(v, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(node)]
        return node

    return walk(value, path), found


def nonfinite_claims(claims: list[Any]) -> list[str]:
    """One entry per non-finite measured value of ``claims`` (:class:`Claim` objects or their
    dicts), e.g. ``claim 2 measured.gap``, ``claim 1 precondition 'baseline learned' measured``."""
    problems: list[str] = []
    for i, claim in enumerate(claims, 1):
        data = claim.to_dict() if hasattr(claim, "to_dict") else claim
        _, paths = strict_json(data.get("measured") or {}, "measured")
        problems += [f"claim {i} {p}" for p in paths]
        for pre in data.get("preconditions") or []:
            _, paths = strict_json(pre.get("measured"), "measured")
            problems += [f"claim {i} precondition {pre.get('name')!r} {p}" for p in paths]
    return problems


def _versions(dist_name: str | None) -> dict[str, str]:
    """Versions of iclr26-common, the experiment's distribution and its direct requirements."""
    names = ["iclr26-common"]
    if dist_name:
        names.append(dist_name)
        with contextlib.suppress(PackageNotFoundError):
            for req in distribution(dist_name).requires or []:
                match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
                if match and "extra ==" not in req.replace('"', "").replace("'", ""):
                    names.append(match.group(1))
    out: dict[str, str] = {}
    for name in names:
        with contextlib.suppress(PackageNotFoundError):
            out.setdefault(name, version(name))
    return out


def md_cell(value: Any) -> str:
    """A value formatted for one markdown table cell."""
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, str | int):
        text = str(value)
    else:
        text = json.dumps(value, separators=(",", ":"))
        if len(text) > 120:
            text = text[:117] + "..."
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _flatten(metrics: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in metrics.items():
        if isinstance(value, dict) and value:
            rows.extend(_flatten(value, f"{prefix}{key}."))
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


def _code_block(text: str) -> str:
    fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence}text\n{text.rstrip()}\n{fence}"


def _measured(measured: dict[str, Any]) -> str:
    return "; ".join(f"{k} = {md_cell(v)}" for k, v in _flatten(measured)) or "—"


def _failed(claim: dict[str, Any]) -> list[str]:
    return [
        str(p.get("name", "?"))
        for p in claim.get("preconditions") or []
        if isinstance(p, dict) and not p.get("passed")
    ]


def claim_kind(claim: dict[str, Any]) -> str:
    """ "held", "not held", "error", or one of :data:`INCONCLUSIVE_KINDS` for a claim dict
    (results of schema <= 3 have no ``reason``: an inconclusive claim there had a failed
    control)."""
    verdict = str(claim.get("verdict", "?"))
    if verdict != "inconclusive":
        return verdict
    if str(claim.get("reason") or "") == "underpowered" and not _failed(claim):
        return INCONCLUSIVE_KINDS[1]
    return INCONCLUSIVE_KINDS[0]


def verdict_text(claim: dict[str, Any]) -> str:
    """The verdict with its reason: ``inconclusive (underpowered)``, ``inconclusive (control
    failed: baseline learned)``, ``held``."""
    verdict = str(claim.get("verdict", "?"))
    if verdict != "inconclusive":
        return verdict
    if claim_kind(claim) == INCONCLUSIVE_KINDS[1]:
        return "inconclusive (underpowered)"
    return f"inconclusive (control failed: {', '.join(_failed(claim)) or '?'})"


def untested(claim: dict[str, Any]) -> bool:
    """Whether a claim dict was not measured (``Claim.untested``: no effect, a failed control,
    ``criterion_met`` None)."""
    return (
        not isinstance(claim.get("effect"), dict)
        and claim.get("criterion_met") is None
        and claim_kind(claim) == INCONCLUSIVE_KINDS[0]
    )


def effect_text(claim: dict[str, Any], *, point_estimate: str = ", no interval") -> str:
    """A claim dict's effect in one line (:func:`~iclr26_common.effects.format_effect`; without
    the units-needed advice when a control failed), or what stands in its place: "— (not
    measured: a control failed)", "— (point estimate``point_estimate``)"."""
    effect = claim.get("effect")
    if not isinstance(effect, dict):
        if untested(claim):
            return "— (not measured: a control failed)"
        return f"— (point estimate{point_estimate})"
    try:
        return format_effect(effect, advice=claim_kind(claim) != INCONCLUSIVE_KINDS[0])
    except (TypeError, ValueError, KeyError):
        return str(effect)


def _effect_cell(claim: dict[str, Any]) -> str:
    return md_cell(effect_text(claim))


def _render_claims(claims: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| # | Claim | Criterion (fixed before the run) | Effect [95 % interval] vs threshold "
        "| Measured | Verdict |"
    ]
    lines.append("|---|---|---|---|---|---|")
    controls, notes = [], []
    for i, claim in enumerate(claims, 1):
        verdict = verdict_text(claim).split(" (", 1)
        cells = [
            str(i),
            md_cell(claim.get("text", "?")),
            md_cell(claim.get("criterion", "?")),
            _effect_cell(claim),
            _measured(claim.get("measured") or {}),
            f"**{verdict[0]}**" + (f" ({md_cell(verdict[1])}" if len(verdict) > 1 else ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")
        for pre in claim.get("preconditions") or []:
            value = pre.get("measured")
            measured = _measured(value) if isinstance(value, dict) else md_cell(value)
            passed = "passed" if pre.get("passed") else "**failed**"
            row = [str(i), md_cell(pre.get("name", "?")), md_cell(pre.get("criterion", "?"))]
            controls.append("| " + " | ".join([*row, measured, passed]) + " |")
        kind = claim_kind(claim)
        if kind == INCONCLUSIVE_KINDS[0]:
            met = {True: "met", False: "not met"}.get(claim.get("criterion_met"), "undecided")
            alone = "it was not measured" if untested(claim) else f"its criterion alone was {met}"
            notes.append(
                f"Claim {i} is **inconclusive**: its control {', '.join(_failed(claim))} failed, "
                f"so this setup could not test it ({alone})."
            )
        elif kind == INCONCLUSIVE_KINDS[1]:
            effect = claim.get("effect") or {}
            needed = effect.get("n_needed")
            more = (
                f"an interval over about {needed} {effect.get('units') or 'units'} (now "
                f"{effect.get('n')}) would decide it at the measured spread"
                if needed is not None
                else "its estimate sits on the threshold: no number of units would decide it"
            )
            notes.append(
                f"Claim {i} is **inconclusive (underpowered)**: its 95 % interval straddles the "
                f"threshold; {more}."
            )
        elif kind in ("held", "not held") and not isinstance(claim.get("effect"), dict):
            notes.append(
                f"Claim {i} is decided on a point estimate without an interval (deprecated): "
                "its verdict does not say how sure it is."
            )
    lines.append("")
    if controls:
        lines += [
            "### Preconditions (pre-registered controls)",
            "",
            "| Claim | Control | Criterion | Measured | Result |",
            "|---|---|---|---|---|",
            *controls,
            "",
        ]
    return lines + [line for note in notes for line in (note, "")]


def _usage(data: dict[str, Any]) -> str:
    devices = data.get("devices") or ([data["device"]] if data.get("device") else [])
    threads = data.get("threads")
    text = ", ".join(devices) or "unknown"
    if threads:
        text += f"; torch threads: {', '.join(str(t) for t in threads)}"
    return text


def _render_report(data: dict[str, Any], out_dir: Path) -> str:
    mode = "quick" if data["quick"] else "full"
    seeds = ", ".join(str(s) for s in data["seeds"]) or "—"
    versions = ", ".join(f"{k} {v}" for k, v in data["versions"].items()) or "unknown"
    wall = format_duration(data.get("wall_s"), decimals=1)
    budget = data.get("budget_s")
    if isinstance(budget, int | float) and isinstance(data.get("wall_s"), int | float):
        wall += f" of a {format_duration(budget, decimals=1)} {mode} budget" + (
            "" if data["wall_s"] <= budget else " — **over budget**"
        )
    source = data.get("source") or {}
    lines = [
        f"# {data['name']}",
        "",
        f"**Paper:** {data['paper']}",
        "",
        "## Claim",
        "",
        *(f"> {line}" if line else ">" for line in data["claim"].splitlines()),
        "",
        "## Setup",
        "",
        f"- **Scale:** {data['scale'] or 'not reported'} ({mode} mode)",
        f"- **Seeds:** {seeds}",
        f"- **Wall time:** {wall} (process start to result, imports included; run() "
        f"{format_duration(data['duration_s'], decimals=1)})",
        f"- **Used by run():** {_usage(data)}",
        f"- **Run at:** {data['timestamp']} on {data['platform']}, Python {data['python']}",
        f"- **Versions:** {versions}",
    ]
    if source.get("digest"):
        lines.append(
            f"- **Source digest:** `{source['digest'][:16]}` ({len(source.get('files') or [])} "
            f"imported file(s) of `{source.get('module')}`'s package, its configs and versions)"
        )
    lines.append("")
    if data.get("claims"):
        lines += ["## Claims and verdicts", "", *_render_claims(data["claims"])]
    if data["status"] != "error" or data["summary"] or data["metrics"]:
        lines += ["## Our numbers", ""]
        if data["summary"]:
            lines += [data["summary"].strip(), ""]
        if data["table_markdown"]:
            lines += [data["table_markdown"].strip(), ""]
        if data["metrics"]:
            lines += ["| Metric | Value |", "|---|---|"]
            lines += [f"| {md_cell(k)} | {md_cell(v)} |" for k, v in _flatten(data["metrics"])]
            lines.append("")
        if data.get("nonfinite_metrics"):
            names = ", ".join(f"`{p}`" for p in data["nonfinite_metrics"])
            lines += [f"Non-finite metric values (written as strings): {names}.", ""]
    if data["plots"]:
        lines += ["## Plots", ""]
        for plot in data["plots"]:
            if (out_dir / plot).is_file():
                lines += [f"![{plot}]({plot})", ""]
            else:
                lines += [f"*(plot file missing: `{plot}`)*", ""]
    if data["details"]:
        lines += ["## Details", "", data["details"].strip(), ""]
    lines += ["## Verdict", "", _VERDICT_LINES[data["status"]], ""]
    if data.get("claims") and data["status"] != "error":
        tally = claim_tally(data["claims"])
        parts = [f"{v} {k}" for k, v in tally.items() if v and k != "held"]
        lines += [
            f"{tally['held']} of {sum(tally.values())} claims held"
            + (f" ({', '.join(parts)})" if parts else "")
            + "; held only if every claim holds, not held if any claim is not held, otherwise "
            "inconclusive. A claim is held or not held only when its whole 95 % interval lies "
            "on one side of its threshold.",
            "",
        ]
    if data["status"] == "error":
        lines += [_code_block(data["error"] or "(no error message)"), ""]
    return "\n".join(lines)


def claim_tally(claims: list[Any]) -> dict[str, int]:
    """Claims per kind: held, not held, the two :data:`INCONCLUSIVE_KINDS`, error."""
    tally = dict.fromkeys(("held", "not held", *INCONCLUSIVE_KINDS, "error"), 0)
    for claim in claims:
        if isinstance(claim, dict):
            kind = claim_kind(claim)
            tally[kind if kind in tally else "error"] += 1
    return tally


def claim_counts(claims: list[Any]) -> tuple[int, int, int]:
    """(held, total, inconclusive) over the claim dicts."""
    claims = [c for c in claims if isinstance(c, dict)]
    verdicts = [c.get("verdict") for c in claims]
    return verdicts.count("held"), len(claims), verdicts.count("inconclusive")


def _relative_plot(plot: str, out_dir: Path) -> str:
    path = Path(plot)
    if path.is_absolute():
        with contextlib.suppress(ValueError):
            return path.resolve().relative_to(out_dir.resolve()).as_posix()
    return plot


def write_result(
    out_dir: Path,
    experiment: Experiment,
    result: Result | None,
    *,
    status: Status,
    error: str | None = None,
    duration_s: float,
    quick: bool,
    wall_s: float | None = None,
    devices: list[str] | None = None,
    threads: list[int] | int | None = None,
    run_id: str | None = None,
    source: dict[str, Any] | None = None,
) -> None:
    """Write ``out_dir/report.md`` then ``out_dir/result.json`` (strict JSON), each atomically.

    ``duration_s`` is the time ``run()`` took; ``wall_s`` the time from the worker process's
    start (imports included), which is what the budget (:data:`BUDGET_S`) applies to.
    ``devices`` / ``threads``: what ``run()`` used (``result.json`` also keeps the joined
    ``device`` string for schema <= 2 readers);
    ``source``: ``{"module", "files", "digest"}``, the ``--resume`` key. An error result may
    carry the ``result`` whose numbers it reports (claims with non-finite values are marked
    "error"). ``result.json`` is written last, so its presence means the report is complete.
    Raises ``ValueError`` for an inconsistent ``status`` or, unless ``status`` is "error", a
    claim with non-finite measured values; ``TypeError`` for values that are not
    JSON-serialisable (before anything is written).
    """
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES!r}, got {status!r}")
    if status != "error" and (result is None or result.verdict != status):
        got = None if result is None else result.verdict
        raise ValueError(f"status {status!r} needs a Result with that verdict, got {got!r}")
    r = result
    metrics, nonfinite_metrics = strict_json(r.metrics if r else {})
    raw_claims = [c.to_dict() for c in (r.claims if r else [])]
    bad = nonfinite_claims(raw_claims)
    if bad and status != "error":
        raise ValueError(f"non-finite measured values cannot be judged: {', '.join(bad)}")
    claims, _ = strict_json(raw_claims)
    for i, claim in enumerate(claims, 1):
        if any(b.startswith(f"claim {i} ") for b in bad):
            claim["verdict"] = "error"
    devices = list(devices or [])
    if isinstance(threads, int):
        threads = [threads]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    versions = _versions(experiment.distribution)
    budget = BUDGET_S["quick" if quick else "full"]
    wall = None if wall_s is None else round(float(wall_s), 3)
    data: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "name": experiment.name,
        "paper": experiment.paper,
        "claim": experiment.claim,
        "status": status,
        "verdict": r.verdict if r and status != "error" else None,
        "claims": claims,
        "summary": r.summary if r else "",
        "metrics": metrics,
        "nonfinite_metrics": nonfinite_metrics,
        "seeds": list(r.seeds) if r else [],
        "scale": r.scale if r else "",
        "table_markdown": r.table_markdown if r else "",
        "plots": [_relative_plot(p, out_dir) for p in r.plots] if r else [],
        "details": r.details if r else "",
        "error": (error or "(no error message)") if status == "error" else error,
        "duration_s": round(float(duration_s), 3),
        "wall_s": wall,
        "budget_s": budget,
        "within_budget": None if wall is None else wall <= budget,
        "device": ", ".join(devices) or None,  # schema <= 2 readers
        "devices": devices,
        "threads": [int(t) for t in threads] if threads else None,
        "quick": bool(quick),
        "run_id": run_id,
        "source": source,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "distribution": experiment.distribution,
        "distribution_version": versions.get(experiment.distribution or ""),
        "versions": versions,
    }
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    atomic_write_text(out_dir / "report.md", _render_report(data, out_dir))
    atomic_write_text(out_dir / "result.json", text)


def read_result(path: Path) -> dict[str, Any]:
    """A ``result.json`` as a dict, normalised across schema versions.

    Schemas 1 (single verdict, no claims, no wall time) and 2 (one ``device`` string, an int
    ``threads``) stay readable: missing keys get None / empty defaults, ``devices`` and
    ``threads`` become lists. An unreadable file gives an error record instead of raising.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"top level is a {type(data).__name__}, not an object")
    except (OSError, ValueError) as exc:
        data = {
            "status": "error",
            "error": f"unreadable result.json: {type(exc).__name__}: {exc}",
            "claim": f"unreadable result.json: {type(exc).__name__}: {exc}",
        }
    if data.get("status") not in STATUSES:
        data["status"] = "error"
    defaults: dict[str, Any] = {
        "schema": 1,
        "name": path.parent.name,
        "claims": [],
        "wall_s": None,
        "budget_s": None,
        "within_budget": None,
        "device": None,
        "threads": None,
        "run_id": None,
        "source": None,
        "nonfinite_metrics": [],
        "distribution": None,
        "distribution_version": None,
        "quick": None,
        "timestamp": None,
    }
    for key, value in defaults.items():
        data.setdefault(key, value)
    if not isinstance(data["claims"], list):
        data["claims"] = []
    if not isinstance(data.get("devices"), list):
        data["devices"] = [data["device"]] if isinstance(data["device"], str) else []
    if isinstance(data["threads"], int):
        data["threads"] = [data["threads"]]
    if data["distribution_version"] is None and data["distribution"]:
        data["distribution_version"] = (data.get("versions") or {}).get(data["distribution"])
    return data
