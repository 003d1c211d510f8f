"""Console-script plumbing every iclr26 package shares (stdlib only; nothing heavy is imported).

- :class:`ArgumentParser`: argparse whose errors are one line, ``PROG: error: MESSAGE (see PROG
  --help)``, with exit code 2.
- :func:`shipped_configs` / :func:`resolve_config_names`: ``--config NAME`` may name a YAML shipped
  in a package's ``configs/`` folder instead of a path.
- :func:`top_level_parser`, :func:`dispatch`, :func:`lightning_commands`, :func:`configs_command`:
  ``PROG COMMAND ARGS...`` routing, where LightningCLI subcommands (``fit``, ``test``...) take their
  own ``--help`` and every other command is a function of its remaining arguments.
- :class:`ConsoleScript`: a package's whole console script (the routing above, ``configs`` and
  the one-line errors below), so every package's ``main`` is one line.
- :func:`run_with_one_line_errors`, :func:`is_user_error`: a console script's ``main`` turns bad
  input (a package's format errors, path errors, :class:`UsageError`, ``ValueError`` raised by
  the package's own validation, also when a library re-raised it with ``raise ... from``) into
  one ``PROG: error: ...`` line and exit code 2; a traceback environment variable shows the
  traceback instead; anything else propagates.
- :func:`comma_list`, :func:`comma_list_of`, :func:`int_list`: argparse ``type=`` parsers for
  ``a,b,c`` lists and ``start:stop:step`` ranges; :func:`finite_float`, :func:`positive_float`,
  :func:`nonnegative_float`, :func:`probability`, :func:`positive_int`,
  :func:`nonnegative_int`: numbers, refusing NaN and infinities, all made by
  :func:`number_type` (one for any other bound).
- :func:`rename_flags`: a renamed flag keeps working for one minor version, with a one-line
  deprecation warning naming the new spelling.
- Ctrl-C in a command run through :func:`run_with_one_line_errors` ends with one line
  ``PROG: interrupted`` and exit status 130, no traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from importlib.resources import files
from pathlib import Path
from typing import Any, NoReturn, TypeVar

__all__ = [
    "CONFIGS_HELP",
    "INTERRUPTED",
    "PATH_ERRORS",
    "TRAINER_SUBCOMMANDS",
    "ArgumentParser",
    "ConsoleScript",
    "Handler",
    "UsageError",
    "check_config_file",
    "comma_list",
    "comma_list_of",
    "config_values",
    "configs_command",
    "dispatch",
    "finite_float",
    "int_list",
    "is_user_error",
    "lightning_commands",
    "nonnegative_float",
    "nonnegative_int",
    "number_type",
    "positive_float",
    "positive_int",
    "probability",
    "raised_in",
    "refuse_non_finite",
    "refuse_removed_flags",
    "rename_flags",
    "resolve_config_names",
    "run_with_one_line_errors",
    "shipped_configs",
    "top_level_parser",
    "user_error_in_chain",
]

#: File-system errors about a path the user gave (missing, existing, wrong kind).
PATH_ERRORS: tuple[type[OSError], ...] = (
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
)

#: Set when a Ctrl-C reached code that turns it into an exit of its own (Lightning's ``fit``
#: catches ``KeyboardInterrupt``, shuts down and calls ``sys.exit(1)``): then
#: :func:`run_with_one_line_errors` still ends with ``PROG: interrupted`` and status 130.
INTERRUPTED = threading.Event()

T = TypeVar("T")
N = TypeVar("N", int, float)

#: Help text of the ``configs`` command :func:`configs_command` builds.
CONFIGS_HELP = "list the YAML configs shipped with the package"

#: A command: called with the arguments after its name; returns an exit code (``None`` means 0).
Handler = Callable[[list[str]], "int | None"]


class UsageError(Exception):
    """Bad command-line input found outside argparse (e.g. a LightningCLI parse error): always a
    user error (:func:`is_user_error`), printed as one line with exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error: ``PROG: error: MESSAGE (see PROG --help)``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def shipped_configs(package: str, folder: str = "configs") -> dict[str, Path]:
    """``{stem: path}`` of the ``*.yaml`` files directly in the importable ``package``'s
    ``folder`` (sorted by name; empty when the folder is missing)."""
    root = Path(str(files(package) / folder))
    if not root.is_dir():
        return {}
    return {path.stem: path for path in sorted(root.glob("*.yaml"))}


def resolve_config_names(argv: Sequence[str], configs: Mapping[str, Path]) -> list[str]:
    """A copy of ``argv`` where ``--config NAME`` / ``--config=NAME`` / ``-c NAME`` /
    ``-c=NAME`` naming a shipped config (and not an existing file) is replaced by that config's
    path; other arguments are kept."""
    resolved = list(argv)
    for i, arg in enumerate(resolved):
        if arg in ("--config", "-c") and i + 1 < len(resolved):
            value = resolved[i + 1]
            if not Path(value).exists() and value in configs:
                resolved[i + 1] = str(configs[value])
        elif arg.startswith(("--config=", "-c=")):
            flag, value = arg.split("=", 1)
            if not Path(value).exists() and value in configs:
                resolved[i] = f"{flag}={configs[value]}"
    return resolved


def config_values(argv: Sequence[str]) -> list[str]:
    """The values of ``--config VALUE`` / ``--config=VALUE`` / ``-c VALUE`` / ``-c=VALUE`` in
    ``argv``, in order."""
    values = []
    for flag, value in zip(argv, [*argv[1:], None], strict=True):
        if flag in ("--config", "-c") and value is not None:
            values.append(value)
        elif flag.startswith(("--config=", "-c=")):
            values.append(flag.split("=", 1)[1])
    return values


def check_config_file(value: str, option: str = "--config") -> None:
    """An existing ``--config`` path must be a UTF-8 text file: a folder or bytes that are not
    UTF-8 are a :class:`UsageError` naming the option, the file and the byte (jsonargparse and
    PyYAML would raise a ``UnicodeDecodeError`` traceback). A path that does not exist is left to
    the caller (it may name a shipped config)."""
    from iclr26_common.textio import read_text

    if not Path(value).exists():
        return
    try:
        read_text(value, "config file", error=UsageError, gzip_suffix=False)
    except (OSError, UsageError) as error:
        raise UsageError(f"{option} {error}") from None


def comma_list(text: str, item: Callable[[str], T] = str) -> list[T]:  # type: ignore[assignment]
    """``'a, b,c'`` -> ``[item('a'), item('b'), item('c')]`` (blank parts dropped, order kept).

    For argparse ``type=`` (strings) or through :func:`comma_list_of`. Raises
    ``argparse.ArgumentTypeError`` for an empty list or a part ``item`` rejects."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    try:
        return [item(part) for part in parts]
    except (TypeError, ValueError):
        name = getattr(item, "__name__", "value")
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {name} values, got {text!r}"
        ) from None


def comma_list_of(item: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse ``type=`` that parses a :func:`comma_list` of ``item`` values."""

    def parse(text: str) -> list[T]:
        return comma_list(text, item)

    parse.__name__ = f"comma_list_of_{getattr(item, '__name__', 'value')}"
    return parse


def int_list(text: str) -> list[int]:
    """``'200:2000:50'`` (inclusive range) or ``'200,400,600'`` -> a non-empty list of ints.

    Raises ``argparse.ArgumentTypeError`` for anything else, including an empty or reversed
    range (``300:200:50``) and a step that is not positive."""
    expected = "expected 'start:stop:step' (start <= stop, step > 0) or a comma-separated list"
    if ":" not in text:
        try:
            return comma_list(text, int)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{expected} of integers, got {text!r}") from None
    try:
        start, stop, step = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected} of integers, got {text!r}") from None
    if step <= 0 or start > stop:
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
    return list(range(start, stop + 1, step))


def number_type(
    kind: Callable[[str], N],
    what: str,
    accept: Callable[[N], bool] | None = None,
    *,
    name: str | None = None,
) -> Callable[[str], N]:
    """An argparse ``type=`` reading ``kind(text)`` (``int`` or ``float``) that ``accept`` (when
    given) says yes to; a float must also be finite (``nan``, ``inf`` refused).

    Anything else raises ``argparse.ArgumentTypeError`` ``expected WHAT, got 'TEXT'`` (``WHAT
    (finite)`` for a non-finite float), so argparse prints ``argument --flag: expected ...``.
    ``name`` becomes the parser's ``__name__`` (what :func:`comma_list` names in its errors).
    The workspace's number types below are all made here::

        seconds = number_type(float, "a number of seconds > 0", lambda v: v > 0)
    """

    def parse(text: str) -> N:
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected {what} (finite), got {text!r}")
        if accept is not None and not accept(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = parse.__qualname__ = name or getattr(kind, "__name__", "number")
    parse.__doc__ = f"An argparse ``type=``: {what}."
    return parse


#: An argparse ``type=``: a finite number (``nan``, ``inf`` refused).
finite_float = number_type(float, "a number", name="finite_float")
#: An argparse ``type=``: a finite number > 0.
positive_float = number_type(float, "a number > 0", lambda v: v > 0, name="positive_float")
#: An argparse ``type=``: a finite number >= 0.
nonnegative_float = number_type(float, "a number >= 0", lambda v: v >= 0, name="nonnegative_float")
#: An argparse ``type=``: a number in [0, 1].
probability = number_type(float, "a number in [0, 1]", lambda v: 0 <= v <= 1, name="probability")
#: An argparse ``type=``: an integer >= 1.
positive_int = number_type(int, "an integer >= 1", lambda v: v >= 1, name="positive_int")
#: An argparse ``type=``: an integer >= 0.
nonnegative_int = number_type(int, "an integer >= 0", lambda v: v >= 0, name="nonnegative_int")


def rename_flags(
    argv: Sequence[str], renames: Mapping[str, str], *, prog: str, removed_in: str
) -> list[str]:
    """``argv`` with each renamed flag (``--old`` or ``--old=VALUE``) spelled the new way, and one
    line on stderr per old spelling used: ``PROG: warning: --old is deprecated, use --new (--old
    will be removed in VERSION)``. Arguments after ``--`` are left alone."""
    out: list[str] = []
    warned: set[str] = set()
    rest = False
    for arg in argv:
        if rest or arg == "--":
            rest = True
            out.append(arg)
            continue
        flag, eq, value = arg.partition("=")
        new = renames.get(flag)
        if new is None:
            out.append(arg)
            continue
        if flag not in warned:
            warned.add(flag)
            print(
                f"{prog}: warning: {flag} is deprecated, use {new} ({flag} will be removed in "
                f"{removed_in})",
                file=sys.stderr,
            )
        out.append(f"{new}{eq}{value}" if eq else new)
    return out


#: The spellings of a non-finite number that Python's ``float()`` and YAML (``.inf``, ``.nan``,
#: which jsonargparse reads) accept, lower-cased.
_NON_FINITE = {
    *(f"{sign}{word}" for sign in ("", "+", "-") for word in ("nan", "inf", "infinity", ".inf")),
    ".nan",
}


def refuse_non_finite(argv: Sequence[str]) -> None:
    """Every number on a command line must be finite: ``--model.init_args.lr nan`` (or ``=nan``,
    ``inf``, ``-Infinity``) is one line naming the option (:class:`UsageError`), not
    jsonargparse's long "Does not validate against any of the Union subtypes" message or a run
    that trains on NaN. Arguments after ``--`` are left alone."""
    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    for flag, value in zip(args, [*args[1:], None], strict=True):
        if flag.startswith("--") and "=" in flag:
            flag, value = flag.split("=", 1)
        elif not flag.startswith("--") or value is None:
            continue
        if value.strip().lower() in _NON_FINITE:
            raise UsageError(f"{flag} {value}: not a finite number")


def refuse_removed_flags(
    argv: Sequence[str], removed: Mapping[str, Mapping[str, str]], *, removed_in: str
) -> None:
    """Refuse a flag that a release removed, in one line naming its replacement.

    ``removed`` maps a command path (``"perk eval"``: the first words of ``argv``) to ``{old
    flag: new flag}``; ``removed_in`` names the release (``"llm-methods 0.8.0"``). ``perk eval
    --ckpt X`` -> :class:`UsageError` ``perk eval --ckpt: removed in llm-methods 0.8.0; use
    --model``, where argparse would only say which options are missing. Arguments after ``--``
    are left alone."""
    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    for command, flags in removed.items():
        words = command.split()
        if args[: len(words)] != words:
            continue
        for arg in args[len(words) :]:
            flag = arg.partition("=")[0]
            if flag in flags:
                raise UsageError(f"{command} {flag}: removed in {removed_in}; use {flags[flag]}")


def top_level_parser(
    prog: str,
    description: str,
    version: str,
    commands: Mapping[str, str],
    *,
    lightning: Sequence[str] = (),
) -> ArgumentParser:
    """``PROG [--version] COMMAND ...`` with one sub-parser per command (for ``--help``).

    ``lightning`` names the LightningCLI subcommands: listed first, they keep their own
    ``--help`` and get the help text ``LightningCLI `NAME` (PROG NAME --help)`` unless
    ``commands`` gives one. ``commands`` maps every other command to its help text."""
    parser = ArgumentParser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"{prog} {version}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in lightning:
        help_text = commands.get(name, f"LightningCLI `{name}` ({prog} {name} --help)")
        sub.add_parser(name, help=help_text, add_help=False)
    for name, help_text in commands.items():
        if name not in lightning:
            sub.add_parser(name, help=help_text)
    return parser


def dispatch(
    argv: Sequence[str], parser: Callable[[], ArgumentParser], handlers: Mapping[str, Handler]
) -> int:
    """Route ``argv = [COMMAND, *rest]`` to ``handlers[COMMAND](rest)``.

    No arguments print the top-level help and exit 2; ``-h``/``--help``/``--version`` are the
    top-level parser's; an unknown command is a one-line parser error (exit 2). ``parser`` is a
    factory so a plain run never builds the help text.
    """
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help", "--version"):
        top = parser()
        if not argv:
            top.print_help()
            raise SystemExit(2)
        top.parse_args(argv)
        return 0
    command, rest = argv[0], argv[1:]
    handler = handlers.get(command)
    if handler is None:
        parser().error(f"unknown command {command!r}")
    result = handler(rest)
    return 0 if result is None else int(result)


def lightning_commands(names: Sequence[str], run: Callable[[list[str]], Any]) -> dict[str, Handler]:
    """``{name: handler}`` for LightningCLI subcommands: each handler calls ``run([name, *rest])``
    (the full LightningCLI argv) and returns 0."""

    def command(name: str) -> Handler:
        def handler(rest: list[str]) -> int:
            run([name, *rest])
            return 0

        return handler

    return {name: command(name) for name in names}


def configs_command(prog: str, package: str, width: int = 16) -> Handler:
    """A ``PROG configs`` handler printing ``NAME PATH`` of each config :func:`shipped_configs`
    finds in ``package``."""

    def handler(rest: list[str]) -> int:
        ArgumentParser(prog=f"{prog} configs", description="List shipped configs.").parse_args(rest)
        for name, path in shipped_configs(package).items():
            print(f"{name:{width}s} {path}")
        return 0

    return handler


def raised_in(error: BaseException, package: str) -> bool:
    """Whether the innermost traceback frame of ``error`` lies in a module of ``package``
    (its top-level import name, e.g. ``"rf_matid"``)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    module = "" if tb is None else str(tb.tb_frame.f_globals.get("__name__", ""))
    return module.split(".")[0] == package


def is_user_error(
    error: BaseException, package: str, error_types: tuple[type[BaseException], ...] = ()
) -> bool:
    """Bad input rather than a bug: one of the package's ``error_types``, a :data:`PATH_ERRORS`
    error, a :class:`UsageError`, or a ``ValueError`` raised by the package's own validation
    (:func:`raised_in`). A ``ValueError`` raised inside torch, Lightning or another library is
    not. ``error`` alone is judged: :func:`user_error_in_chain` walks the chain."""
    if isinstance(error, (*error_types, *PATH_ERRORS, UsageError)):
        return True
    return isinstance(error, ValueError) and raised_in(error, package)


def user_error_in_chain(
    error: BaseException, is_user: Callable[[BaseException], bool]
) -> BaseException | None:
    """``error`` itself or, when a library wrapped it (LightningCLI/jsonargparse re-raise a data
    module's error, MONAI wraps transform errors in ``RuntimeError``, both with ``raise ... from``),
    the first user error in its explicit ``__cause__`` chain; ``None`` when there is none.

    The implicit ``__context__`` (an exception raised while another was being handled) is not
    followed: a bug inside ``except FileNotFoundError:`` is a bug, not the user's missing file."""
    seen: set[int] = set()
    node: BaseException | None = error
    while node is not None and id(node) not in seen:
        if is_user(node):
            return node
        seen.add(id(node))
        node = node.__cause__
    return None


def run_with_one_line_errors(
    prog: str,
    dispatch: Callable[[list[str]], T],
    argv: Sequence[str],
    *,
    is_user: Callable[[BaseException], bool],
    traceback_env: str,
) -> T:
    """``dispatch(argv)``; a user error (a :class:`UsageError` or one ``is_user`` accepts,
    searched along the explicit ``raise ... from`` chain)
    ends with one line ``PROG: error: MESSAGE`` on stderr and ``SystemExit(2)``. When the
    environment variable ``traceback_env`` is set, or the error is not a user error, the
    exception propagates with its traceback. Ctrl-C (``KeyboardInterrupt``) ends with one line
    ``PROG: interrupted`` and ``SystemExit(130)`` (the traceback only with ``traceback_env``),
    also when a Lightning fit caught the Ctrl-C itself (it exits with status 1 after its
    shutdown; :data:`INTERRUPTED` says the exit came from a Ctrl-C). A set ``$ICLR26_DEVICE``
    is checked before ``dispatch`` (:func:`iclr26_common.device.check_device_env`)."""
    INTERRUPTED.clear()
    try:
        from iclr26_common.device import check_device_env

        check_device_env()  # a bad $ICLR26_DEVICE stops the command before any work
        return dispatch(list(argv))
    except KeyboardInterrupt:
        if os.environ.get(traceback_env):
            raise
        print(f"\n{prog}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except SystemExit as exit_:
        if not INTERRUPTED.is_set() or exit_.code in (0, None) or os.environ.get(traceback_env):
            raise
        INTERRUPTED.clear()
        print(f"\n{prog}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as error:
        found = user_error_in_chain(error, lambda e: isinstance(e, UsageError) or is_user(e))
        if os.environ.get(traceback_env) or found is None:
            raise
        message = " ".join(str(found).split()) or type(found).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2) from None


#: The LightningCLI subcommands a package's console script offers unless it says otherwise.
TRAINER_SUBCOMMANDS = ("fit", "validate", "test", "predict")


@dataclass(frozen=True)
class ConsoleScript:
    """A package's console script ``PROG COMMAND ARGS...``: every package's ``main`` is
    ``SCRIPT.main(args)``, so each promise of the command line is implemented once, here:

    - no arguments print the help (exit 2); ``--help`` lists the ``lightning`` subcommands, then
      ``commands`` (``{name: help text}``, in that order); ``--version`` prints ``PROG
      VERSION``; an unknown command is one line, exit 2 (:func:`top_level_parser`,
      :func:`dispatch`);
    - a ``lightning`` subcommand runs ``run_lightning([name, *rest])``; ``configs`` lists the
      ``package``'s shipped YAML configs (:func:`configs_command`); any other command is
      ``handlers()[name](rest)``: ``handlers`` is called on each run, so it sees the module's
      functions as they are then;
    - bad input (an ``error_types`` class, each named ``"module:Class"`` and imported only when
      an error is judged; a path error; a :class:`UsageError`; a ``ValueError`` raised in
      ``package``: :func:`is_user_error`) is one line ``PROG: error: ...``, exit 2; Ctrl-C one
      line, exit 130; with the environment variable ``traceback_env`` set, the traceback
      instead (:func:`run_with_one_line_errors`).

    ``prog`` defaults to the package name with dashes (``rf_matid`` -> ``rf-matid``) and
    ``traceback_env`` to ``PACKAGE_TRACEBACK`` in capitals. ``commands`` may be a function
    returning the mapping (commands discovered at run time, as llm-methods' method plugins),
    called only to build the help. ``configs=False``: no ``configs`` command (a package that
    ships no configs of its own). ``removed_flags``: ``{command path: {old flag: new flag}}``
    of flags removed in the release ``removed_in``, refused in one line naming the new flag
    (:func:`refuse_removed_flags`).
    """

    package: str
    version: str
    description: str
    commands: Mapping[str, str] | Callable[[], Mapping[str, str]]
    handlers: Callable[[], Mapping[str, Handler]]
    run_lightning: Callable[[list[str]], Any] | None = None
    lightning: Sequence[str] = TRAINER_SUBCOMMANDS
    error_types: Sequence[str] = ()
    prog: str = ""
    traceback_env: str = ""
    configs_width: int = 16
    configs: bool = True
    removed_flags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    removed_in: str = ""

    def __post_init__(self) -> None:
        if not self.prog:
            object.__setattr__(self, "prog", self.package.replace("_", "-"))
        if not self.traceback_env:
            object.__setattr__(self, "traceback_env", f"{self.package.upper()}_TRACEBACK")
        if self.run_lightning is None:
            object.__setattr__(self, "lightning", ())

    def parser(self) -> ArgumentParser:
        """The top-level parser (for ``--help`` and ``--version``)."""
        commands = self.commands() if callable(self.commands) else self.commands
        return top_level_parser(
            self.prog, self.description, self.version, commands, lightning=self.lightning
        )

    def is_user_error(self, error: BaseException) -> bool:
        """Whether ``error`` alone is bad input rather than a bug (:func:`is_user_error`)."""
        types = []
        for name in self.error_types:
            module, _, attr = name.partition(":")
            types.append(getattr(import_module(module), attr))
        return is_user_error(error, self.package, tuple(types))

    def dispatch(self, argv: Sequence[str]) -> int:
        """Route ``argv`` to its command (no one-line error handling: :meth:`main` adds it)."""
        handlers: dict[str, Handler] = {}
        if self.run_lightning is not None:
            handlers.update(lightning_commands(self.lightning, self.run_lightning))
        if self.configs:
            handlers["configs"] = configs_command(self.prog, self.package, self.configs_width)
        handlers.update(self.handlers())
        if self.removed_flags:
            refuse_removed_flags(argv, self.removed_flags, removed_in=self.removed_in)
        return dispatch(argv, self.parser, handlers)

    def main(self, args: Sequence[str] | None = None) -> int:
        """Run the command line ``args`` (default ``sys.argv[1:]``); returns the exit status."""
        argv = sys.argv[1:] if args is None else args
        return run_with_one_line_errors(
            self.prog,
            self.dispatch,
            argv,
            is_user=self.is_user_error,
            traceback_env=self.traceback_env,
        )
