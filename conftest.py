"""Workspace-wide test guard: no test may leave files in the repository root.

A CLI test that forgets ``--trainer.default_root_dir`` or a temporary working directory writes
``config.yaml`` / ``lightning_logs/`` into the folder pytest was started from, which for a user is
their own folder. The session fails if the root holds entries it did not hold at the start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
_BEFORE: set[str] = set()


def pytest_sessionstart(session: pytest.Session) -> None:
    _BEFORE.update(p.name for p in ROOT.iterdir())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Only the main process checks (pytest-xdist workers have no view of the whole session).
    if hasattr(session.config, "workerinput"):
        return
    new = sorted(p.name for p in ROOT.iterdir() if p.name not in _BEFORE)
    new = [name for name in new if name not in {".pytest_cache", ".hypothesis", "__pycache__"}]
    if new:
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(
            f"ERROR: tests left files in the repository root: {', '.join(new)}", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
