"""``llm-methods antibody``: configs, synth -> pretrain -> align -> finetune -> eval, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error, shipped_configs
from llm_methods.antibody.cli import CONFIG_DIR
from llm_methods.cli import main

CONFIGS = shipped_configs("llm_methods.antibody")


def _yaml(name: str) -> dict:
    return yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())


def test_default_config_is_the_official_script() -> None:
    """Issue 27: the default λ_t rule is the official code's (η_λ 5, EMA 0.99, the script's
    values); the paper's rule, whose constant a is ours, is the antibody_paper config."""
    code, paper = _yaml("antibody")["antibody"], _yaml("antibody_paper")["antibody"]
    assert (code["rho"], code["eta_lambda"], code["tau"], code["lambda2"], code["ema"]) == (
        0.1,
        5.0,
        1.0,
        0.05,
        0.99,
    )
    assert code["lambda_rule"] == "code" and paper["lambda_rule"] == "paper" and paper["a"] == 1.0


def test_every_config_sets_the_same_antibody_group() -> None:
    """Issue 29: one shape, the ``antibody:`` group of AntibodyConfig, in the stage configs and
    (under ``model.init_args``) in the LightningCLI one; keys outside the dataclass fail."""
    from dataclasses import fields

    from llm_methods.antibody.model import AntibodyConfig

    names = {f.name for f in fields(AntibodyConfig)}
    for path in CONFIGS:
        data = yaml.safe_load(path.read_text())
        group = data["model"]["init_args"] if "trainer" in data else data
        assert set(group["antibody"]) <= names, path.name


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ab-synth")
    assert main(["antibody", "synth", "--out", str(folder)]) == 0
    return folder


def test_pretrain_shows_progress_unless_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 36 review: `antibody pretrain` (300 steps by default, ~30 s) was silent on 5b6cfbf."""
    assert main(["antibody", "pretrain", "--out", str(tmp_path / "a"), "--steps", "2"]) == 0
    err = capsys.readouterr().err
    assert "antibody pretrain steps: 0/2" in err and "2/2" in err and "(done)" in err, err
    args = ["antibody", "pretrain", "--out", str(tmp_path / "b"), "--steps", "2", "--quiet"]
    assert main(args) == 0
    assert "antibody pretrain steps" not in capsys.readouterr().err


def test_pipeline_end_to_end(synth: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
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
                "--stage.steps",
                "2",
                "--out",
                str(aligned),
            ]
        )
        == 0
    )
    info = json.loads((aligned / "antibody.json").read_text())
    # issue 37: progress over the steps on stderr (--quiet: none); 11b2942 was silent
    assert "antibody align steps: 2/2" in capsys.readouterr().err
    assert info["method"] == "antibody" and info["config"]["lambda_rule"] == "code"
    assert "lambda_t" in info["log"][-1] and len(info["log"]) == 2
    assert info["settings"] == {**info["settings"], "steps": 2, "batch_size": 4}  # tiny, 2 steps
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
    # each score with its 95 % interval over the prompts, the resampling seed recorded
    for key, n in (("hs", summary["n_harmful"]), ("fa", summary["n_task"])):
        interval = summary[f"{key}_interval"]
        assert interval["n"] == n and interval["units"] == "prompts"
        assert interval["estimate"] == pytest.approx(summary[key])
        assert interval["low"] <= summary[key] <= interval["high"]
        # 0/1 per prompt: Wilson's interval, of non-zero width also when every prompt went the
        # same way
        assert interval["method"] == "wilson" and interval["low"] < interval["high"]
    assert "n=" in capsys.readouterr().out.splitlines()[-1]


def test_eval_intervals_over_prompts_planted() -> None:
    """A model refusing every harmful prompt: HS 0 with Wilson's upper bound (not a zero width:
    40 prompts cannot show HS is exactly 0; by hand 1.96^2 / (40 + 1.96^2) = 8.76 %); half the
    task prompts right: FA's interval holds 50 and excludes 0 and 100; one prompt: wide."""
    from llm_methods.antibody.cli import score_intervals

    out = score_intervals({"hs": [0] * 40, "fa": [1, 0] * 20})
    hs, hs_text = out["hs"]
    assert hs["method"] == "wilson" and hs["low"] == 0.0 and hs["n"] == 40
    assert hs["high"] == pytest.approx(8.76, abs=0.01)
    assert hs_text == "[0.00, 8.76] (wilson, n=40 prompts)"
    fa, fa_text = out["fa"]
    assert fa["method"] == "wilson" and fa["n"] == 40
    assert 0 < fa["low"] < 50 < fa["high"] < 100 and "(wilson, n=40 prompts)" in fa_text
    (single, text) = score_intervals({"hs": [1]})["hs"]
    assert single["method"] == "wilson" and single["n"] == 1 and single["high"] == 100.0
    assert single["low"] > 0 and "(wilson, n=1 prompts)" in text


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


def test_lightning_fit_tiny_config(
    synth: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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
    # ordinary modes (d875146: save_pretrained's weights were 0600), the base's folder too
    for folder in (out, base):
        assert all(f.stat().st_mode & 0o777 == 0o644 for f in folder.iterdir()), folder
    # save_to is checked before the model is loaded, also when set only in a --config YAML
    own = tmp_path / "own.yaml"
    own.write_text(f"model:\n  init_args:\n    save_to: {out}\n", encoding="utf-8")
    refused = ["antibody", "fit", "--config", "fit_tiny", "--config", str(own)]
    line = assert_one_line_error(
        main,
        [*refused, f"--model.init_args.model={tmp_path / 'no-such-model'}"],
        capsys,
        drop_earlier=True,
    )
    assert f"--model.init_args.save_to {out}: holds earlier results" in line, line
    # the run's config, in its run folder: the logger's (fit_tiny keeps logger and checkpoint)
    (config,) = (tmp_path / "pre").rglob("config.yaml")
    assert config.parent.parent.name == "lightning_logs"
    assert list(config.parent.glob("checkpoints/*.ckpt"))
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


@pytest.fixture(scope="module")
def base(synth: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ab-base")
    assert main(["antibody", "pretrain", "--out", str(folder), "--steps", "1"]) == 0
    return folder


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_config_runs(path: Path, synth: Path, base: Path, tmp_path: Path) -> None:
    """Issue 29: each shipped YAML runs through ``main``: the LightningCLI one with
    ``fast_dev_run``, the stage ones through ``align`` then ``finetune`` (1 step each; every
    other value the file's)."""
    data = yaml.safe_load(path.read_text())
    if "trainer" in data:
        args = ["antibody", "fit", "--config", path.stem, f"--model.init_args.model={base}"]
        args += ["--trainer.fast_dev_run=true", f"--trainer.default_root_dir={tmp_path}"]
        assert main(args) == 0
        return
    aligned, tuned = tmp_path / "aligned", tmp_path / "tuned"
    common = ["--config", path.stem, "--stage.steps", "1"]
    align = ["antibody", "align", "--model", str(base), "--safe", str(synth / "align.jsonl")]
    align += ["--harmful", str(synth / "align_harmful.jsonl"), "--out", str(aligned)]
    assert main([*align, *common]) == 0
    info = json.loads((aligned / "antibody.json").read_text())
    assert info["config"] == {**info["config"], **data["antibody"]}
    assert info["settings"] == {**info["settings"], **data["stage"], "steps": 1}
    tune = ["antibody", "finetune", "--model", str(aligned), "--data", str(synth / "task.jsonl")]
    assert main([*tune, *common, "--out", str(tuned)]) == 0
    assert json.loads((tuned / "antibody.json").read_text())["tau"] == data["antibody"]["tau"]


def test_old_flat_settings_fail_in_one_line(synth: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Issue 29: the flat YAML of before (and its flags) is rejected in one line, not ignored."""
    flat = tmp_path / "flat.yaml"
    flat.write_text("rho: 0.1\nlambda_rule: code\nsteps: 4\n")
    args = ["antibody", "align", "--model", "unused", "--safe", str(synth / "align.jsonl")]
    args += ["--method", "sft", "--out", str(tmp_path / "x")]
    line = _one_line_error(capsys, [*args, "--config", str(flat)])
    assert line == (
        f"llm-methods antibody align: error: {flat}: unknown field(s) ['rho', 'lambda_rule', "
        "'steps'] (settings nest under: antibody, stage) (see llm-methods antibody align --help)"
    )
    assert _one_line_error(capsys, [*args, "--steps", "4"]) == (
        "llm-methods antibody align: error: unrecognized arguments: --steps 4 "
        "(see llm-methods antibody align --help)"
    )
    line = _one_line_error(capsys, [*args, "--antibody.tau", "0"])
    assert line.startswith("llm-methods antibody align: error: ") and "tau must be > 0" in line
    line = _one_line_error(capsys, [*args, "--config", "nope"])
    assert line.startswith("llm-methods antibody align: error: unknown config 'nope'; shipped: [")
    assert _one_line_error(capsys, [*args, "--config=nope"]) == line
    bad = tmp_path / "bad.yaml"
    bad.write_text("stage:\n  steps: 0\n")
    line = _one_line_error(capsys, [*args, f"--config={bad}"])
    assert line.startswith(f"llm-methods antibody align: error: {bad}: steps must be >= 1")
    fit = ["antibody", "fit", "--config", "fit_tiny", "--model.init_args.lambda_rule=paper"]
    assert "lambda_rule" in _one_line_error(capsys, fit)
    assert not (tmp_path / "x").exists()


def test_checkpoint_of_the_flat_hparams_fails_in_one_line(tmp_path: Path) -> None:
    """A Lightning checkpoint written before issue 29 (flat hparams) is refused naming the
    file; the new hparams hold the antibody group as plain values."""
    import torch

    from llm_methods.antibody.lit_module import AntibodyModule
    from llm_methods.lm.errors import LMError

    old = tmp_path / "old.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"model": "zoo:micro", "rho": 0.1}}, old)
    with pytest.raises(LMError, match=r"old\.ckpt: an AntibodyModule checkpoint from before"):
        AntibodyModule.load_from_checkpoint(old)


def test_fit_reads_the_antibody_group(base: Path, tmp_path: Path) -> None:
    """``--model.init_args.antibody.*`` reaches the module's AntibodyConfig, and the hparams
    hold it as plain values (weights_only-loadable checkpoints)."""
    from llm_methods.antibody.cli import run_lightning_cli

    cli = run_lightning_cli(
        [
            "fit",
            "--config",
            "fit_tiny",
            f"--model.init_args.model={base}",
            "--model.init_args.antibody.lambda_rule=paper",
            "--model.init_args.antibody.tau=0.5",
            "--trainer.fast_dev_run=true",
            f"--trainer.default_root_dir={tmp_path}",
        ]
    )
    assert (cli.model.cfg.lambda_rule, cli.model.cfg.tau, cli.model.ema) == ("paper", 0.5, None)
    assert cli.model.hparams["antibody"] == {**cli.model.hparams["antibody"], "tau": 0.5}
    assert isinstance(cli.model.hparams["antibody"], dict)
    from llm_methods.antibody.lit_module import AntibodyModule

    ckpt = tmp_path / "new.ckpt"
    cli.trainer.save_checkpoint(ckpt)
    loaded = AntibodyModule.load_from_checkpoint(ckpt)
    assert (loaded.cfg.lambda_rule, loaded.cfg.tau) == ("paper", 0.5)
