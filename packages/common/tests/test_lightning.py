"""iclr26_common.lightning: the shared LightningCLI wiring and the quiet Trainer."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("lightning")

from iclr26_common.cli_support import UsageError, run_with_one_line_errors
from iclr26_common.testing import (
    DDP_CPU_ARGS,
    assert_one_line_error,
    lightning_logs_to_current_stderr,
    run_main,
)

PKG = "fakelit_pkg"

MODULE = """
import os
import sys

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from iclr26_common.lightning import BatchPredictionWriter

SEEN_ARGV = []


class Regressor(L.LightningModule):
    def __init__(self, width: int = 4, lr: float = 0.1, n_features: int = 3, interrupt_at: int = -1,
                 save_to: str | None = None):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(n_features, width), torch.nn.Linear(width, 1))

    def on_fit_start(self):
        SEEN_ARGV.append(list(sys.argv))

    def on_fit_end(self):
        if self.hparams.save_to:
            with open(self.hparams.save_to, "w") as f:
                f.write("trained")

    def training_step(self, batch, batch_idx):
        if self.global_step == self.hparams.interrupt_at:
            raise KeyboardInterrupt  # what Ctrl-C raises in the main thread
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    def predict_step(self, batch, batch_idx):
        return {"probs": self.net(batch[0]).squeeze(-1)}


class Data(L.LightningDataModule):
    def __init__(self, n: int = 16, n_features: int = 3, batch_size: int = 4):
        super().__init__()
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.n, self.n_features, self.batch_size = n, n_features, batch_size

    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(self.n, self.n_features, generator=g)
        return DataLoader(TensorDataset(x, x.sum(-1)), batch_size=self.batch_size)

    def predict_dataloader(self):
        x = torch.randn(self.n, self.n_features, generator=torch.Generator().manual_seed(1))
        return DataLoader(TensorDataset(x), batch_size=self.batch_size)


class Writer(BatchPredictionWriter):
    # the base class collects "probs" rows by position (every rank's under DDP); one line per
    # prediction into preds.txt, and the same into preds-extra.txt. FAKELIT_FAIL=collect:R
    # fails rank R while predicting, FAKELIT_FAIL=write fails rank 0's write.

    def __init__(self):
        super().__init__("preds.txt", "preds-extra.txt")

    def collect(self, prediction, batch, batch_indices):
        if os.environ.get("FAKELIT_FAIL") == f"collect:{int(os.environ.get('LOCAL_RANK', 0))}":
            raise RuntimeError("rank failed while predicting")
        super().collect(prediction, batch, batch_indices)

    def write_rows(self, trainer, pl_module, rows):
        if os.environ.get("FAKELIT_FAIL") == "write":
            raise ValueError("rank 0 failed to write")
        text = "".join(f"{i} {float(v):.4f}\\n" for i, v in rows.items())
        for path in self.targets(trainer):
            self.path = self.write_output(path, text)
"""


MAIN = """
import sys

from iclr26_common.cli_support import is_user_error, run_with_one_line_errors
from iclr26_common.lightning import run_cli

from fakelit_pkg.model import Data, Regressor, Writer


def lightning(argv):
    return run_cli(Regressor, Data, argv, package="fakelit_pkg", prog="fakelit", subclass_mode=False,
                   links=[("data.n_features", "model.n_features")],
                   fit_outputs={"model.save_to": "file"}, predict_writer=Writer)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv

    def dispatch(args):
        lightning(args)
        return 0

    return run_with_one_line_errors("fakelit", dispatch, argv,
                                    is_user=lambda e: is_user_error(e, "fakelit_pkg"),
                                    traceback_env="FAKELIT_TRACEBACK")


if __name__ == "__main__":
    sys.exit(main())
"""

TINY = """\
trainer:
  max_steps: 2
  enable_progress_bar: false
  enable_model_summary: false
model:
  width: 5
data:
  n: 8
"""


@pytest.fixture(scope="module")
def fake_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    site = tmp_path_factory.mktemp("litsite")
    pkg = site / PKG
    (pkg / "configs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(textwrap.dedent(MODULE))
    (pkg / "cli.py").write_text(textwrap.dedent(MAIN))
    (pkg / "configs" / "tiny.yaml").write_text(TINY)
    (pkg / "configs" / "wide.yaml").write_text(TINY.replace("width: 5", "width: 7"))
    sys.path.insert(0, str(site))
    yield site
    sys.path.remove(str(site))
    for name in [m for m in sys.modules if m.split(".")[0] == PKG]:
        del sys.modules[name]


@pytest.fixture
def cli_main(fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The fake package's ``main``, run in an empty temporary cwd on the CPU."""
    from fakelit_pkg import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICLR26_DEVICE", "cpu")
    monkeypatch.delenv("FAKELIT_TRACEBACK", raising=False)
    return cli


def test_config_never_overwrites_the_users_config_yaml(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fit --config tiny --trainer.logger=false` overwrote ./config.yaml before (overwrite=True
    in bio-scisor/llm-methods): the user's file must survive, the run's config goes beside it
    when the run has a folder (``--trainer.default_root_dir``)."""
    sentinel = tmp_path / "config.yaml"
    sentinel.write_text("# the user's own config\nkeep: me\n")
    root = ["--trainer.default_root_dir", str(tmp_path)]
    run = run_main(
        cli_main.main, ["fit", "--config", "tiny", "--trainer.logger=false", *root], capsys
    )
    assert run.code == 0, run.err
    assert sentinel.read_text() == "# the user's own config\nkeep: me\n"
    saved = tmp_path / "config-1.yaml"  # default_root_dir is the run's folder
    assert "width: 5" in saved.read_text()
    assert f"saved this run's config as {saved}" in run.err
    run = run_main(cli_main.main, ["fit", "-c", "tiny", "--trainer.logger=false", *root], capsys)
    assert run.code == 0 and (tmp_path / "config-2.yaml").is_file()
    assert sentinel.read_text() == "# the user's own config\nkeep: me\n"


def test_without_a_logger_or_a_root_dir_no_config_lands_in_the_current_folder(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: fits whose config turns the logger off wrote config.yaml, config-1.yaml, ...
    into the current folder (7 files after a few runs; 11b2942)."""
    for _ in range(2):
        run = run_main(cli_main.main, ["fit", "--config", "tiny", "--trainer.logger=false"], capsys)
        assert run.code == 0, run.err
    assert sorted(p.name for p in tmp_path.glob("config*.yaml")) == []


#: The fake package's model, as its fits stamp their checkpoints.
OWN = "fakelit_pkg.model.Regressor"


def _checkpoint(
    path: Path, *, class_path: str | None = None, epoch: int = 0, stamp: str | None = None
) -> Path:
    import torch

    from iclr26_common.lightning import MODEL_KEY

    hparams = {"_class_path": class_path} if class_path else {}
    payload = {"state_dict": {}, "hyper_parameters": hparams, "epoch": epoch}
    if stamp:
        payload[MODEL_KEY] = stamp
    torch.save(payload, path)
    return path


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (
            lambda d: _checkpoint(
                d / "rf.ckpt", class_path="rf_matid.lit_module.RFMatIDClassifier"
            ),
            ["test"],
            "--ckpt_path {ckpt}: a checkpoint of rf-matid "
            "(rf_matid.lit_module.RFMatIDClassifier), not of fakelit-pkg",
        ),
        (
            # a model given without subclass mode (atomistic-scaling, bio-scisor) saves no
            # _class_path: on 52aa8a9 its checkpoint passed and ended in a jsonargparse error
            lambda d: _checkpoint(d / "at.ckpt", stamp="atomistic_scaling.lit_module.ForceField"),
            ["test"],
            "--ckpt_path {ckpt}: a checkpoint of atomistic-scaling "
            "(atomistic_scaling.lit_module.ForceField), not of fakelit-pkg",
        ),
        (lambda d: d / "missing.ckpt", ["fit"], "--ckpt_path {ckpt}: no such checkpoint"),
        # a folder read "no such checkpoint" on 52aa8a9
        (lambda d: d, ["fit"], "--ckpt_path {ckpt}: is a folder; give a checkpoint"),
        (
            lambda d: (d / "t.ckpt").write_bytes(b"PK\x03\x04 truncated") and d / "t.ckpt",
            ["fit"],
            "--ckpt_path {ckpt}: not a readable checkpoint (",
        ),
        (
            lambda d: _checkpoint(d / "e3.ckpt", epoch=2, stamp=OWN),
            ["fit", "--trainer.max_epochs", "3"],
            "--trainer.max_epochs 3: {ckpt} already trained 3 epoch(s); give more epochs",
        ),
        # a plain Lightning checkpoint (no stamp, no _class_path): on e21a374 it passed unchecked
        (
            lambda d: _checkpoint(d / "plain.ckpt"),
            ["test"],
            "--ckpt_path {ckpt}: not a checkpoint of fakelit-pkg: it names no model (no "
            "'iclr26_model' stamp",
        ),
        # another model class of the same package (on e21a374: a jsonargparse error)
        (
            lambda d: _checkpoint(d / "data.ckpt", stamp="fakelit_pkg.model.Data"),
            ["test"],
            "--ckpt_path {ckpt}: a checkpoint of fakelit_pkg.model.Data, not of "
            "fakelit_pkg.model.Regressor (the model this command runs)",
        ),
        (
            lambda d: _checkpoint(d / "gone.ckpt", stamp="fakelit_pkg.model.Gone"),
            ["test"],
            "--ckpt_path {ckpt}: a checkpoint of fakelit_pkg.model.Gone, which this version of "
            "fakelit-pkg does not have",
        ),
        (
            lambda d: _checkpoint(d / "own.ckpt", stamp=OWN),
            ["test", "--weights_only", "false"],
            "--weights_only false: checkpoints are read with weights_only=True only",
        ),
        (
            lambda d: Path("last"),
            ["fit", "--trainer.max_epochs", "3"],
            "--ckpt_path last: no last checkpoint in this run's checkpoint folder",
        ),
    ],
)
def test_checkpoints_a_run_cannot_use_are_one_line_errors(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str], make, args, message
) -> None:
    """Issue 36: another package's checkpoint ran that package's model (robotics-remac test
    --ckpt_path <rf-matid checkpoint>); a truncated checkpoint was an UnpicklingError traceback;
    --ckpt_path last without a checkpoint trained from scratch (11b2942)."""
    ckpt = make(tmp_path)
    argv = [*args[:1], "--config", "tiny", "--trainer.logger=false", *args[1:]]
    # `last` is known missing only once the Trainer (its checkpoint folder) exists: after
    # Lightning's start-up lines
    startup = (lambda line: line.startswith("INFO: ")) if str(ckpt) == "last" else None
    err = assert_one_line_error(
        cli_main.main, [*argv, "--ckpt_path", str(ckpt)], capsys, skip=startup
    )
    assert message.format(ckpt=ckpt) in err


def test_a_fit_resumes_from_its_own_checkpoint_read_with_weights_only(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks pass a checkpoint the package's own fit saved (stamp and model class), and
    the Trainer reads it with ``weights_only=True`` whatever ``--weights_only`` defaults to
    (Lightning passes ``None``, torch's default of the day, on e21a374)."""
    from lightning.pytorch.trainer.connectors.checkpoint_connector import _CheckpointConnector

    run = run_main(cli_main.main, ["fit", "--config", "tiny"], capsys)
    assert run.code == 0, run.err
    (ckpt,) = (tmp_path / "lightning_logs" / "version_0" / "checkpoints").glob("*.ckpt")
    seen: list[object] = []
    real = _CheckpointConnector.resume_start

    def resume_start(self, checkpoint_path=None, weights_only=None):  # type: ignore[no-untyped-def]
        if checkpoint_path is not None:
            seen.append(weights_only)
        return real(self, checkpoint_path, weights_only)

    monkeypatch.setattr(_CheckpointConnector, "resume_start", resume_start)
    args = ["fit", "--config", "tiny", "--trainer.max_steps", "4", f"--ckpt_path={ckpt}"]
    run = run_main(cli_main.main, args, capsys)
    assert run.code == 0, run.err
    assert seen == [True]


def test_checkpoints_name_their_model_without_subclass_mode(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fit saves its model's import path (``MODEL_KEY``) into the checkpoint, so a package
    that takes its model without subclass mode (no ``_class_path``) is named when its
    checkpoint reaches another package's command (on 52aa8a9: a jsonargparse error)."""
    import torch

    from iclr26_common.lightning import MODEL_KEY, check_checkpoint_file

    run = run_main(cli_main.main, ["fit", "--config", "tiny"], capsys)
    assert run.code == 0, run.err
    (ckpt,) = (tmp_path / "lightning_logs" / "version_0" / "checkpoints").glob("*.ckpt")
    payload = torch.load(ckpt, weights_only=True)
    assert "_class_path" not in payload["hyper_parameters"]
    assert payload[MODEL_KEY] == "fakelit_pkg.model.Regressor"
    assert check_checkpoint_file(str(ckpt), package="fakelit_pkg") is not None
    with pytest.raises(UsageError, match=r"a checkpoint of fakelit-pkg \(fakelit_pkg\.model"):
        check_checkpoint_file(str(ckpt), package="rf_matid")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"model:\n  width: 5 # caf\xe9\n", "not UTF-8 text (byte 0xe9 at offset 23)"),
        (None, "is a folder; give a config file"),
    ],
)
def test_config_files_that_are_not_utf8_text_are_one_line_errors(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str], content, message
) -> None:
    """Issue 36: a Latin-1 ``--config`` YAML was a UnicodeDecodeError traceback from
    jsonargparse in every LightningCLI (52aa8a9)."""
    path = tmp_path / "conf"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    err = assert_one_line_error(cli_main.main, ["fit", "--config", str(path)], capsys)
    assert f"--config {path}: {message}" in err


def test_ctrl_c_in_a_fit_is_one_line_and_status_130(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lightning catches a Ctrl-C inside ``fit``, shuts down and exits with status 1: on 52aa8a9
    ``rf-matid benchmark`` and ``atomistic-scaling sweep`` ended with status 1 and no line."""
    import signal

    handler = signal.getsignal(signal.SIGINT)
    try:
        run = run_main(cli_main.main, ["fit", "-c", "tiny", "--model.interrupt_at", "1"], capsys)
    finally:
        signal.signal(signal.SIGINT, handler)  # Lightning ignores SIGINT after a Ctrl-C
    assert run.code == 130, run.err
    assert run.err.strip().splitlines()[-1] == "fakelit: interrupted"
    assert "Traceback" not in run.err


def test_ctrl_c_in_a_quiet_trainer_fit_is_one_line_and_status_130(
    fake_site: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for the fits a command runs itself (``quiet_trainer``: rf-matid's benchmark,
    atomistic-scaling's sweep)."""
    import signal

    from fakelit_pkg.model import Data, Regressor

    from iclr26_common.lightning import quiet_trainer

    monkeypatch.setenv("ICLR26_DEVICE", "cpu")
    monkeypatch.delenv("FAKELIT_TRACEBACK", raising=False)

    def dispatch(args: list[str]) -> int:
        quiet_trainer(max_steps=4).fit(Regressor(interrupt_at=1), Data())
        return 0

    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as info:
            run_with_one_line_errors(
                "sweeper", dispatch, [], is_user=lambda e: False, traceback_env="FAKELIT_TRACEBACK"
            )
    finally:
        signal.signal(signal.SIGINT, handler)
    assert info.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "sweeper: interrupted"


def test_config_goes_into_the_loggers_version_folder(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_main(cli_main.main, ["fit", "--config", "tiny"], capsys)
    assert run.code == 0, run.err
    assert not (tmp_path / "config.yaml").exists()
    saved = tmp_path / "lightning_logs" / "version_0" / "config.yaml"
    assert "width: 5" in saved.read_text()


def test_shipped_config_names_resolve_with_both_flags(fake_site: Path, tmp_path: Path) -> None:
    from fakelit_pkg.cli import lightning

    for argv in (["--config", "wide"], ["-c", "wide"], ["--config=wide"], ["-c=wide"]):
        cli = lightning(
            [
                "fit",
                *argv,
                "--trainer.max_steps",
                "0",
                "--trainer.logger=false",
                f"--trainer.default_root_dir={tmp_path}",
            ]
        )
        assert cli.model.hparams.width == 7, argv
        assert cli.config.fit.data.n == 8


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["fit", "--config", "nosuch.yaml"], "--config nosuch.yaml: no such file"),
        (["fit", "-c", "nosuch"], "shipped: tiny, wide"),
        (["fit", "--config", "tiny", "--trainer.max_steps", "abc"], "fit: "),
        (["fit", "--no-such-option", "1"], "unrecognized arguments: --no-such-option"),
        (["fit", "--config", "tiny", "--data.n", "0"], "n must be >= 1, got 0"),
        # values jsonargparse accepts but the Trainer rejects (55 and 49 traceback lines before)
        # ... naming the option (Lightning's own message names the Trainer argument only)
        (["fit", "--config", "tiny", "--trainer.devices", "abc"], "--trainer.devices abc: "),
        (
            ["fit", "--config", "tiny", "--trainer.accelerator", "tpuu"],
            "--trainer.accelerator tpuu: ",
        ),
        # an accelerator this machine lacks: Lightning's "can not run on your system" (MPS is
        # Apple-only), and an ImportError traceback for tpu without torch_xla
        (
            ["fit", "--config", "tiny", "--trainer.accelerator", "mps"],
            "--trainer.accelerator mps: ",
        ),
        (
            ["fit", "--config", "tiny", "--trainer.accelerator", "tpu"],
            "--trainer.accelerator tpu: ",
        ),
        (
            ["fit", "--config", "tiny", "--trainer.strategy", "nosuch"],
            "--trainer.strategy nosuch: ",
        ),
    ],
)
def test_parse_errors_are_one_line_exit_2(
    cli_main, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    """`fit --config nosuch.yaml` printed 52-72 stderr lines before exit_on_error=False."""
    line = assert_one_line_error(cli_main.main, args, capsys, prog="fakelit: error: ")
    assert expected in line


def test_fit_outputs_are_checked_before_any_work_from_the_command_line_or_a_config(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A save path ``fit`` writes (``run_cli(fit_outputs=)``) is checked before the model is built
    or trained, whether it was given on the command line or only in a ``--config`` YAML
    (d875146: a value set in a YAML was not seen, and the trained model was lost at the end);
    ``--overwrite`` replaces it."""
    from fakelit_pkg import model

    earlier = tmp_path / "earlier.txt"
    earlier.write_text("earlier")
    own = tmp_path / "own.yaml"
    own.write_text(TINY.replace("  width: 5\n", f"  width: 5\n  save_to: {earlier}\n"))
    seen = len(model.SEEN_ARGV)
    for args in (
        ["fit", "--config", "tiny", "--model.save_to", str(earlier)],
        ["fit", "--config", str(own)],
    ):
        line = assert_one_line_error(cli_main.main, args, capsys, prog="fakelit: error: ")
        assert f"--model.save_to {earlier}: exists; pass --overwrite" in line, line
    line = assert_one_line_error(
        cli_main.main,
        ["fit", "--config", "tiny", "--model.save_to", str(tmp_path)],
        capsys,
        prog="fakelit: error: ",
    )
    assert "is a folder; give a file name" in line, line
    assert len(model.SEEN_ARGV) == seen, "a refused fit started training"
    assert earlier.read_text() == "earlier"
    run = run_main(cli_main.main, ["fit", "--config", str(own), "--overwrite"], capsys)
    assert run.code == 0, run.err
    assert earlier.read_text() == "trained"


@pytest.mark.parametrize("value", ["nan", "-inf", "Infinity"])
def test_non_finite_numbers_are_one_line_naming_the_option(
    cli_main, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """``--model.lr nan`` in any package's LightningCLI is one line naming the option
    (d875146: only llm-methods refused it; elsewhere jsonargparse's long Union message)."""
    line = assert_one_line_error(
        cli_main.main,
        ["fit", "--config", "tiny", f"--model.lr={value}"],
        capsys,
        prog="fakelit: error: ",
    )
    assert f"--model.lr {value}: not a finite number" in line, line


def test_no_args_warning_and_sys_argv_is_the_real_one_during_fit(
    fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LightningCLI warns when both ``args`` and ``sys.argv[1:]`` are given; ddp re-runs
    ``sys.argv`` for ranks > 0, so sys.argv must stay the real command line during fit."""
    from fakelit_pkg import model
    from fakelit_pkg.cli import lightning

    argv = ["fit", "--config", "tiny", "--trainer.logger=false", "--trainer.accelerator=cpu"]
    real = ["/venv/bin/fakelit", *argv]
    monkeypatch.setattr(sys, "argv", real)
    monkeypatch.chdir(tmp_path)
    model.SEEN_ARGV.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lightning(argv)
    assert not [w for w in caught if "args parameter" in str(w.message)]
    assert model.SEEN_ARGV == [real] and sys.argv == real


def test_ddp_in_process_with_a_foreign_sys_argv_is_refused(
    fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ddp would re-run pytest's command line for rank 1: refuse before launching anything."""
    from fakelit_pkg.cli import lightning

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["pytest", "-q", "tests"])
    with pytest.raises(RuntimeError, match="re-runs this process's command line"):
        lightning(["fit", "--config", "tiny", "--trainer.logger=false", *DDP_CPU_ARGS])


def test_accelerator_comes_from_the_device_helper(
    fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakelit_pkg.cli import lightning

    import iclr26_common.lightning as wiring

    monkeypatch.chdir(tmp_path)
    calls: list[str] = []

    def fake_accelerator() -> str:
        calls.append("asked")
        return "cpu"

    monkeypatch.setattr(wiring, "lightning_accelerator", fake_accelerator)
    common = ["fit", "--config", "tiny", "--trainer.logger=false", "--trainer.max_steps=0"]
    cli = lightning(common)
    assert calls == ["asked"] and type(cli.trainer.accelerator).__name__ == "CPUAccelerator"
    lightning([*common, "--trainer.accelerator", "cpu"])  # the user's choice is not replaced
    assert calls == ["asked"]


@pytest.mark.skipif(
    pytest.importorskip("torch").cuda.is_available(), reason="needs a machine without CUDA"
)
def test_forced_missing_cuda_is_a_one_line_error(
    cli_main, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ICLR26_DEVICE", "cuda")
    line = assert_one_line_error(cli_main.main, ["fit", "--config", "tiny"], capsys)
    assert "ICLR26_DEVICE=cuda: PyTorch sees no CUDA device" in line


def test_package_bug_keeps_its_traceback(
    fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only parse errors become UsageError; a bug in a hook propagates unchanged."""
    from fakelit_pkg.model import Data, Regressor

    from iclr26_common.lightning import run_cli

    def broken(cli: object) -> None:
        raise KeyError("bug")

    monkeypatch.chdir(tmp_path)
    with pytest.raises(KeyError):
        run_cli(
            Regressor,
            Data,
            ["fit", "--trainer.logger=false"],
            package=PKG,
            subclass_mode=False,
            before_trainer=broken,
        )
    with pytest.raises(UsageError):
        run_cli(Regressor, Data, ["fit", "--model.width", "x"], package=PKG, subclass_mode=False)


def test_seed_line_is_quiet(cli_main, capsys: pytest.CaptureFixture[str]) -> None:
    lightning_logs_to_current_stderr()
    run = run_main(cli_main.main, ["fit", "--config", "tiny", "--trainer.logger=false"], capsys)
    assert run.code == 0 and "Seed set" not in run.err


def test_quiet_trainer_defaults_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    from iclr26_common.lightning import quiet_trainer

    monkeypatch.setenv("ICLR26_DEVICE", "cpu")
    trainer = quiet_trainer(max_epochs=2)
    assert trainer.logger is None and trainer.max_epochs == 2
    assert not trainer.progress_bar_callback and trainer.checkpoint_callback is None
    assert type(trainer.accelerator).__name__ == "CPUAccelerator" and trainer.num_devices == 1
    trainer = quiet_trainer(max_steps=3, limit_val_batches=0, enable_progress_bar=True)
    assert trainer.max_steps == 3 and trainer.progress_bar_callback is not None


def test_cuda_index_reaches_the_trainer(monkeypatch: pytest.MonkeyPatch) -> None:
    """ICLR26_DEVICE=cuda:1 recorded cuda:1 while Lightning's devices=1 trained on cuda:0."""
    import torch

    from iclr26_common import device
    from iclr26_common.lightning import quiet_trainer

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: f"Fake{i}")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("ICLR26_DEVICE", "cuda:1")
    assert device.lightning_devices() == [1]
    seen: dict[str, object] = {}

    class FakeTrainer:
        def __init__(self, **kwargs: object) -> None:
            seen.update(kwargs)

    import iclr26_common.trainer as quiet

    monkeypatch.setattr(quiet, "Trainer", FakeTrainer)
    quiet_trainer()
    assert seen["accelerator"] == "gpu" and seen["devices"] == [1]
    quiet_trainer(devices=2)  # the caller's choice stays
    assert seen["devices"] == 2
    monkeypatch.setenv("ICLR26_DEVICE", "cuda")
    assert device.lightning_devices() == 1


def test_free_config_path(tmp_path: Path) -> None:
    from iclr26_common.lightning import free_config_path

    assert free_config_path(tmp_path) == tmp_path / "config.yaml"
    (tmp_path / "config.yaml").write_text("x")
    (tmp_path / "config-1.yaml").write_text("x")
    assert free_config_path(tmp_path) == tmp_path / "config-2.yaml"


def test_one_line_errors_for_run_cli_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    def dispatch(argv: list[str]) -> int:
        raise UsageError("fit: unrecognized arguments: --x")

    with pytest.raises(SystemExit) as exc:
        run_with_one_line_errors("p", dispatch, [], is_user=lambda e: False, traceback_env="NO_TB")
    assert exc.value.code == 2
    assert capsys.readouterr().err == "p: error: fit: unrecognized arguments: --x\n"


@pytest.mark.slow
def test_ddp_two_cpu_processes_through_the_command_line(fake_site: Path, tmp_path: Path) -> None:
    """The real relaunch: rank 1 re-runs ``python .../cli.py fit ...``; one config is written."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(fake_site), "OMP_NUM_THREADS": "1"}
    args = ["fit", "--config", "tiny", *DDP_CPU_ARGS]
    proc = subprocess.run(
        [sys.executable, str(fake_site / PKG / "cli.py"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr
    assert [p.name for p in (tmp_path / "lightning_logs").rglob("config*.yaml")] == ["config.yaml"]


def _fake_ddp(
    fake_site: Path, cwd: Path, *args: str, fail: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The fake package's console script under DDP (two gloo processes) in ``cwd``; the
    ``timeout`` is a guard against a hang, not a speed check."""
    env = {**os.environ, "PYTHONPATH": str(fake_site), "OMP_NUM_THREADS": "1"}
    env["ICLR26_DEVICE"] = "cpu"
    env.pop("FAKELIT_FAIL", None)
    env.update({"FAKELIT_FAIL": fail} if fail else {})
    command = [sys.executable, str(fake_site / PKG / "cli.py"), *args, *DDP_CPU_ARGS]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_ddp_predict_writes_one_file_with_every_row_once(
    cli_main, fake_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39: under DDP every rank's rows reach rank 0, which writes the writer's files once,
    in the split's order (7 rows: the ranks predict 4 and 3), as one process writes them; no
    rank writes a file of its own. (rf-matid's first try hung: rank 0 alone read
    ``trainer.log_dir``, a broadcast every rank must join.)"""
    args = ["predict", "--config", "tiny", "--trainer.logger=false", "--data.n=7"]
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    single.mkdir()
    ddp.mkdir()
    run = run_main(cli_main.main, [*args, f"--trainer.default_root_dir={single}"], capsys)
    assert run.code == 0, run.err
    proc = _fake_ddp(fake_site, ddp, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr
    assert sorted(p.name for p in ddp.iterdir()) == ["preds-extra.txt", "preds.txt"]
    lines = (ddp / "preds.txt").read_text().splitlines()
    assert [line.split()[0] for line in lines] == [str(i) for i in range(7)]
    assert (ddp / "preds.txt").read_text() == (single / "preds.txt").read_text()
    assert (ddp / "preds-extra.txt").read_text() == (single / "preds.txt").read_text()


@pytest.mark.parametrize(
    "fail",
    [
        "write",  # rank 0 fails writing; rank 1 waits in the barrier
        pytest.param("collect:0", marks=pytest.mark.slow),  # rank 1 waits in the gather
        pytest.param("collect:1", marks=pytest.mark.slow),  # rank 0 waits in the gather
    ],
)
def test_ddp_predict_with_a_failing_rank_ends(fake_site: Path, tmp_path: Path, fail: str) -> None:
    """A rank that fails in predict must not leave the other waiting for ever: its closed
    connection ends the other's collective (gloo), the command exits non-zero, no file."""
    proc = _fake_ddp(fake_site, tmp_path, "predict", "--config", "tiny", "--data.n=7", fail=fail)
    assert proc.returncode != 0
    assert "Starting with 2 processes" in proc.stderr, proc.stderr[-3000:]
    message = "rank 0 failed to write" if fail == "write" else "rank failed while predicting"
    assert message in proc.stderr, proc.stderr[-3000:]
    assert not list(tmp_path.rglob("preds*"))


@pytest.mark.slow
def test_ddp_predict_refuses_an_earlier_file_in_the_loggers_folder_on_every_rank(
    fake_site: Path, tmp_path: Path
) -> None:
    """With a logger the run folder is known only to the Trainer: every rank's writer refuses
    the earlier file in ``setup`` (one line each, exit 2), before the config is saved beside
    it (the writer's ``setup`` runs first) and before any batch."""
    logger = [
        "--trainer.logger=lightning.pytorch.loggers.CSVLogger",
        "--trainer.logger.save_dir=.",
        "--trainer.logger.version=0",
    ]
    args = ["predict", "--config", "tiny", "--data.n=7", *logger]
    assert _fake_ddp(fake_site, tmp_path, *args).returncode == 0
    folder = tmp_path / "lightning_logs" / "version_0"
    before = (folder / "preds.txt").read_text()
    proc = _fake_ddp(fake_site, tmp_path, *args)
    assert proc.returncode == 2, proc.stderr[-3000:]
    refusal = f"fakelit: error: predict: {Path('lightning_logs/version_0/preds.txt')}: exists"
    assert proc.stderr.count(refusal) == 2, proc.stderr[-3000:]  # both ranks refuse
    assert (folder / "preds.txt").read_text() == before
    assert not (folder / "config-1.yaml").exists()


def test_seed_everything_is_lightnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """iclr26_common.seed_everything has one implementation with Lightning installed:
    Lightning's (it exports PL_GLOBAL_SEED, which Lightning's worker seeding reads), quietly."""
    import os

    import lightning.fabric.utilities.seed as seed_module

    from iclr26_common import seed_everything

    calls: list[tuple[int, bool]] = []
    real = seed_module.seed_everything

    def spy(seed: int, workers: bool = False, verbose: bool = True) -> int:
        calls.append((seed, verbose))
        return real(seed, workers=workers, verbose=verbose)

    monkeypatch.setattr(seed_module, "seed_everything", spy)
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    assert seed_everything(77) == 77
    assert calls == [(77, False)] and os.environ["PL_GLOBAL_SEED"] == "77"


def test_only_file_finds_exactly_one(tmp_path: Path) -> None:
    from iclr26_common.testing import only_file

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "config.yaml").write_text("x: 1\n")
    assert only_file(tmp_path, "config*.yaml") == tmp_path / "a" / "b" / "config.yaml"
    (tmp_path / "a" / "config-1.yaml").write_text("x: 1\n")  # what a second rank would write
    with pytest.raises(AssertionError, match="expected one config"):
        only_file(tmp_path, "config*.yaml")
    with pytest.raises(AssertionError, match="found \\[\\]"):
        only_file(tmp_path, "*.ckpt")


def test_subcommand_flags_reach_that_subcommand_only(
    fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_cli(subcommand_flags=...)``: the public way to give one subcommand options of its
    own (``predict --overwrite``); other subcommands refuse them."""
    from fakelit_pkg.model import Data, Regressor

    from iclr26_common.lightning import run_cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICLR26_DEVICE", "cpu")
    flags = {"fit": {"--overwrite": {"action": "store_true", "help": "replace outputs"}}}
    args = ["--config", "tiny", "--overwrite", "--trainer.logger=false"]
    kwargs = {"package": PKG, "subclass_mode": False, "subcommand_flags": flags}
    cli = run_cli(Regressor, Data, ["fit", *args], **kwargs)
    assert cli.config["fit"]["overwrite"] is True and cli.trainer.global_step == 2
    with pytest.raises(UsageError, match="overwrite"):
        run_cli(Regressor, Data, ["validate", *args], **kwargs)


def test_predict_files_follow_the_one_rule(
    cli_main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run_cli(predict_writer=...)``: the rule of every package's ``predict`` (issue 36 review:
    rf-matid wrote predictions-1.csv beside an earlier file on 43a8cc5, atomistic-scaling had its
    own copy of the check). An earlier predict's file in the run folder (any of the writer's
    files) is one line naming it and --overwrite, before any class is built (``--data.n=0``
    would raise in the data module); ``predict --overwrite`` replaces them, mode 0644."""
    args = ["predict", "--config", "tiny", "--trainer.logger=false"]  # run folder: the cwd
    run = run_main(cli_main.main, args, capsys)
    assert run.code == 0, run.err
    first, extra = tmp_path / "preds.txt", tmp_path / "preds-extra.txt"
    lines = first.read_text().splitlines()
    assert len(lines) == 8 and lines[0].startswith("0 ")  # tiny: n=8
    extra.write_text("mine\n")
    first.unlink()  # only the second file is left: still refused, naming it
    line = assert_one_line_error(cli_main.main, [*args, "--data.n=0"], capsys, prog="fakelit")
    assert f"predict: {extra}: exists; pass --overwrite to replace it" in line, line
    assert extra.read_text() == "mine\n" and not first.exists()
    run = run_main(cli_main.main, [*args, "--overwrite"], capsys)
    assert run.code == 0, run.err
    assert extra.read_text() == first.read_text() != "mine\n"
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in (first, extra))
    line = assert_one_line_error(
        cli_main.main, ["validate", "--config", "tiny", "--overwrite"], capsys
    )
    assert "overwrite" in line  # predict's flag, not validate's


def test_a_prediction_writer_refuses_earlier_files_before_the_first_batch(
    fake_site: Path, tmp_path: Path
) -> None:
    """With a logger the run folder is known only to the Trainer: the writer's ``setup`` applies
    the same rule there, before any batch is predicted."""
    from fakelit_pkg.model import Data, Regressor, Writer

    from iclr26_common.lightning import quiet_trainer
    from iclr26_common.outputs import OutputError

    (tmp_path / "preds.txt").write_text("mine\n")
    writer = Writer()
    trainer = quiet_trainer(default_root_dir=tmp_path, callbacks=[writer], accelerator="cpu")
    with pytest.raises(OutputError, match=r"preds.txt: exists; pass --overwrite to replace it"):
        trainer.predict(Regressor(), datamodule=Data())
    assert writer.collected() == 0 and (tmp_path / "preds.txt").read_text() == "mine\n"
    writer.overwrite = True
    trainer.predict(Regressor(), datamodule=Data())
    assert writer.collected() == 16 and (tmp_path / "preds.txt").read_text().startswith("0 ")


def test_a_prediction_writer_collects_by_position_when_lightning_gives_empty_indices(
    fake_site: Path,
) -> None:
    """Lightning passes ``batch_indices=[]`` when it cannot infer them (a plain loader without a
    sampler, as robotics-remac's): the writer crashed in ``zip`` (d3f35d6) instead of counting
    rows by position as it does for ``None``."""
    import torch
    from fakelit_pkg.model import Writer

    writer = Writer()
    for start in (0, 3):
        prediction = {"probs": torch.arange(start, start + 3, dtype=torch.float32)}
        writer.write_on_batch_end(None, None, prediction, [], None, 0, 0)
    assert writer.collected() == 6


def test_a_method_of_a_package_accepts_its_own_checkpoints_and_refuses_its_siblings(
    tmp_path: Path,
) -> None:
    """llm-methods' commands check ``--ckpt_path`` against ``llm_methods.<method>``: on
    7db60f3 only the top module was compared (``llm_methods`` != ``llm_methods.perk``), so
    every llm-methods LightningCLI refused its own checkpoints as another package's."""
    from iclr26_common.lightning import check_checkpoint_file

    own = _checkpoint(tmp_path / "perk.ckpt", class_path="llm_methods.perk.lit_module.PERKModule")
    assert check_checkpoint_file(str(own), package="llm_methods.perk") is not None
    with pytest.raises(UsageError, match=r"a checkpoint of llm-methods\.perk .* not of llm-me"):
        check_checkpoint_file(str(own), package="llm_methods.remix")
    rf = _checkpoint(tmp_path / "rf.ckpt", class_path="rf_matid.lit_module.RFMatIDClassifier")
    assert check_checkpoint_file(str(rf), package="rf_matid") is not None
    with pytest.raises(UsageError, match="a checkpoint of rf-matid"):
        check_checkpoint_file(str(rf), package="rf_matidx")


def test_lightnings_pytree_deprecation_is_not_shown_other_warnings_are(
    fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every fit/predict printed Lightning's own "`isinstance(treespec, LeafSpec)` is
    deprecated" warning (lightning/pytorch/utilities/_pytree.py, with torch >= 2.9): nothing a
    user can act on. It is raised here inside the run, as Lightning raises it, beside another
    warning that must still reach the user."""
    import warnings

    from fakelit_pkg.cli import lightning

    import iclr26_common.lightning as wiring

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICLR26_DEVICE", "cpu")
    run = wiring.CLI._run_subcommand

    def noisy(self, subcommand):  # type: ignore[no-untyped-def]
        warnings.warn(
            "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)"
            " and treespec.is_leaf()` instead.",
            FutureWarning,
            stacklevel=1,
        )
        warnings.warn("a warning of the user's own model", UserWarning, stacklevel=1)
        return run(self, subcommand)

    monkeypatch.setattr(wiring.CLI, "_run_subcommand", noisy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lightning(["fit", "--config", "tiny", "--trainer.max_steps", "1", "--trainer.logger=false"])
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "LeafSpec" in m], messages
    assert "a warning of the user's own model" in messages
