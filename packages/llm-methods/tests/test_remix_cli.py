"""``llm-methods remix``: configs parse, LightningCLI fit (tiny, in process), eval, synth,
one-line errors for bad input (empty reward set, bad jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main
from llm_methods.method_cli import shipped_configs


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_methods.remix.data import records_to_problems, sft_texts, synth_problems
    from llm_methods.zoo.models import tiny_lm

    texts = [p + r for p, r in sft_texts(records_to_problems(synth_problems(30, 0)))]
    lm = tiny_lm(texts, vocab_size=280, n_layers=1, hidden=32, heads=2)
    folder = tmp_path_factory.mktemp("remix-policy")
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


@pytest.mark.parametrize("name", sorted(shipped_configs("remix")))
def test_shipped_configs_parse(name: str) -> None:
    from llm_methods.remix.model import RLConfig

    cfg = yaml.safe_load(shipped_configs("remix")[name].read_text())
    args = dict(cfg["model"]["init_args"])
    for key in ("policy", "rewards", "save_dir", "seed"):
        args.pop(key, None)
    RLConfig(**args).validate()
    assert cfg["model"]["class_path"].endswith("ReMixModule")


def test_remix_config_has_paper_defaults() -> None:
    args = yaml.safe_load(shipped_configs("remix")["remix"].read_text())["model"]["init_args"]
    assert (args["p_off"], args["utd"], args["n_past"], args["reincarnate_at"]) == (0.4, 2, 2, 50)


def test_fit_tiny_then_eval(policy_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "trained"
    assert (
        main(
            [
                "remix",
                "fit",
                "--config",
                "tiny",
                f"--model.init_args.policy={policy_dir}",
                f"--model.init_args.save_dir={out}",
                "--trainer.fast_dev_run=1",
                f"--trainer.default_root_dir={tmp_path}",
            ]
        )
        == 0
    )
    assert (out / "config.json").is_file()
    data = tmp_path / "p.jsonl"
    assert main(["remix", "synth", "--out", str(data), "--n", "5"]) == 0
    ev = tmp_path / "ev"
    assert (
        main(
            [
                "remix",
                "eval",
                "--model",
                str(out),
                "--data",
                str(data),
                "--out",
                str(ev),
                "--max-new-tokens",
                "4",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (ev / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 5 and {"gold", "prediction", "correct", "length"} <= set(rows[0])
    assert json.loads((ev / "summary.json").read_text())["n"] == 5
    capsys.readouterr()
    assert main(["remix", "configs"]) == 0
    assert "tiny" in capsys.readouterr().out


def test_bad_input_one_line(policy_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    line = _one_line_error(
        capsys,
        [
            "remix",
            "fit",
            "--config",
            "tiny",
            f"--model.init_args.policy={policy_dir}",
            "--model.init_args.rewards=[]",
            "--trainer.fast_dev_run=1",
        ],
    )
    assert "empty reward set" in line
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    line = _one_line_error(
        capsys, ["remix", "eval", "--model", str(policy_dir), "--data", str(empty)]
    )
    assert "empty.jsonl: no problems (empty reward set)" in line
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "What is 2 + 2?"}\n')
    line = _one_line_error(
        capsys, ["remix", "eval", "--model", str(policy_dir), "--data", str(bad)]
    )
    assert "bad.jsonl:1: missing field 'answer'" in line
    line = _one_line_error(
        capsys,
        [
            "remix",
            "fit",
            "--config",
            "tiny",
            f"--model.init_args.policy={policy_dir}",
            "--model.init_args.p_off=2",
            "--trainer.fast_dev_run=1",
        ],
    )
    assert "p_off must be in [0, 1]" in line
