"""JSON-lines input shared by the methods' dataset readers (GSM8K, BabiLong, BeaverTails, traces...).

Every error names the place: ``FILE: no such file``, ``FILE:LINE: not valid JSON (...)``,
``FILE:LINE: expected a JSON object``, ``FILE:LINE: missing field 'x'``, ``FILE: no records``,
``FILE: not UTF-8 text (byte 0xff at offset 0)`` (every text reader of the package goes through
:func:`read_text`).
Blank lines are skipped; nothing else is. A ``.gz`` file is read through gzip (HumanEval ships
``HumanEval.jsonl.gz``). The error type is the caller's (a ``ValueError``
subclass such as :class:`~llm_methods.lm.errors.LMError`), so the CLI prints one line, exit 2.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from llm_methods.lm.errors import LMError

__all__ = ["finished_run", "iter_jsonl", "read_jsonl", "read_text"]


def read_text(path: str | Path, error: type[ValueError] = LMError, what: str = "file") -> str:
    """The UTF-8 text of ``path`` (``.gz``: decompressed), read by the workspace's
    :func:`iclr26_common.textio.read_text`: a missing file raises ``FileNotFoundError("FILE: no
    such WHAT")``, a folder ``IsADirectoryError("FILE: is a folder; give a WHAT")``, bytes that
    are not UTF-8 (or a ``.gz`` that is not gzip) ``error("FILE: not UTF-8 text (byte 0x.. at
    offset N); ...")``: one line naming the file. The error is raised again here, so the
    console script judges it this package's own bad input (``is_user_error``: a ``ValueError``
    raised in ``llm_methods``), whatever ``error`` class the reader passes."""
    from iclr26_common import textio

    try:
        return textio.read_text(path, what, error=error)
    except error as err:
        raise error(str(err)) from None


def iter_jsonl(
    path: str | Path,
    required: Sequence[str] = (),
    error: type[ValueError] = LMError,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, record)`` for each non-blank line, ``where = "FILE:LINE"``; each record is
    a JSON object holding every ``required`` field. Raises ``FileNotFoundError`` for a missing
    file and ``error`` for anything malformed."""
    import json

    path = Path(path)
    for number, line in enumerate(read_text(path, error).split("\n"), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise error(f"{where}: not valid JSON ({err.msg})") from None
        if not isinstance(record, dict):
            raise error(f"{where}: expected a JSON object")
        for name in required:
            if name not in record:
                raise error(f"{where}: missing field {name!r}")
        yield where, record


def read_jsonl(
    path: str | Path,
    required: Sequence[str] = (),
    error: type[ValueError] = LMError,
    limit: int | None = None,
    what: str = "records",
) -> list[tuple[str, dict[str, Any]]]:
    """:func:`iter_jsonl` into a list (at most ``limit`` records); a file without any record
    raises ``error("FILE: no WHAT")`` rather than returning nothing."""
    out = []
    for item in iter_jsonl(path, required, error):
        out.append(item)
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise error(f"{path}: no {what}")
    return out


def finished_run(path: str | Path, method: str, command: str) -> tuple[Path, dict[str, Any]]:
    """``(predictions.jsonl, its summary)`` of one finished run of ``command`` (``ltpo solve``,
    ``perk eval``) for ``method``: ``path`` is its ``--out`` folder or its ``predictions.jsonl``.
    A missing file, an unfinished run (no ``summary.json`` beside it), a summary that is not
    JSON, or a run of another ``method`` (the summary's ``method`` field) is a ``ValueError`` of
    one line naming the file (the ``judge`` commands of LTPO and PERK)."""
    import json

    path = Path(path)
    predictions = path / "predictions.jsonl" if path.is_dir() else path
    summary_path = predictions.parent / "summary.json"
    if not predictions.is_file():
        raise ValueError(f"{predictions}: no such file (the {method} run's `{command}` output)")
    if not summary_path.is_file():
        raise ValueError(
            f"{summary_path}: no such file: the {method} run is unfinished (continue it with "
            f"{command} --resume)"
        )
    try:
        summary = json.loads(read_text(summary_path, ValueError))
    except json.JSONDecodeError as err:
        raise ValueError(f"{summary_path}: not valid JSON ({err.msg})") from None
    got = summary.get("method") if isinstance(summary, dict) else None
    if got != method:
        raise ValueError(f"{summary_path}: field 'method' is {got!r}, expected {method!r}")
    return predictions, summary
