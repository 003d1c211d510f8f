"""The LightningModules' grouped settings (robotics_remac.settings): checked values, nested YAML
only (old flat keys are one-line errors), and checkpoints of 0.3.x (flat hyperparameters) still
load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_one_line_error, fast_dev_args
from robotics_remac.checkpoint import load_policy
from robotics_remac.cli import main
from robotics_remac.lit_module import RemacModule
from robotics_remac.settings import (
    CurriculumSettings,
    EMASettings,
    LoRASettings,
    LossSettings,
    OptimSettings,
    PolicySizes,
    TrainingTimeRTCSettings,
)

OLD = Path(__file__).parent / "data" / "checkpoints_0_3"


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: PolicySizes(channels=0), "PolicySizes.channels"),
        (lambda: OptimSettings(lr=-1.0), "OptimSettings.lr"),
        (lambda: OptimSettings(warmup_steps=-1), "OptimSettings.warmup_steps"),
        (lambda: TrainingTimeRTCSettings(max_delay=-1), "TrainingTimeRTCSettings.max_delay"),
        (lambda: LoRASettings(rank=0), "LoRASettings.rank"),
        (lambda: LoRASettings(dropout=1.5), "LoRASettings.dropout"),
        (lambda: CurriculumSettings(epochs=0), "CurriculumSettings.epochs"),
        (lambda: CurriculumSettings(p_end=2.0), "CurriculumSettings.p_end"),
        (lambda: LossSettings(weight=0.0), "LossSettings.weight"),
        (lambda: EMASettings(decay=1.5), "EMASettings.decay"),
    ],
)
def test_bad_values_name_the_field(make, field: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=rf"^{field} must be") as info:
        make()
    assert "\n" not in str(info.value)


def test_max_delay_must_be_below_the_horizon() -> None:
    with pytest.raises(ValueError, match=r"curriculum\.max_delay must be in \[0, horizon=8\)"):
        RemacModule(curriculum=CurriculumSettings(max_delay=8))


@pytest.mark.parametrize(
    "option",
    [
        "--model.init_args.rank=3",  # 0.3.x flat keys
        "--model.init_args.channels=8",
        "--model.init_args.max_delay=2",
        "--model.init_args.ema_decay=0.9",
    ],
)
def test_old_flat_keys_are_one_line_errors(option: str, capsys: pytest.CaptureFixture) -> None:
    line = assert_one_line_error(
        main, ["fit", "--config", "remac", option, "--print_config"], capsys, prog="robotics-remac"
    )
    key = option.split("=")[0].rsplit(".", 1)[1]
    assert f"'{key}' is not accepted" in line


def test_old_flat_yaml_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(
        "model:\n  class_path: robotics_remac.lit_module.FlowPolicyModule\n"
        "  init_args:\n    channels: 32\n    training_time_rtc: true\n"
    )
    line = assert_one_line_error(main, ["fit", "--config", str(old), "--print_config"], capsys)
    assert "is not accepted" in line


def test_bad_group_value_from_the_cli_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    line = assert_one_line_error(
        main,
        fast_dev_args(
            tmp_path,
            "--model.init_args.lora.rank=0",
            "--data.init_args.n_episodes=2",
            config="remac",
        ),
        capsys,
    )
    assert line == "robotics-remac: error: LoRASettings.rank must be > 0, got 0"


def test_nested_options_reach_the_module(tmp_path: Path) -> None:
    from robotics_remac.cli import run_lightning_cli

    cli = run_lightning_cli(
        fast_dev_args(
            tmp_path,
            "--model.init_args.lora.rank=2",
            "--model.init_args.curriculum.max_delay=3",
            "--model.init_args.sizes.channels=8",
            "--data.init_args.n_episodes=2",
            config="remac",
        )
    )
    module = cli.model
    assert module.lora == LoRASettings(rank=2)
    assert module.curriculum.max_delay == 3 and module.curriculum.epochs == 32
    assert module.policy.config["channels"] == 8
    # hyperparameters are plain dicts: a checkpoint stays readable with weights_only=True
    assert module.hparams["lora"] == {"rank": 2, "alpha": 8.0, "dropout": 0.1, "use_mask": True}


def test_checkpoints_of_0_3_still_load() -> None:
    """Lightning checkpoints written by robotics-remac 0.3.0 (flat hyperparameters; see
    ``checkpoints.json``) load with the same kind and the same outputs as 0.3.0 gave."""
    meta = json.loads((OLD / "checkpoints.json").read_text())
    with np.load(OLD / "outputs.npz") as blob:
        stored = dict(blob)
    obs, x, t = (torch.from_numpy(stored[k]) for k in ("obs", "x", "t"))
    for name, kind in meta["kinds"].items():
        loaded = load_policy(OLD / f"{name}.ckpt")
        assert loaded.kind == kind, name
        with torch.no_grad():
            out = loaded.policy(obs, x, t)
        torch.testing.assert_close(out, torch.from_numpy(stored[name]), rtol=1e-5, atol=1e-6)


def test_a_0_3_base_checkpoint_starts_a_remac_finetune() -> None:
    module = RemacModule(base_ckpt=str(OLD / "base_0.3.0.ckpt"))
    assert module.hparams["sizes"]["channels"] == 16
    assert module.hparams["sizes"]["depth"] == 1


def test_a_0_3_checkpoint_as_ckpt_path_is_one_line(
    demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``--ckpt_path`` (resume, test, predict) parses the checkpoint's hyperparameters back into
    the model's arguments; 0.3.x's flat ones cannot be, so the file is named in one line."""
    line = assert_one_line_error(
        main,
        [
            "test",
            "--config",
            "base",
            f"--ckpt_path={OLD / 'base_0.3.0.ckpt'}",
            f"--data.init_args.data_dir={demo_dir}",
            f"--trainer.default_root_dir={tmp_path}",
        ],
        capsys,
    )
    assert f"--ckpt_path {OLD / 'base_0.3.0.ckpt'}: written by robotics-remac 0.3.x" in line


@pytest.mark.parametrize("name", ["FlowPolicyModule", "RemacModule"])
def test_load_from_checkpoint_rebuilds_the_groups(tmp_path, name) -> None:  # type: ignore[no-untyped-def]
    """A checkpoint stores the groups as plain dicts (weights_only=True can read them);
    ``load_from_checkpoint`` hands them back to ``__init__``, which must rebuild the groups
    (it failed with "'dict' object has no attribute 'enabled'")."""
    import lightning as L
    import torch

    from robotics_remac import lit_module
    from robotics_remac.settings import LoRASettings, OptimSettings, PolicySizes

    cls = getattr(lit_module, name)
    extra = {"lora": LoRASettings(rank=2)} if name == "RemacModule" else {}
    module = cls(
        sizes=PolicySizes(channels=8, hidden=16, token_hidden=4, depth=1),
        optim=OptimSettings(lr=5e-4),
        **extra,
    )
    trainer = L.Trainer(logger=False, enable_checkpointing=False, max_steps=0)
    trainer.strategy.connect(module)
    path = tmp_path / "m.ckpt"
    trainer.save_checkpoint(path, weights_only=True)
    assert isinstance(torch.load(path, weights_only=True)["hyper_parameters"]["sizes"], dict)
    loaded = cls.load_from_checkpoint(path, weights_only=True)
    assert loaded.optim == OptimSettings(lr=5e-4)
    if name == "RemacModule":
        assert loaded.lora == LoRASettings(rank=2)
    for key, value in module.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)


def test_a_group_from_a_dict_with_a_stray_key_is_one_line() -> None:
    from robotics_remac.settings import PolicySizes, as_group

    assert as_group(PolicySizes, {"channels": 8}, "sizes") == PolicySizes(channels=8)
    with pytest.raises(
        ValueError, match=r"^sizes: unknown field\(s\) \['width'\] for PolicySizes$"
    ):
        as_group(PolicySizes, {"width": 8}, "sizes")
