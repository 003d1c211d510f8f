"""The LinguaMap experiment builds and fine-tunes its model on the workspace's device choice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch


class _Stop(Exception):
    """Raised by the fake trainer: the test only needs the run up to the first training call."""


def test_run_builds_the_model_on_the_chosen_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import llm_methods.lm.train as train
    from llm_methods.linguamap import experiment

    asked: list[Any] = []
    trained_on: list[torch.device] = []

    def choose_device(prefer: str | None = None) -> torch.device:
        asked.append(prefer)
        return torch.device("meta")  # a device the model is not built on: moving it shows

    def fake_train(model: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        trained_on.append(next(model.parameters()).device)
        raise _Stop

    # raising=False: code that never asks for a device fails on the assertions below
    monkeypatch.setattr(experiment, "choose_device", choose_device, raising=False)
    monkeypatch.setattr(train, "train_lm", fake_train)
    with pytest.raises(_Stop):
        experiment.run(True, tmp_path)
    assert trained_on == [torch.device("meta")]
    assert asked == [None]
