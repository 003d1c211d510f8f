from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from atomistic_scaling.cli import main, run_lightning_cli
from atomistic_scaling.constants import ARCHITECTURES
from atomistic_scaling.io import read_structures
from atomistic_scaling.peers import nequip_available
from iclr26_common.testing import (
    CliContract,
    assert_one_line_error,
    fast_dev_args,
    fit_beside_users_config,
    only_file,
    run_main,
    shipped_configs,
)

CONFIGS = shipped_configs("atomistic_scaling")


class TestCliContract(CliContract):
    package = "atomistic_scaling"
    commands = ("synth", "sweep", "configs")

    def check_config(self, printed: dict, declared: dict) -> None:
        assert printed["model"]["arch"] == declared["model"]["arch"]
        assert printed["data"]["cutoff"] == declared["data"]["cutoff"]
        assert "cutoff" not in printed["model"]  # linked from the data module, not set twice


def test_every_arch_has_a_shipped_config() -> None:
    assert set(ARCHITECTURES) | {"tiny"} == {path.stem for path in CONFIGS}


#: Width of the shipped configs' models in the run-every-config test: the l2/l3 tensor products
#: at the shipped width 32 cost seconds per step on a CPU (sizes only; the file is parsed as is).
SMALL_WIDTH = {"l2": 8, "l3": 8}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_fits_tests_and_predicts(
    config: Path, structures_xyz: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every shipped config through ``main``: ``fit`` with ``fast_dev_run`` on a 12-structure
    extxyz file (the configs' own data options, the file given as they ask), then ``test`` and
    ``predict``. Before issue 29 ``predict`` failed for every config (the loaders passed
    ``batch_size`` positionally, which Lightning cannot re-create) and ``test``/``predict`` of
    a conservative model (nequip) failed under Lightning's inference mode."""
    args = [
        "--config",
        str(config),
        "--trainer.fast_dev_run=true",
        f"--data.train_files=[{structures_xyz}]",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    if config.stem in SMALL_WIDTH:
        args.append(f"--model.width={SMALL_WIDTH[config.stem]}")
    if config.stem == "nequip" and not nequip_available():  # the optional [peers] extra
        run = run_main(main, ["fit", *args], capsys, cwd=tmp_path)
        assert run.code == 2 and "atomistic-scaling[peers]" in run.err, run.err[-2000:]
        return
    for command in ("fit", "test", "predict"):
        run = run_main(main, [command, *args], capsys, cwd=tmp_path)
        assert run.code == 0, f"{command}: {run.err[-2000:]}"
        if command == "fit":
            assert "trivial predictor val_loss" in run.out  # the fit reached on_fit_start
        if command == "test":
            assert "test_loss" in run.out and "test_force_l2" in run.out
    written = torch.load(only_file(tmp_path, "predictions.pt"), weights_only=True)
    assert len(written["forces"]) == len(written["energy"]) > 0  # structures of the test split


def test_fit_tiny_config_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cli = run_lightning_cli(fast_dev_args(tmp_path))
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    assert cli.model.hparams.cutoff == 4.0  # linked from the data module
    assert cli.model.model.atomic_energies.abs().sum() > 0  # fitted on the training split
    assert not (tmp_path / "config.yaml").exists()  # no logger: nothing written
    # the trivial predictor is reported in every fit (before: only sweep and the experiment)
    from atomistic_scaling.sweep import trivial_loss

    dm = cli.datamodule
    expected = trivial_loss(dm.val_set, dm.atomic_energies())["loss"]
    assert float(cli.trainer.callback_metrics["trivial_val_loss"]) == pytest.approx(expected)


@pytest.mark.parametrize("conservative", [False, True], ids=["direct", "conservative"])
def test_predict_writes_each_structures_energy_and_forces(
    conservative: bool, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``predict`` ran but wrote nothing (issue 29 review): now ``predictions.pt`` in the run
    folder holds, per structure of the predict split, what the plain ``ForceField`` gives on
    the same structures (forces per structure, stress for a conservative model); a second
    ``predict`` into the same folder is one line and leaves the file alone."""
    from torch_geometric.loader import DataLoader

    args = [
        "predict",
        "--config",
        "tiny",
        f"--model.conservative={str(conservative).lower()}",
        f"--trainer.default_root_dir={tmp_path}",
        "--trainer.logger=false",  # the run folder is default_root_dir (tiny keeps a logger)
    ]
    cli = run_lightning_cli(args)
    path = tmp_path / "predictions.pt"
    saved = torch.load(path, weights_only=True)
    test_set = cli.datamodule.test_set
    assert len(test_set) == 4  # tiny: 40 structures, 10 % test
    assert saved["index"].tolist() == list(range(len(test_set)))
    model = cli.model.model.cpu().eval()
    batch = next(iter(DataLoader(test_set, batch_size=len(test_set))))
    direct = model(batch, compute_stress=conservative)
    torch.testing.assert_close(saved["energy"], direct["energy"].detach())
    forces = direct["forces"].detach()
    assert saved["n_atoms"].tolist() == [int(g.num_nodes) for g in test_set]
    assert len(saved["forces"]) == len(test_set)
    for s, structure_forces in enumerate(saved["forces"]):
        start, stop = int(batch.ptr[s]), int(batch.ptr[s + 1])
        torch.testing.assert_close(structure_forces, forces[start:stop])
    if conservative:
        assert saved["stress"].shape == (len(test_set), 3, 3)
        torch.testing.assert_close(saved["stress"], direct["stress"].detach())
    else:
        assert "stress" not in saved
    before = path.read_bytes()
    line = assert_one_line_error(main, args, capsys, drop_earlier=True)
    assert f"{path}: exists" in line and path.read_bytes() == before


def test_fit_never_overwrites_a_config_in_the_run_folder(tmp_path: Path) -> None:
    """Without a logger the run folder is --trainer.default_root_dir, here the working
    directory: a user's config.yaml there is kept and this run's config goes next to it. (tiny
    keeps its logger and checkpoint since issue 36, so the test turns them off.)"""
    saved = fit_beside_users_config(run_lightning_cli, tmp_path)
    assert saved["model"]["arch"] == "l1" and saved["trainer"]["max_steps"] == 1


def test_unknown_config_is_one_line(capsys: pytest.CaptureFixture) -> None:
    line = assert_one_line_error(main, ["fit", "--config", "nosuch.yaml"], capsys)
    assert line.startswith("atomistic-scaling: error:") and "nosuch.yaml" in line
    assert "tiny" in line  # names the shipped configs


def test_synth_writes_readable_extxyz(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "emt.xyz"
    assert main(["synth", "--out", str(out), "--n", "5", "--elements", "Cu,Au"]) == 0
    frames = read_structures(out)
    assert len(frames) == 5
    assert set().union(*(a.get_chemical_symbols() for a in frames)) <= {"Cu", "Au"}


def test_fit_on_files_and_bad_input_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "d.xyz"
    main(["synth", "--out", str(data), "--n", "12"])
    cli = run_lightning_cli(fast_dev_args(tmp_path, f"--data.train_files=[{data}]"))
    assert cli.trainer.state.finished
    bad = tmp_path / "bad.xyz"
    bad.write_text(data.read_text().replace("REF_forces", "F_other"))
    args = fast_dev_args(tmp_path, f"--data.train_files=[{bad}]")
    line = assert_one_line_error(
        main,
        args,
        capsys,
        prog="atomistic-scaling: error:",
        drop_earlier=True,
    )
    assert "bad.xyz: frame 0: missing forces key" in line
    before = data.read_text()
    line = assert_one_line_error(main, ["synth", "--out", str(data), "--n", "2"], capsys)
    assert "exists" in line and data.read_text() == before  # refuses, file untouched


@pytest.mark.slow
def test_sweep_cli_tiny(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    assert (
        main(
            [
                "sweep",
                "--out",
                str(out),
                "--archs=[mpnn,l1]",
                "--widths=[4,8]",
                "--d_values=[12,16,24]",
                "--seeds=[0,1]",
                "--batch_size=2",
                "--warmup_steps=2",
                "--synthetic_val=8",
                "--n_boot=3",
            ]
        )
        == 0
    )
    assert (out / "fits.json").is_file() and (out / "loss_vs_compute.png").is_file()
    fits = json.loads((out / "fits.json").read_text())
    assert fits["trivial_predictor"]["loss"] > 0 and set(fits["fits"]) == {"mpnn", "l1"}


def test_sweep_defaults_are_the_sweep_configs() -> None:
    """The sweep command used batch 8 and D checkpoints [50..800] while SweepConfig had 16 and
    [100..1600]: now every SweepConfig field is an option with the dataclass's default."""
    import dataclasses

    from atomistic_scaling.cli import sweep_parser
    from atomistic_scaling.sweep import SweepConfig

    ns = sweep_parser().parse_args(["--out", "x"])
    assert {f.name: ns[f.name] for f in dataclasses.fields(SweepConfig)} == dataclasses.asdict(
        SweepConfig()
    )
