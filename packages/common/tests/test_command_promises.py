"""The promises every command keeps (issue 36), in common: outputs checked before work, nothing
overwritten, partial folders marked, files 0644, finite numeric options, renamed flags, Ctrl-C as
one line, progress, a device option named in its error."""

from __future__ import annotations

import argparse
import io
import os
import stat
from pathlib import Path

import pytest

from iclr26_common.cli_support import (
    ArgumentParser,
    ConsoleScript,
    UsageError,
    finite_float,
    nonnegative_int,
    positive_float,
    positive_int,
    probability,
    refuse_non_finite,
    refuse_removed_flags,
    rename_flags,
    run_with_one_line_errors,
)
from iclr26_common.outputs import (
    PARTIAL_MARKER,
    OutputError,
    OutputFolder,
    add_output_options,
    check_out_file,
    check_out_folder,
    check_output_options,
    check_resume_settings,
    compare_settings,
    publish,
    record_settings,
    write_bytes,
    write_text,
)
from iclr26_common.progress import format_eta, progress

# ------------------------------------------------------------------ outputs


def test_a_file_given_as_the_output_folder_is_refused_before_work(tmp_path: Path) -> None:
    target = tmp_path / "outfile.txt"
    target.write_text("mine")
    with pytest.raises(OutputError, match=r"^--out .*outfile.txt: exists and is a file; give a"):
        check_out_folder(target)
    assert target.read_text() == "mine"


def test_a_folder_with_earlier_results_needs_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with check_out_folder(out) as folder:
        (folder.path / "results.csv").write_text("a,b\n")
    assert not (out / PARTIAL_MARKER).exists()  # complete
    with pytest.raises(OutputError, match="holds earlier results; pass --overwrite"):
        check_out_folder(out)
    with pytest.raises(OutputError, match="nothing to resume"):
        check_out_folder(out, resume=True)
    assert check_out_folder(out, overwrite=True).path == out
    assert (out / "results.csv").read_text() == "a,b\n"  # checking wrote nothing


def test_an_interrupted_folder_is_marked_partial_and_resumed_only_on_request(
    tmp_path: Path,
) -> None:
    out = tmp_path / "sweep"
    with pytest.raises(KeyboardInterrupt), check_out_folder(out) as folder:
        (folder.path / "cell-1.json").write_text("{}")
        raise KeyboardInterrupt
    assert (out / PARTIAL_MARKER).is_file() and (out / "cell-1.json").is_file()
    with pytest.raises(OutputError, match="partial results of an interrupted run; pass --resume"):
        check_out_folder(out)
    resumed = check_out_folder(out, resume=True)
    assert resumed.resumed
    with resumed:
        (out / "cell-2.json").write_text("{}")
    assert not (out / PARTIAL_MARKER).exists()


def test_a_command_that_cannot_resume_leaves_no_marked_empty_folder(tmp_path: Path) -> None:
    """``resumable=False`` (a command writing its files at the end, with no --resume): a failure
    before writing leaves the user's empty folder as it was, and a partial folder is refused
    with a hint at --overwrite alone."""
    out = tmp_path / "empty"
    out.mkdir()
    with pytest.raises(RuntimeError), check_out_folder(out, resumable=False):
        raise RuntimeError("could not connect")
    assert out.is_dir() and not any(out.iterdir())
    with pytest.raises(KeyboardInterrupt), check_out_folder(out, resumable=False) as folder:
        (folder.path / "features.npy").write_bytes(b"")
        raise KeyboardInterrupt
    with pytest.raises(OutputError, match=r"interrupted run; pass --overwrite to start again$"):
        check_out_folder(out, resumable=False)
    with pytest.raises(ValueError, match="not resumable"):
        check_out_folder(out, resume=True, resumable=False)
    with pytest.raises(RuntimeError), check_out_folder(tmp_path / "new", resumable=False):
        raise RuntimeError("bug")
    assert not (tmp_path / "new").exists()


def test_a_refused_or_failed_run_leaves_no_empty_folder(tmp_path: Path) -> None:
    out = tmp_path / "new" / "deeper"
    with pytest.raises(RuntimeError), check_out_folder(out):
        raise RuntimeError("could not connect")
    assert not out.exists()
    with pytest.raises(OutputError, match="does not exist; there is nothing to resume"):
        check_out_folder(out, resume=True)
    assert not out.exists()


def test_output_files(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    with pytest.raises(OutputError, match="is a folder; give a file name"):
        check_out_file(folder, option="--save-to")
    existing = tmp_path / "w.safetensors"
    existing.write_bytes(b"user's")
    with pytest.raises(OutputError, match=r"^--out .*w.safetensors: exists; pass --overwrite"):
        check_out_file(existing)
    assert check_out_file(existing, overwrite=True) == existing
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        check_out_file(blocker / "sub" / "out.json")


def test_written_files_are_0644_and_atomic(tmp_path: Path) -> None:
    old = os.umask(0o077)  # a restrictive umask must not leak into outputs
    try:
        path = write_bytes(tmp_path / "a" / "weights.bin", b"\x00\x01")
        text = write_text(tmp_path / "edit.json", "{}\n")
    finally:
        os.umask(old)
    for p in (path, text):
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert path.read_bytes() == b"\x00\x01"
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["weights.bin"]  # no temp left


def test_a_resume_must_match_the_recorded_settings(tmp_path: Path) -> None:
    """One rule for every resumable command (issue 36 review: rf-matid benchmark and atomistic
    sweep each had their own copy, worded differently): the settings recorded when the run
    started are what ``--resume`` is compared with, as JSON reads them back (a tuple equals the
    list it was written as); the first differing key is named with the option a user types."""
    settings = {"seeds": (0, 1), "batch_size": 4, "data": tmp_path / "d"}
    path = record_settings(tmp_path / "run-settings.json", settings)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    check_resume_settings(path, settings, "benchmark")  # the same run: accepted
    options = {"batch_size": "--batch-size"}
    with pytest.raises(OutputError) as caught:
        check_resume_settings(path, {**settings, "batch_size": 8}, "benchmark", options=options)
    assert str(caught.value) == (
        f"--resume: the interrupted benchmark in {tmp_path} ran with --batch-size 4, this one "
        "with 8; rerun with its settings, or pass --overwrite"
    )
    with pytest.raises(OutputError, match=r"ran with --seeds \[0, 1\], this one with None"):
        check_resume_settings(path, {"batch_size": 4, "data": str(tmp_path / "d")}, "sweep")
    for text in ("not json", "[1, 2]"):  # unreadable, or not the object record_settings writes
        path.write_text(text)
        with pytest.raises(OutputError, match=r"holds no readable run-settings\.json \(no sweep"):
            check_resume_settings(path, settings, "sweep")
    path.unlink()
    with pytest.raises(OutputError, match="pass --overwrite to start again or give a new --out"):
        check_resume_settings(path, settings, "sweep")
    # settings kept inside another file (mas2's cto-state.json): the same comparison and words
    compare_settings({"rounds": 3, "seed": 0}, {"rounds": 3, "seed": 0}, "training", "state.json")
    with pytest.raises(OutputError) as caught:
        compare_settings({"rounds": 3, "seed": 0}, {"rounds": 4, "seed": 0}, "training", "x/s.json")
    assert str(caught.value) == (
        "--resume: the interrupted training in x/s.json ran with --rounds 3, this one with 4; "
        "rerun with its settings, or pass --overwrite"
    )


# ------------------------------------------------------------------ options


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "NaN", "1e999"])
def test_non_finite_numbers_are_refused_in_one_line(text: str, capsys) -> None:  # type: ignore[no-untyped-def]
    parser = ArgumentParser(prog="suit edit")
    parser.add_argument("--kl-factor", type=finite_float)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([f"--kl-factor={text}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert "--kl-factor" in err[0] and "finite" in err[0]


def test_number_types() -> None:
    assert finite_float("-2.5") == -2.5 and positive_int("3") == 3 and nonnegative_int("0") == 0
    assert probability("1") == 1.0
    for parse, bad in [
        (positive_float, "0"),
        (positive_int, "0"),
        (nonnegative_int, "-1"),
        (probability, "1.5"),
        (positive_int, "2.5"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(bad)


def test_renamed_flags_keep_working_with_one_warning(capsys) -> None:  # type: ignore[no-untyped-def]
    argv = ["--base", "a", "--base=b", "--ft", "c", "--", "--base"]
    out = rename_flags(
        argv, {"--base": "--model", "--ft": "--model-b"}, prog="adl kl", removed_in="0.8.0"
    )
    assert out == ["--model", "a", "--model=b", "--model-b", "c", "--", "--base"]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "adl kl: warning: --base is deprecated, use --model (--base will be removed in 0.8.0)",
        "adl kl: warning: --ft is deprecated, use --model-b (--ft will be removed in 0.8.0)",
    ]


def test_removed_flags_are_one_line_naming_the_new_flag(capsys) -> None:  # type: ignore[no-untyped-def]
    """A flag a release removed names its replacement (d875146: ``perk eval --ckpt`` said only
    that ``--model`` was missing; ``mbok eval --text``: "unrecognized arguments")."""
    removed = {"perk eval": {"--ckpt": "--model"}, "adl kl": {"--base": "--base-model"}}
    with pytest.raises(
        UsageError, match=r"^perk eval --ckpt: removed in pkg 0\.8\.0; use --model$"
    ):
        refuse_removed_flags(["perk", "eval", "--ckpt=x"], removed, removed_in="pkg 0.8.0")
    for fine in (
        ["perk", "fit", "--ckpt", "x"],
        ["adl", "kl", "--base-model", "m"],
        ["adl", "kl", "--", "--base"],
    ):
        refuse_removed_flags(fine, removed, removed_in="pkg 0.8.0")
    script = ConsoleScript(
        "demo_pkg",
        "1.0",
        "demo",
        {"adl": "x"},
        handlers=lambda: {"adl": lambda argv: 0},
        configs=False,
        removed_flags=removed,
        removed_in="demo 0.8.0",
    )
    with pytest.raises(SystemExit) as exc:
        script.main(["adl", "kl", "--base", "m"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert err == ["demo-pkg: error: adl kl --base: removed in demo 0.8.0; use --base-model"]
    assert script.main(["adl", "kl", "--base-model", "m"]) == 0


@pytest.mark.parametrize("value", ["nan", "-inf", "Infinity", "+NaN", ".inf", "-.Inf", ".NaN"])
def test_non_finite_command_line_numbers_name_the_option(value: str) -> None:
    with pytest.raises(
        UsageError, match=f"^--lr {value}: not a finite number$".replace("+", r"\+")
    ):
        refuse_non_finite(["fit", "--lr", value])
    with pytest.raises(UsageError, match=r"--model\.init_args\.lr"):
        refuse_non_finite([f"--model.init_args.lr={value}"])
    refuse_non_finite(["--name", "inference", "--", "--lr", value])  # after --: not an option


def test_publish_gives_library_written_files_ordinary_modes(tmp_path: Path) -> None:
    """safetensors writes 0600 and ``tempfile`` folders are 0700 (d875146: ``save_pretrained``
    folders of suit/antibody/linguamap/remix and the model caches were private)."""
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    os.chmod(folder / "sub", 0o700)
    for name in ("model.safetensors", "sub/tokenizer.json"):
        (folder / name).write_text("x")
        os.chmod(folder / name, 0o600)
    single = tmp_path / "w.safetensors"
    single.write_text("x")
    os.chmod(single, 0o600)
    assert publish(folder) == folder and publish(single) == single
    assert stat.S_IMODE(single.stat().st_mode) == 0o644
    for path in (folder / "model.safetensors", folder / "sub" / "tokenizer.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    for path in (folder, folder / "sub"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, path


def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("DEMO_TRACEBACK", raising=False)

    def work(argv: list[str]) -> int:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exc:
        run_with_one_line_errors(
            "demo", work, [], is_user=lambda e: False, traceback_env="DEMO_TRACEBACK"
        )
    assert exc.value.code == 130
    err = capsys.readouterr().err
    assert err.strip() == "demo: interrupted" and "Traceback" not in err
    monkeypatch.setenv("DEMO_TRACEBACK", "1")
    with pytest.raises(KeyboardInterrupt):
        run_with_one_line_errors(
            "demo", work, [], is_user=lambda e: False, traceback_env="DEMO_TRACEBACK"
        )


def test_output_errors_are_one_line_user_errors(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "f.txt"
    target.write_text("x")

    def work(argv: list[str]) -> int:
        check_out_folder(target)
        raise AssertionError("the work ran")

    with pytest.raises(SystemExit) as exc:
        run_with_one_line_errors("demo", work, [], is_user=lambda e: False, traceback_env="X_TB")
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"demo: error: --out {target}: exists and is a file; give a folder"
    )


# ------------------------------------------------------------------ progress and devices


def _output_parser(**kwargs: object) -> ArgumentParser:
    parser = ArgumentParser(prog="tool run")
    add_output_options(parser, **kwargs)  # type: ignore[arg-type]
    return parser


def test_output_options_overwrite_and_resume_exclude_each_other(capsys) -> None:  # type: ignore[no-untyped-def]
    parser = _output_parser(resumable=True)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--out", "x", "--overwrite", "--resume"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "argument --resume: not allowed with argument --overwrite" in err
    ns = parser.parse_args(["--out", "x", "--resume"])
    assert (ns.overwrite, ns.resume) == (False, True)
    # the same pair from a config file (argparse does not see it) is one line from the check
    ns.overwrite = True
    with pytest.raises(OutputError, match="--overwrite and --resume exclude each other"):
        check_output_options(ns)


def test_output_options_required_or_optional(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit):
        _output_parser().parse_args([])
    assert "the following arguments are required: --out" in capsys.readouterr().err
    optional = _output_parser(kind="file", required=False)
    ns = optional.parse_args([])
    assert ns.out is None and check_output_options(ns, kind="file") is None
    assert not hasattr(_output_parser().parse_args(["--out", "x"]), "resume")
    helps = {a.dest: a.help for a in _output_parser(resumable=True)._actions}
    assert helps["overwrite"] == "replace the earlier results in --out"
    assert "--out holds" in helps["resume"]
    helps = {a.dest: a.help for a in _output_parser(kind="file", help="a CSV")._actions}
    assert (helps["out"], helps["overwrite"]) == ("a CSV", "replace an existing --out")
    helps = {a.dest: a.help for a in _output_parser(kind="file", resumable=True)._actions}
    assert "kept beside it" in helps["resume"]
    with pytest.raises(ValueError):
        _output_parser(kind="table")


def test_output_options_check_a_folder_or_a_file(tmp_path: Path) -> None:
    existing = tmp_path / "a.csv"
    existing.write_text("x\n")
    folder_ns = _output_parser().parse_args(["--out", str(existing)])
    with pytest.raises(OutputError, match=r"^--out .*a.csv: exists and is a file; give a folder"):
        check_output_options(folder_ns)
    file_ns = _output_parser(kind="file").parse_args(["--out", str(existing)])
    with pytest.raises(OutputError, match=r"^--out .*a.csv: exists; pass --overwrite"):
        check_output_options(file_ns, kind="file")
    file_ns.overwrite = True
    assert check_output_options(file_ns, kind="file") == existing
    dir_ns = _output_parser(kind="file").parse_args(["--out", str(tmp_path)])
    with pytest.raises(OutputError, match="is a folder; give a file name"):
        check_output_options(dir_ns, kind="file")
    # a resumable folder: a partial one is continued with --resume
    partial = tmp_path / "run"
    partial.mkdir()
    (partial / PARTIAL_MARKER).write_text("")
    (partial / "done.json").write_text("{}")
    resumable = _output_parser(resumable=True)
    folder = check_output_options(resumable.parse_args(["--out", str(partial), "--resume"]))
    assert isinstance(folder, OutputFolder) and folder.resumed
    with pytest.raises(OutputError, match="--resume to continue it"):
        check_output_options(resumable.parse_args(["--out", str(partial)]))
    # not resumable: the hint names --overwrite alone
    with pytest.raises(OutputError, match="pass --overwrite to start again"):
        check_output_options(_output_parser().parse_args(["--out", str(partial)]))
    # another option name
    other = ArgumentParser(prog="tool")
    add_output_options(other, option="--toolkit-dir")
    with pytest.raises(OutputError, match=r"^--toolkit-dir "):
        check_output_options(
            other.parse_args(["--toolkit-dir", str(existing)]), option="--toolkit-dir"
        )


def test_output_options_check_a_derived_path(tmp_path: Path) -> None:
    """``path=`` checks a folder the command derives from ``--out`` (``suit facts``'
    ``OUT.partial/``) under the same rule and wording; the pair from a config file stays one line."""
    derived = tmp_path / "facts.json.partial"
    derived.mkdir()
    (derived / PARTIAL_MARKER).write_text("")
    (derived / "chunk-0.json").write_text("[]")
    resumable = _output_parser(kind="file", resumable=True)
    ns = resumable.parse_args(["--out", str(tmp_path / "facts.json")])
    with pytest.raises(OutputError, match=r"^--out .*facts.json.partial: .*--resume to continue"):
        check_output_options(ns, path=derived)
    ns.resume = True
    assert check_output_options(ns, path=derived).resumed
    ns.overwrite = True
    with pytest.raises(OutputError, match="--overwrite and --resume exclude each other"):
        check_output_options(ns, path=derived)
    optional = _output_parser(kind="file", required=False).parse_args([])
    assert check_output_options(optional, path=derived) is None


def test_output_options_on_a_jsonargparse_parser() -> None:
    jsonargparse = pytest.importorskip("jsonargparse")
    parser = jsonargparse.ArgumentParser(exit_on_error=False)
    add_output_options(parser, resumable=True)
    with pytest.raises(argparse.ArgumentError, match="not allowed with argument --overwrite"):
        parser.parse_args(["--out", "x", "--overwrite", "--resume"])
    ns = parser.parse_args(["--out", "x", "--resume"])
    assert (ns.overwrite, ns.resume) == (False, True)


class _Stream(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_plain_progress_lines_when_not_a_terminal() -> None:
    stream = _Stream()
    items = list(progress(range(4), description="suit facts", stream=stream, every_s=0.0))
    assert items == [0, 1, 2, 3]
    lines = stream.getvalue().strip().splitlines()
    assert lines[0] == "suit facts: 0/4"  # at once, before the first item is done
    assert lines[1].startswith("suit facts: 1/4, ") and "left" in lines[1]
    assert len(lines) == 1 + 4  # the start line, then every item (every_s=0), the last "(done)"
    assert lines[-1].startswith("suit facts: 4/4, ") and lines[-1].endswith("(done)")
    quiet = _Stream()
    assert list(progress([1, 2], description="x", stream=quiet, quiet=True)) == [1, 2]
    assert quiet.getvalue() == ""
    slow = _Stream()  # the start line comes before the first item is asked for
    started = progress(iter(range(2)), description="judge", stream=slow, every_s=3600.0)
    assert next(started) == 0 and slow.getvalue() == "judge: 0\n"
    assert list(started) == [1] and slow.getvalue().splitlines()[-1].endswith("(done)")
    from iclr26_common.testing import progress_line

    assert all(progress_line(line) for line in [*lines, "judge: 0"])
    assert not progress_line("tool: error: rows.jsonl: 12") and not progress_line("x: interrupted")
    assert format_eta(5) == "5 s" and format_eta(185) == "3 min 05 s"
    assert format_eta(3720) == "1 h 02 min"


def test_progress_after_a_delay_prints_nothing_before_it() -> None:
    """``after_s``: an inner loop under another progress display (rf-matid's per-cell epochs)
    shows plain lines, none before ``after_s`` seconds, start and end lines included; it
    replaced a stream wrapper in rf-matid that held the lines back."""

    class _Terminal(_Stream):
        def isatty(self) -> bool:
            return True

    short = _Terminal()
    assert list(progress(range(3), description="e", stream=short, after_s=3600.0)) == [0, 1, 2]
    assert short.getvalue() == ""  # neither the start line nor "(done)" of a short loop
    late = _Terminal()  # past the delay at once: plain lines (no bar on a terminal), no start line
    assert list(progress(range(2), description="e", stream=late, every_s=0.0, after_s=0.0)) == [
        0,
        1,
    ]
    lines = late.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("e: 1/2, ") and lines[1].endswith("(done)")


def test_device_option_errors_name_the_option() -> None:
    torch = pytest.importorskip("torch")
    from iclr26_common.cli_support import UsageError
    from iclr26_common.device import parse_device_option

    assert parse_device_option("CPU") == torch.device("cpu")
    with pytest.raises(UsageError, match=r"^--device gpu: not a device; use cpu, cuda or cuda:N"):
        parse_device_option("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match=r"^--device cuda: PyTorch sees no CUDA device"):
            parse_device_option("cuda")
    else:
        with pytest.raises(UsageError, match="CUDA device"):
            parse_device_option(f"cuda:{torch.cuda.device_count()}")


def test_best_time_is_the_fastest_of_the_timed_calls() -> None:
    from iclr26_common.timing import best_time

    calls: list[int] = []
    assert best_time(lambda: calls.append(1), 4) >= 0.0 and len(calls) == 4
    assert best_time(lambda: calls.append(1), 2, warmup=True) >= 0.0 and len(calls) == 7
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        best_time(lambda: None, 0)


def test_every_quiet_option_has_the_one_help_text() -> None:
    import subprocess

    from iclr26_common.cli_support import ArgumentParser
    from iclr26_common.progress import QUIET_HELP, add_quiet_option

    parser = ArgumentParser(prog="x")
    add_quiet_option(parser, also="no HU window line")
    assert parser.parse_args(["--quiet"]).quiet and not parser.parse_args([]).quiet
    assert f"{QUIET_HELP}; no HU window line" in " ".join(parser.format_help().split())
    # no package declares --quiet by hand (its wording would drift from the others)
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run(
        ["grep", "-rln", '"--quiet"', *map(str, root.glob("*/src"))],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert found, "the grep found no package source (not even common's)"
    assert [f for f in found if not f.endswith("iclr26_common/progress.py")] == []


def test_every_device_option_has_the_one_help_text() -> None:

    from iclr26_common.cli_support import ArgumentParser
    from iclr26_common.device import DEVICE_HELP, add_device_option

    parser = ArgumentParser(prog="x")
    add_device_option(parser)
    assert parser.parse_args(["--device", "cuda:1"]).device == "cuda:1"
    assert parser.parse_args([]).device is None
    assert DEVICE_HELP in " ".join(parser.format_help().split())
    cpu = ArgumentParser(prog="y")
    add_device_option(cpu, default_text="the CPU, as the experiment", also="where it trains")
    assert "cpu, cuda or cuda:N (default: the CPU, as the experiment); where it trains" in (
        " ".join(cpu.format_help().split())
    )
    assert DEVICE_HELP not in " ".join(cpu.format_help().split())
    # no package declares --device by hand (its wording would drift from the others)
    # (a declaration: `add_argument(` then the option, on one line or the next; a message that
    # names "--device" is not one)
    import re

    root = Path(__file__).resolve().parents[2]
    declares = re.compile(r'add_argument\(\s*"--device"')
    found = [
        str(path)
        for path in sorted(root.glob("*/src/**/*.py"))
        if declares.search(path.read_text(encoding="utf-8"))
    ]
    assert found, "the search found no package source (not even common's)"
    assert [f for f in found if not f.endswith("iclr26_common/device.py")] == []


def test_device_option_on_a_jsonargparse_parser() -> None:
    jsonargparse = pytest.importorskip("jsonargparse")
    from iclr26_common.device import DEVICE_HELP, add_device_option

    parser = jsonargparse.ArgumentParser(exit_on_error=False)
    add_device_option(parser, type=str | None)
    assert parser.parse_args(["--device", "cpu"]).device == "cpu"
    assert parser.parse_args([]).device is None
    assert DEVICE_HELP in " ".join(parser.format_help().split())
