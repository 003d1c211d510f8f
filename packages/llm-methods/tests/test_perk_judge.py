"""``llm-methods perk judge``: the experiment's claims from paired ``perk eval`` runs.

Planted runs (no model): PERK ahead of FT-ICR at the trained lengths and further ahead beyond
them gives "held" for both claims; PERK behind and further behind gives "not held" for both;
mismatched runs are refused in one line naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main

LENGTHS = (4, 8, 16, 32)


def _plant(root: Path, rates: dict[str, dict[int, float]], n: int = 100) -> dict[str, list[str]]:
    """One ``perk eval``-shaped run per method and length: a record is solved when its shared
    draw is below the method's rate at that length (paired records)."""
    runs: dict[str, list[str]] = {"perk": [], "ficr": []}
    for L in LENGTHS:
        u = np.random.default_rng(L).random(n)
        for m in runs:
            rows = [
                {
                    "question": f"Where is person {i} (length {L})?",
                    "gold": "kitchen",
                    "n_segments": L + 3,
                    "correct": bool(u[i] < rates[m][L]),
                    "output": "",
                }
                for i in range(n)
            ]
            folder = root / f"{m}_{L}"
            folder.mkdir(parents=True)
            (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            (folder / "summary.json").write_text(json.dumps({"method": m, "n": n}))
            runs[m].append(str(folder))
    return runs


def _args(runs: dict[str, list[str]]) -> list[str]:
    return ["perk", "judge", "--perk", *runs["perk"], "--ficr", *runs["ficr"]]


def test_planted_perk_win_holds_both_claims(tmp_path: Path, capsys: Any) -> None:
    """PERK +20 pts at lengths 4/8, +50 pts at 16/32: (a) ~ +20 pts >= 0, (b) ~ +30 pts >= 5."""
    perk = {4: 0.7, 8: 0.7, 16: 0.6, 32: 0.6}
    ficr = {4: 0.5, 8: 0.5, 16: 0.1, 32: 0.1}
    out = tmp_path / "claims.json"
    runs = _plant(tmp_path / "runs", {"perk": perk, "ficr": ficr})
    assert main([*_args(runs), "--out", str(out)]) == 0
    assert "verdict: held" in capsys.readouterr().out
    claims = json.loads(out.read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["held", "held"]
    assert claims[0]["effect"]["low"] > 0 and claims[1]["effect"]["low"] > 5


def test_planted_perk_loss_holds_neither_claim(tmp_path: Path) -> None:
    """PERK -30 pts at 4/8 and -50 pts at 16/32 (both methods >= 0.3 trained): not held."""
    perk = {4: 0.4, 8: 0.4, 16: 0.1, 32: 0.1}
    ficr = {4: 0.7, 8: 0.7, 16: 0.6, 32: 0.6}
    out = tmp_path / "claims.json"
    runs = _plant(tmp_path / "runs", {"perk": perk, "ficr": ficr})
    assert main([*_args(runs), "--out", str(out)]) == 0
    claims = json.loads(out.read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["not held", "not held"]
    assert all(p["passed"] for c in claims for p in c["preconditions"])


def test_unlearned_task_is_inconclusive(tmp_path: Path) -> None:
    """Both methods near chance at the trained lengths (the CPU experiment's case): the controls
    fail, both claims "inconclusive", whatever the differences."""
    from llm_methods.perk.experiment import judge_predictions

    low = {4: 0.15, 8: 0.15, 16: 0.1, 32: 0.1}
    runs = _plant(tmp_path, {"perk": low, "ficr": {L: 0.0 for L in LENGTHS}})
    claims, metrics = judge_predictions(runs["perk"], runs["ficr"], list(LENGTHS), [4, 8])
    assert [c.verdict for c in claims] == ["inconclusive", "inconclusive"]
    assert metrics["extrapolated"] == [16, 32]


def test_mismatched_runs_are_refused_in_one_line(tmp_path: Path, capsys: Any) -> None:
    rates = {L: 0.5 for L in LENGTHS}
    runs = _plant(tmp_path, {"perk": rates, "ficr": rates}, n=10)
    swapped = {"perk": runs["perk"], "ficr": [runs["ficr"][1], runs["ficr"][0], *runs["ficr"][2:]]}
    line = assert_one_line_error(main, _args(swapped), capsys)
    assert f"{Path(runs['ficr'][1]) / 'predictions.jsonl'}: not the records of" in line, line
    line = assert_one_line_error(main, [*_args(runs)[:-1]], capsys)
    assert "one PERK run and one FT-ICR run per length: 4 PERK runs, 3 FT-ICR runs" in line
    wrong = {"perk": runs["perk"], "ficr": runs["perk"]}
    line = assert_one_line_error(main, _args(wrong), capsys)
    assert f"{Path(runs['perk'][0]) / 'summary.json'}: field 'method' is 'perk'" in line, line
    line = assert_one_line_error(main, [*_args(runs), "--trained", *map(str, LENGTHS)], capsys)
    assert "must be some, not all, of the lengths" in line
    (Path(runs["ficr"][2]) / "summary.json").unlink()
    line = assert_one_line_error(main, _args(runs), capsys)
    assert "the ficr run is unfinished" in line


def _fit(folder: Path, config: str) -> Path:
    args = ["perk", "fit", "--config", config, "--trainer.max_steps=1"]
    args += ["--trainer.limit_val_batches=0", f"--trainer.default_root_dir={folder}"]
    assert main(args) in (0, None)
    (ckpt,) = sorted(folder.rglob("*.ckpt"))
    return ckpt


def test_fit_eval_judge_end_to_end(tmp_path: Path, capsys: Any) -> None:
    """The README's GPU recipe on the tiny configs: ``fit`` PERK (``tiny``) and FT-ICR
    (``icr_tiny``), ``synth`` one test file per length, ``eval`` each checkpoint on each file,
    ``judge``. The untrained tiny models answer nothing, so both claims are "inconclusive"."""
    ckpt = {"perk": _fit(tmp_path / "perk", "tiny"), "ficr": _fit(tmp_path / "ficr", "icr_tiny")}
    runs: dict[str, list[str]] = {"perk": [], "ficr": []}
    lengths = ["1", "2", "3"]
    for L in lengths:
        data = tmp_path / f"test_{L}.jsonl"
        synth = ["perk", "synth", "--out", str(data), "--n", "2", "--n-segments", L]
        assert main([*synth, "--tasks", "qa1", "--seed", L]) == 0
        for m in runs:
            out = tmp_path / f"eval_{m}_{L}"
            args = ["perk", "eval", "--model", str(ckpt[m]), "--data", str(data), "--out", str(out)]
            assert main([*args, "--max-new-tokens", "2", "--device", "cpu", "--quiet"]) == 0
            runs[m].append(str(out))
    capsys.readouterr()
    out = tmp_path / "claims.json"
    judge = [*_args(runs), "--lengths", *lengths, "--trained", "1", "--out", str(out)]
    assert main(judge) == 0
    assert "verdict: inconclusive" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [c["verdict"] for c in data["claims"]] == ["inconclusive", "inconclusive"]
    assert data["metrics"]["extrapolated"] == [2, 3]


#: the README's GPU fit commands ("What would decide the claims"), $M = the tiny stand-in
TRAINING_DATA = ["--data.init_args.n_train", "800", "--data.init_args.n_val", "20"]
TRAINING_DATA += ["--data.init_args.n_test", "1", "--data.init_args.n_segments", "[4, 8]"]
TRAINING_DATA += ["--data.init_args.tasks", "[qa1]"]
README_FITS = {
    "perk": [
        *("--config", "paper", "--model.init_args.model", "tiny"),
        *("--data.init_args.train_file", "null", "--data.init_args.val_file", "null"),
        *("--data.init_args.test_file", "null", *TRAINING_DATA, "--trainer.max_epochs", "1"),
    ],
    "ficr": [
        *("--config", "icr_tiny", "--model.init_args.model", "tiny", "--model.init_args.r"),
        *("256", "--model.init_args.alpha", "16", "--model.init_args.lr", "1e-5"),
        *("--model.init_args.max_new_tokens", "64", "--trainer.max_steps", "-1"),
        *("--trainer.max_epochs", "1", "--trainer.precision", "bf16-mixed"),
        *("--trainer.gradient_clip_val", "1.0", "--trainer.limit_val_batches", "50"),
        *TRAINING_DATA,
    ],
}


def test_readme_gpu_fit_commands_parse_to_the_paper_settings(capsys: Any) -> None:
    """The README's two GPU ``fit`` commands parse (``--print_config``) to the paper's
    hyperparameters on both methods and the experiment's training data (800 records of
    lengths 4 and 8, qa1)."""
    printed = {}
    for method, args in README_FITS.items():
        with pytest.raises(SystemExit) as exit_info:
            main(["perk", "fit", *args, "--print_config"])
        assert exit_info.value.code == 0
        printed[method] = yaml.safe_load(capsys.readouterr().out)
    for method, config in printed.items():
        model, data = config["model"]["init_args"], config["data"]["init_args"]
        assert (model["r"], model["alpha"], model["lr"]) == (256, 16, 1e-5), method
        assert data["train_file"] is None and data["n_train"] == 800, method
        assert (data["n_segments"], data["tasks"]) == ([4, 8], ["qa1"]), method
        assert config["trainer"]["precision"] == "bf16-mixed", method
        assert config["trainer"]["max_epochs"] == 1, method
    assert printed["perk"]["model"]["init_args"]["lslr_init"] == 5e-5
