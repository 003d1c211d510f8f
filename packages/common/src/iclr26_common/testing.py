"""What the test suites of the workspace's packages share, written once: running a command
in-process (:func:`run_main`) or as a console script (:func:`run_console_script`, :func:`run_ddp`),
the one-line error contract (:func:`assert_one_line_error`), the promises every console script
keeps (:class:`CliContract`, :func:`fit_beside_users_config`, :func:`assert_light_package`), and,
from :mod:`iclr26_common.stored`, stored outputs compared on any CPU.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import TRAINER_SUBCOMMANDS
from iclr26_common.stored import (
    assert_mutation_detected,
    assert_portable_close,
    regenerate_main,
    relative_error,
    write_stored_outputs,
)

__all__ = [
    "DDP_CPU_ARGS",
    "CliContract",
    "MainRun",
    "assert_cli_help",
    "assert_light_package",
    "assert_mutation_detected",
    "assert_one_line_error",
    "assert_portable_close",
    "console_script",
    "ddp_fit_checkpoint",
    "fast_dev_args",
    "fit_beside_users_config",
    "help_commands",
    "lightning_logs_to_current_stderr",
    "nonblank_lines",
    "only_file",
    "progress_line",
    "regenerate_main",
    "registered_experiment",
    "relative_error",
    "run_console_script",
    "run_ddp",
    "run_main",
    "shipped_configs",
    "write_stored_outputs",
]

#: Trainer options of a two-process DDP run on the CPU (gloo): what the multi-device tests add
#: to a package's tiny ``fit``.
DDP_CPU_ARGS = (
    "--trainer.strategy",
    "ddp",
    "--trainer.devices",
    "2",
    "--trainer.accelerator",
    "cpu",
)


@dataclass(frozen=True)
class MainRun:
    """What :func:`run_main` saw: the exit code (0 when ``main`` returned ``None``), stdout,
    stderr."""

    code: int | str | None
    out: str
    err: str


def run_main(
    main: Callable[[list[str]], Any],
    args: Sequence[str],
    capsys: Any,
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> MainRun:
    """Run ``main(list(args))`` in-process (in ``cwd`` if given, restored afterwards) and return
    its exit code and captured output. A ``SystemExit`` becomes the code; other exceptions
    propagate. ``capsys``: pytest's fixture; what was printed before is discarded."""
    lightning_logs_to_current_stderr()
    capsys.readouterr()
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        try:
            result = main(list(args))
        except SystemExit as exc:
            code = exc.code
        else:
            code = 0 if result is None else result
    captured = capsys.readouterr()
    return MainRun(code, captured.out, captured.err)


def console_script(name: str) -> Path:
    """The path of the installed console script ``name`` next to this interpreter (the venv's
    ``bin/``); ``FileNotFoundError`` when it is not installed."""
    folder = Path(sys.executable).parent
    for candidate in (folder / name, folder / f"{name}.exe"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"console script {name!r} is not installed in {folder}")


def run_console_script(
    name: str,
    args: Sequence[str],
    cwd: str | os.PathLike[str],
    *,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the console script ``name`` with ``args`` in ``cwd`` as a user would (a fresh
    process, so Lightning's ``ddp`` can re-run its command line for ranks > 0). One torch thread
    per process unless ``env`` says otherwise; returns the completed process (text output)."""
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [str(console_script(name)), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_ddp(
    name: str, args: Sequence[str], cwd: str | os.PathLike[str], **options: Any
) -> subprocess.CompletedProcess[str]:
    """Run the console script ``name`` with ``args`` plus :data:`DDP_CPU_ARGS` (two processes,
    gloo) through :func:`run_console_script` (``options``: its ``timeout``, ``env``), and assert
    what every package's DDP test needs: exit status 0, Lightning started two processes, and no
    "sync_dist" warning (epoch-level metrics logged without reduction over the ranks). Returns
    the completed process for the package's own checks (steps, files written by rank 0 alone:
    :func:`only_file`)."""
    proc = run_console_script(name, [*args, *DDP_CPU_ARGS], cwd, **options)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr, proc.stderr[-3000:]
    assert "sync_dist" not in proc.stderr, proc.stderr[-3000:]
    return proc


def fast_dev_args(
    root: str | os.PathLike[str], *options: str, command: str = "fit", config: str = "tiny"
) -> list[str]:
    """``COMMAND --config CONFIG *OPTIONS --trainer.fast_dev_run=1
    --trainer.default_root_dir=ROOT``: the one-batch LightningCLI run a package's tests make of
    a shipped config (``options`` override the config's values)."""
    return [
        command,
        "--config",
        config,
        *options,
        "--trainer.fast_dev_run=1",
        f"--trainer.default_root_dir={root}",
    ]


def ddp_fit_checkpoint(
    name: str, folder: str | os.PathLike[str], extra: Sequence[str] = ()
) -> dict[str, Any]:
    """``NAME fit --config tiny`` with a checkpoint, ``--trainer.default_root_dir=FOLDER`` and
    ``extra``, under DDP on two CPU processes (:func:`run_ddp`, run in ``folder``); asserts that
    rank 0 alone wrote: one ``config.yaml`` (no ``config-1.yaml`` from rank 1) and one
    checkpoint under ``folder``. Returns that checkpoint (``torch.load``, weights only) for the
    package's own checks (its step count)."""
    import torch

    args = [
        "fit",
        "--config",
        "tiny",
        *extra,
        "--trainer.enable_checkpointing=true",
        f"--trainer.default_root_dir={folder}",
    ]
    run_ddp(name, args, folder)
    assert only_file(folder, "config*.yaml").name == "config.yaml"
    return torch.load(only_file(folder, "*.ckpt"), map_location="cpu", weights_only=True)


def only_file(root: str | os.PathLike[str], pattern: str) -> Path:
    """The one file under ``root`` (recursively) whose name matches ``pattern``; fails when there
    are none or several (e.g. ``config*.yaml`` after DDP: rank 1 must not write a second one)."""
    found = sorted(p for p in Path(root).rglob(pattern) if p.is_file())
    assert len(found) == 1, f"expected one {pattern} under {root}, found {found}"
    return found[0]


def nonblank_lines(text: str) -> list[str]:
    """The lines of ``text`` that are not blank (what a test compares a command's stderr by)."""
    return [line for line in text.splitlines() if line.strip()]


def registered_experiment(name: str) -> Any:
    """What the one ``iclr26.experiments`` entry point named ``name`` loads (asserts there is
    exactly one): a package's test that ``iclr26 reproduce`` finds its experiment."""
    from importlib.metadata import entry_points

    from iclr26_common.registry import ENTRY_POINT_GROUP

    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    assert len(found) == 1, f"{len(found)} entry points named {name!r} in {ENTRY_POINT_GROUP}"
    return found[0].load()


def assert_cli_help(main: Callable[[list[str]], Any], args: Sequence[str] = ("--help",)) -> str:
    """Run ``main(list(args))`` in-process; assert it exits with status 0 after printing usage.

    Returns the captured stdout for further assertions.
    """
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
        else:
            raise AssertionError(f"main({list(args)!r}) returned instead of raising SystemExit")
    out = buf.getvalue()
    assert code in (0, None), f"main({list(args)!r}) exited with {code!r}; output:\n{out}"
    assert "usage" in out.lower(), f"no usage text on stdout for {list(args)!r}:\n{out!r}"
    return out


def help_commands(help_text: str) -> list[str]:
    """The subcommand names an argparse ``--help`` lists under its ``COMMAND`` argument, in
    order (e.g. ``["fit", "validate", "synth", "configs"]``): what a help test should compare,
    rather than searching the whole text for a word such as "test"."""
    lines = help_text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "COMMAND") + 1
    except StopIteration:
        raise AssertionError(f"no COMMAND list in the help text:\n{help_text}") from None
    names = []
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break  # the next section ("options:")
        if line.startswith("    ") and not line.startswith("     "):
            names.append(line.split()[0])
    return names


_PROGRESS_LINE = re.compile(r".+: \d+(/\d+)?(, \S.* elapsed(, about .* left)?)?( \(done\))?")


def progress_line(line: str) -> bool:
    """Whether ``line`` is a plain progress line of :func:`iclr26_common.progress.progress`
    (``DESCRIPTION: 0/10`` at the start, ``DESCRIPTION: 3/10, 12 s elapsed, about 28 s left``,
    ``... (done)``): what a test of a command's stderr leaves out of an error's one line."""
    return ": error: " not in line and _PROGRESS_LINE.fullmatch(line.strip()) is not None


def assert_one_line_error(
    main: Callable[[list[str]], Any],
    args: Sequence[str],
    capsys: Any,
    *,
    prog: str | None = None,
    skip: Callable[[str], bool] | None = None,
    drop_earlier: bool = False,
) -> str:
    """Run ``main(list(args))`` in-process and assert the CLI contract for bad input: exit status
    2, exactly one non-blank stderr line besides progress lines (:func:`progress_line`: a
    command that fails in its first item has printed its start line) and no traceback. Returns
    that line.

    ``capsys`` is pytest's fixture (anything with ``readouterr()``). ``prog``: the line must start
    with it. ``skip(line)``: lines to leave out of the count (a library's start-up chatter).
    ``drop_earlier``: discard what the test printed before this call. Lightning's log handlers
    are pointed at the current stderr first (:func:`lightning_logs_to_current_stderr`).
    """
    lightning_logs_to_current_stderr()
    if drop_earlier:
        capsys.readouterr()
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code
    else:
        raise AssertionError(f"main({list(args)!r}) returned instead of exiting with status 2")
    err = capsys.readouterr().err
    assert code == 2, f"main({list(args)!r}) exited with {code!r}; stderr:\n{err}"
    lines = [
        line
        for line in err.splitlines()
        if line.strip() and not progress_line(line) and not (skip and skip(line))
    ]
    assert len(lines) == 1 and "Traceback" not in err, err
    if prog is not None:
        assert lines[0].startswith(prog), lines[0]
    return lines[0]


def lightning_logs_to_current_stderr() -> None:
    """Point Lightning's log handlers at the current ``sys.stderr``.

    Lightning adds a ``StreamHandler`` bound to ``sys.stderr`` when it is first imported. Under
    pytest that is the capture of whichever test imported it first, closed once that test ends,
    so a later test that logs through Lightning ("Seed set to 0") gets "I/O operation on closed
    file" noise on its stderr. Call this at the start of a test that inspects stderr.
    """
    import logging
    import sys

    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "lightning_fabric"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.stream = sys.stderr  # setStream() would flush the closed stream


def _walk(node: Traversable) -> Iterator[Traversable]:
    for child in node.iterdir():
        if child.is_dir():
            yield from _walk(child)
        else:
            yield child


def shipped_configs(package: str) -> list[Path]:
    """The ``*.yaml`` files under the importable ``package``'s ``configs/`` folder, recursively.

    Raises ``FileNotFoundError`` when the folder is missing or holds no YAML file.
    """
    root = files(package) / "configs"
    if not root.is_dir():
        raise FileNotFoundError(f"package {package!r} has no configs/ folder")
    found = sorted(
        Path(str(node)) for node in _walk(root) if node.is_file() and node.name.endswith(".yaml")
    )
    if not found:
        raise FileNotFoundError(f"package {package!r} ships no configs/**/*.yaml")
    return found


# ------------------------------------------------------------------ every package's CLI promises


class CliContract:
    """The promises every package's console script keeps, as pytest tests written once: subclass
    it in the package's ``tests/test_cli.py`` (``class TestCliContract(CliContract)``) and set

    - ``package``: the import name (its ``cli.main`` is the console script, its
      ``__version__`` the version, its shipped ``configs/`` are parsed);
    - ``commands``: the package's own subcommands, in the order ``--help`` lists them after the
      ``lightning`` ones (default :data:`~iclr26_common.cli_support.TRAINER_SUBCOMMANDS`);
      ``commands_with_help``: those whose own ``--help`` is checked too (default: none);
    - ``check_config(printed, declared)``: what a shipped config's ``--print_config`` output
      must keep from the file (default: nothing beyond parsing).

    Tests: the ``--help`` lists; ``--version`` exits 0 printing the version and an unknown
    command exits 2; ``fit --config CONFIG --print_config`` exits 0 for every shipped config
    (one test per config, by stem).
    """

    package: str
    commands: Sequence[str]
    lightning: Sequence[str] = TRAINER_SUBCOMMANDS
    commands_with_help: Sequence[str] = ()

    def main(self, argv: list[str]) -> Any:
        """The package's console script (``PACKAGE.cli.main``)."""
        return import_module(f"{self.package}.cli").main(argv)

    def version(self) -> str:
        """The version ``--version`` prints (``PACKAGE.__version__``)."""
        return str(import_module(self.package).__version__)

    def check_config(self, printed: dict[str, Any], declared: dict[str, Any]) -> None:
        """Override: assert what ``printed`` (the resolved config) keeps from ``declared``."""

    def pytest_generate_tests(self, metafunc: Any) -> None:
        if "shipped_config" in metafunc.fixturenames:
            configs = shipped_configs(self.package)
            metafunc.parametrize("shipped_config", configs, ids=[p.stem for p in configs])

    def test_help_lists_every_subcommand(self) -> None:
        listed = help_commands(assert_cli_help(self.main))
        assert listed == [*self.lightning, *self.commands]
        for command in self.commands_with_help:
            assert_cli_help(self.main, [command, "--help"])

    def test_version_and_unknown_command(self, capsys: Any) -> None:
        version_run = run_main(self.main, ["--version"], capsys)
        assert version_run.code == 0 and self.version() in version_run.out, version_run
        unknown_run = run_main(self.main, ["train"], capsys)
        assert unknown_run.code == 2, unknown_run

    def test_shipped_config_parses(self, shipped_config: Path, capsys: Any) -> None:
        import yaml

        args = ["fit", "--config", str(shipped_config), "--print_config"]
        run = run_main(self.main, args, capsys)
        assert run.code == 0, run.err[-3000:]
        self.check_config(yaml.safe_load(run.out), yaml.safe_load(shipped_config.read_text()))


def fit_beside_users_config(
    run: Callable[[list[str]], Any], folder: str | os.PathLike[str], extra: Sequence[str] = ()
) -> dict[str, Any]:
    """The promise that a fit never overwrites a user's ``config.yaml``: with ``folder`` as the
    working directory holding one, ``run(["fit", "-c", "tiny", ...one step, no logger, no
    checkpoint, --trainer.default_root_dir=FOLDER, *extra])`` (a package's ``main`` or
    ``run_lightning_cli``) must leave it as it was and save its own config beside it as
    ``config-1.yaml``, the only other file in ``folder``. Returns that saved config."""
    import yaml

    folder = Path(folder)
    mine = "mine: 1\n"
    (folder / "config.yaml").write_text(mine)
    args = [
        "fit",
        "-c",
        "tiny",
        "--trainer.max_steps=1",
        "--trainer.limit_val_batches=1",
        "--trainer.logger=false",
        "--trainer.enable_checkpointing=false",
        f"--trainer.default_root_dir={folder}",
        *extra,
    ]
    with contextlib.chdir(folder):
        run(args)
    assert (folder / "config.yaml").read_text() == mine
    assert sorted(p.name for p in folder.iterdir()) == ["config-1.yaml", "config.yaml"]
    return yaml.safe_load((folder / "config-1.yaml").read_text())


_LIGHT_IMPORT_PROBE = """
import importlib, json, sys
package, heavy, names, defined_in = json.loads(sys.argv[1])
module = importlib.import_module(package)
loaded = [name for name in heavy if name in sys.modules]
assert not loaded, f"import {package} imported {loaded}"
missing = sorted(set(names) - set(module.__all__))
assert not missing, f"not in {package}.__all__: {missing}"
for name, source in defined_in.items():
    value = getattr(module, name)
    assert value is getattr(importlib.import_module(source), name), (name, source)
    assert getattr(value, "__module__", source) == source, (name, value.__module__, source)
try:
    module.no_such_name_
except AttributeError:
    pass
else:
    raise AssertionError(f"{package}.no_such_name_ did not raise AttributeError")
"""


def assert_light_package(
    package: str,
    names: Sequence[str],
    defined_in: Mapping[str, str],
    *,
    heavy: Sequence[str] = ("torch",),
) -> None:
    """The promise of a package's lazy top level (:mod:`iclr26_common.exports`), checked in a
    fresh interpreter: ``import PACKAGE`` loads none of the ``heavy`` modules; every one of
    ``names`` is in ``PACKAGE.__all__``; each ``{name: module}`` of ``defined_in`` resolves to
    the object that ``module`` defines under that name; an unknown name raises
    ``AttributeError``."""
    import json

    payload = json.dumps([package, list(heavy), list(names), dict(defined_in)])
    proc = subprocess.run(
        [sys.executable, "-c", _LIGHT_IMPORT_PROBE, payload],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
