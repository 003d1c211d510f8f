"""The promises every command keeps about its outputs (stdlib only).

- **Checked before any work**: :func:`check_out_folder` / :func:`check_out_file` refuse a bad
  output path in one line naming the option and what it must be (``--out results.txt: exists and
  is a file; give a folder``), before a model is loaded or a minute is spent.
- **Nothing overwritten**: a folder holding complete earlier results is refused unless
  ``--overwrite``; a folder an interrupted run marked partial is continued with ``--resume`` and
  refused without it (or started again with ``--overwrite``); an existing output file is refused
  unless ``--overwrite``.
- **Nothing that looks complete when it is not**: :class:`OutputFolder` marks the folder partial
  (``.iclr26-partial``) while the command works and unmarks it only when the work finished; a run
  refused or failed before it wrote anything leaves no empty folder behind.
- **A resume continues the same run**: :func:`record_settings` writes the options that decide a
  resumable command's numbers into its output folder when it starts; :func:`check_resume_settings`
  refuses ``--resume`` with other settings, in one line naming the first that differs.
- **One set of options**: :func:`add_output_options` adds ``--out``, ``--overwrite`` and (for a
  resumable command) ``--resume`` with one wording everywhere, ``--overwrite`` and ``--resume``
  mutually exclusive through argparse; :func:`check_output_options` checks the parsed values with
  :func:`check_out_folder` / :func:`check_out_file`.
- **Ordinary permissions**: :func:`write_bytes` / :func:`write_text` write atomically (a temporary
  file in the same folder, then ``os.replace``) with mode 0644, like any other tool's output;
  :func:`publish` gives a file or folder another library wrote (safetensors: 0600) the same
  modes.

Errors are :class:`OutputError` (a :class:`~iclr26_common.cli_support.UsageError`): one line, exit
status 2 through :func:`~iclr26_common.cli_support.run_with_one_line_errors`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from iclr26_common.cli_support import UsageError

__all__ = [
    "FILE_MODE",
    "FOLDER_MODE",
    "PARTIAL_MARKER",
    "RESUME_HELP",
    "OutputError",
    "OutputFolder",
    "add_output_options",
    "check_out_file",
    "check_out_folder",
    "check_output_options",
    "check_resume_settings",
    "compare_settings",
    "overwrite_help",
    "publish",
    "record_settings",
    "write_bytes",
    "write_text",
]

#: The marker file of a folder whose command has not finished (interrupted, failed, running).
PARTIAL_MARKER = ".iclr26-partial"
#: The mode of every output file (what ``umask 022`` gives any other tool's output).
FILE_MODE = 0o644
#: The mode of every output folder.
FOLDER_MODE = 0o755


class OutputError(UsageError):
    """A bad output path: one line naming the option, exit status 2."""


def _creatable(path: Path, option: str) -> None:
    """Fail unless ``path``'s nearest existing ancestor is a writable folder."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{option} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {path}: cannot write into {parent} (permission denied)")


class OutputFolder:
    """An output folder checked before the work (:func:`check_out_folder`); use it as a context
    manager around the work::

        out = check_out_folder(args.out, overwrite=args.overwrite, resume=args.resume)
        with out:                     # creates the folder and marks it partial
            ...                       # the work, writing files into out.path
        # left normally: the folder is complete (marker removed)

    Leaving with an exception (Ctrl-C included) keeps the marker, so the folder never looks
    complete; a folder this command created and left empty (the work failed before writing
    anything) is removed, and for a command that is not ``resumable`` an existing folder it left
    empty loses the marker again (a rerun is not refused for an empty folder). ``resumed``: the
    folder held an interrupted run's partial results and ``--resume`` was given (finished pieces
    are in it: skip them).
    """

    def __init__(self, path: Path, *, created: bool, resumed: bool, resumable: bool = True) -> None:
        self.path = path
        self.created = created
        self.resumed = resumed
        self.resumable = resumable

    @property
    def marker(self) -> Path:
        return self.path / PARTIAL_MARKER

    def __enter__(self) -> OutputFolder:
        self.path.mkdir(parents=True, exist_ok=True)
        self.marker.write_text(
            "This folder holds the partial output of a command that has not finished; rerun it "
            "with --resume to continue or --overwrite to start again.\n",
            encoding="utf-8",
        )
        os.chmod(self.marker, FILE_MODE)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            with contextlib.suppress(FileNotFoundError):
                self.marker.unlink()
            return
        if not self.path.is_dir() or {p.name for p in self.path.iterdir()} - {PARTIAL_MARKER}:
            return  # something was written: the marker stays
        if self.created:
            shutil.rmtree(self.path, ignore_errors=True)
        elif not self.resumable:
            with contextlib.suppress(FileNotFoundError):
                self.marker.unlink()


def check_out_folder(
    path: str | os.PathLike[str],
    *,
    option: str = "--out",
    overwrite: bool = False,
    resume: bool = False,
    resumable: bool = True,
) -> OutputFolder:
    """Check an output folder before any work; nothing is created yet (see
    :class:`OutputFolder`).

    Refused, in one line naming ``option``: a path that exists and is not a folder; a folder
    holding earlier complete results (any entry) without ``overwrite``; a folder an interrupted
    run marked partial without ``resume`` or ``overwrite``; ``resume`` on a folder that holds
    nothing to resume; a folder that cannot be created or written.

    ``resumable=False``: the command has no ``--resume`` (it writes its files at the end): a
    partial folder is refused with a hint at ``--overwrite`` alone, and a folder it leaves empty
    after a failure is not left marked partial.
    """
    if resume and not resumable:
        raise ValueError("resume=True for a command that is not resumable")
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{option} {folder}: exists and is a file; give a folder")
    if not folder.exists():
        if resume:
            raise OutputError(f"{option} {folder}: does not exist; there is nothing to resume")
        _creatable(folder, option)
        return OutputFolder(folder, created=True, resumed=False, resumable=resumable)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {folder}: cannot write into it (permission denied)")
    entries = {p.name for p in folder.iterdir()}
    partial = PARTIAL_MARKER in entries
    if partial and resume:
        return OutputFolder(folder, created=False, resumed=True)
    if overwrite:
        return OutputFolder(folder, created=False, resumed=False, resumable=resumable)
    if partial:
        how = "pass --resume to continue it or --overwrite" if resumable else "pass --overwrite"
        raise OutputError(
            f"{option} {folder}: holds the partial results of an interrupted run; {how} to "
            "start again"
        )
    if resume:
        raise OutputError(
            f"{option} {folder}: holds complete results, nothing to resume; pass --overwrite "
            "to replace them or give a new folder"
        )
    if entries:
        raise OutputError(
            f"{option} {folder}: holds earlier results; pass --overwrite to replace them or give "
            "a new folder"
        )
    return OutputFolder(folder, created=False, resumed=False, resumable=resumable)


def check_out_file(
    path: str | os.PathLike[str], *, option: str = "--out", overwrite: bool = False
) -> Path:
    """Check an output file before any work: refused when it is a folder, when it exists and
    ``overwrite`` is not given, or when its folder cannot be created or written."""
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"{option} {target}: is a folder; give a file name")
    if target.exists() and not overwrite:
        raise OutputError(f"{option} {target}: exists; pass --overwrite to replace it")
    _creatable(target, option)
    return target


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, then
    ``os.replace``), mode 0644, creating the folder; readers see the old file or the whole new
    one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8 with ``\\n`` line ends."""
    return write_bytes(path, text.encode("utf-8"))


def publish(path: str | os.PathLike[str]) -> Path:
    """Give what another library wrote the ordinary modes: ``path`` itself when a file (0644),
    or every file (0644) and folder (0755) under ``path`` when a folder. For writers that choose
    their own modes: safetensors (``save_pretrained``'s ``model.safetensors``, ``save_file``)
    creates its files 0600, ``tempfile`` folders are 0700. Symbolic links are left alone.
    Returns ``path``."""
    target = Path(path)
    if target.is_symlink():
        return target
    if target.is_file():
        os.chmod(target, FILE_MODE)
        return target
    for root, dirs, names in os.walk(target):
        os.chmod(root, FOLDER_MODE)
        for name in names:
            item = Path(root) / name
            if not item.is_symlink():
                os.chmod(item, FILE_MODE)
        dirs[:] = [d for d in dirs if not (Path(root) / d).is_symlink()]
    return target


def _plain(value: Any) -> Any:
    """``value`` as JSON gives it back (paths become strings, tuples lists)."""
    return json.loads(json.dumps(value, default=str))


def record_settings(path: str | os.PathLike[str], settings: Mapping[str, Any]) -> Path:
    """Write ``settings`` (the options that decide a resumable command's numbers, not where or
    how it writes) as the JSON file ``path`` (:func:`write_text`: atomic, mode 0644), for
    :func:`check_resume_settings` to compare a ``--resume`` against."""
    return write_text(path, json.dumps(_plain(dict(settings)), indent=1))


def check_resume_settings(
    path: str | os.PathLike[str],
    settings: Mapping[str, Any],
    noun: str,
    *,
    options: Mapping[str, str] | None = None,
) -> None:
    """A resumed run must continue the same run: refuse, in one line (:class:`OutputError`),
    ``--resume`` into a folder whose settings file ``path`` (:func:`record_settings`) is missing
    or unreadable, or records other ``settings`` than this run's, naming the first key that
    differs (sorted) with both values. ``noun`` names the run in the message (``"sweep"``,
    ``"benchmark"``); ``options`` maps a settings key to the option a user types for it (default
    ``--KEY``). Values are compared as JSON reads them back (tuples as lists, paths as
    strings)."""
    settings_file = Path(path)
    folder = settings_file.parent
    try:
        recorded = json.loads(settings_file.read_text(encoding="utf-8"))
        if not isinstance(recorded, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError):
        raise OutputError(
            f"--resume: {folder} holds no readable {settings_file.name} (no {noun} was started "
            "there); pass --overwrite to start again or give a new --out"
        ) from None
    compare_settings(recorded, settings, noun, folder, options=options)


def compare_settings(
    recorded: Mapping[str, Any],
    settings: Mapping[str, Any],
    noun: str,
    where: str | os.PathLike[str],
    *,
    options: Mapping[str, str] | None = None,
) -> None:
    """The comparison of :func:`check_resume_settings`, for a command that keeps its recorded
    settings inside another file (``mas2 train``'s ``cto-state.json``, ``suit edit``'s
    safetensors metadata): ``recorded`` (as JSON read it back) against this run's ``settings``;
    the first key that differs (sorted) is one line (:class:`OutputError`) naming its option
    (``options``, default ``--KEY``), both values, ``noun`` and ``where`` the run was."""
    current = _plain(dict(settings))
    recorded = dict(recorded)
    differ = [k for k in sorted(set(recorded) | set(current)) if recorded.get(k) != current.get(k)]
    if differ:
        key = differ[0]
        option = (options or {}).get(key, f"--{key}")
        raise OutputError(
            f"--resume: the interrupted {noun} in {where} ran with {option} "
            f"{recorded.get(key)!r}, this one with {current.get(key)!r}; rerun with its "
            "settings, or pass --overwrite"
        )


#: ``--resume``'s help (``{option}``: the output option), for an output folder and for an output
#: file (whose finished pieces a command keeps beside it, as ``suit facts`` in ``OUT.partial/``).
RESUME_HELP = {
    "folder": "continue the interrupted run whose partial results {option} holds (its finished "
    "pieces are kept, not redone)",
    "file": "continue the interrupted run that was writing {option} (its finished pieces, kept "
    "beside it, are not redone)",
}
_OUT_HELP = {
    "folder": "output folder (new or empty; see --overwrite)",
    "file": "output file (new; see --overwrite)",
}


def overwrite_help(option: str = "--out", kind: Literal["folder", "file"] = "folder") -> str:
    """The one help text of ``--overwrite`` for the output ``option`` (a folder or a file)."""
    if kind == "file":
        return f"replace an existing {option}"
    return f"replace the earlier results in {option}"


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def add_output_options(
    parser: argparse.ArgumentParser,
    *,
    kind: Literal["folder", "file"] = "folder",
    required: bool = True,
    resumable: bool = False,
    help: str | None = None,
    option: str = "--out",
    type: Any = Path,
    default: Any = None,
) -> None:
    """Add the output options every command that writes results has: ``option`` (``--out``; a
    ``kind`` folder or file, ``help`` its help; ``default`` unless ``required``), ``--overwrite``
    and, when ``resumable``, ``--resume``, with the one wording (:func:`overwrite_help`,
    :data:`RESUME_HELP`; a resumable file command checks where it keeps its finished pieces
    itself). ``--overwrite`` and ``--resume`` are an argparse mutually exclusive
    group: both given is one line (``argument --resume: not allowed with argument
    --overwrite``), exit status 2 with :class:`~iclr26_common.cli_support.ArgumentParser`.
    Works on argparse and jsonargparse parsers; check the values with
    :func:`check_output_options`."""
    if kind not in _OUT_HELP:
        raise ValueError(f"kind must be 'folder' or 'file', got {kind!r}")
    parser.add_argument(
        option, type=type, required=required, default=default, help=help or _OUT_HELP[kind]
    )
    group = parser.add_mutually_exclusive_group() if resumable else parser
    group.add_argument("--overwrite", action="store_true", help=overwrite_help(option, kind))
    if resumable:
        group.add_argument(
            "--resume", action="store_true", help=RESUME_HELP[kind].format(option=option)
        )


def check_output_options(
    ns: Any,
    *,
    kind: Literal["folder", "file"] = "folder",
    option: str = "--out",
    path: str | os.PathLike[str] | None = None,
) -> OutputFolder | Path | None:
    """The options :func:`add_output_options` added, checked before any work: ``ns.out`` (the
    attribute of ``option``) through :func:`check_out_folder` (``kind="folder"``; resumable when
    ``ns`` has ``resume``) or :func:`check_out_file`, with ``ns.overwrite`` / ``ns.resume`` and
    the option's name in every message. ``None`` when the option is optional and not given.
    ``path``, when given, is checked in place of the option's value under the same rule: a
    folder the command derives from it (``suit facts`` keeps its finished chunks in
    ``OUT.partial/``). ``--overwrite`` with ``--resume`` (from a config file, which argparse's
    mutually exclusive group does not see) is one line (:class:`OutputError`)."""
    if getattr(ns, _dest(option)) is None:
        return None
    if path is None:
        path = getattr(ns, _dest(option))
    overwrite = bool(getattr(ns, "overwrite", False))
    resume = getattr(ns, "resume", None)
    if overwrite and resume:
        raise OutputError("--overwrite and --resume exclude each other")
    if kind == "file":
        return check_out_file(path, option=option, overwrite=overwrite)
    return check_out_folder(
        path, option=option, overwrite=overwrite, resume=bool(resume), resumable=resume is not None
    )
