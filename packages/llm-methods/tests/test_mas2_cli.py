"""``llm-methods mas2``: synth, generate/validate, run, train; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main

CONFIGS = sorted((Path(__file__).parents[1] / "src/llm_methods/mas2/configs").glob("*.yaml"))


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_parse(path: Path) -> None:
    from llm_methods.mas2.pool import load_pool

    assert yaml.safe_load(path.read_text())
    assert load_pool(path).models


def test_synth_train_generate_run(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "code.jsonl"
    assert main(["mas2", "synth", "--kind", "code", "--n", "4", "--out", str(data)]) == 0
    assert (
        main(
            [
                "mas2",
                "train",
                "--tasks",
                str(data),
                "--rounds",
                "1",
                "--k",
                "2",
                "--out",
                str(tmp_path / "t"),
            ]
        )
        == 0
    )
    team = tmp_path / "t" / "team.json"
    assert json.loads(team.read_text())["generator"]
    wf = tmp_path / "wf.json"
    assert (
        main(["mas2", "generate", "--tasks", str(data), "--team", str(team), "--out", str(wf)]) == 0
    )
    assert "assignment" in json.loads(wf.read_text())
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["mas2", "run", "--tasks", str(data), "--team", str(team), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 4 and 0 <= summary["success"] <= 1 and summary["cost_per_task"] > 0
    # progress over the runs on stderr, none with --quiet (d875146: silent, --quiet unknown)
    assert "mas2 run tasks: 4/4" in capsys.readouterr().err
    quiet = ["mas2", "run", "--tasks", str(data), "--team", str(team), "--quiet"]
    assert main([*quiet, "--out", str(tmp_path / "run-q")]) == 0
    assert "mas2 run tasks" not in capsys.readouterr().err
    assert (tmp_path / "run-q" / "results.jsonl").read_text() == (out / "results.jsonl").read_text()
    spec = tmp_path / "fixed.wf"
    spec.write_text("p = Programmer()\nt = Test(p)\nreturn t\n")
    assert main(["mas2", "generate", "--validate", str(spec)]) == 0
    assert (
        main(
            [
                "mas2",
                "run",
                "--tasks",
                "synth-arith",
                "--limit",
                "2",
                "--workflow",
                str(spec),
                "--no-rectifier",
                "--out",
                str(tmp_path / "r2"),
            ]
        )
        == 0
    )


def test_bad_input_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    spec = tmp_path / "bad.wf"
    spec.write_text("a = AnswerGenerate()\nb = Review(a, a)\nreturn b\n")
    line = _one_line_error(capsys, ["mas2", "generate", "--validate", str(spec)])
    assert "node 'b'" in line
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"task_id": "1", "question": "q"}\n')
    out = str(tmp_path / "o")  # not tmp_path: it holds the inputs, refused as earlier results
    line = _one_line_error(capsys, ["mas2", "run", "--tasks", str(bad), "--out", out])
    assert "t.jsonl:1: missing field 'answer'" in line
    line = _one_line_error(
        capsys,
        [
            "mas2",
            "run",
            "--backend",
            "openai",
            "--models",
            "m=1",
            "--retries",
            "0",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--limit",
            "1",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert "failed after 1 attempts" in line
    assert not (tmp_path / "o").exists()  # issue 37: a refused run leaves no empty folder
    line = _one_line_error(capsys, ["mas2", "run", "--backend", "openai", "--out", out])
    assert "--models" in line


def test_generated_code_needs_an_os_sandbox_or_consent(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.mas2 import isolation

    monkeypatch.setattr(isolation, "available", lambda: ())
    args = [
        "mas2",
        "train",
        "--tasks",
        "synth-arith",
        "--limit",
        "2",
        "--rounds",
        "1",
        "--k",
        "2",
        "--out",
        str(tmp_path / "t"),
    ]
    line = _one_line_error(capsys, args)
    assert "no OS-level isolation" in line and "--allow-unisolated" in line
    assert not (tmp_path / "t").exists()
    run = ["mas2", "run", "--tasks", "synth-arith", "--limit", "1", "--out", str(tmp_path / "r")]
    line = _one_line_error(capsys, run)
    assert "no OS-level isolation" in line
    assert not (tmp_path / "r").exists()  # issue 37: 11b2942 left an empty folder behind
    assert main([*args, "--allow-unisolated"]) == 0


def test_deep_workflow_json_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    deep = tmp_path / "deep.json"
    deep.write_text('{"nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested too deeply" in _one_line_error(
        capsys, ["mas2", "generate", "--validate", str(deep)]
    )


def test_generate_honours_limit(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``generate --limit 2`` writes the workflows of the first two tasks (fails on d9942d3:
    ``--limit`` was ignored, one workflow of the first task); without ``--limit`` one, as
    before."""
    from iclr26_common.testing import run_main

    out = tmp_path / "wf.json"
    args = ["mas2", "generate", "--tasks", "synth-arith", "--limit", "2", "--out", str(out)]
    run = run_main(main, args, capsys)
    assert run.code == 0, run.err
    written = json.loads(out.read_text())
    assert isinstance(written, list) and len(written) == 2
    assert len({w["task_id"] for w in written}) == 2 and all("assignment" in w for w in written)
    assert run.out.count("# task ") == 2
    one = tmp_path / "one.json"
    assert main(["mas2", "generate", "--tasks", "synth-arith", "--out", str(one)]) == 0
    assert "assignment" in json.loads(one.read_text())


def test_run_says_which_isolation_boundary_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` names the sandbox boundary generated code ran in, in ``summary.json`` and on the
    console: here, with no OS boundary and ``--allow-unisolated``, the hook only (fails on
    d9942d3: neither said which)."""
    from iclr26_common.testing import run_main
    from llm_methods.mas2 import isolation

    monkeypatch.setattr(isolation, "available", lambda: ())
    out = tmp_path / "r"
    args = ["mas2", "run", "--tasks", "synth-code", "--limit", "2", "--allow-unisolated"]
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 0, run.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["isolation"] == ["none"], summary
    assert "audit hook only" in summary["isolation_boundary"]
    assert f"generated code ran in: {summary['isolation_boundary']}" in run.out, run.out


def test_run_local_backend_checks_device(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``run --backend local --device gpu`` is one line naming ``--device`` before any task runs
    (fails on d9942d3: ``--device`` unknown, the local model always on the default device)."""
    out = tmp_path / "r"
    args = ["mas2", "run", "--backend", "local", "--models", "m=1", "--model", "nope"]
    line = _one_line_error(capsys, [*args, "--device", "gpu", "--out", str(out)])
    assert "--device gpu: not a device" in line, line
    assert not out.exists()


@pytest.mark.parametrize("backend", ["sim", "openai"])
def test_run_checks_device_whatever_the_backend(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``run --device gpu`` is one line naming ``--device`` with every backend, before any task
    runs (fails on 44537c0: checked only for ``--backend local``; ``--backend sim`` exited 0)."""
    out = tmp_path / "r"
    args = ["mas2", "run", "--backend", backend, "--models", "m=1", "--limit", "1"]
    line = _one_line_error(capsys, [*args, "--device", "gpu", "--out", str(out)])
    assert "--device gpu: not a device" in line, line
    assert not out.exists()


def test_team_file_not_utf8_or_a_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``run --team`` reads through the workspace's text reader: bytes that are not UTF-8 are one
    line naming the file and the byte (fails on 44537c0: a 36-line ``UnicodeDecodeError``), a
    folder is "is a folder", a missing file "no such"."""
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x80 team")
    folder = tmp_path / "given"
    folder.mkdir()
    out = tmp_path / "r"
    args = ["mas2", "run", "--allow-unisolated", "--limit", "1", "--out", str(out), "--team"]
    line = _one_line_error(capsys, [*args, str(bad)])
    assert f"{bad}: not UTF-8 text (byte 0xff at offset 0)" in line, line
    line = _one_line_error(capsys, [*args, str(folder)])
    assert f"{folder}: is a folder; give a MAS² team file" in line, line
    line = _one_line_error(capsys, [*args, str(tmp_path / "none.json")])
    assert "none.json: no such MAS² team file" in line, line
    assert not out.exists()  # a refused run leaves no output folder
