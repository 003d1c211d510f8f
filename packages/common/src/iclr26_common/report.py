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

from iclr26_common.registry import Experiment, Result

__all__ = ["STATUSES", "atomic_write_text", "write_index", "write_result"]

STATUSES = ("held", "not held", "error")
Status = Literal["held", "not held", "error"]
SCHEMA_VERSION = 1

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


def _render_report(data: dict[str, Any], out_dir: Path) -> str:
    mode = "quick" if data["quick"] else "full"
    seeds = ", ".join(str(s) for s in data["seeds"]) or "—"
    versions = ", ".join(f"{k} {v}" for k, v in data["versions"].items()) or "unknown"
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
        f"- **Duration:** {_duration(data['duration_s'])}",
        f"- **Run at:** {data['timestamp']} on {data['platform']}, Python {data['python']}",
        f"- **Versions:** {versions}",
        "",
    ]
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
) -> None:
    """Write ``out_dir/report.md`` then ``out_dir/result.json``, each atomically.

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
    data: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "name": experiment.name,
        "paper": experiment.paper,
        "claim": experiment.claim,
        "status": status,
        "verdict": r.verdict if r else None,
        "summary": r.summary if r else "",
        "metrics": metrics,
        "seeds": list(r.seeds) if r else [],
        "scale": r.scale if r else "",
        "table_markdown": r.table_markdown if r else "",
        "plots": [_relative_plot(p, out_dir) for p in r.plots] if r else [],
        "details": r.details if r else "",
        "error": (error or "(no error message)") if status == "error" else error,
        "duration_s": round(float(duration_s), 3),
        "quick": bool(quick),
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "distribution": experiment.distribution,
        "versions": _versions(experiment.distribution),
    }
    atomic_write_text(out_dir / "report.md", _render_report(data, out_dir))
    atomic_write_text(out_dir / "result.json", json.dumps(data, indent=2, default=str) + "\n")


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def write_index(reports_dir: Path) -> Path:
    """Write ``reports_dir/index.md`` summarising every ``*/result.json`` and return its path.

    A result.json that cannot be read is listed as an error instead of failing.
    """
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    rows: list[str] = []
    counts = dict.fromkeys(STATUSES, 0)
    for path in sorted(reports_dir.glob("*/result.json")):
        exp_dir = path.parent.name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError(f"top level is a {type(data).__name__}, not an object")
        except (OSError, ValueError) as exc:
            data = {"claim": f"unreadable result.json: {type(exc).__name__}: {exc}"}
            data["status"] = "error"
        status = data.get("status")
        if status not in STATUSES:
            status = "error"
        counts[status] += 1
        has_report = (path.parent / "report.md").is_file()
        quick = data.get("quick")
        cells = [
            str(data.get("name") or exp_dir),
            str(data.get("paper") or "?"),
            _short(data.get("claim") or "?"),
            "**error**" if status == "error" else status,
            "?" if quick is None else ("quick" if quick else "full"),
            _duration(data.get("duration_s")),
        ]
        link = f"[report.md]({exp_dir}/report.md)" if has_report else "—"
        rows.append("| " + " | ".join(_cell(c) for c in cells) + f" | {link} |")
    total = sum(counts.values())
    text = "\n".join(
        [
            "# iclr26 reproduction reports",
            "",
            f"Generated {datetime.now(UTC).isoformat(timespec='seconds')}. "
            f"**{total} experiment{'' if total == 1 else 's'}: {counts['held']} held, {counts['not held']} not held, "
            f"{counts['error']} error.**",
            "",
            "Each verdict applies only to the miniature scale that was run (see each report).",
            "",
            "| Experiment | Paper | Claim | Verdict | Mode | Duration | Report |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    index = reports_dir / "index.md"
    atomic_write_text(index, text)
    return index
