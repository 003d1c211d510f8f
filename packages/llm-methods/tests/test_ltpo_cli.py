"""``llm-methods ltpo``: synth, configs, solve on a tiny local model, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error, shipped_configs
from llm_methods.cli import main
from llm_methods.ltpo.cli import CONFIG_DIR


@pytest.fixture(scope="module")
def model_dir(saved_tiny_lm: Any) -> Path:
    return saved_tiny_lm(
        "tiny-ltpo",
        ["Tom has 3 apples and buys 4 more. " * 4, "How many now? 7. " * 8] * 3,
        vocab_size=280,
        n_layers=2,
        hidden=32,
        heads=2,
        max_len=1024,
    )


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


def _ltpo_group(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())["ltpo"]


def test_two_upstream_default_sets_differ() -> None:
    a, b = _ltpo_group("run_ltpo"), _ltpo_group("argparse_defaults")
    assert (a["n_thoughts"], a["sigma"], a["sigma_decay"], a["lr"]) == (8, 4.0, 0.9, 0.04)
    assert (b["n_thoughts"], b["sigma"], b["sigma_decay"], b["lr"]) == (10, 0.1, 0.99, 0.03)


def test_run_ltpo_is_the_config_default() -> None:
    """No --config = run_ltpo.sh's values (the LTPOConfig defaults)."""
    from dataclasses import asdict

    from llm_methods.ltpo.optimize import LTPOConfig

    assert {**asdict(LTPOConfig()), **_ltpo_group("run_ltpo")} == asdict(LTPOConfig())


@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("ltpo-problems") / "p.jsonl"
    assert main(["ltpo", "synth", "--out", str(data), "--n", "2"]) == 0
    return data


@pytest.mark.parametrize("path", shipped_configs("llm_methods.ltpo"), ids=lambda p: p.stem)
def test_every_shipped_config_solves(
    path: Path, model_dir: Path, problems: Path, tmp_path: Path
) -> None:
    """Each shipped YAML runs `ltpo solve` on the tiny model (2 problems; steps and K shrunk
    on the command line, every other value the file's)."""
    out = tmp_path / "run"
    args = ["--model", str(model_dir), "--data", str(problems), "--out", str(out)]
    small = ["--ltpo.steps", "2", "--ltpo.n_thoughts", "2", "--decode.max_new_tokens", "2"]
    assert main(["ltpo", "solve", "--config", path.stem, *args, *small]) == 0
    config = json.loads((out / "summary.json").read_text())["config"]
    expected = {**_ltpo_group(path.stem), "steps": 2, "n_thoughts": 2}
    assert {k: config[k] for k in expected} == expected


def test_synth_and_solve(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "p.jsonl"
    assert main(["ltpo", "synth", "--out", str(data), "--n", "3"]) == 0
    out = tmp_path / "run"
    args = [
        "ltpo",
        "solve",
        "--model",
        str(model_dir),
        "--data",
        str(data),
        "--out",
        str(out),
        "--ltpo.steps",
        "2",
        "--ltpo.n_thoughts",
        "3",
        "--decode.max_new_tokens",
        "4",
    ]
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and {"gold", "prediction", "correct"} <= set(rows[0])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["steps"] == 2 and summary["n"] == 3
    rerun = [*args[:-6], "--method", "cot", "--decode.max_new_tokens", "3"]
    assert_one_line_error(main, rerun, capsys, drop_earlier=True)  # earlier results kept (#37)
    assert main([*rerun, "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["ltpo", "configs"]) == 0
    assert "run_ltpo" in capsys.readouterr().out


def test_bad_input_one_line(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "p.jsonl"
    data.write_text('{"question": "q?", "answer": "#### 1"}\n{"question": "no answer"}\n')
    base = ["ltpo", "solve", "--model", str(model_dir), "--out", str(tmp_path / "o")]
    line = _one_line_error(capsys, [*base, "--data", str(data)])
    assert "p.jsonl:2: missing field 'answer'" in line
    good = tmp_path / "g.jsonl"
    good.write_text('{"question": "q?", "answer": "#### 1"}\n')
    line = _one_line_error(capsys, [*base, "--data", str(good), "--ltpo.n_thoughts", "0"])
    assert "n_thoughts (K) must be >= 1" in line
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"question": "", "answer": "#### 1"}\n')
    assert "field 'question' is empty" in _one_line_error(capsys, [*base, "--data", str(empty)])
    line = _one_line_error(capsys, [*base, "--data", str(good), "--config", "nope"])
    assert line == (
        "llm-methods ltpo solve: error: unknown config 'nope'; shipped: ['adam', "
        "'argparse_defaults', 'run_ltpo', 'run_ltpo_scaled'] (see llm-methods ltpo solve --help)"
    )
    assert _one_line_error(capsys, [*base, "--data", str(good), "--config=nope"]) == line


def test_old_flat_config_and_flags_fail_in_one_line(
    model_dir: Path, problems: Path, tmp_path: Path, capsys: Any
) -> None:
    """Issue 29: the settings are the ``ltpo:``/``decode:`` groups; a flat YAML of the old shape
    and the old flags are rejected by jsonargparse in one line, not silently ignored."""
    flat = tmp_path / "flat.yaml"
    flat.write_text("n_thoughts: 8\nsigma: 4.0\n")
    base = ["ltpo", "solve", "--model", str(model_dir), "--data", str(problems)]
    base += ["--out", str(tmp_path / "o")]
    line = _one_line_error(capsys, [*base, "--config", str(flat)])
    assert line == (
        f"llm-methods ltpo solve: error: {flat}: unknown field(s) ['n_thoughts', 'sigma'] "
        "(settings nest under: decode, ltpo) (see llm-methods ltpo solve --help)"
    )
    assert _one_line_error(capsys, [*base, f"--config={flat}"]) == line
    assert _one_line_error(capsys, [*base, "--steps", "2"]) == (
        "llm-methods ltpo solve: error: unrecognized arguments: --steps 2 "
        "(see llm-methods ltpo solve --help)"
    )
    line = _one_line_error(capsys, [*base, "--ltpo.optimizer", "sgd"])
    assert line.startswith("llm-methods ltpo solve: error: ") and "ltpo.optimizer" in line
    assert not (tmp_path / "o").exists()


def test_a_bad_config_file_is_named_in_the_error(
    model_dir: Path, problems: Path, tmp_path: Path, capsys: Any
) -> None:
    """Issue 29 review: an error coming from a --config YAML names that file (and the field):
    an unknown nested field, a value of the wrong type, a value the group's check refuses."""
    base = ["ltpo", "solve", "--model", str(model_dir), "--data", str(problems)]
    base += ["--out", str(tmp_path / "o")]
    cases = {
        "ltpo:\n  bogus: 1\n": "unknown field(s) ['ltpo.bogus']",
        "ltpo:\n  n_thoughts: abc\n": 'Parser key "ltpo.n_thoughts": Expected a',
        "decode:\n  batch_size: 0\n": "decode.batch_size must be >= 1, got 0",
        "- n_thoughts\n": "expected a mapping of settings, got list",
    }
    for i, (text, message) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(text)
        line = _one_line_error(capsys, [*base, "--config", str(path)])
        assert line.startswith(f"llm-methods ltpo solve: error: {path}: {message}"), line
    assert not (tmp_path / "o").exists()
