"""What ``atomistic-scaling sweep`` keeps in its ``--out`` folder while it works, so that an
interrupted sweep (Ctrl-C, a crash, a lost machine) loses at most the job that was running.

- ``sweep-settings.json``: every option that decides the numbers (not ``--out``, ``--workers``
  or ``--quiet``), written when the sweep starts; ``--resume`` refuses other settings, naming
  the first that differs.
- ``jobs/<arch>_w<width>_seed<seed>.json``: the records of one finished (arch, width, seed)
  job (its runs over every D), written atomically the moment it finishes; ``--resume`` reads
  them back and trains only the missing jobs.

The folder itself is checked and marked partial by :func:`iclr26_common.outputs.check_out_folder`
(the marker goes when the tables and plots are written).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import UsageError
from iclr26_common.outputs import check_resume_settings, record_settings, write_text

__all__ = ["JOBS_DIR", "SETTINGS_FILE", "SweepFolder"]

JOBS_DIR = "jobs"
SETTINGS_FILE = "sweep-settings.json"
#: The files a finished sweep writes (``--overwrite`` removes them with the jobs and settings).
RESULT_FILES = ("records.json", "fits.json", "fits.md", "loss_vs_compute.png", "loss_vs_data.png")


class SweepFolder:
    """The sweep's ``--out`` folder (``path``) and the ``settings`` of this run."""

    def __init__(self, path: Path, settings: dict[str, Any]) -> None:
        self.path = Path(path)
        self.settings = dict(settings)

    @property
    def jobs_dir(self) -> Path:
        return self.path / JOBS_DIR

    def job_path(self, job: tuple[str, int, int]) -> Path:
        arch, width, seed = job
        return self.jobs_dir / f"{arch}_w{width}_seed{seed}.json"

    def resume(self) -> dict[tuple[str, int, int], list[dict[str, Any]]]:
        """The finished jobs of the interrupted sweep in :attr:`path`, after checking that it
        ran with these settings (:func:`iclr26_common.outputs.check_resume_settings`: one line
        naming the first difference)."""
        check_resume_settings(self.path / SETTINGS_FILE, self.settings, "sweep")
        done: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
        for path in sorted(self.jobs_dir.glob("*.json")):
            try:
                runs = json.loads(path.read_text(encoding="utf-8"))
                first = runs[0]
                job = (str(first["arch"]), int(first["width"]), int(first["seed"]))
            except (ValueError, TypeError, KeyError, IndexError) as error:
                raise UsageError(
                    f"--resume: {path} is not a finished sweep job ({error}); delete it or "
                    "pass --overwrite"
                ) from None
            done[job] = runs
        return done

    def remove_earlier(self) -> None:
        """``--overwrite``: remove what an earlier sweep wrote here; other files stay."""
        shutil.rmtree(self.jobs_dir, ignore_errors=True)
        for name in (*RESULT_FILES, SETTINGS_FILE):
            (self.path / name).unlink(missing_ok=True)

    def start(self, resumed: bool) -> None:
        """Record the settings (a resumed sweep keeps those it checked)."""
        if not resumed:
            record_settings(self.path / SETTINGS_FILE, self.settings)

    def save_job(self, job: tuple[str, int, int], runs: list[dict[str, Any]]) -> Path:
        """Write one finished job's records (atomically, mode 0644)."""
        return write_text(self.job_path(job), json.dumps(runs, indent=1))

    def write_text(self, name: str, text: str) -> Path:
        return write_text(self.path / name, text)
