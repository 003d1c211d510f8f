"""``llm-methods perk``: synth, configs, fit -> checkpoint -> eval, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(
        main,
        args,
        capsys,
        drop_earlier=True,  # what earlier commands printed
        skip=lambda line: "Warning" in line or "warnings.warn" in line,
    )


def _fit(folder: Path, config: str) -> Path:
    args = [
        "perk",
        "fit",
        "--config",
        config,
        "--trainer.max_steps=1",
        "--trainer.limit_val_batches=0",
        f"--trainer.default_root_dir={folder}",  # lightning_logs/ there, not in the cwd
    ]
    assert main(args) in (0, None)
    (ckpt,) = sorted(folder.rglob("*.ckpt"))
    return ckpt


@pytest.fixture(scope="module")
def perk_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fit(tmp_path_factory.mktemp("perk-fit"), "tiny")


def test_tiny_fit_saves_a_checkpoint_and_a_log_the_readme_eval_takes(perk_ckpt: Path) -> None:
    """The README's ``perk fit --config tiny`` then ``perk eval --model <the ckpt>``: the tiny
    config keeps Lightning's checkpoint and logger, so the run folder holds
    ``lightning_logs/version_0/{checkpoints/*.ckpt, hparams.yaml, config.yaml}``
    (fails on 52aa8a9: ``logger: false, enable_checkpointing: false`` saved nothing, and
    ``perk eval`` needed ``--trainer.enable_checkpointing true``). ``test_fit_then_eval`` runs
    ``perk eval`` on this checkpoint."""
    version = perk_ckpt.parent.parent
    assert perk_ckpt.parent.name == "checkpoints" and version.parent.name == "lightning_logs"
    logged = {p.name for p in version.iterdir()}
    assert {"config.yaml", "hparams.yaml"} <= logged, logged  # hparams.yaml: the logger's


def test_every_tiny_config_keeps_its_logger_checkpoint_and_progress() -> None:
    """Every tiny LightningCLI config of llm-methods (perk tiny / icr_tiny, dispersion, mbok,
    remix, antibody fit_tiny) leaves Lightning's logger, checkpointing and progress bar on, as
    the science packages' tiny configs do (fails on 52aa8a9: all three were ``false``)."""
    import yaml

    from iclr26_common.cli_support import shipped_configs

    tiny = {
        f"{method}/{name}": path
        for method in ("perk", "dispersion", "mbok", "remix", "antibody")
        for name, path in shipped_configs(f"llm_methods.{method}").items()
        if "tiny" in name
    }
    assert set(tiny) == {
        "perk/tiny",
        "perk/icr_tiny",
        "dispersion/tiny",
        "mbok/tiny",
        "remix/tiny",
        "antibody/tiny",
        "antibody/fit_tiny",
    }
    for key, path in tiny.items():
        trainer = (yaml.safe_load(path.read_text()) or {}).get("trainer", {})
        for flag in ("logger", "enable_checkpointing", "enable_progress_bar"):
            assert trainer.get(flag, True) is not False, f"{key}: trainer.{flag} is off"


def test_synth_and_configs(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "b.jsonl"
    assert (
        main(
            [
                "perk",
                "synth",
                "--out",
                str(out),
                "--n",
                "4",
                "--n-segments",
                "3",
                "--position",
                "0",
                "--tasks",
                "qa2",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 4 and all(r["task"] == "qa2" and r["support"] for r in rows)
    assert rows[0]["context"].index(rows[0]["support"][0]) == 1  # qa2 facts open the context
    assert main(["perk", "configs"]) == 0
    listed = capsys.readouterr().out
    assert "tiny" in listed and "icr_tiny" in listed


def test_fit_then_eval(perk_ckpt: Path, tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    main(["perk", "synth", "--out", str(data), "--n", "2", "--n-segments", "2"])
    out = tmp_path / "ev"
    assert (
        main(
            [
                "perk",
                "eval",
                "--model",
                str(perk_ckpt),
                "--data",
                str(data),
                "--out",
                str(out),
                "--max-new-tokens",
                "4",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {"gold", "prediction", "correct", "output"} <= set(rows[0])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "perk" and summary["n"] == 2


def test_checkpoint_roundtrip_restores_meta_parameters(perk_ckpt: Path) -> None:
    import torch

    from llm_methods.perk.lit_module import load_checkpoint

    module = load_checkpoint(perk_ckpt)
    state = torch.load(perk_ckpt, map_location="cpu", weights_only=True)["state_dict"]
    assert torch.equal(module.perk.lslr, state["perk.lslr"])
    assert not torch.allclose(state["perk.lslr"], torch.full_like(state["perk.lslr"], 0.01))


def test_bad_input_one_line(perk_ckpt: Path, tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"context": ["Mary went home."], "answer": "home"}) + "\n")
    line = _one_line_error(
        capsys,
        [
            "perk",
            "eval",
            "--model",
            str(perk_ckpt),
            "--data",
            str(bad),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert "bad.jsonl:1: missing field 'question'" in line
    long = tmp_path / "long.jsonl"
    long.write_text(
        json.dumps({"context": ["word " * 700], "question": "Where?", "answer": "home"}) + "\n"
    )
    line = _one_line_error(
        capsys,
        [
            "perk",
            "eval",
            "--model",
            str(perk_ckpt),
            "--data",
            str(long),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert "split the context into shorter segments" in line
    line = _one_line_error(
        capsys,
        [
            "perk",
            "eval",
            "--model",
            str(tmp_path / "none.ckpt"),
            "--data",
            str(long),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert "none.ckpt: no such PERK / FT-ICR checkpoint" in line
    line = _one_line_error(
        capsys, ["perk", "synth", "--out", str(tmp_path / "s.jsonl"), "--position", "2"]
    )
    assert "position must be in [0, 1]" in line


def test_eval_checkpoint_errors_name_the_option(tmp_path: Path, capsys: Any) -> None:
    """A missing or truncated ``perk eval --model`` checkpoint is one line that starts with the
    option, as ``--ckpt_path``'s do (the review of issue 36: ``PATH: no such checkpoint``
    named the file only); nothing is written."""
    import torch

    data = tmp_path / "d.jsonl"
    assert main(["perk", "synth", "--out", str(data), "--n", "1", "--n-segments", "2"]) == 0
    truncated = tmp_path / "cut.ckpt"
    torch.save({"perk_method": "perk", "state_dict": {"w": torch.zeros(64)}}, truncated)
    truncated.write_bytes(truncated.read_bytes()[:100])
    for ckpt, says in (
        (tmp_path / "none.ckpt", "no such PERK / FT-ICR checkpoint"),
        (truncated, "not a readable PERK / FT-ICR checkpoint ("),
    ):
        args = ["perk", "eval", "--model", str(ckpt), "--data", str(data), "--device", "cpu"]
        line = _one_line_error(capsys, [*args, "--out", str(tmp_path / "o")])
        assert line.startswith(f"llm-methods: error: --model {ckpt}: {says}"), line
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_icr_context_too_long_one_line(tmp_path: Path, capsys: Any) -> None:
    ckpt = _fit(tmp_path / "icr", "icr_tiny")
    data = tmp_path / "long.jsonl"
    data.write_text(
        json.dumps(
            {
                "context": ["Mary went to the kitchen. " * 10] * 12,
                "question": "Where is Mary?",
                "answer": "kitchen",
            }
        )
        + "\n"
    )
    line = _one_line_error(
        capsys,
        ["perk", "eval", "--model", str(ckpt), "--data", str(data), "--out", str(tmp_path / "o")],
    )
    assert "without segmentation" in line


def test_perk_test_takes_its_own_fit_checkpoint(perk_ckpt: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``fit`` -> ``test --ckpt_path``: on 7db60f3 every llm-methods LightningCLI refused its own
    checkpoint ("a checkpoint of llm-methods (...PERKModule), not of llm-methods.perk")."""
    args = ["perk", "test", "--config", "tiny", f"--ckpt_path={perk_ckpt}"]
    args.append(f"--trainer.default_root_dir={tmp_path}")  # its log there, not in the cwd
    assert main(args) in (0, None)
    assert "not of llm-methods" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        (  # another package's fit (its ModelStamp): rf-matid
            {"iclr26_model": "rf_matid.lit_module.RFMatIDModule", "hyper_parameters": {}},
            "a checkpoint of rf-matid (rf_matid.lit_module.RFMatIDModule)",
        ),
        (  # another llm-methods method's fit, in subclass mode (its _class_path): ReMix
            {
                "hyper_parameters": {"_class_path": "llm_methods.remix.lit_module.ReMixModule"},
                "iclr26_model": "llm_methods.remix.lit_module.ReMixModule",
            },
            "a checkpoint of llm-methods.remix (llm_methods.remix.lit_module.ReMixModule)",
        ),
    ],
    ids=["rf-matid", "remix"],
)
def test_eval_names_the_package_of_a_foreign_checkpoint(
    payload: dict, named: str, tmp_path: Path, capsys: Any
) -> None:
    """``perk eval --model`` with another package's or method's checkpoint is one line naming
    both packages and the saved class, as ``--ckpt_path`` and rf-matid's ``predict-files`` do
    (fails on 43a8cc5: "not a PERK / FT-ICR checkpoint (no 'perk_method' entry)", which named
    neither)."""
    import torch

    ckpt = tmp_path / "other.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(2)}, **payload}, ckpt)
    data = tmp_path / "d.jsonl"
    main(["perk", "synth", "--out", str(data), "--n", "1", "--n-segments", "2"])
    args = ["perk", "eval", "--model", str(ckpt), "--data", str(data)]
    line = _one_line_error(capsys, [*args, "--out", str(tmp_path / "o")])
    assert named in line and "not of llm-methods.perk (PERKModule / ICRModule)" in line, line
    assert not (tmp_path / "o").exists()  # refused before the folder was made


def _eval_args(ckpt: Path, data: Path, out: Path, *extra: str) -> list[str]:
    args = ["perk", "eval", "--model", str(ckpt), "--data", str(data), "--out", str(out)]
    return [*args, "--max-new-tokens", "3", "--quiet", *extra]


def test_ctrl_c_keeps_finished_records_and_resume_continues(
    perk_ckpt: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during record 3 of 5 of ``perk eval``: one line, exit 130, the 2 finished records
    kept in ``predictions.jsonl`` with the folder marked partial (no ``summary.json``); a rerun
    without ``--resume`` is refused, one with other settings too, and ``--resume`` answers only
    records 3-5 and writes what an uninterrupted run writes (fails on 43a8cc5: the rows were
    held in memory and lost, and ``--resume`` did not exist). The interruption is raised at a
    known record, no clock involved."""
    from iclr26_common.outputs import PARTIAL_MARKER
    from iclr26_common.testing import run_main
    from llm_methods.perk.lit_module import PERKModule

    monkeypatch.delenv("LLM_METHODS_TRACEBACK", raising=False)
    data = tmp_path / "d.jsonl"
    main(["perk", "synth", "--out", str(data), "--n", "5", "--n-segments", "2"])
    whole = tmp_path / "whole"
    assert run_main(main, _eval_args(perk_ckpt, data, whole), capsys).code == 0

    answered: list[str] = []
    real = PERKModule.predict_record

    def interrupt_third(self: Any, rec: Any) -> str:
        if len(answered) == 2:
            raise KeyboardInterrupt
        answered.append(rec.question)
        return real(self, rec)

    monkeypatch.setattr(PERKModule, "predict_record", interrupt_third)
    out = tmp_path / "cut"
    run = run_main(main, _eval_args(perk_ckpt, data, out), capsys)
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert run.code == 130 and lines[-1] == "llm-methods: interrupted", run.err
    assert "Traceback" not in run.err
    assert (out / PARTIAL_MARKER).is_file() and not (out / "summary.json").exists()
    kept = (out / "predictions.jsonl").read_text().splitlines()
    assert kept == (whole / "predictions.jsonl").read_text().splitlines()[:2]

    line = _one_line_error(capsys, _eval_args(perk_ckpt, data, out))
    assert "partial results of an interrupted run; pass --resume" in line, line
    line = _one_line_error(capsys, _eval_args(perk_ckpt, data, out, "--resume", "--seed", "1"))
    assert "ran with --seed 0, this one with 1" in line and "--overwrite" in line, line

    answered.clear()
    monkeypatch.setattr(
        PERKModule,
        "predict_record",
        lambda self, rec: answered.append(rec.question) or real(self, rec),
    )
    run = run_main(main, _eval_args(perk_ckpt, data, out, "--resume"), capsys)
    assert run.code == 0, run.err
    assert "resuming after 2 of 5 records" in run.out
    assert len(answered) == 3  # only the unfinished records are answered again
    assert not (out / PARTIAL_MARKER).exists()
    for name in ("predictions.jsonl", "summary.json"):
        assert (out / name).read_text() == (whole / name).read_text().replace(
            str(whole), str(out)
        ), name


def test_no_shipped_fit_config_turns_the_progress_bar_off() -> None:
    """Every shipped LightningCLI config of llm-methods is a user config (the experiments build
    their Trainers with ``quiet_trainer`` and read none of them), so none turns Lightning's
    progress bar off (fails on 44537c0: ``perk fit --config experiment`` printed nothing for its
    400 steps, ``enable_progress_bar: false``)."""
    import yaml

    from iclr26_common.cli_support import shipped_configs
    from llm_methods.cli import _method_clis

    checked = 0
    for method in _method_clis():
        for name, path in shipped_configs(f"llm_methods.{method}").items():
            trainer = (yaml.safe_load(path.read_text()) or {}).get("trainer") or {}
            assert trainer.get("enable_progress_bar", True) is not False, f"{method}/{name}"
            checked += 1
    assert checked >= 10  # the perk, dispersion, mbok, remix and antibody configs at least
