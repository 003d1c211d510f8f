"""Both dispersion experiments run on the workspace's device choice: push-away builds its tiny
Llamas there, the correlation study loads SmolLM2 there (float32 on every device)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from llm_methods.dispersion import experiment


class _Stop(Exception):
    """Raised by the fakes: the tests only need the runs up to the first model."""


def _choose(asked: list[Any]) -> Any:
    def choose_device(prefer: str | None = None) -> torch.device:
        asked.append(prefer)
        return torch.device("meta")  # a device the model is not built on: moving it shows

    return choose_device


def test_pushaway_builds_the_models_on_the_chosen_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import llm_methods.lm.train as train

    asked: list[Any] = []
    trained_on: list[torch.device] = []

    def fake_train(model: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        trained_on.append(next(model.parameters()).device)
        raise _Stop

    monkeypatch.setattr(experiment, "choose_device", _choose(asked), raising=False)
    monkeypatch.setattr(train, "train_lm", fake_train)
    with pytest.raises(_Stop):
        experiment.run_pushaway(True, tmp_path)
    assert trained_on == [torch.device("meta")]
    assert asked == [None]


def test_correlation_loads_the_model_on_the_chosen_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import llm_methods.lm as lm

    asked: list[Any] = []
    loads: list[tuple[Any, ...]] = []

    def fake_load(spec: str, device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        loads.append((spec, device, dtype))
        raise _Stop

    monkeypatch.setattr(experiment, "choose_device", _choose(asked), raising=False)
    monkeypatch.setattr(lm, "load_lm", fake_load)
    with pytest.raises(_Stop):
        experiment.run_correlation(True, tmp_path)
    assert asked == [None]
    assert loads == [("smollm2", torch.device("meta"), "float32")]
