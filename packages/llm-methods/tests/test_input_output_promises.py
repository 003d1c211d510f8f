"""Issue 36 (what a review found left on 52aa8a9), through the public CLI in-process: every
output path is checked before the work with :mod:`iclr26_common.outputs` (``antibody
eval/synth/pretrain``, ``perk synth``); every input file is read with
:mod:`iclr26_common.textio` (a folder given as a file is "is a folder", not "no such file"; bytes
that are not UTF-8 are one line naming the file, not a ``UnicodeDecodeError``); a non-finite
number is one line naming the option; ``mbok compress`` shows progress unless ``--quiet``;
``antibody align/finetune`` take a plain ``--seed``; ``zoo build`` takes ``--seed``/``--device``;
``suit edit --layers`` leaves ROME's layer alone. Each test fails on 52aa8a9 (its docstring says
how)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iclr26_common.testing import assert_one_line_error, run_main
from llm_methods.cli import main

#: Latin-1 bytes (0xe9 = "é"): not UTF-8.
NOT_UTF8 = "Caf\xe9 au lait\n".encode("latin-1")


def test_antibody_eval_checks_out_first_and_never_overwrites(tmp_path: Path, capsys: Any) -> None:
    """``antibody eval --out`` naming a file is refused before the data are read or the model
    loaded, and a folder holding an earlier ``summary.json`` is refused unless ``--overwrite``
    (52aa8a9: the file was found after the evaluation; ``summary.json`` was overwritten; no
    ``--overwrite`` or ``--quiet``)."""
    args = ["antibody", "eval", "--model", "nope", "--task", str(tmp_path / "missing.jsonl")]
    taken = tmp_path / "taken.txt"
    taken.write_text("mine")
    line = assert_one_line_error(main, [*args, "--out", str(taken)], capsys)
    assert f"--out {taken}: exists and is a file; give a folder" in line, line
    earlier = tmp_path / "ev"
    earlier.mkdir()
    (earlier / "summary.json").write_text("{}")
    line = assert_one_line_error(main, [*args, "--out", str(earlier)], capsys)
    assert "holds earlier results; pass --overwrite" in line, line
    assert (earlier / "summary.json").read_text() == "{}"
    # with --overwrite (and --quiet) the command goes on to the work: here the missing data file
    line = assert_one_line_error(
        main, [*args, "--out", str(earlier), "--overwrite", "--quiet"], capsys
    )
    assert "missing.jsonl" in line, line


def test_antibody_synth_and_pretrain_check_out_first(tmp_path: Path, capsys: Any) -> None:
    """``antibody synth`` refuses a folder of earlier splits unless ``--overwrite``, and
    ``antibody pretrain`` refuses a file as ``--out`` before training (52aa8a9: synth replaced
    the splits silently; pretrain trained, then failed on ``mkdir``)."""
    data = tmp_path / "data"
    assert run_main(main, ["antibody", "synth", "--out", str(data)], capsys).code == 0
    (data / "task.jsonl").write_text("mine\n")
    line = assert_one_line_error(main, ["antibody", "synth", "--out", str(data)], capsys)
    assert "holds earlier results; pass --overwrite" in line, line
    assert (data / "task.jsonl").read_text() == "mine\n"
    run = run_main(main, ["antibody", "synth", "--out", str(data), "--overwrite"], capsys)
    assert run.code == 0 and (data / "task.jsonl").read_text() != "mine\n", run.err
    taken = tmp_path / "base.txt"
    taken.write_text("mine")
    pretrain = ["antibody", "pretrain", "--out", str(taken), "--steps", "100000"]
    line = assert_one_line_error(main, pretrain, capsys)  # 100000 steps: refused before them
    assert f"--out {taken}: exists and is a file; give a folder" in line, line


def test_perk_synth_never_overwrites_without_overwrite(tmp_path: Path, capsys: Any) -> None:
    """``perk synth --out FILE`` refuses an existing file unless ``--overwrite`` and a folder
    (52aa8a9: replaced the file silently; a folder gave ``IsADirectoryError``)."""
    out = tmp_path / "b.jsonl"
    out.write_text("mine")
    synth = ["perk", "synth", "--n", "2", "--n-segments", "2"]
    line = assert_one_line_error(main, [*synth, "--out", str(out)], capsys)
    assert f"--out {out}: exists; pass --overwrite" in line and out.read_text() == "mine", line
    assert run_main(main, [*synth, "--out", str(out), "--overwrite"], capsys).code == 0
    assert len(out.read_text().splitlines()) == 2
    line = assert_one_line_error(main, [*synth, "--out", str(tmp_path)], capsys)
    assert f"--out {tmp_path}: is a folder; give a file name" in line, line


ROUTE = ("meta_router", "route")


def _input_cases(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """``{family: (command line with {input} for the input file, what the file is)}``."""
    queries = tmp_path / "q.csv"
    queries.write_text("prompt\nhello\n")
    out = str(tmp_path / "o")
    return {
        "bed play --world": (["bed", "play", "--world", "{input}", "--out", out], "world file"),
        "bed eig --world": (
            ["bed", "eig", "--world", "{input}", "--out", out + ".json"],
            "world file",
        ),
        "mas2 generate --validate": (
            ["mas2", "generate", "--validate", "{input}"],
            "workflow file",
        ),
        "mas2 run --workflow": (
            ["mas2", "run", "--workflow", "{input}", "--out", out],
            "workflow file",
        ),
        "meta_router route --router": (
            [*ROUTE, "--router", "{input}", "--queries", str(queries), "--out", out + ".csv"],
            "router file",
        ),
        "meta_router route --queries": (
            [*ROUTE, "--router", str(queries), "--queries", "{input}", "--out", out + ".csv"],
            "queries file",
        ),
    }


FAMILIES = [
    "bed play --world",
    "bed eig --world",
    "mas2 generate --validate",
    "mas2 run --workflow",
    "meta_router route --router",
    "meta_router route --queries",
]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_folder_given_as_an_input_file_is_named_as_a_folder(
    family: str, tmp_path: Path, capsys: Any
) -> None:
    """A folder where an input file is expected: one line "PATH: is a folder; give a WHAT",
    exit 2 (52aa8a9: "no such world file" / "no such workflow file" / "no such router file" for
    a folder that exists)."""
    args, what = _input_cases(tmp_path)[family]
    folder = tmp_path / "given"
    folder.mkdir()
    line = assert_one_line_error(main, [a.replace("{input}", str(folder)) for a in args], capsys)
    assert f"{folder}: is a folder; give a {what}" in line, line
    assert not (tmp_path / "o").exists()  # a refused run leaves no output folder


@pytest.mark.parametrize(
    "family",
    [f for f in FAMILIES if f != "meta_router route --router"],  # a pickle, not text
)
def test_an_input_file_that_is_not_utf8_is_one_line(
    family: str, tmp_path: Path, capsys: Any
) -> None:
    """Latin-1 bytes in a text input: one line naming the file and the byte, exit 2 (52aa8a9: a
    ``UnicodeDecodeError`` traceback; ``meta_router route --queries`` from pandas)."""
    args, _ = _input_cases(tmp_path)[family]
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(NOT_UTF8)
    line = assert_one_line_error(main, [a.replace("{input}", str(bad)) for a in args], capsys)
    assert f"{bad}: not UTF-8 text (byte 0xe9 at offset 3)" in line, line


def test_dispersion_text_files_decode_like_every_reader(tmp_path: Path, capsys: Any) -> None:
    """``dispersion measure --input`` reads ``.txt`` files with the workspace's decoding: the
    same one line naming the byte and its offset as every other reader (52aa8a9: its own
    message without the byte, ``not UTF-8 (invalid continuation byte)``)."""
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(NOT_UTF8)
    args = ["dispersion", "measure", "--input", str(bad), "--model", "nope"]
    line = assert_one_line_error(main, [*args, "--out", str(tmp_path / "o")], capsys)
    assert f"{bad}: not UTF-8 text (byte 0xe9 at offset 3); save it as UTF-8" in line, line


def test_jsonl_read_text_is_the_workspace_reader(tmp_path: Path) -> None:
    """``llm_methods.jsonl.read_text`` delegates to :func:`iclr26_common.textio.read_text`: a
    folder is "is a folder" (52aa8a9: "no such file"), a BOM is dropped, the error class is the
    caller's."""
    from llm_methods.jsonl import read_text
    from llm_methods.lm.errors import LMError

    with pytest.raises(IsADirectoryError, match="is a folder; give a file"):
        read_text(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl: no such file"):
        read_text(tmp_path / "nope.jsonl")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello")
    assert read_text(tmp_path / "bom.txt") == "hello"
    (tmp_path / "bad.txt").write_bytes(NOT_UTF8)
    with pytest.raises(LMError, match="byte 0xe9 at offset 3"):
        read_text(tmp_path / "bad.txt")


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["antibody", "finetune", "--model", "m", "--data", "d", "--out", "o"], "--poison-ratio"),
        (["ltpo", "solve", "--out", "o"], "--ltpo.sigma"),
    ],
    ids=lambda c: " ".join(c[:2]) if isinstance(c, list) else c,
)
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_non_finite_number_names_the_option(
    command: list[str], option: str, value: str, capsys: Any
) -> None:
    """``antibody finetune --poison-ratio nan`` and ``ltpo solve --ltpo.sigma inf``: one line
    naming the option (52aa8a9: jsonargparse's long "Does not validate against any of the Union
    subtypes" line, and ``Parser key "ltpo.sigma"`` instead of the option)."""
    line = assert_one_line_error(main, [*command, option, value], capsys)
    assert f"{option} {value}: not a finite number" in line, line
    assert "Union" not in line and "Parser key" not in line, line


def test_antibody_stages_take_a_plain_seed_and_the_old_spelling_warns(
    tmp_path: Path, capsys: Any
) -> None:
    """``antibody align/finetune --seed`` sets the stage seed; ``--stage.seed`` (renamed in 0.8.0)
    still works with one deprecation line naming its own removal version, 0.9.0, not the 0.8.0
    of the renames of 0.7.0 (52aa8a9: ``--seed`` was "unrecognized")."""
    from llm_methods.antibody.cli import STAGE_SEED_REMOVED_IN

    base = ["antibody", "finetune", "--model", "m", "--data", str(tmp_path / "none.jsonl")]
    base += ["--out", str(tmp_path / "o")]
    line = assert_one_line_error(main, [*base, "--seed", "-1"], capsys)
    assert "argument --seed: expected an integer in [0, 2**32), got '-1'" in line, line
    run = run_main(main, [*base, "--stage.seed", "3"], capsys)
    lines = [x for x in run.err.splitlines() if x.strip()]
    assert run.code == 2 and len(lines) == 2, run.err
    assert lines[0] == (
        "llm-methods antibody finetune: warning: --stage.seed is deprecated, use --seed "
        "(--stage.seed will be removed in llm-methods 0.9.0)"
    )
    assert STAGE_SEED_REMOVED_IN == "0.9.0"
    assert "none.jsonl" in lines[1], lines


def test_antibody_seed_reaches_the_stage_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain ``--seed`` is the stage's seed (the batch draws and the poisoned mixture)."""
    from llm_methods.antibody import cli

    seen: dict[str, int] = {}

    def fake(ns: Any) -> int:
        seen["seed"] = ns.stage.seed
        return 0

    monkeypatch.setattr(cli, "_finetune", fake)
    argv = ["finetune", "--model", "m", "--data", "d", "--out", "/nonexistent-dir/o"]
    monkeypatch.setattr("iclr26_common.outputs.check_out_folder", lambda *a, **k: _NullOut())
    assert cli.main([*argv, "--seed", "7"]) == 0 and seen["seed"] == 7
    assert cli.main(argv) == 0 and seen["seed"] == 0  # StageSettings' default


class _NullOut:
    def __enter__(self) -> _NullOut:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_mbok_compress_shows_progress_unless_quiet(
    tmp_path: Path, capsys: Any, saved_tiny_lm: Any
) -> None:
    """``mbok compress`` prints progress over the layers on stderr, none with ``--quiet``
    (52aa8a9: silent, and no ``--quiet``)."""
    model = saved_tiny_lm(
        "mbok-progress",
        ["Lists and tuples. " * 8] * 4,
        vocab_size=280,
        n_layers=1,
        hidden=16,
        heads=2,
    )
    args = ["mbok", "compress", "--model", str(model), "--device", "cpu", "--method", "rtn"]
    run = run_main(main, [*args, "--out", str(tmp_path / "a.safetensors")], capsys)
    assert run.code == 0 and "mbok compress (rtn) layers: 7/7" in run.err, run.err
    run = run_main(main, [*args, "--out", str(tmp_path / "b.safetensors"), "--quiet"], capsys)
    assert run.code == 0 and "mbok compress" not in run.err, run.err


def test_zoo_build_seed_and_device(tmp_path: Path, capsys: Any, nano_zoo: Any) -> None:
    """``zoo build --seed`` builds the recipe with that seed into its own folder, ``--device``
    is checked before any work (52aa8a9: neither existed: "unrecognized arguments")."""
    from llm_methods.zoo.registry import zoo_dir

    nano_zoo(2)
    line = assert_one_line_error(
        main, ["zoo", "build", "nano", "--cache-dir", str(tmp_path), "--device", "gpu"], capsys
    )
    assert "--device gpu: not a device" in line, line
    build = ["zoo", "build", "nano", "--cache-dir", str(tmp_path), "--quiet", "--device", "cpu"]
    assert run_main(main, [*build, "--seed", "1"], capsys).code == 0
    seeded = zoo_dir("nano", tmp_path, seed=1)
    assert seeded != zoo_dir("nano", tmp_path) and not zoo_dir("nano", tmp_path).exists()
    assert json.loads((seeded / "zoo.json").read_text())["recipe"]["seed"] == 1


def test_suit_edit_layers_leave_rome_its_own_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``suit edit --layers 3,4,5,6`` (the default layers) edits ROME's layer 4, as without
    ``--layers`` (52aa8a9: the last of --layers, 6): ROME's layer is its own setting, as in the
    official code's hparams/ROME files (AlphaEdit's ``ROME/Llama3-8B.json``: layer 5, inside
    AlphaEdit's layers 4-8, not the last). The edit itself is not run."""
    from llm_methods.suit import cli

    configs: list[Any] = []

    class Built(Exception):
        pass

    def fake_edit(ns: Any) -> dict[str, object]:
        configs.append(cli.edit_config(ns))
        raise Built

    monkeypatch.setattr(cli, "edit_main", fake_edit)
    edit = ["suit", "edit", "--method", "rome", "--requests", "r.json", "--out", str(tmp_path)]
    for extra in (["--layers", "3,4,5,6"], [], ["--layers", "3,4,5,6", "--rome-layer", "6"]):
        with pytest.raises(Built):
            main([*edit, *extra])
    assert [c.rome_layer for c in configs] == [4, 4, 6]
    assert [c.layers for c in configs] == [(3, 4, 5, 6)] * 3


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["ltpo", "solve", "--model", "zoo:micro", "--data", "{input}"], "file"),
        (["seekbench", "analyze", "{input}"], "trace file"),
    ],
)
def test_more_readers_name_a_folder_as_a_folder(
    args: list[str], what: str, tmp_path: Path, capsys: Any
) -> None:
    """A fresh review of issue 36 found ``ltpo solve --data DIR`` and ``seekbench analyze DIR``
    still reading "no such file" for a folder (every ``if not path.is_file()`` reader of the
    package now goes through ``iclr26_common.textio.input_file``)."""
    folder = tmp_path / "given"
    folder.mkdir()
    out = tmp_path / "o"
    argv = [a.replace("{input}", str(folder)) for a in args] + ["--out", str(out)]
    line = assert_one_line_error(main, argv, capsys)
    assert f"{folder}: is a folder; give a {what}" in line, line
    assert not out.exists()


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path: Path, capsys: Any) -> None:
    """``ltpo solve --config LATIN1.yaml`` was a ``UnicodeDecodeError`` traceback (a fresh review
    of issue 36; the LightningCLI commands already gave one line)."""
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"ltpo:\n  sigma: 4.0 # caf\xe9\n")
    data = tmp_path / "gsm.jsonl"
    data.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    argv = [
        "ltpo",
        "solve",
        "--config",
        str(bad),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "o"),
    ]
    line = assert_one_line_error(main, argv, capsys)
    assert f"--config {bad}: not UTF-8 text (byte 0xe9 at offset" in line, line
