"""Stored outputs of ``ReMixModule`` on a seeded tiny policy (issue 29): a refactor of the module's
settings that changes a number fails here.

Fixture ``data/stored_outputs/remix_tiny.npz``, made from the code before the issue-29
refactor (flat ``__init__`` arguments): a 1 x 32 tiny Llama (``zoo.models.tiny_lm`` on 40
task-format texts, BPE of 300, seed 0), ``ProblemDataModule`` (16 generated problems, 2 per
step, seed 0) and a Lightning ``Trainer`` (CPU, 1 thread, ``seed_everything(0)``) for 4
gradient steps of ReMix (G=3, m=2, p=0.5, N=2, T=3, lambda from t=1 every 1, rewards
``exact_match`` + ``format``: 2 iterations, the second with replay groups) and 2 of GRPO (mu=2,
one iteration). Stored: every logged ``train/*`` value of each iteration and the norm of each
policy parameter after fit. Regenerate (only when a change of numbers is intended and
explained) with ``ICLR26_WRITE_STORED_OUTPUTS=1 .venv/bin/python -m pytest -q
packages/llm-methods/tests/test_remix_stored_outputs.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

FIXTURE = Path(__file__).parent / "data" / "stored_outputs" / "remix_tiny.npz"
RUNS: dict[str, dict[str, Any]] = {
    "remix": {
        "algo": "remix",
        "group_size": 3,
        "max_new_tokens": 8,
        "lr": 1e-3,
        "p_off": 0.5,
        "utd": 2,
        "n_past": 2,
        "reincarnate_at": 3,
        "lam_start": 1,
        "lam_every": 1,
        "max_steps": 4,
    },
    "grpo": {
        "algo": "grpo",
        "group_size": 3,
        "max_new_tokens": 8,
        "lr": 1e-3,
        "num_iterations": 2,
        "max_steps": 2,
    },
}


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_methods.remix.pretrain import TaskModelSpec, pretrain_task_model

    spec = TaskModelSpec(
        n_train=256, vocab_size=300, n_layers=1, hidden=32, heads=2, steps=60, batch_size=16
    )
    tok, model, _ = pretrain_task_model(spec)
    folder = tmp_path_factory.mktemp("remix-stored-policy")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _module(policy: Path, settings: dict[str, Any]) -> Any:
    from llm_methods.remix.lit_module import ReMixModule
    from llm_methods.remix.model import RLConfig

    rl = RLConfig(**settings)
    return ReMixModule(policy=str(policy), rl=rl, rewards=["exact_match", "format"], seed=0)


def _run(policy: Path, name: str, root: Path) -> dict[str, np.ndarray]:
    import lightning as L

    from llm_methods.remix.lit_module import ProblemDataModule

    settings = dict(RUNS[name])
    max_steps = settings.pop("max_steps")
    L.seed_everything(0, verbose=False)
    module = _module(policy, settings)
    data = ProblemDataModule(synth_n=16, synth_val_n=4, prompts_per_step=2, seed=0)
    logs: list[dict[str, float]] = []

    class _Record(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # type: ignore[no-untyped-def]
            metrics = trainer.callback_metrics
            logs.append({k: float(v) for k, v in metrics.items() if k.startswith("train/")})

    trainer = L.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=[_Record()],
        default_root_dir=root,
    )
    trainer.fit(module, datamodule=data)
    keys = sorted(logs[0])
    norms = [float(p.detach().double().norm()) for p in module.policy.parameters()]
    return {
        f"{name}_log_keys": np.array(json.dumps(keys)),
        f"{name}_logs": np.array([[row[k] for k in keys] for row in logs], dtype=np.float64),
        f"{name}_param_norms": np.array(norms),
    }


def test_remix_module_matches_the_stored_outputs(policy_dir: Path, tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        got = {**_run(policy_dir, "remix", tmp_path), **_run(policy_dir, "grpo", tmp_path)}
    finally:
        torch.set_num_threads(threads)
    if os.environ.get("ICLR26_WRITE_STORED_OUTPUTS") == "1":
        meta = {
            "made_by": "tests/test_remix_stored_outputs.py::_run",
            "policy": "tiny_lm(40 sft_texts, vocab 300, 1 x 32, 2 heads, seed 0)",
            "data": "ProblemDataModule(synth_n=16, prompts_per_step=2, seed=0)",
            "runs": RUNS,
            "regenerate": "ICLR26_WRITE_STORED_OUTPUTS=1 .venv/bin/python -m pytest -q "
            "packages/llm-methods/tests/test_remix_stored_outputs.py",
        }
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(FIXTURE, meta=np.array(json.dumps(meta)), **got)
    stored = np.load(FIXTURE)
    assert set(got) == set(stored.files) - {"meta"}
    for key, value in got.items():
        if value.dtype.kind == "U":
            np.testing.assert_array_equal(value, stored[key], err_msg=key)
        else:
            torch.testing.assert_close(
                torch.from_numpy(value),
                torch.from_numpy(stored[key]),
                rtol=1e-5,
                atol=1e-6,
                msg=key,
            )


def test_the_stored_run_is_not_degenerate() -> None:
    """ReMix took two iterations (the second with replay groups) and the logs of the two
    algorithms differ, so the fixture would catch a changed setting."""
    stored = np.load(FIXTURE)
    keys = json.loads(str(stored["remix_log_keys"]))
    logs = stored["remix_logs"]
    assert logs.shape == (2, len(keys))
    assert logs[1, keys.index("train/off_policy_groups")] > 0
    assert not np.allclose(stored["remix_param_norms"], stored["grpo_param_norms"])
