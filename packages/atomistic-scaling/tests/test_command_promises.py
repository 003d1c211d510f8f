"""The promises every atomistic-scaling command keeps (issue 36): outputs checked before any
work, one line for a refused output or a non-finite number, Ctrl-C as one line and exit 130
with the finished sweep jobs kept and skipped by ``--resume`` (an interrupted sweep's folder is
marked partial, never complete-looking), progress with ``--quiet``, a checkpoint from ``fit
--config tiny`` that ``test``/``predict --ckpt_path`` follow, files written with mode 0644, and
the package's main names importable from ``atomistic_scaling``.

All of them fail on 11b2942 (before issue 36 moved the commands onto ``iclr26_common.outputs``
/ ``progress``), as each docstring says.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from atomistic_scaling.cli import main
from iclr26_common.outputs import PARTIAL_MARKER
from iclr26_common.testing import assert_light_package, assert_one_line_error, run_main

PROG = "atomistic-scaling: error: "
# 2 archs x 1 width x 2 seeds = 4 jobs on 24 generated structures
SWEEP = [
    "sweep",
    "--archs=[mpnn,l1]",
    "--widths=[4]",
    "--d_values=[12,16,24]",
    "--seeds=[0,1]",
    "--batch_size=2",
    "--warmup_steps=2",
    "--synthetic_val=4",
    "--n_boot=2",
]


def _fake_runs(arch: str, width: int, seed: int, config) -> list[dict]:  # type: ignore[no-untyped-def]
    """Records of one job as train_runs + _job give them, without training."""
    return [
        {
            "arch": arch,
            "width": width,
            "seed": seed,
            "n_params": 100 * width,
            "D": d,
            "steps": config.steps_of(d),
            "loss": 1.0 / d + 0.01 * seed,
            "energy_term": 0.5 / d,
            "force_term": 0.5 / d,
            "train_seconds": 0.01 * d,
            "flops_per_structure": 1e5,
            "compute": 1e5 * d,
            "kappa": 3.0,
        }
        for d in config.d_values
    ]


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """``sweep._job`` replaced by a fake (no training) that records the jobs it ran."""
    import atomistic_scaling.sweep as sweep

    ran: list[tuple] = []

    def fake(arch, width, seed, data, config):  # type: ignore[no-untyped-def]
        ran.append((arch, width, seed))
        return _fake_runs(arch, width, seed, config), 0.0

    monkeypatch.setattr(sweep, "_job", fake)
    return ran


def _interrupt_the_third_job(monkeypatch, sweep) -> None:  # type: ignore[no-untyped-def]
    """Replace the sweep's jobs by fakes that raise KeyboardInterrupt (Ctrl-C) in the third."""
    ran: list[tuple] = []

    def interrupted(arch, width, seed, data, config):  # type: ignore[no-untyped-def]
        ran.append((arch, width, seed))
        if len(ran) == 3:
            raise KeyboardInterrupt
        return _fake_runs(arch, width, seed, config), 0.0

    monkeypatch.setattr(sweep, "_job", interrupted)


def test_sweep_checks_its_out_before_generating_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A file as --out, or a folder with an earlier sweep, is refused before any structure is
    generated (11b2942 refused a non-empty folder only with a FileExistsError and trained
    into a file's path until the first write failed)."""
    import atomistic_scaling.synth as synth

    def no_data(*_: object, **__: object) -> None:
        raise AssertionError("data generated before --out was checked")

    monkeypatch.setattr(synth, "generate_structures", no_data)
    target = tmp_path / "outfile.txt"
    target.write_text("mine\n")
    line = assert_one_line_error(main, [*SWEEP, "--out", str(target)], capsys, prog=PROG)
    assert f"--out {target}: exists and is a file; give a folder" in line
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "fits.json").write_text("{}")
    line = assert_one_line_error(main, [*SWEEP, "--out", str(earlier)], capsys, prog=PROG)
    assert "holds earlier results; pass --overwrite" in line
    fresh = tmp_path / "fresh"
    line = assert_one_line_error(main, [*SWEEP, "--out", str(fresh), "--resume"], capsys)
    assert "nothing to resume" in line and not fresh.exists()


def test_sweep_ctrl_c_keeps_finished_jobs_and_resume_skips_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Ctrl-C in the third job: one line ``atomistic-scaling: interrupted``, exit 130, no
    traceback; two finished jobs are on disk, the folder is marked partial (11b2942 left
    nothing, or a folder that looked complete); a rerun is refused without --resume, refused
    with other settings, and with --resume trains only the two missing jobs."""
    import atomistic_scaling.sweep as sweep

    out = tmp_path / "sweep"
    args = [*SWEEP, "--out", str(out), "--quiet"]
    _interrupt_the_third_job(monkeypatch, sweep)
    run = run_main(main, args, capsys)
    assert run.code == 130
    assert [x for x in run.err.splitlines() if x.strip()] == ["atomistic-scaling: interrupted"]
    assert "Traceback" not in run.err
    assert (out / PARTIAL_MARKER).is_file() and not (out / "fits.json").exists()
    saved = sorted(p.name for p in (out / "jobs").iterdir())
    assert saved == ["mpnn_w4_seed0.json", "mpnn_w4_seed1.json"]

    assert "pass --resume" in assert_one_line_error(main, args, capsys, prog=PROG)
    # other settings: one line in the wording every resumable command shares
    # (iclr26_common.outputs.check_resume_settings; rf-matid benchmark's)
    other = [a if a != "--seeds=[0,1]" else "--seeds=[0,2]" for a in args]
    assert (
        f"--resume: the interrupted sweep in {out} ran with --seeds [0, 1], this one with "
        "[0, 2]; rerun with its settings, or pass --overwrite"
    ) in assert_one_line_error(main, [*other, "--resume"], capsys, prog=PROG)

    resumed: list[tuple] = []

    def fake(arch, width, seed, data, config):  # type: ignore[no-untyped-def]
        resumed.append((arch, width, seed))
        return _fake_runs(arch, width, seed, config), 0.0

    monkeypatch.setattr(sweep, "_job", fake)
    run = run_main(main, [*args, "--resume"], capsys)
    assert run.code == 0, run.err
    assert resumed == [("l1", 4, 0), ("l1", 4, 1)]
    assert not (out / PARTIAL_MARKER).exists()
    records = json.loads((out / "records.json").read_text())
    assert [(r["arch"], r["seed"]) for r in records[::3]] == [
        ("mpnn", 0),
        ("mpnn", 1),
        ("l1", 0),
        ("l1", 1),
    ]


def test_sweep_overwrite_replaces_an_earlier_sweep(
    tmp_path: Path, jobs: list, capsys: pytest.CaptureFixture
) -> None:
    """--overwrite replaces the earlier sweep's files and trains every job again (11b2942 had
    no --overwrite: a folder had to be emptied by hand)."""
    out = tmp_path / "sweep"
    args = [*SWEEP, "--out", str(out), "--quiet"]
    assert run_main(main, args, capsys).code == 0 and len(jobs) == 4
    (out / "notes.txt").write_text("mine\n")
    assert run_main(main, [*args, "--overwrite"], capsys).code == 0 and len(jobs) == 8
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "fits.md").is_file()


def test_sweep_shows_progress_unless_quiet(
    tmp_path: Path, jobs: list, capsys: pytest.CaptureFixture
) -> None:
    """Progress over the jobs on stderr; --quiet turns it off (11b2942: no progress, no
    --quiet)."""
    loud = run_main(main, [*SWEEP, "--out", str(tmp_path / "a")], capsys)
    assert loud.code == 0 and "sweep jobs: 4/4" in loud.err
    quiet = run_main(main, [*SWEEP, "--out", str(tmp_path / "b"), "--quiet"], capsys)
    assert quiet.code == 0 and "sweep jobs" not in quiet.err


def test_sweep_says_what_it_runs_before_the_data_and_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A start line on stderr before the data are generated (~20 s at the defaults): the jobs,
    how many a resumed sweep finished before, how many are left; --quiet silences it. 34583c8
    printed nothing until the first job finished (9-40 s), and on --resume a stdout line only
    after the data (issue 36 review: 20 s silent with 30 of 36 jobs done)."""
    import atomistic_scaling.sweep as sweep
    import atomistic_scaling.synth as synth

    before_data: list[str] = []
    generate = synth.generate_structures

    def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        before_data.append(capsys.readouterr().err)  # what stderr showed before the data
        return generate(*args, **kwargs)

    monkeypatch.setattr(synth, "generate_structures", watched)
    _interrupt_the_third_job(monkeypatch, sweep)
    out = tmp_path / "sweep"
    run = run_main(main, [*SWEEP, "--out", str(out)], capsys)
    assert run.code == 130
    start = before_data[0].splitlines()[0]
    assert start.startswith("sweep: 4 job(s) (2 arch(s) x 1 width(s) x 2 seed(s), D = 12, 16, 24)")
    assert "resuming" not in start and "4 to run; generating 24 training and 4 validation" in start

    monkeypatch.setattr(sweep, "_job", lambda a, w, s, d, c: (_fake_runs(a, w, s, c), 0.0))
    before_data.clear()
    run = run_main(main, [*SWEEP, "--out", str(out), "--resume"], capsys)
    assert run.code == 0, run.err
    start = before_data[0].splitlines()[0]
    assert f"resuming: 2 finished before (in {out / 'jobs'}), 2 to run; generating" in start
    assert "resuming" not in run.out  # progress is stderr's; stdout is the table

    before_data.clear()
    run = run_main(main, [*SWEEP, "--out", str(tmp_path / "q"), "--quiet"], capsys)
    assert run.code == 0 and set(before_data) == {""} and "sweep:" not in run.err


@pytest.mark.parametrize(
    ("option", "value"),
    [("--lr", "nan"), ("--lr", ".inf"), ("--cutoff", ".nan"), ("--min_distance", ".inf")],
)
def test_sweep_numbers_must_be_finite(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """nan/inf are one line naming the option (11b2942: jsonargparse's multi-line usage for
    ``nan``, and ``.inf`` reached the optimiser)."""
    args = [*SWEEP, "--out", str(tmp_path / "s"), f"{option}={value}"]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert option in line and not (tmp_path / "s").exists()
    # d875146: "--lr: Expected a <class 'float'>. Got value: nan" (jsonargparse's wording)
    assert f"{option} {value}: not a finite number" in line, line


def test_synth_checks_its_out_first_and_overwrites_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """An existing --out is refused before structures are generated; --overwrite replaces it
    (11b2942 generated first and had no --overwrite)."""
    import atomistic_scaling.synth as synth

    out = tmp_path / "emt.xyz"
    out.write_text("mine\n")
    real = synth.generate_structures
    monkeypatch.setattr(synth, "generate_structures", lambda *a, **k: pytest.fail("generated"))
    line = assert_one_line_error(main, ["synth", "--out", str(out), "--n", "2"], capsys, prog=PROG)
    assert f"--out {out}: exists; pass --overwrite" in line and out.read_text() == "mine\n"
    folder = assert_one_line_error(main, ["synth", "--out", str(tmp_path), "--n", "2"], capsys)
    assert "is a folder; give a file name" in folder
    monkeypatch.setattr(synth, "generate_structures", real)
    assert run_main(main, ["synth", "--out", str(out), "--n", "2", "--overwrite"], capsys).code == 0
    from atomistic_scaling.io import read_structures

    assert len(read_structures(out)) == 2


def test_outputs_are_written_with_mode_0644(
    tmp_path: Path, jobs: list, capsys: pytest.CaptureFixture
) -> None:
    """Under umask 077 the sweep's files and synth's extxyz are 0644 (11b2942: 0600)."""
    previous = os.umask(0o077)
    try:
        assert run_main(main, [*SWEEP, "--out", str(tmp_path / "s"), "--quiet"], capsys).code == 0
        synth = ["synth", "--out", str(tmp_path / "emt.xyz"), "--n", "2"]
        assert run_main(main, synth, capsys).code == 0
    finally:
        os.umask(previous)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".png" for p in files) and any(p.parent.name == "jobs" for p in files)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o644}, modes


def test_tiny_fit_saves_a_checkpoint_that_test_and_predict_follow(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The README's path: ``fit --config tiny`` saves a logger folder and
    ``checkpoints/epoch=0-step=4.ckpt``; ``test`` and ``predict --ckpt_path`` run from it
    (11b2942's tiny.yaml turned the logger and checkpointing off)."""
    fit = run_main(
        main, ["fit", "--config", "tiny", f"--trainer.default_root_dir={tmp_path / 'fit'}"], capsys
    )
    assert fit.code == 0, fit.err
    version = tmp_path / "fit" / "lightning_logs" / "version_0"
    checkpoint = version / "checkpoints" / "epoch=0-step=4.ckpt"
    assert checkpoint.is_file(), sorted(p.name for p in (tmp_path / "fit").rglob("*"))
    assert (version / "config.yaml").is_file() and (version / "metrics.csv").is_file()
    test = run_main(
        main,
        [
            "test",
            "--config",
            "tiny",
            f"--ckpt_path={checkpoint}",
            f"--trainer.default_root_dir={tmp_path / 'test'}",
        ],
        capsys,
    )
    assert test.code == 0 and "test_loss" in test.out, test.err
    predict = run_main(
        main,
        [
            "predict",
            "--config",
            "tiny",
            f"--ckpt_path={checkpoint}",
            f"--trainer.default_root_dir={tmp_path / 'predict'}",
        ],
        capsys,
    )
    assert predict.code == 0, predict.err
    (written,) = (tmp_path / "predict").rglob("predictions.pt")
    assert stat.S_IMODE(written.stat().st_mode) == 0o644


def test_import_is_light_and_exports_the_main_names() -> None:
    """``import atomistic_scaling`` does not import torch, and the main names come from it
    (11b2942 exported only ``__version__``)."""
    assert_light_package(
        "atomistic_scaling",
        [
            "ForceFieldModule",
            "AtomisticDataModule",
            "ForceFieldCalculator",
            "generate_structures",
            "read_structures",
            "write_extxyz",
            "run_sweep",
            "SweepConfig",
        ],
        defined_in={"ForceFieldModule": "atomistic_scaling.lit_module"},
    )
