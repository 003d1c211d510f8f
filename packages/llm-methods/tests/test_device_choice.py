"""The experiments that train or load models run on the workspace's device choice
(``iclr26_common.device.choose_device``): ADL, LinguaMap and dispersion's push-away build their
tiny Llamas there, dispersion's correlation study loads SmolLM2 there (float32 on every device).

``choose_device`` is replaced by one that answers ``meta``, a device the models are not built on,
so a model that reaches training on ``meta`` was moved there; the runs stop at the first training
or loading call."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import torch


class _Stop(Exception):
    """Raised by the fakes: the tests only need the runs up to the first model."""


def _choose(asked: list[Any]) -> Any:
    def choose_device(prefer: str | None = None) -> torch.device:
        asked.append(prefer)
        return torch.device("meta")  # a device the model is not built on: moving it shows

    return choose_device


def _no_vocabulary(*args: Any, **kwargs: Any) -> set[int]:
    return set()


@pytest.mark.parametrize(
    ("module", "function", "stubs"),
    [
        # ADL's domain vocabularies (the pretraining corpus tokenised once per domain: ~60 % of
        # the work before its first training call, profiled) are read only after training
        (
            "llm_methods.adl.experiment",
            "run",
            {"llm_methods.adl.diff.enriched_tokens": _no_vocabulary},
        ),
        ("llm_methods.linguamap.experiment", "run", {}),
        ("llm_methods.dispersion.experiment", "run_pushaway", {}),
    ],
    ids=["adl-run", "linguamap-run", "dispersion-run_pushaway"],
)
def test_training_experiments_build_the_model_on_the_chosen_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module: str, function: str, stubs: dict
) -> None:
    import llm_methods.lm.train as train

    for target, stub in stubs.items():
        monkeypatch.setattr(target, stub)
    experiment = importlib.import_module(module)
    asked: list[Any] = []
    trained_on: list[torch.device] = []

    def fake_train(model: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        trained_on.append(next(model.parameters()).device)
        raise _Stop

    # raising=False: code that never asks for a device fails on the assertions below
    monkeypatch.setattr(experiment, "choose_device", _choose(asked), raising=False)
    monkeypatch.setattr(train, "train_lm", fake_train)
    with pytest.raises(_Stop):
        getattr(experiment, function)(True, tmp_path)
    assert trained_on == [torch.device("meta")]
    assert asked == [None]


def test_correlation_loads_the_model_on_the_chosen_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import llm_methods.lm as lm
    from llm_methods.dispersion import experiment

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
