"""``llm-methods ltpo``: synth, configs, solve on a tiny local model, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main
from llm_methods.ltpo.cli import CONFIG_DIR, load_config


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_methods.zoo.models import tiny_lm

    lm = tiny_lm(
        ["Tom has 3 apples and buys 4 more. " * 4, "How many now? 7. " * 8] * 3,
        vocab_size=280,
        n_layers=2,
        hidden=32,
        heads=2,
        max_len=1024,
    )
    folder = tmp_path_factory.mktemp("tiny-ltpo")
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_configs_parse(path: Path) -> None:
    from llm_methods.ltpo.model import LTPOConfig

    LTPOConfig(**load_config(path.stem)).validate()
    assert yaml.safe_load(path.read_text())


def test_two_upstream_default_sets_differ() -> None:
    a, b = load_config("run_ltpo"), load_config("argparse_defaults")
    assert (a["n_thoughts"], a["sigma"], a["sigma_decay"], a["lr"]) == (8, 4.0, 0.9, 0.04)
    assert (b["n_thoughts"], b["sigma"], b["sigma_decay"], b["lr"]) == (10, 0.1, 0.99, 0.03)


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
        "--steps",
        "2",
        "--n-thoughts",
        "3",
        "--max-new-tokens",
        "4",
    ]
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and {"gold", "prediction", "correct"} <= set(rows[0])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["steps"] == 2 and summary["n"] == 3
    assert main([*args[:-6], "--method", "cot", "--max-new-tokens", "3"]) == 0
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
    line = _one_line_error(capsys, [*base, "--data", str(good), "--n-thoughts", "0"])
    assert "n_thoughts (K) must be >= 1" in line
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"question": "", "answer": "#### 1"}\n')
    assert "field 'question' is empty" in _one_line_error(capsys, [*base, "--data", str(empty)])
    line = _one_line_error(capsys, [*base, "--data", str(good), "--config", "nope"])
    assert "unknown config 'nope'" in line
