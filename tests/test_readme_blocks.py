"""Every ```python block of every README runs as written (issue 36).

Each block runs in a fresh interpreter in an empty folder, on the CPU, as a user would paste it.
A block that can only run on a user's own files starts with the line ``# requires: <what>``: it
is skipped with that reason, and a README may hold at most one such block. Blocks that do not run
yet are listed in ``NOT_YET`` as strict xfails: each package issue of this wave removes its
entries, and an entry whose block starts to run fails here until it is removed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
REQUIRES = "# requires:"
TIMEOUT_S = 600

#: "README path:block number" of the blocks that did not run as written on 2026-12-06 (b47f8b7:
#: undefined names such as `lm`, `model`, `chunks`, files that do not exist, or minutes of
#: training). Remove an entry when its block runs.
NOT_YET: dict[str, str] = {}


def _readmes() -> list[Path]:
    tracked = subprocess.run(
        ["git", "ls-files", "*README.md"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    found = [ROOT / p for p in tracked] if tracked else sorted(ROOT.glob("**/README.md"))
    return [p for p in found if ".venv" not in p.parts and "tests" not in p.parts and p.is_file()]


def _blocks() -> list[tuple[str, str]]:
    out = []
    for readme in _readmes():
        for i, match in enumerate(BLOCK.finditer(readme.read_text(encoding="utf-8")), 1):
            out.append((f"{readme.relative_to(ROOT).as_posix()}:{i}", match.group(1)))
    return out


BLOCKS = _blocks()


def test_the_blocks_are_found() -> None:
    assert len(BLOCKS) >= 20, [key for key, _ in BLOCKS]
    assert set(NOT_YET) <= {key for key, _ in BLOCKS}, set(NOT_YET) - {k for k, _ in BLOCKS}


def test_at_most_one_block_per_readme_needs_the_users_files() -> None:
    per_readme: dict[str, int] = {}
    for key, code in BLOCKS:
        if code.lstrip().startswith(REQUIRES):
            readme = key.rsplit(":", 1)[0]
            per_readme[readme] = per_readme.get(readme, 0) + 1
    assert all(n <= 1 for n in per_readme.values()), per_readme


@pytest.mark.parametrize(
    ("key", "code"),
    [
        pytest.param(
            key,
            code,
            id=key,
            marks=[pytest.mark.xfail(reason=NOT_YET[key], run=False)] if key in NOT_YET else [],
        )
        for key, code in BLOCKS
    ],
)
def test_readme_block_runs_as_written(key: str, code: str, tmp_path: Path) -> None:
    first = code.lstrip().splitlines()[0] if code.strip() else ""
    if first.startswith(REQUIRES):
        pytest.skip(first[len(REQUIRES) :].strip() or "the user's own files")
    env = {
        **os.environ,
        "ICLR26_DEVICE": "cpu",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
        "MPLBACKEND": "Agg",
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, f"{key} failed:\n{proc.stderr[-3000:]}"
