from __future__ import annotations

import sys
from pathlib import Path

import pytest

from iclr26_common.cli_support import (
    ArgumentParser,
    is_user_error,
    raised_in,
    resolve_config_names,
    run_with_one_line_errors,
    shipped_configs,
    user_error_in_chain,
)
from iclr26_common.threads import torch_threads


class FormatError(Exception):
    pass


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    pkg = tmp_path / "fakepkg_cli"
    (pkg / "configs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "validate.py").write_text(
        "def check(x):\n    if x < 0:\n        raise ValueError(f'x must be >= 0, got {x}')\n"
    )
    for name in ("tiny", "default"):
        (pkg / "configs" / f"{name}.yaml").write_text("seed: 0\n")
    (pkg / "configs" / "notes.txt").write_text("not a config")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "fakepkg_cli"
    sys.modules.pop("fakepkg_cli", None)
    sys.modules.pop("fakepkg_cli.validate", None)


def test_parser_error_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    parser = ArgumentParser(prog="demo")
    parser.add_argument("--n", type=int, required=True)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--n", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("demo: error: ") and "(see demo --help)" in err[0]


def test_shipped_configs_and_name_resolution(fake_package: str, tmp_path: Path) -> None:
    configs = shipped_configs(fake_package)
    assert list(configs) == ["default", "tiny"]
    assert shipped_configs(fake_package, "missing") == {}
    argv = ["fit", "--config", "tiny", "--config=default", "--trainer.max_epochs", "1"]
    out = resolve_config_names(argv, configs)
    assert out[2] == str(configs["tiny"]) and out[3] == f"--config={configs['default']}"
    assert out[4:] == argv[4:] and argv[2] == "tiny"  # input not mutated
    # an existing file of that name wins; unknown names are left for the parser to reject
    local = tmp_path / "tiny"
    local.write_text("seed: 1\n")
    assert resolve_config_names(["--config", str(local)], configs)[1] == str(local)
    assert resolve_config_names(["--config", "nope", "--config"], configs) == [
        "--config",
        "nope",
        "--config",
    ]


def test_user_error_classification(fake_package: str) -> None:
    from fakepkg_cli.validate import check

    with pytest.raises(ValueError) as own:
        check(-1)
    assert raised_in(own.value, fake_package)
    assert is_user_error(own.value, fake_package)
    with pytest.raises(ValueError) as lib:
        int("x")  # raised outside the package
    assert not is_user_error(lib.value, fake_package)
    assert is_user_error(FileNotFoundError("a.csv"), fake_package)
    assert is_user_error(FormatError("a.csv: field x"), fake_package, (FormatError,))
    assert not is_user_error(RuntimeError("bug"), fake_package, (FormatError,))


def test_user_error_found_in_chain() -> None:
    inner = FormatError("data.jsonl line 3: missing field 'answer'")
    try:
        try:
            raise inner
        except FormatError as error:
            raise RuntimeError("Does not validate") from error
    except RuntimeError as outer:
        wrapped = outer
    assert user_error_in_chain(wrapped, lambda e: isinstance(e, FormatError)) is inner
    assert user_error_in_chain(wrapped, lambda e: False) is None


def _dispatch_raising(error: BaseException):  # type: ignore[no-untyped-def]
    def dispatch(argv: list[str]) -> int:
        assert argv == ["a"]
        raise error

    return dispatch


def test_a_bad_device_variable_stops_every_command_before_it_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 review: ``ICLR26_DEVICE=gpu atomistic-scaling sweep --out sw9`` was a 40-line
    traceback after it had made ``sw9/`` and marked it partial (the rerun was refused). Every
    console script checks the variable before its command: one line, exit 2, nothing run (with
    torch installed: ``iclr26-common`` alone runs no model and checks nothing)."""
    pytest.importorskip("torch")
    ran: list[list[str]] = []
    monkeypatch.setenv("ICLR26_DEVICE", "gpu")
    monkeypatch.delenv("X_TB", raising=False)
    with pytest.raises(SystemExit) as exc:
        run_with_one_line_errors(
            "p", ran.append, ["--out", "sw9"], is_user=lambda e: False, traceback_env="X_TB"
        )
    assert exc.value.code == 2 and ran == []
    assert capsys.readouterr().err == (
        "p: error: ICLR26_DEVICE=gpu: not a device; use cpu, cuda or cuda:N\n"
    )
    monkeypatch.setenv("ICLR26_DEVICE", "cpu")
    run_with_one_line_errors("p", ran.append, ["x"], is_user=lambda e: False, traceback_env="X_TB")
    assert ran == [["x"]]


def test_without_torch_the_device_variable_is_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """``iclr26-common`` alone has no torch: its commands run no model, so a set
    ``$ICLR26_DEVICE`` is not checked there (the check would fail on the import)."""
    import sys

    from iclr26_common.device import check_device_env

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    monkeypatch.setenv("ICLR26_DEVICE", "gpu")
    check_device_env()
    ran: list[list[str]] = []
    run_with_one_line_errors("p", ran.append, ["x"], is_user=lambda e: False, traceback_env="X_TB")
    assert ran == [["x"]]


def test_run_with_one_line_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    is_user = lambda e: isinstance(e, FormatError)  # noqa: E731
    assert (
        run_with_one_line_errors("p", lambda argv: 7, [], is_user=is_user, traceback_env="X_TB")
        == 7
    )
    monkeypatch.delenv("X_TB", raising=False)
    with pytest.raises(SystemExit) as exc:
        run_with_one_line_errors(
            "p",
            _dispatch_raising(FormatError("f.csv:\n  bad  field")),
            ("a",),
            is_user=is_user,
            traceback_env="X_TB",
        )
    assert exc.value.code == 2
    assert capsys.readouterr().err == "p: error: f.csv: bad field\n"
    with pytest.raises(RuntimeError):  # a bug keeps its traceback
        run_with_one_line_errors(
            "p",
            _dispatch_raising(RuntimeError("bug")),
            ["a"],
            is_user=is_user,
            traceback_env="X_TB",
        )
    monkeypatch.setenv("X_TB", "1")
    with pytest.raises(FormatError):  # the traceback switch
        run_with_one_line_errors(
            "p", _dispatch_raising(FormatError("f")), ["a"], is_user=is_user, traceback_env="X_TB"
        )


def test_torch_threads_restores() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    with pytest.raises(KeyError):
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            raise KeyError
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="n must be >= 1"):
        with torch_threads(0):
            pass


def test_dispatch_routes_and_rejects(capsys: pytest.CaptureFixture[str], fake_package: str) -> None:
    from iclr26_common.cli_support import (
        configs_command,
        dispatch,
        lightning_commands,
        top_level_parser,
    )

    seen: list[list[str]] = []
    handlers = {
        **lightning_commands(("fit", "test"), seen.append),
        "echo": lambda rest: len(rest),
        "none": lambda rest: None,
        "configs": configs_command("demo", fake_package, width=8),
    }

    def parser():  # type: ignore[no-untyped-def]
        return top_level_parser(
            "demo",
            "Demo tool.",
            "1.2",
            {"fit": "train", "test": "eval", "echo": "count args"},
            lightning=("fit", "test", "validate"),
        )

    assert dispatch(["fit", "--config", "tiny"], parser, handlers) == 0
    assert dispatch(["test"], parser, handlers) == 0
    assert seen == [["fit", "--config", "tiny"], ["test"]]
    assert dispatch(["echo", "a", "b"], parser, handlers) == 2
    assert dispatch(["none"], parser, handlers) == 0
    assert dispatch(["configs"], parser, handlers) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["default", "tiny"]
    with pytest.raises(SystemExit) as exc:
        dispatch(["--version"], parser, handlers)
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == "demo 1.2"
    with pytest.raises(SystemExit) as exc:
        dispatch(["--help"], parser, handlers)
    help_text = capsys.readouterr().out
    assert exc.value.code == 0 and "count args" in help_text and "train" in help_text
    assert "LightningCLI `validate` (demo validate --help)" in help_text  # the default help
    with pytest.raises(SystemExit) as exc:
        dispatch([], parser, handlers)  # no command: help on stdout, exit 2
    assert exc.value.code == 2 and "usage: demo" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        dispatch(["nope"], parser, handlers)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "demo: error: unknown command 'nope' (see demo --help)"
    )
    with pytest.raises(SystemExit) as exc:
        dispatch(["configs", "--bad"], parser, handlers)
    assert exc.value.code == 2 and "demo configs: error:" in capsys.readouterr().err


def test_assert_one_line_error_contract(capsys: pytest.CaptureFixture[str]) -> None:
    from iclr26_common.testing import assert_one_line_error

    def main(argv: list[str]) -> None:
        if argv == ["ok"]:
            return
        if argv == ["chatter"]:
            print("Seed set to 0", file=sys.stderr)
        print("demo: error: bad --x", file=sys.stderr)
        if argv == ["two"]:
            print("demo: error: again", file=sys.stderr)
        raise SystemExit(1 if argv == ["one"] else 2)

    assert assert_one_line_error(main, ["bad"], capsys, prog="demo") == "demo: error: bad --x"
    line = assert_one_line_error(main, ["chatter"], capsys, skip=lambda s: "Seed set" in s)
    assert line == "demo: error: bad --x"
    for argv, kwargs in (
        (["ok"], {}),
        (["one"], {}),
        (["two"], {}),
        (["chatter"], {}),
        (["bad"], {"prog": "other"}),
    ):
        with pytest.raises(AssertionError):
            assert_one_line_error(main, argv, capsys, **kwargs)


def test_implicit_context_is_not_taken_for_the_users_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug (KeyError) raised while handling a FileNotFoundError was reported as the user's
    missing file (exit 2, no traceback): only an explicit ``raise ... from`` links errors."""

    def buggy(argv: list[str]) -> int:
        try:
            raise FileNotFoundError("data.csv")
        except FileNotFoundError:
            return {}["missing key"]  # a bug inside the handler: implicit __context__

    def wrapped(argv: list[str]) -> int:
        try:
            raise FileNotFoundError("data.csv")
        except FileNotFoundError as error:
            raise RuntimeError("loader failed") from error

    is_user = lambda e: is_user_error(e, "nopkg")  # noqa: E731
    monkeypatch.delenv("X_TB", raising=False)
    with pytest.raises(KeyError):
        run_with_one_line_errors("p", buggy, [], is_user=is_user, traceback_env="X_TB")
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as exc:
        run_with_one_line_errors("p", wrapped, [], is_user=is_user, traceback_env="X_TB")
    assert exc.value.code == 2 and capsys.readouterr().err == "p: error: data.csv\n"


def test_short_config_flag_resolves(fake_package: str) -> None:
    configs = shipped_configs(fake_package)
    out = resolve_config_names(["fit", "-c", "tiny", "-c=default", "-c"], configs)
    assert out == ["fit", "-c", str(configs["tiny"]), f"-c={configs['default']}", "-c"]


def test_usage_error_is_a_user_error() -> None:
    from iclr26_common.cli_support import UsageError

    assert is_user_error(UsageError("fit: bad"), "anypkg")


def test_comma_list_and_int_list() -> None:
    import argparse

    from iclr26_common.cli_support import comma_list, comma_list_of, int_list

    assert comma_list(" chair, table,,lamp ") == ["chair", "table", "lamp"]
    assert comma_list("1,2", int) == [1, 2]
    assert comma_list_of(float)("0.5, 2") == [0.5, 2.0]
    assert int_list("200:600:200") == [200, 400, 600]
    assert int_list("3,1,2") == [3, 1, 2]
    for bad in ("", " , ", "a,b", "300:200:50", "0:10:0", "1:2", "1:x:1"):
        with pytest.raises(argparse.ArgumentTypeError):
            int_list(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="list of float"):
        comma_list_of(float)("1,x")
    parser = ArgumentParser(prog="demo")
    parser.add_argument("--ids", type=comma_list_of(int))
    assert parser.parse_args(["--ids", "4,5"]).ids == [4, 5]


def test_base_install_needs_no_torch_or_lightning() -> None:
    """common's base install has no torch: the CLI plumbing, the test helpers and seeding must
    import and work with torch/lightning unimportable."""
    import subprocess

    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'lightning', 'lightning_fabric'):
            raise ImportError(f'blocked {name}')
sys.meta_path.insert(0, Block())
import random
import iclr26_common, iclr26_common.cli_support, iclr26_common.testing, iclr26_common.device
from iclr26_common import seed_everything
seed_everything(3); a = random.random(); seed_everything(3)
assert random.random() == a
print('ok')
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_number_type_messages_and_names() -> None:
    import argparse

    from iclr26_common.cli_support import number_type, positive_int

    seconds = number_type(float, "a number of seconds > 0", lambda v: v > 0, name="seconds")
    assert seconds("2.5") == 2.5 and seconds.__name__ == "seconds"
    for text, message in [
        ("x", "expected a number of seconds > 0, got 'x'"),
        ("0", "expected a number of seconds > 0, got '0'"),
        ("inf", "expected a number of seconds > 0 (finite), got 'inf'"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError) as exc:
            seconds(text)
        assert str(exc.value) == message
    assert positive_int.__name__ == "positive_int" and "integer >= 1" in str(positive_int.__doc__)


def _fake_lightning(argv: list[str]) -> None:
    """A stand-in for LightningCLI: ``fit --config PATH --print_config`` prints the file."""
    assert argv[0] == "fit" and argv[-1] == "--print_config"
    print(Path(argv[2]).read_text(), end="")


def _fake_script(package: str) -> object:
    from iclr26_common.cli_support import CONFIGS_HELP, ConsoleScript

    def check(rest: list[str]) -> int:
        parser = ArgumentParser(prog="demo check", description="Check a number.")
        parser.add_argument("x", type=int)
        validate = __import__(f"{package}.validate", fromlist=["check"])
        validate.check(parser.parse_args(rest).x)
        return 0

    return ConsoleScript(
        package,
        "1.2",
        "Demo tool.",
        {"check": "check a number", "boom": "raise", "configs": CONFIGS_HELP},
        handlers=lambda: {"check": check, "boom": lambda rest: 1 / 0},
        run_lightning=_fake_lightning,
        lightning=("fit", "test"),
        error_types=("configparser:Error",),  # "module:Class", imported when judged
        prog="demo",
    )


@pytest.fixture
def contract(fake_package: str) -> type:
    from iclr26_common.testing import CliContract

    script = _fake_script(fake_package)

    class Contract(CliContract):
        package = fake_package
        lightning = ("fit", "test")
        commands = ("check", "boom", "configs")
        commands_with_help = ("check",)

        def main(self, argv: list[str]) -> int:
            return script.main(argv)  # type: ignore[attr-defined]

        def version(self) -> str:
            return "1.2"

        def check_config(self, printed: dict, declared: dict) -> None:
            assert printed == declared == {"seed": 0}

    return Contract


def test_console_script_keeps_the_promises_cli_contract_checks(
    contract: type, fake_package: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ConsoleScript`` is the one implementation of the CLI promises, ``CliContract`` the one
    test of them: the fake package's script passes every contract test."""
    from iclr26_common.cli_support import shipped_configs as configs_of
    from iclr26_common.testing import assert_one_line_error

    suite = contract()
    suite.test_help_lists_every_subcommand()
    suite.test_version_and_unknown_command(capsys)
    for config in configs_of(fake_package).values():
        suite.test_shipped_config_parses(config, capsys)
    main = suite.main
    line = assert_one_line_error(main, ["check", "-3"], capsys, drop_earlier=True)
    assert line == "demo: error: x must be >= 0, got -3"
    assert main(["check", "4"]) == 0
    with pytest.raises(ZeroDivisionError):  # a bug is not bad input: the traceback stays
        main(["boom"])
    script = _fake_script(fake_package)
    assert script.traceback_env == "FAKEPKG_CLI_TRACEBACK"  # type: ignore[attr-defined]
    import configparser

    assert script.is_user_error(configparser.Error("bad"))  # type: ignore[attr-defined]
    assert not script.is_user_error(RuntimeError("bug"))  # type: ignore[attr-defined]


def test_console_script_with_run_time_commands_and_no_configs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``commands`` may be a function (llm-methods discovers its method commands at run time)
    and ``configs=False`` drops the ``configs`` command of a package without configs (52aa8a9:
    ``commands`` had to be a fixed mapping and ``configs`` was always added, so llm-methods kept
    its own routing)."""
    from iclr26_common.cli_support import ConsoleScript
    from iclr26_common.testing import assert_one_line_error, run_main

    found: list[str] = []

    def discovered() -> dict[str, str]:
        found.append("help")
        return {"hello": "say hello", "plugin": "a command found at run time"}

    script = ConsoleScript(
        "iclr26_common",
        "1.0",
        "Demo.",
        discovered,
        handlers=lambda: {"hello": lambda rest: print("hi") or 0, "plugin": lambda rest: 3},
        prog="demo",
        configs=False,
    )
    assert script.main(["hello"]) == 0 and script.main(["plugin"]) == 3
    assert found == []  # the help's mapping is built only for --help
    run = run_main(script.main, ["--help"], capsys)
    assert run.code == 0 and "plugin" in run.out and "configs" not in run.out, run.out
    line = assert_one_line_error(script.main, ["configs"], capsys)
    assert "unknown command 'configs'" in line, line
