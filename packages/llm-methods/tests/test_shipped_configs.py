"""Every shipped YAML of dispersion, mbok, perk, remix and mas2 runs through
``llm_methods.cli.main([...])`` in process (ltpo and antibody are tested with their packages'
own config tests).

LightningCLI configs run ``fit`` with ``--trainer.fast_dev_run=true`` (then ``test`` where the
method has it); mas2's pool YAML runs through ``mas2 train`` and ``mas2 run``. The shipped file
itself is always what ``--config`` parses; the overrides in :data:`OVERRIDES` only point a
config that cannot run here at tiny local stand-ins:

- ``perk/experiment``: its ``model: base_model`` is the folder ``iclr26 reproduce
  llm-methods.perk`` trains; here the untrained ``tiny`` model.
- ``perk/paper``: Qwen2.5-0.5B and the BabiLong jsonl files are not in the workspace; here the
  ``tiny`` model and generated BabiLong files (rank and precision as shipped).
- ``remix/*``: the ``task`` policy is pretrained on first use (~15 s); here a tiny local policy.
- ``mbok/mbok_k2``, ``mbok/onebit``: run as shipped on SmolLM2-135M (offline wheel) in the slow
  suite; the default suite runs them on ``zoo:micro`` (``blocks: all``, its only blocks).

Each as-shipped file also parses with ``--print_config`` (LightningCLI) or the pool reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from iclr26_common.testing import shipped_configs
from llm_methods.cli import main

# method -> its LightningCLI training command (mas2's pool YAML is no LightningCLI config)
FIT = {"dispersion": "fit", "mbok": "finetune", "perk": "fit", "remix": "fit"}
CONFIGS = [path for method in (*FIT, "mas2") for path in shipped_configs(f"llm_methods.{method}")]
HAS_TEST = {"dispersion", "perk"}  # LightningCLI `test`; mbok and remix expose `fit` only
SLOW = {"mbok/mbok_k2", "mbok/onebit"}  # SmolLM2-135M as shipped: > 10 s on 2 cores


def _key(path: Path) -> str:
    """``method/stem`` of a shipped config (``llm_methods/<method>/configs/<stem>.yaml``)."""
    return f"{path.parent.parent.name}/{path.stem}"


@pytest.fixture(scope="module")
def policy_dir(saved_tiny_lm: Any) -> Path:
    """A 1-layer tiny Llama trained on the remix task format (a stand-in for policy ``task``)."""
    from llm_methods.remix.data import records_to_problems, sft_texts, synth_problems

    texts = [p + r for p, r in sft_texts(records_to_problems(synth_problems(30, 0)))]
    return saved_tiny_lm("remix-policy", texts, vocab_size=280, n_layers=1, hidden=32, heads=2)


@pytest.fixture(scope="module")
def babilong_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Generated BabiLong-format train/val/test jsonl (a stand-in for the paper's files)."""
    folder = tmp_path_factory.mktemp("babilong")
    files = {}
    for split, seed in (("train", 0), ("val", 1), ("test", 2)):
        files[split] = folder / f"babilong_{split}.jsonl"
        args = ["--out", str(files[split]), "--n", "2", "--n-segments", "3", "--seed", str(seed)]
        assert main(["perk", "synth", *args]) == 0
    return files


def overrides(key: str, request: pytest.FixtureRequest) -> list[str]:
    """CLI overrides that let ``key``'s shipped config run here (see the module docstring)."""
    if key == "perk/experiment":
        return ["--model.init_args.model=tiny"]
    if key == "perk/paper":
        files = request.getfixturevalue("babilong_files")
        return [
            "--model.init_args.model=tiny",
            *(f"--data.init_args.{split}_file={path}" for split, path in files.items()),
        ]
    if key.startswith("remix/"):
        return [f"--model.init_args.model={request.getfixturevalue('policy_dir')}"]
    if key in ("mbok/mbok_k2", "mbok/onebit") and not request.node.get_closest_marker("slow"):
        return ["--model.init_args.model=zoo:micro", "--model.init_args.blocks=all"]
    return []


@pytest.mark.parametrize("path", CONFIGS, ids=_key)
def test_shipped_config_parses(path: Path, capsys: pytest.CaptureFixture) -> None:
    """The file as shipped (no overrides): LightningCLI prints back the declared model."""
    method = path.parent.parent.name
    declared = yaml.safe_load(path.read_text())
    if method == "mas2":
        from llm_methods.mas2.pool import load_pool

        assert set(load_pool(path).models) == set(declared["models"])
        return
    with pytest.raises(SystemExit) as exit_info:
        main([method, FIT[method], "--config", str(path), "--print_config"])
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert _holds(_model_args(printed), _model_args(declared))
    assert printed["trainer"]["max_steps"] == declared["trainer"].get("max_steps", -1)


def _holds(printed: dict, declared: dict) -> bool:
    """Whether every declared value is printed back (recursing into groups, e.g. remix's ``rl``)."""
    for key, value in declared.items():
        if key not in printed:
            return False
        if isinstance(value, dict) and isinstance(printed[key], dict):
            if not _holds(printed[key], value):
                return False
        elif printed[key] != value:
            return False
    return True


def _model_args(config: dict) -> dict:
    """The model's arguments of a LightningCLI config (``init_args`` under a ``class_path``)."""
    model = config["model"]
    return model["init_args"] if "class_path" in model else model


def _run_lightning(path: Path, extra: list[str], root: Path) -> None:
    method = path.parent.parent.name
    base = ["--config", str(path), *extra, "--trainer.fast_dev_run=true"]
    base.append(f"--trainer.default_root_dir={root}")
    if method == "mbok":
        base.append(f"--model.init_args.save_to={root / 'compressed.safetensors'}")
    if method == "remix":
        base.append(f"--model.init_args.save_dir={root / 'policy'}")
    assert main([method, FIT[method], *base]) in (0, None)
    if method in HAS_TEST:
        assert main([method, "test", *base]) in (0, None)


def _lightning_cases() -> list[object]:
    cases: list[object] = []
    for path in CONFIGS:
        if path.parent.parent.name not in FIT:
            continue
        cases.append(pytest.param(path, id=_key(path)))
        if _key(path) in SLOW:
            cases.append(pytest.param(path, id=f"{_key(path)}-as-shipped", marks=pytest.mark.slow))
    return cases


@pytest.mark.parametrize("path", _lightning_cases())
def test_shipped_lightning_config_runs(
    path: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``fit`` (``mbok finetune``) with ``fast_dev_run``, then ``test`` where it exists."""
    _run_lightning(path, overrides(_key(path), request), tmp_path)
    method = path.parent.parent.name
    if method == "mbok":
        assert (tmp_path / "compressed.safetensors").is_file()
    if method == "remix":
        assert (tmp_path / "policy" / "config.json").is_file()


@pytest.mark.parametrize("path", [p for p in CONFIGS if p.parent.parent.name == "mas2"], ids=_key)
def test_shipped_pool_trains_and_runs(path: Path, tmp_path: Path) -> None:
    """The pool YAML through ``mas2 train`` (CTO, one round) and ``mas2 run`` with that team."""
    tasks = ["--tasks", "synth-arith", "--limit", "2"]
    train = ["--pool", str(path), "--rounds", "1", "--k", "2", "--out", str(tmp_path / "t")]
    assert main(["mas2", "train", *tasks, *train]) == 0
    team = tmp_path / "t" / "team.json"
    assert set(json.loads(team.read_text())["models"]) == set(
        yaml.safe_load(path.read_text())["models"]
    )
    run = ["--pool", str(path), "--team", str(team), "--out", str(tmp_path / "run")]
    assert main(["mas2", "run", *tasks, *run]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n"] == 2 and summary["cost_per_task"] > 0
