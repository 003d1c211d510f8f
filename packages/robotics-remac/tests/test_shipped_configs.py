"""Every shipped config runs: ``fit``, ``test`` and ``predict`` through ``main([...])`` in process
with ``--trainer.fast_dev_run=true`` on the 6-episode demonstration folder (the only override:
the configs otherwise generate 300 episodes). The REMAC configs start from a random base
(``base_ckpt: null``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from iclr26_common.testing import run_main, shipped_configs
from robotics_remac.cli import main

CONFIGS = shipped_configs("robotics_remac")


def test_the_five_configs_are_shipped() -> None:
    assert sorted(p.stem for p in CONFIGS) == ["base", "lora_only", "remac", "tiny", "ttrtc"]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_fits_tests_and_predicts(
    config: Path, demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    common = [
        "--config",
        str(config),
        f"--data.init_args.data_dir={demo_dir}",
        "--trainer.fast_dev_run=true",
    ]
    for command in ("fit", "test", "predict"):
        args = [command, *common, f"--trainer.default_root_dir={tmp_path / command}"]
        run = run_main(main, args, capsys)
        assert run.code == 0, f"{command}: {run.err[-3000:]}"
    chunks = torch.load(tmp_path / "predict" / "predictions.pt", weights_only=True)["chunks"]
    assert chunks.shape[1:] == (8, 2) and len(chunks) > 0 and torch.isfinite(chunks).all()
    declared = yaml.safe_load(config.read_text())["model"]["class_path"]
    assert declared.rsplit(".", 1)[1] in ("FlowPolicyModule", "RemacModule")
