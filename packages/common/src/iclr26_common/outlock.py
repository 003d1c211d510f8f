"""The output-folder lock: one ``iclr26 reproduce`` at a time writes into a reports folder.

:class:`OutputLock` holds an ``flock`` on ``OUT/.iclr26.lock``, which records the holder (pid,
host, run id, start). The workers inherit the open file, so orphaned workers of a killed run
still hold it; the kernel drops it when the last of them exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["LOCK_FILE", "OutputLock", "OutputLocked", "held_lock", "lock_is_free"]

LOCK_FILE = ".iclr26.lock"
LOCK_POLL_S = 0.2
_HELD: dict[Path, OutputLock] = {}  # reports folders whose lock this process holds


class OutputLocked(RuntimeError):
    """Another live run holds the reports folder; the message is one line naming it."""


class OutputLock:
    """``flock`` on ``OUT/.iclr26.lock``, which records the holder (pid, host, run id, start).

    The lock belongs to the open file: the kernel drops it when every process holding the file
    is gone (no stale lock after a crash), and the workers inherit it (``pass_fds``), so workers
    orphaned by a killed ``reproduce`` keep their folders safe from the next run.
    """

    def __init__(self, folder: Path, run_id: str) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.run_id = run_id
        self.fd: int | None = None

    def holder(self) -> str:
        """Who holds the lock, in words, from the lock file."""
        try:
            info = json.loads(self.path.read_text(encoding="utf-8"))
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return "another iclr26 run (no details recorded)"
        alive = True
        if info.get("host") == socket.gethostname():
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                alive = False
            except PermissionError:
                pass
        text = f"run {info.get('run_id')} (pid {pid} on {info.get('host')}, since "
        text += f"{info.get('started')})"
        return text + ("" if alive else "; that process is gone, its workers still run")

    def acquire(self, wait: bool = False, on_wait: Callable[[str], None] | None = None) -> None:
        """Take the lock; raise :class:`OutputLocked` if another run holds it (or, with
        ``wait``, poll until it is free, calling ``on_wait(holder)`` once)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait:
                    os.close(fd)
                    raise OutputLocked(
                        f"{self.folder} is in use by {self.holder()}; wait for it to finish, "
                        "pass --wait, or use another --out"
                    ) from None
                if not waited and on_wait is not None:
                    on_wait(self.holder())
                waited = True
                try:
                    time.sleep(LOCK_POLL_S)
                except BaseException:
                    os.close(fd)
                    raise
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "run_id": self.run_id,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self.fd = fd
        _HELD[self.folder.resolve()] = self

    def release(self) -> None:
        if self.fd is not None:
            _HELD.pop(self.folder.resolve(), None)
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    @contextlib.contextmanager
    def held(
        self, wait: bool = False, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[OutputLock]:
        self.acquire(wait, on_wait)
        try:
            yield self
        finally:
            self.release()


def held_lock(folder: Path) -> OutputLock | None:
    return _HELD.get(Path(folder).resolve())


def lock_is_free(folder: Path) -> bool:
    """True if no process holds ``folder``'s lock (it is not taken by this check)."""
    path = Path(folder) / LOCK_FILE
    if not path.exists():
        return True
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the probe's lock
    return True
