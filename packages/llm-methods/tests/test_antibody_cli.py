"""``llm-methods antibody``: configs, synth -> pretrain -> align -> finetune -> eval, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error
from llm_methods.antibody.cli import CONFIG_DIR, load_config
from llm_methods.cli import main

STAGE_CONFIGS = sorted(p for p in CONFIG_DIR.glob("*.yaml") if not p.stem.startswith("fit_"))


@pytest.mark.parametrize("path", STAGE_CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_parse(path: Path) -> None:
    from llm_methods.antibody.model import AntibodyConfig

    values = load_config(path.stem)
    AntibodyConfig(
        **{k: v for k, v in values.items() if k in AntibodyConfig.__dataclass_fields__}
    ).validate()
    assert yaml.safe_load(path.read_text())


def test_default_config_is_the_official_script() -> None:
    """Issue 27: the default λ_t rule is the official code's (η_λ 5, EMA 0.99, the script's
    values); the paper's rule, whose constant a is ours, is the antibody_paper config."""
    code, paper = load_config("antibody"), load_config("antibody_paper")
    assert (code["rho"], code["eta_lambda"], code["tau"], code["lambda2"], code["ema"]) == (
        0.1,
        5.0,
        1.0,
        0.05,
        0.99,
    )
    assert code["lambda_rule"] == "code" and paper["lambda_rule"] == "paper" and paper["a"] == 1.0


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ab-synth")
    assert main(["antibody", "synth", "--out", str(folder)]) == 0
    return folder


def test_pipeline_end_to_end(synth: Path, tmp_path: Path) -> None:
    base, aligned, tuned, ev = (tmp_path / n for n in ("base", "aligned", "tuned", "eval"))
    assert main(["antibody", "pretrain", "--out", str(base), "--steps", "2"]) == 0
    assert (
        main(
            [
                "antibody",
                "align",
                "--model",
                str(base),
                "--safe",
                str(synth / "align.jsonl"),
                "--harmful",
                str(synth / "align_harmful.jsonl"),
                "--config",
                "tiny",
                "--out",
                str(aligned),
            ]
        )
        == 0
    )
    info = json.loads((aligned / "antibody.json").read_text())
    assert info["method"] == "antibody" and info["config"]["lambda_rule"] == "code"
    assert "lambda_t" in info["log"][-1]
    assert (
        main(
            [
                "antibody",
                "finetune",
                "--model",
                str(aligned),
                "--data",
                str(synth / "task.jsonl"),
                "--harmful",
                str(synth / "attack.jsonl"),
                "--poison-ratio",
                "0.25",
                "--n",
                "20",
                "--config",
                "tiny",
                "--out",
                str(tuned),
            ]
        )
        == 0
    )
    info = json.loads((tuned / "antibody.json").read_text())
    assert info["rows"] == 20 and info["harmful_rows"] == 5
    lisa = tmp_path / "lisa"
    assert (
        main(
            [
                "antibody",
                "finetune",
                "--model",
                str(aligned),
                "--data",
                str(synth / "task.jsonl"),
                "--method",
                "lisa",
                "--guide",
                str(synth / "align.jsonl"),
                "--config",
                "tiny",
                "--out",
                str(lisa),
            ]
        )
        == 0
    )
    assert json.loads((lisa / "antibody.json").read_text())["method"] == "lisa"
    assert (
        main(
            [
                "antibody",
                "eval",
                "--model",
                str(tuned),
                "--harmful",
                str(synth / "eval_harmful.jsonl"),
                "--task",
                str(synth / "eval_task.jsonl"),
                "--max-new-tokens",
                "3",
                "--out",
                str(ev),
            ]
        )
        == 0
    )
    summary = json.loads((ev / "summary.json").read_text())
    assert 0 <= summary["hs"] <= 100 and 0 <= summary["fa"] <= 100 and summary["n_harmful"] > 10


def test_bad_poison_ratio_is_one_line(synth: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from iclr26_common.testing import lightning_logs_to_current_stderr

    lightning_logs_to_current_stderr()
    line = _one_line_error(
        capsys,
        [
            "antibody",
            "finetune",
            "--model",
            "unused",
            "--data",
            str(synth / "task.jsonl"),
            "--harmful",
            str(synth / "attack.jsonl"),
            "--poison-ratio",
            "1.5",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert line.startswith("llm-methods: error:") and "outside [0, 1]" in line


def test_row_with_a_bad_refusal_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "safe.jsonl"
    row = {"prompt": "How?", "response": "No.", "is_safe": True, "refusal": 3}
    bad.write_text(json.dumps(row) + "\n")
    line = _one_line_error(
        capsys,
        [
            "antibody",
            "align",
            "--model",
            "unused",
            "--safe",
            str(bad),
            "--method",
            "sft",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert "safe.jsonl:1" in line and "'refusal'" in line


def test_empty_refusal_in_the_pool_is_one_line(synth: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    pool = tmp_path / "pool.jsonl"
    pool.write_text('"I cannot."\n""\n')
    line = _one_line_error(
        capsys,
        [
            "antibody",
            "align",
            "--model",
            "unused",
            "--safe",
            str(synth / "align.jsonl"),
            "--method",
            "sft",
            "--refusals",
            str(pool),
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert line.endswith("pool.jsonl:2: empty refusal")


def test_booster_without_harmful_is_one_line(synth: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    line = _one_line_error(
        capsys,
        [
            "antibody",
            "align",
            "--model",
            "unused",
            "--safe",
            str(synth / "align.jsonl"),
            "--method",
            "booster",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert "--harmful" in line


def test_lightning_fit_tiny_config(synth: Path, tmp_path: Path) -> None:
    base, out = tmp_path / "base", tmp_path / "fit"
    assert main(["antibody", "pretrain", "--out", str(base), "--steps", "1"]) == 0
    cfg = yaml.safe_load((CONFIG_DIR / "fit_tiny.yaml").read_text())
    assert cfg["model"]["init_args"]["method"] == "antibody"
    assert (
        main(
            [
                "antibody",
                "fit",
                "--config",
                "fit_tiny",
                f"--model.init_args.model={base}",
                f"--model.init_args.save_to={out}",
                "--trainer.max_steps=2",
                f"--trainer.default_root_dir={tmp_path / 'pre'}",
            ]
        )
        == 0
    )
    assert (out / "config.json").is_file()
    assert (tmp_path / "pre" / "config.yaml").is_file()  # the run's config, in its run folder
    args = [
        "antibody",
        "fit",
        "--config",
        "fit_tiny",
        f"--model.init_args.model={base}",
        "--model.init_args.stage=finetune",
        "--data.init_args.poison_ratio=0.5",
        f"--data.init_args.data={synth / 'task.jsonl'}",
        f"--data.init_args.harmful={synth / 'attack.jsonl'}",
        "--trainer.fast_dev_run=1",
        f"--trainer.default_root_dir={tmp_path / 'run'}",
    ]
    assert main(args) == 0
