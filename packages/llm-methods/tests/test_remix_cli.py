"""``llm-methods remix``: configs parse, LightningCLI fit (tiny, in process), eval, synth,
one-line errors for bad input (empty reward set, bad jsonl, a bad or flat RL setting), the
checkpoint's hparams (``rl`` as a plain dict, weights_only-loadable; a checkpoint with the flat
hparams of before issue 29 fails with one line naming the file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main
from llm_methods.method_cli import shipped_configs


@pytest.fixture(scope="module")
def policy_dir(saved_tiny_lm: Any) -> Path:
    from llm_methods.remix.data import records_to_problems, sft_texts, synth_problems

    texts = [p + r for p, r in sft_texts(records_to_problems(synth_problems(30, 0)))]
    return saved_tiny_lm("remix-policy", texts, vocab_size=280, n_layers=1, hidden=32, heads=2)


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


@pytest.mark.parametrize("name", sorted(shipped_configs("remix")))
def test_shipped_configs_parse(name: str) -> None:
    from llm_methods.remix.model import RLConfig

    cfg = yaml.safe_load(shipped_configs("remix")[name].read_text())
    args = cfg["model"]["init_args"]
    assert set(args) <= {"model", "rl", "rewards", "save_dir", "seed"}  # RL settings grouped
    assert RLConfig(**args["rl"]).algo == {"tiny": "remix"}.get(name, name)
    assert cfg["model"]["class_path"].endswith("ReMixModule")


def test_remix_config_has_paper_defaults() -> None:
    rl = yaml.safe_load(shipped_configs("remix")["remix"].read_text())["model"]["init_args"]["rl"]
    assert (rl["p_off"], rl["utd"], rl["n_past"], rl["reincarnate_at"]) == (0.4, 2, 2, 50)


def test_fit_tiny_then_eval(policy_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "trained"
    assert (
        main(
            [
                "remix",
                "fit",
                "--config",
                "tiny",
                f"--model.init_args.model={policy_dir}",
                f"--model.init_args.save_dir={out}",
                "--trainer.fast_dev_run=1",
                f"--trainer.default_root_dir={tmp_path}",
            ]
        )
        == 0
    )
    assert (out / "config.json").is_file()
    # an ordinary output folder (d875146: save_pretrained's model.safetensors was 0600)
    assert {f.name: f.stat().st_mode & 0o777 for f in out.iterdir()}["model.safetensors"] == 0o644
    assert all(f.stat().st_mode & 0o777 == 0o644 for f in out.iterdir())
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


def test_fit_tiny_shows_reward_and_loss(policy_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The tiny config prints reward and loss as it trains (issue 41): Lightning's progress bar
    carries ``train/reward`` and ``train/loss``, and every step's logs reach the CSV logger
    (``log_every_n_steps: 1``; at Lightning's default of 50 a 4-step run logged nothing)."""
    args = ["remix", "fit", "--config", "tiny", f"--model.init_args.model={policy_dir}"]
    assert main([*args, "--trainer.max_steps=2", f"--trainer.default_root_dir={tmp_path}"]) == 0
    captured = capsys.readouterr()
    bar = captured.out + captured.err  # Lightning's tqdm bar writes to stdout
    assert "train/reward" in bar and "train/loss" in bar, bar[-2000:]  # rich or tqdm bar
    rows = (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert {"train/reward", "train/loss", "train/lam"} <= set(header), header
    reward = header.index("train/reward")
    steps = [r.split(",") for r in rows[1:] if r.split(",")[reward] != ""]
    assert steps, rows  # a row per RL iteration (max_steps counts gradient steps: utd each)
    assert all(0.0 <= float(r[reward]) <= 1.0 for r in steps), rows


def test_fit_tiny_bar_and_no_lightning_warnings(policy_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Review of issue 41: ``remix fit --config tiny`` showed "Epoch 0/-2" (no ``max_epochs``:
    Lightning's -1) and leaked two Lightning warnings (``transfer_batch_to_device`` overridden
    on the module beside a DataModule; the tensorboardX note of ``logger: true``)."""
    import warnings

    args = ["remix", "fit", "--config", "tiny", f"--model.init_args.model={policy_dir}"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([*args, "--trainer.max_steps=2", f"--trainer.default_root_dir={tmp_path}"]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err + " ".join(str(w.message) for w in caught)
    assert "/-2" not in text and "Epoch 0" in text, text[-2000:]
    assert "transfer_batch_to_device" not in text and "tensorboardX" not in text, text[-3000:]


def test_bad_input_one_line(policy_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    line = _one_line_error(
        capsys,
        [
            "remix",
            "fit",
            "--config",
            "tiny",
            f"--model.init_args.model={policy_dir}",
            "--model.init_args.rewards=[]",
            "--trainer.fast_dev_run=1",
        ],
    )
    assert "empty reward set" in line
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    ev = tmp_path / "ev"
    line = _one_line_error(
        capsys,
        ["remix", "eval", "--model", str(policy_dir), "--data", str(empty), "--out", str(ev)],
    )
    assert "empty.jsonl: no problems (empty reward set)" in line
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "What is 2 + 2?"}\n')
    line = _one_line_error(
        capsys, ["remix", "eval", "--model", str(policy_dir), "--data", str(bad), "--out", str(ev)]
    )
    assert "bad.jsonl:1: missing field 'answer'" in line
    assert not ev.exists()
    line = _one_line_error(
        capsys,
        [
            "remix",
            "fit",
            "--config",
            "tiny",
            f"--model.init_args.model={policy_dir}",
            "--model.init_args.rl.p_off=2",
            "--trainer.fast_dev_run=1",
        ],
    )
    assert "rl.p_off must be in [0, 1], got 2" in line


def test_flat_rl_settings_fail_with_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The flat keys of before issue 29 (``init_args.p_off``) are rejected, not ignored."""
    line = _one_line_error(
        capsys,
        ["remix", "fit", "--config", "tiny", "--model.init_args.p_off=0.5"],
    )
    assert "Option 'p_off' is not accepted" in line
    cfg = yaml.safe_load(shipped_configs("remix")["tiny"].read_text())
    args = cfg["model"]["init_args"]
    args.update(args.pop("rl"))  # the old flat shape
    flat = tmp_path / "flat.yaml"
    flat.write_text(yaml.safe_dump(cfg))
    line = _one_line_error(capsys, ["remix", "fit", "--config", str(flat)])
    assert "Option 'algo' is not accepted" in line


def test_checkpoint_hparams_load_weights_only(policy_dir: Path, tmp_path: Path) -> None:
    import lightning as L
    import torch

    from llm_methods.lm.errors import LMError
    from llm_methods.remix.lit_module import ProblemDataModule, ReMixModule
    from llm_methods.remix.model import RLConfig

    rl = RLConfig(algo="grpo", group_size=2, max_new_tokens=2, lr=3e-4)
    module = ReMixModule(model=str(policy_dir), rl=rl)
    trainer = L.Trainer(
        max_steps=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, datamodule=ProblemDataModule(synth_n=4, prompts_per_step=2))
    path = tmp_path / "remix.ckpt"
    trainer.save_checkpoint(path)
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["hyper_parameters"]["rl"]["lr"] == 3e-4
    loaded = ReMixModule.load_from_checkpoint(path)
    assert loaded.cfg == rl
    renamed = tmp_path / "policy.ckpt"  # ``model`` under its name before 0.7.0, removed in 0.8.0
    hp = {"policy" if k == "model" else k: v for k, v in ckpt["hyper_parameters"].items()}
    torch.save({**ckpt, "hyper_parameters": hp}, renamed)
    with pytest.raises(LMError, match=r"policy\.ckpt: hyper_parameters\.policy was renamed model"):
        ReMixModule.load_from_checkpoint(renamed)
    old = tmp_path / "old.ckpt"
    hp = ckpt["hyper_parameters"]
    hp.update(hp.pop("rl"))  # the flat hparams of before issue 29
    torch.save(ckpt, old)
    with pytest.raises(LMError, match=r"old\.ckpt: a ReMixModule checkpoint from before issue 29"):
        ReMixModule.load_from_checkpoint(old)


def test_eval_takes_device_seed_and_shows_progress(
    policy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``eval --device cpu --seed 1`` (recorded in summary.json) with progress over the batches
    on stderr, none with ``--quiet``; ``--device gpu`` is one line naming it (fails on d9942d3:
    ``--device``, ``--seed``, ``--batch-size``, ``--quiet`` unknown, no progress)."""
    from iclr26_common.testing import run_main

    args = ["remix", "eval", "--model", str(policy_dir), "--n", "5", "--max-new-tokens", "2"]
    args += ["--batch-size", "2", "--device", "cpu", "--seed", "1"]
    run = run_main(main, [*args, "--out", str(tmp_path / "a")], capsys)
    assert run.code == 0, run.err
    assert "remix eval batches: 3/3" in run.err and "(done)" in run.err, run.err
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["n"] == 5 and summary["device"] == "cpu" and summary["seed"] == 1
    run = run_main(main, [*args, "--out", str(tmp_path / "b"), "--quiet"], capsys)
    assert run.code == 0 and "batches" not in run.err, run.err
    rows = [(tmp_path / d / "predictions.jsonl").read_text() for d in ("a", "b")]
    assert rows[0] == rows[1]  # greedy: the same answers
    line = _one_line_error(capsys, [*args[:-4], "--device", "gpu", "--out", str(tmp_path / "c")])
    assert "--device gpu: not a device" in line, line
    assert not (tmp_path / "c").exists()


def test_policy_renamed_model_in_0_7_0_is_refused(
    policy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The pretrained model is ``--model.init_args.model`` as in perk and mbok (d9942d3:
    ``model`` is not an argument of ReMixModule). The old ``policy`` warned in 0.7.0 and is
    removed in 0.8.0: ``--model.init_args.policy`` is refused in one line naming
    ``--model.init_args.model``, exit 2, before anything is trained or saved; ``policy:`` in a
    config file as an unknown option;
    ``ReMixModule(policy=...)`` is a ``TypeError`` (a checkpoint naming ``policy``: see
    :func:`test_checkpoint_hparams_load_weights_only`)."""
    from llm_methods.remix.lit_module import ReMixModule

    save = f"--model.init_args.save_dir={tmp_path / 'saved'}"
    args = ["remix", "fit", "--config", "tiny", f"--model.init_args.policy={policy_dir}", save]
    line = assert_one_line_error(main, args, capsys)
    assert "removed in llm-methods 0.8.0; use --model.init_args.model" in line, line
    config = tmp_path / "old.yaml"
    config.write_text(yaml.safe_dump({"model": {"init_args": {"policy": str(policy_dir)}}}))
    line = assert_one_line_error(main, [*args[:4], "--config", str(config), save], capsys)
    assert "Option 'policy' is not accepted" in line, line
    assert not (tmp_path / "saved").exists()
    with pytest.raises(TypeError, match="policy"):
        ReMixModule(policy=str(policy_dir))  # type: ignore[call-arg]
    assert ReMixModule(model=str(policy_dir)).hparams["model"] == str(policy_dir)


def test_eval_ctrl_c_is_one_line_exit_130(
    policy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while ``eval`` generates: one line, exit status 130, no ``--out`` folder (a guard:
    d9942d3 already ended so)."""
    from iclr26_common.testing import progress_line, run_main
    from llm_methods.remix.runner import RLRunner

    def interrupted(*args: object, **kwargs: object) -> list:
        raise KeyboardInterrupt

    monkeypatch.setattr(RLRunner, "sample", interrupted)
    monkeypatch.delenv("LLM_METHODS_TRACEBACK", raising=False)
    out = tmp_path / "ev"
    args = ["remix", "eval", "--model", str(policy_dir), "--n", "3", "--out", str(out)]
    run = run_main(main, args, capsys)
    lines = [line for line in run.err.splitlines() if line.strip() and not progress_line(line)]
    assert run.code == 130 and lines == ["llm-methods: interrupted"], run.err
    assert not out.exists()


def test_eval_without_out_is_refused_before_the_model_is_loaded(
    policy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No result only on stdout (issue 36): ``eval`` without ``--out`` is one line naming it,
    exit 2, before the policy is loaded, and ``--help`` says what the folder holds (fails on
    34583c8: ``--out`` was optional, "default: stdout only"; ``remix eval --model zoo:micro``
    printed "accuracy 0.000 on 64 problems" and wrote no file)."""
    from iclr26_common.testing import run_main
    from llm_methods.remix import lit_module

    def not_loaded(*args: object, **kwargs: object) -> None:
        raise AssertionError("the policy was loaded")

    monkeypatch.setattr(lit_module, "load_policy", not_loaded)
    args = ["remix", "eval", "--model", str(policy_dir), "--n", "3", "--max-new-tokens", "2"]
    line = _one_line_error(capsys, args)
    assert "the following arguments are required: --out" in line, line
    assert not any(tmp_path.iterdir())
    run = run_main(main, ["remix", "eval", "--help"], capsys)
    entry = " ".join(run.out[run.out.index("\n  --out OUT") :].split())
    assert run.code == 0 and entry.startswith("--out OUT output folder: predictions.jsonl"), run.out
    assert "summary.json" in entry and "stdout only" not in run.out, run.out
