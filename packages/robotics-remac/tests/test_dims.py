"""State/action sizes come from the dataset's ``meta/info.json`` (issue 25: every real dataset,
whose sizes are not the chase task's 8 and 2, used to be rejected)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from iclr26_common.testing import assert_one_line_error, fast_dev_args
from robotics_remac.cli import main, run_lightning_cli
from robotics_remac.dataset_format import Episode, RemacFormatError
from robotics_remac.dataset_reader import dataset_dims, read_lerobot_dataset
from robotics_remac.dataset_writer import write_lerobot_dataset

OBS, ACT = 5, 3  # another robot's sizes


@pytest.fixture(scope="module")
def other_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 episodes of 20 frames with 5-wide states and 3-wide actions."""
    rng = np.random.default_rng(0)
    eps = [Episode(rng.normal(size=(20, OBS)), rng.uniform(-1, 1, (20, ACT))) for _ in range(4)]
    return write_lerobot_dataset(tmp_path_factory.mktemp("other") / "d", eps)


def test_reader_takes_the_sizes_from_info_json(other_dir: Path) -> None:
    info = json.loads((other_dir / "meta/info.json").read_text())
    assert info["features"]["observation.state"]["shape"] == [OBS]
    assert info["features"]["action"]["shape"] == [ACT]
    assert dataset_dims(other_dir) == (OBS, ACT)
    episodes = read_lerobot_dataset(other_dir)
    assert [ep.states.shape for ep in episodes] == [(20, OBS)] * 4
    assert [ep.actions.shape for ep in episodes] == [(20, ACT)] * 4
    # a caller that needs the chase task's sizes still gets a one-line error naming the field
    with pytest.raises(RemacFormatError, match=r"info\.json: features\['observation.state'\]"):
        read_lerobot_dataset(other_dir, obs_dim=8)


def test_datamodule_and_model_follow_the_dataset(other_dir: Path, tmp_path: Path) -> None:
    import torch

    from robotics_remac.data import DemoDataModule
    from robotics_remac.settings import CurriculumSettings, PolicySizes
    from robotics_remac.training import fit_base, fit_finetune

    dm = DemoDataModule(str(other_dir), horizon=4, batch_size=32)
    assert (dm.obs_dim, dm.action_dim) == (OBS, ACT)
    dm.setup()
    batch = next(iter(dm.train_dataloader()))
    assert batch["obs"].shape[1:] == (OBS,) and batch["actions"].shape[1:] == (4, ACT)
    assert batch["prev_obs"].shape[1:] == (4, OBS)
    base = fit_base(dm, 1, PolicySizes(channels=8, hidden=8, token_hidden=4, depth=1))
    assert (base.config["obs_dim"], base.config["action_dim"]) == (OBS, ACT)
    remac = fit_finetune(
        base, dm, 1, curriculum=CurriculumSettings(max_delay=2)
    )  # stale-prefix sampling at these sizes
    out = remac(torch.zeros(2, OBS), torch.zeros(2, 4, ACT), torch.zeros(2), torch.ones(2, 4))
    assert out.shape == (2, 4, ACT)


def test_cli_links_the_sizes_into_the_model(other_dir: Path, tmp_path: Path) -> None:
    cli = run_lightning_cli(fast_dev_args(tmp_path, f"--data.init_args.data_dir={other_dir}"))
    assert cli.trainer.state.finished
    assert cli.model.policy.config["obs_dim"] == OBS
    assert cli.model.policy.config["action_dim"] == ACT


@pytest.mark.parametrize("shape", [[5, 1], "5", [0]])
def test_bad_declared_shape_is_one_line(
    other_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, shape: object
) -> None:
    import shutil

    root = Path(shutil.copytree(other_dir, tmp_path / "copy"))
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["observation.state"]["shape"] = shape
    (root / "meta/info.json").write_text(json.dumps(info))
    line = assert_one_line_error(
        main,
        fast_dev_args(tmp_path, f"--data.init_args.data_dir={root}"),
        capsys,
        prog="robotics-remac",
    )
    assert "info.json" in line and "features['observation.state'].shape" in line


def test_declared_width_disagreeing_with_the_data_names_both(
    other_dir: Path, tmp_path: Path
) -> None:
    import shutil

    root = Path(shutil.copytree(other_dir, tmp_path / "copy"))
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["action"]["shape"] = [2]
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(RemacFormatError) as err:
        read_lerobot_dataset(root)
    msg = str(err.value)
    assert "\n" not in msg and "info.json: features['action'].shape [2]" in msg
    assert "episode_000000.parquet is 3 wide" in msg


def test_eval_rejects_a_policy_of_other_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from robotics_remac.checkpoint import save_policy
    from robotics_remac.model import FlowPolicy

    kw = {"channels": 8, "hidden": 8, "token_hidden": 4}
    other = save_policy(tmp_path / "o.pt", FlowPolicy(OBS, ACT, **kw), "base")
    line = assert_one_line_error(
        main,
        [
            "eval",
            "--policy",
            str(other),
            "--method",
            "naive",
            "--delays",
            "0",
            "--episodes",
            "2",
            "--out",
            str(tmp_path / "ev"),
        ],
        capsys,
        prog="robotics-remac",
    )
    assert "o.pt" in line and "obs_dim 5" in line and "needs 8" in line
