"""Write an experiment's ``result.json`` + ``report.md`` and the reports ``index.md``."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import tempfile
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path
from typing import Any, Literal

from iclr26_common.registry import BUDGET_S, Experiment, Result

__all__ = [
    "ATTEMPTS_DIR",
    "STATUSES",
    "atomic_write_text",
    "read_result",
    "write_attempt",
    "write_index",
    "write_result",
]

STATUSES = ("held", "not held", "error")
Status = Literal["held", "not held", "error"]
# 2: per-claim verdicts, wall time from process start, device, run id, distribution version.
SCHEMA_VERSION = 2
# Under the reports folder: one JSON per experiment whose latest attempt died without a result
# while an earlier result was kept. Starts with "_" so it can never be an experiment's name.
ATTEMPTS_DIR = "_attempts"

_VERDICT_LINES = {
    "held": "**Verdict: held at this scale**",
    "not held": "**Verdict: not held at this scale**",
    "error": "**Error**",
}


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


def _cell(value: Any) -> str:
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


def _duration(seconds: float | None) -> str:
    if not isinstance(seconds, int | float):
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def _measured(measured: dict[str, Any]) -> str:
    return "; ".join(f"{k} = {_cell(v)}" for k, v in _flatten(measured)) or "—"


def _render_claims(claims: list[dict[str, Any]]) -> list[str]:
    lines = ["| # | Claim | Criterion (fixed before the run) | Measured | Verdict |"]
    lines.append("|---|---|---|---|---|")
    for i, claim in enumerate(claims, 1):
        cells = [
            str(i),
            _cell(claim.get("text", "?")),
            _cell(claim.get("criterion", "?")),
            _measured(claim.get("measured") or {}),
            f"**{claim.get('verdict', '?')}**",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def _render_report(data: dict[str, Any], out_dir: Path) -> str:
    mode = "quick" if data["quick"] else "full"
    seeds = ", ".join(str(s) for s in data["seeds"]) or "—"
    versions = ", ".join(f"{k} {v}" for k, v in data["versions"].items()) or "unknown"
    wall = _duration(data.get("wall_s"))
    budget = data.get("budget_s")
    if isinstance(budget, int | float) and isinstance(data.get("wall_s"), int | float):
        wall += f" of a {_duration(budget)} {mode} budget" + (
            "" if data["wall_s"] <= budget else " — **over budget**"
        )
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
        f"{_duration(data['duration_s'])})",
        f"- **Device:** {data.get('device') or 'unknown'}"
        + (f", {data['threads']} torch thread(s)" if data.get("threads") else ""),
        f"- **Run at:** {data['timestamp']} on {data['platform']}, Python {data['python']}",
        f"- **Versions:** {versions}",
        "",
    ]
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
            lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in _flatten(data["metrics"])]
            lines.append("")
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
        held = sum(c.get("verdict") == "held" for c in data["claims"])
        lines += [
            f"{held} of {len(data['claims'])} claims held; held only if every claim holds.",
            "",
        ]
    if data["status"] == "error":
        lines += [_code_block(data["error"] or "(no error message)"), ""]
    return "\n".join(lines)


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
    device: str | None = None,
    threads: int | None = None,
    run_id: str | None = None,
) -> None:
    """Write ``out_dir/report.md`` then ``out_dir/result.json``, each atomically.

    ``duration_s`` is the time ``run()`` took; ``wall_s`` the time from the worker process's
    start (imports included), which is what the budget (:data:`BUDGET_S`) applies to.
    ``result.json`` is written last, so its presence means the report is complete. Raises
    ``ValueError`` for an inconsistent ``status`` and ``TypeError`` for metrics that are not
    JSON-serialisable (before anything is written).
    """
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES!r}, got {status!r}")
    if status != "error" and (result is None or result.verdict != status):
        got = None if result is None else result.verdict
        raise ValueError(f"status {status!r} needs a Result with that verdict, got {got!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    r = result
    metrics = json.loads(json.dumps(r.metrics if r else {}, default=_json_default))
    claims = json.loads(
        json.dumps([c.to_dict() for c in (r.claims if r else [])], default=_json_default)
    )
    versions = _versions(experiment.distribution)
    budget = BUDGET_S["quick" if quick else "full"]
    wall = None if wall_s is None else round(float(wall_s), 3)
    data: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "name": experiment.name,
        "paper": experiment.paper,
        "claim": experiment.claim,
        "status": status,
        "verdict": r.verdict if r else None,
        "claims": claims,
        "summary": r.summary if r else "",
        "metrics": metrics,
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
        "device": device,
        "threads": threads,
        "quick": bool(quick),
        "run_id": run_id,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "distribution": experiment.distribution,
        "distribution_version": versions.get(experiment.distribution or ""),
        "versions": versions,
    }
    atomic_write_text(out_dir / "report.md", _render_report(data, out_dir))
    atomic_write_text(out_dir / "result.json", json.dumps(data, indent=2, default=str) + "\n")


def read_result(path: Path) -> dict[str, Any]:
    """A ``result.json`` as a dict, normalised across schema versions.

    Schema 1 (single verdict, no claims, no wall time) stays readable: missing keys get None /
    empty defaults. An unreadable file gives an error record instead of raising.
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
        "run_id": None,
        "distribution": None,
        "distribution_version": None,
        "quick": None,
        "timestamp": None,
    }
    for key, value in defaults.items():
        data.setdefault(key, value)
    if not isinstance(data["claims"], list):
        data["claims"] = []
    if data["distribution_version"] is None and data["distribution"]:
        data["distribution_version"] = (data.get("versions") or {}).get(data["distribution"])
    return data


def write_attempt(
    reports_dir: Path, name: str, *, run_id: str, problem: str, log_text: str
) -> Path:
    """Record a failed attempt (no result written) whose earlier result was kept in place."""
    folder = Path(reports_dir) / ATTEMPTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / f"{name}.log", log_text)
    record = {
        "name": name,
        "run_id": run_id,
        "problem": problem,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "log": f"{ATTEMPTS_DIR}/{name}.log",
    }
    path = folder / f"{name}.json"
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def clear_attempt(reports_dir: Path, name: str) -> None:
    """Forget a recorded failed attempt (a newer result replaced the kept one)."""
    for suffix in (".json", ".log"):
        with contextlib.suppress(FileNotFoundError):
            (Path(reports_dir) / ATTEMPTS_DIR / f"{name}{suffix}").unlink()


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _when(data: dict[str, Any], run_id: str | None) -> str:
    if run_id is not None and data.get("run_id") == run_id:
        return "this run"
    stamp = str(data.get("timestamp") or "unknown date").replace("T", " ")
    stamp = stamp.removesuffix("+00:00")
    return f"earlier run ({stamp} UTC)" if data.get("timestamp") else "earlier run (unknown date)"


def _wall(data: dict[str, Any]) -> str:
    wall = data.get("wall_s")
    if not isinstance(wall, int | float):
        return "?"
    text = _duration(wall)
    return text + (" ⚠ over budget" if data.get("within_budget") is False else "")


def _claims_held(data: dict[str, Any]) -> str:
    claims = data["claims"]
    if not claims:
        return "— (single verdict)" if data["status"] != "error" else "—"
    held = sum(c.get("verdict") == "held" for c in claims if isinstance(c, dict))
    return f"{held}/{len(claims)}"


def _load_attempts(reports_dir: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((reports_dir / ATTEMPTS_DIR).glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(record, dict):
                out[path.stem] = record
    return out


def write_index(reports_dir: Path, run_id: str | None = None) -> Path:
    """Write ``reports_dir/index.md`` over every ``*/result.json`` and return its path.

    Lists each experiment's verdict, claims held, mode, wall time (marked when over budget),
    device and whether it comes from this invocation (``run_id``) or an earlier run (with its
    date), then every claim with its verdict. Unreadable results are listed as errors.
    """
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    attempts = _load_attempts(reports_dir)
    rows: list[str] = []
    claim_sections: list[str] = []
    counts = dict.fromkeys(STATUSES, 0)
    n_claims = n_claims_held = 0
    for path in sorted(reports_dir.glob("*/result.json")):
        exp_dir = path.parent.name
        if exp_dir.startswith((".", "_")):
            continue  # temporary run folders and bookkeeping, never results
        data = read_result(path)
        status = data["status"]
        counts[status] += 1
        has_report = (path.parent / "report.md").is_file()
        quick = data.get("quick")
        when = _when(data, run_id)
        attempt = attempts.get(exp_dir)
        if attempt is not None:
            ran = "this run" if attempt.get("run_id") == run_id else "a later run"
            when += f"; {ran}'s attempt failed ({_short(attempt.get('problem', '?'), 80)}; "
            when += f"log {attempt.get('log', '?')})"
        cells = [
            str(data.get("name") or exp_dir),
            str(data.get("paper") or "?"),
            "**error**" if status == "error" else status,
            _claims_held(data),
            "?" if quick is None else ("quick" if quick else "full"),
            _wall(data),
            str(data.get("device") or "?"),
            when,
        ]
        link = f"[report.md]({exp_dir}/report.md)" if has_report else "—"
        rows.append("| " + " | ".join(_cell(c) for c in cells) + f" | {link} |")

        claims = [c for c in data["claims"] if isinstance(c, dict)]
        verdict = "**error**" if status == "error" else status
        section = [f"### {data.get('name') or exp_dir} — {verdict}", ""]
        if claims:
            n_claims += len(claims)
            n_claims_held += sum(c.get("verdict") == "held" for c in claims)
            section += ["| # | Claim | Criterion | Verdict |", "|---|---|---|---|"]
            for i, claim in enumerate(claims, 1):
                cells = [str(i), claim.get("text", "?"), claim.get("criterion", "?")]
                section.append(
                    "| " + " | ".join(_cell(c) for c in cells) + f" | {claim.get('verdict')} |"
                )
        elif status == "error":
            section.append(f"No claims judged: {_short(data.get('error') or '?', 200)}")
        else:
            section.append(f"Single verdict (no per-claim breakdown): {_short(data['claim'], 200)}")
        claim_sections += [*section, ""]
    total = sum(counts.values())
    quick_budget, full_budget = _duration(BUDGET_S["quick"]), _duration(BUDGET_S["full"])
    text = "\n".join(
        [
            "# iclr26 reproduction reports",
            "",
            f"Generated {datetime.now(UTC).isoformat(timespec='seconds')}. "
            f"**{total} experiment{'' if total == 1 else 's'}: {counts['held']} held, "
            f"{counts['not held']} not held, {counts['error']} error.** "
            f"Claims: {n_claims_held} of {n_claims} held.",
            "",
            "Each verdict applies only to the miniature scale that was run (see each report). "
            "An experiment is held only if every one of its claims holds. Budget per experiment "
            f"on 2 CPU cores, process start to result: full {full_budget}, quick {quick_budget}.",
            "",
            "| Experiment | Paper | Verdict | Claims held | Mode | Wall time | Device | Run "
            "| Report |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            "## Claims",
            "",
            *claim_sections,
        ]
    )
    index = reports_dir / "index.md"
    atomic_write_text(index, text)
    return index
