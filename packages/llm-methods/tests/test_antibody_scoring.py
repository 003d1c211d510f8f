"""Issue 41, Antibody: finetune accuracy (FA) is scored by the official evaluation scripts'
rules (Antibody@1d4fa5f ``gsm8k/pred_eval.py``, ``sst2/pred_eval.py``,
``agnews/pred_eval.py``), and a row longer than ``--max-len`` is named by file and line with a
truncation option.

Every test here fails on d9942d3: there FA compared the gold with the *first* integer of the
response (a GSM8K solution "48/2 = 24 ... The final answer is 72" scored against 48), had no
SST-2 / AG News rule, and ``row 0: 56 tokens > max_len 32`` named neither the file nor
``--max-len`` and offered no truncation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iclr26_common.testing import assert_one_line_error
from llm_methods.antibody.data import answer_matches, gsm8k_answer
from llm_methods.cli import main

NATALIA = (
    "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April "
    "and May.\n"
)


@pytest.mark.parametrize(
    ("response", "gold", "expected"),
    [
        # the example: no "The final answer is: " marker -> the last number
        (NATALIA + "The final answer is 72", "72", True),
        # the official marker (colon and space): the first number after it
        (NATALIA + "The final answer is: 72", "72", True),
        ("The final answer is: 72. Check: 72 - 24 = 48", "72", True),
        ("The final answer is: 48 clips, then 72", "72", False),
        # a full GSM8K gold solution: its #### is read as the official marker
        (NATALIA + "The final answer is: 72", NATALIA + "#### 72", True),
        # commas removed, numbers compared as floats
        ("so the total is $1,234", "1234", True),
        ("The final answer is: 72.0", "72", True),
        # the last number, not the first
        ("It is 17 or 7", "7", True),
        ("It is 7 or 17", "7", False),
        ("no number at all", "7", False),
    ],
)
def test_gsm8k_rule_is_the_official_extraction(response: str, gold: str, expected: bool) -> None:
    assert answer_matches(response, gold) is expected
    assert answer_matches(response, gold, "gsm8k") is expected


def test_gsm8k_answer_values() -> None:
    assert gsm8k_answer("The final answer is: -3.5 apples") == -3.5
    assert gsm8k_answer("1,000 and 2,000") == 2000.0
    assert gsm8k_answer("none") == float("inf")


@pytest.mark.parametrize(
    ("response", "gold", "rule", "expected"),
    [
        ("positive", "positive", "sst2", True),
        ("Positive", "1", "sst2", True),
        (" negative\n", "0", "sst2", True),
        ("positive.", "positive", "sst2", False),  # the official check is exact
        ("The sentiment is positive", "positive", "sst2", False),
        ("Sci/Tech", "3", "agnews", True),
        ("sci", "Sci/Tech", "agnews", True),
        ("Sports", "sports", "agnews", True),
        ("Science", "3", "agnews", False),
        ("World news", "World", "agnews", False),
        ("red fox sky.", "red fox sky", "auto", True),  # the copy task (ours): prefix
    ],
)
def test_label_rules_are_exact_as_the_official_scripts(
    response: str, gold: str, rule: str, expected: bool
) -> None:
    assert answer_matches(response, gold, rule) is expected


def test_bad_golds_and_rules_raise() -> None:
    from llm_methods.lm import LMError

    with pytest.raises(LMError, match="SST-2 gold"):
        answer_matches("positive", "neutral", "sst2")
    with pytest.raises(LMError, match="unknown FA rule"):
        answer_matches("x", "y", "math")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ab-base-len")
    assert main(["antibody", "pretrain", "--out", str(folder), "--steps", "1"]) == 0
    return folder


def test_long_row_names_file_line_and_max_len_and_truncate_cuts(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = tmp_path / "user.jsonl"
    rows = [
        {"prompt": "Repeat: red fox", "response": "red fox.", "is_safe": True},
        {"prompt": "Repeat: sky", "response": " ".join(["sky"] * 60), "is_safe": True},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["antibody", "finetune", "--model", str(base), "--data", str(data), "--method", "sft"]
    argv += ["--max-len", "32", "--stage.steps", "1", "--quiet"]
    line = assert_one_line_error(
        main, [*argv, "--out", str(tmp_path / "a")], capsys, drop_earlier=True
    )
    assert f"{data}:2:" in line and "--max-len 32" in line and "--truncate" in line, line
    assert main([*argv, "--truncate", "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "antibody.json").is_file()


def test_fit_long_row_names_file_line_and_its_options_and_truncate_cuts(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``antibody fit`` (LightningCLI) has no ``--max-len``: its message names the file, the
    line and the module's own options, and ``--model.init_args.truncate`` cuts instead."""
    data = tmp_path / "user.jsonl"
    rows = [
        {"prompt": "Repeat: sky", "response": " ".join(["sky"] * 60), "is_safe": True},
        {"prompt": "Repeat: fox", "response": " ".join(["fox"] * 60), "is_safe": True},
    ]  # both too long: the module draws its batch rows at random
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["antibody", "fit", "--config", "fit_tiny", f"--model.init_args.model={base}"]
    argv += ["--model.init_args.stage=finetune", "--model.init_args.method=sft"]
    argv += [f"--data.init_args.data={data}", "--data.init_args.poison_ratio=null"]
    argv += ["--data.init_args.batch_size=2", "--model.init_args.max_len=32"]
    argv += ["--trainer.fast_dev_run=1", f"--trainer.default_root_dir={tmp_path}"]
    # rows are encoded batch by batch, after the Trainer's start-up lines ("INFO: ...")
    info = lambda line: line.startswith("INFO:")  # noqa: E731
    line = assert_one_line_error(main, argv, capsys, drop_earlier=True, skip=info)
    assert f"{data}:1:" in line or f"{data}:2:" in line, line
    assert "--model.init_args.max_len 32" in line, line
    assert "--model.init_args.truncate" in line and "--max-len" not in line, line
    assert main([*argv, "--model.init_args.truncate=true"]) == 0
