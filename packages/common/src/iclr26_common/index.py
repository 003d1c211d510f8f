"""Write the reports folder's ``index.md`` and record failed attempts under ``_attempts/``.

``index.md`` lists every ``NAME/result.json`` of one mode folder (read with
:func:`report.read_result`) with its verdict, claims held, wall time and run, then every claim.
A worker that died without a result while an earlier result was kept is recorded by
:func:`write_attempt` in ``_attempts/NAME.json`` + ``.log`` and shown next to that result.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iclr26_common.progress import format_duration
from iclr26_common.registry import BUDGET_S
from iclr26_common.report import (
    INCONCLUSIVE_KINDS,
    atomic_write_text,
    claim_counts,
    claim_kind,
    claim_tally,
    effect_text,
    md_cell,
    read_result,
    verdict_text,
)

__all__ = ["ATTEMPTS_DIR", "clear_attempt", "write_attempt", "write_index"]

# Under the reports folder: one JSON per experiment whose latest attempt died without a result
# while an earlier result was kept. Starts with "_" so it can never be an experiment's name.
ATTEMPTS_DIR = "_attempts"


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
    text = format_duration(wall, decimals=1)
    return text + (" ⚠ over budget" if data.get("within_budget") is False else "")


def _effect_text(claim: dict[str, Any]) -> str:
    return effect_text(claim, point_estimate=": " + str(claim.get("criterion", "?")))


def _claims_held(data: dict[str, Any]) -> str:
    if not data["claims"]:
        return "— (single verdict)" if data["status"] != "error" else "—"
    held, n, inconclusive = claim_counts(data["claims"])
    return f"{held}/{n}" + (f" ({inconclusive} inconclusive)" if inconclusive else "")


#: What index.md counts experiments by: an inconclusive experiment counts as "control failed"
#: when any of its inconclusive claims had a failed control, else as "underpowered".
HEADLINE_KINDS = ("held", "not held", *INCONCLUSIVE_KINDS, "error")


def _experiment_kind(data: dict[str, Any]) -> str:
    status = data["status"]
    if status != "inconclusive":
        return status
    kinds = [claim_kind(c) for c in data["claims"] if isinstance(c, dict)]
    return (
        INCONCLUSIVE_KINDS[0]
        if INCONCLUSIVE_KINDS[0] in kinds or not kinds
        else (INCONCLUSIVE_KINDS[1])
    )


def _load_attempts(reports_dir: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((reports_dir / ATTEMPTS_DIR).glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(record, dict):
                out[path.stem] = record
    return out


def write_index(
    reports_dir: Path,
    run_id: str | None = None,
    *,
    registered: list[str] | None = None,
    mode: str | None = None,
) -> Path:
    """Write ``reports_dir/index.md`` over every ``*/result.json`` and return its path.

    Lists each experiment's verdict, claims held, mode, wall time (marked when over budget),
    device and whether it comes from this invocation (``run_id``) or an earlier run (with its
    date), then every claim with its verdict. Unreadable results are listed as errors. With
    ``registered`` (the experiment names) and ``mode`` ("full" / "quick"), the headline counts
    only registered experiments of that mode; other folders are listed under "Not counted" and
    registered experiments without a result under "Not run".
    """
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    attempts = _load_attempts(reports_dir)
    rows: list[str] = []
    leftovers: list[str] = []
    claim_sections: list[str] = []
    counted: set[str] = set()
    counts = dict.fromkeys(HEADLINE_KINDS, 0)
    claims_tally = dict.fromkeys(HEADLINE_KINDS, 0)
    for path in sorted(reports_dir.glob("*/result.json")):
        exp_dir = path.parent.name
        if exp_dir.startswith((".", "_")):
            continue  # temporary run folders and bookkeeping, never results
        data = read_result(path)
        status = data["status"]
        quick = data.get("quick")
        when = _when(data, run_id)
        link = f"[report.md]({exp_dir}/report.md)" if (path.parent / "report.md").is_file() else "—"
        why = None
        if registered is not None and exp_dir not in registered:
            why = "not a registered experiment"
        elif mode is not None and quick is not None and quick != (mode == "quick"):
            why = f"a {'quick' if quick else 'full'} result in the {mode} folder"
        if why is not None:
            cells = [exp_dir, "**error**" if status == "error" else status, when, why]
            leftovers.append("| " + " | ".join(md_cell(c) for c in cells) + f" | {link} |")
            continue
        counted.add(exp_dir)
        counts[_experiment_kind(data)] += 1
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
        rows.append("| " + " | ".join(md_cell(c) for c in cells) + f" | {link} |")

        claims = [c for c in data["claims"] if isinstance(c, dict)]
        verdict = "**error**" if status == "error" else status
        section = [f"### {data.get('name') or exp_dir} — {verdict}", ""]
        if claims:
            for kind, count in claim_tally(claims).items():
                claims_tally[kind] += count
            section += [
                "| # | Claim | Effect [95 % interval] vs threshold | Verdict |",
                "|---|---|---|---|",
            ]
            for i, claim in enumerate(claims, 1):
                cells = [str(i), claim.get("text", "?"), _effect_text(claim)]
                cells.append(verdict_text(claim))
                section.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
        elif status == "error":
            section.append(f"No claims judged: {_short(data.get('error') or '?', 200)}")
        else:
            section.append(f"Single verdict (no per-claim breakdown): {_short(data['claim'], 200)}")
        claim_sections += [*section, ""]
    total = sum(counts.values())
    tally = ", ".join(f"{counts[s]} {s}" for s in HEADLINE_KINDS)
    claim_line = ", ".join(f"{claims_tally[s]} {s}" for s in HEADLINE_KINDS)
    if registered is not None:
        missing = sorted(set(registered) - counted)
        scope = f" ({mode} mode)" if mode else ""
        headline = f"{total} of {len(registered)} registered experiments{scope}: {tally}"
        headline += f"; {len(missing)} not run" if missing else ""
    else:
        missing = []
        headline = f"{total} experiment{'' if total == 1 else 's'}: {tally}"
    quick_budget, full_budget = (
        format_duration(BUDGET_S["quick"], decimals=1),
        format_duration(BUDGET_S["full"], decimals=1),
    )
    extra: list[str] = []
    if leftovers:
        extra += ["## Not counted", "", "| Folder | Verdict | Run | Why | Report |"]
        extra += ["|---|---|---|---|---|", *leftovers, ""]
    if missing:
        extra += ["## Not run", "", "Registered, without a result here: " + ", ".join(missing)]
        extra.append("")
    text = "\n".join(
        [
            "# iclr26 reproduction reports" + (f" ({mode} mode)" if mode else ""),
            "",
            f"Generated {datetime.now(UTC).isoformat(timespec='seconds')}. **{headline}.** "
            f"Claims ({sum(claims_tally.values())}): {claim_line}.",
            "",
            "Each verdict applies only to the miniature scale that was run (see each report). "
            "An experiment is held only if every one of its claims holds, not held if any claim "
            "is not held, otherwise inconclusive. A claim is held or not held only when the whole "
            "95 % interval of its effect lies on one side of its pre-registered threshold; it is "
            "inconclusive (underpowered) when the interval straddles the threshold, and "
            "inconclusive (control failed) when a pre-registered control failed. Budget per "
            "experiment on 2 CPU cores, process "
            f"start to result: full {full_budget}, quick {quick_budget}.",
            "",
            "| Experiment | Paper | Verdict | Claims held | Mode | Wall time | Device | Run "
            "| Report |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            *extra,
            "## Claims",
            "",
            *claim_sections,
        ]
    )
    index = reports_dir / "index.md"
    atomic_write_text(index, text)
    return index
