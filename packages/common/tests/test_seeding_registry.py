from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from iclr26_common import Experiment, LoadError, Result, discover, seed_everything
from iclr26_common.registry import find_entry_points


def _draws() -> tuple[float, list[float]]:
    return random.random(), np.random.rand(3).tolist()  # noqa: NPY002


def test_seed_everything_repeats_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    assert seed_everything(123) == 123
    first = _draws()
    seed_everything(123)
    assert _draws() == first
    seed_everything(124)
    assert _draws() != first
    assert os.environ["PYTHONHASHSEED"] == "124"


def test_seed_everything_torch_and_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    # Record instead of flipping torch's global switch (slow to import, and it would leak).
    calls: list[tuple[bool, bool]] = []
    monkeypatch.setattr(
        torch,
        "use_deterministic_algorithms",
        lambda on, warn_only=False: calls.append((on, warn_only)),
    )
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)

    seed_everything(5)
    a = torch.rand(4)
    assert calls == [] and torch.backends.cudnn.benchmark
    seed_everything(5, deterministic=True)
    assert torch.equal(a, torch.rand(4))
    assert calls == [(True, True)]
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


@pytest.mark.parametrize("bad", [-1, 2**32, 1.5, True])
def test_seed_everything_rejects_bad_seeds(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        seed_everything(bad)  # type: ignore[arg-type]


def test_result_validates_verdict() -> None:
    ok = Result("not held", "s", {"x": 1}, (np.int64(3),), "tiny")
    assert ok.seeds == [3] and type(ok.seeds[0]) is int
    with pytest.raises(ValueError, match="'held', 'not held'"):
        Result("maybe", "s", {}, [0], "tiny")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="metrics"):
        Result("held", "s", [1], [0], "tiny")  # type: ignore[arg-type]


def test_experiment_validates_fields() -> None:
    def run(quick: bool, out_dir: Path) -> Result:
        raise NotImplementedError

    Experiment("pkg.name-1_x", "Paper (arXiv:1)", "claim", run)
    for name in ["", "../x", "a/b", ".hidden", "a b"]:
        with pytest.raises(ValueError, match="name"):
            Experiment(name, "Paper", "claim", run)
    with pytest.raises(ValueError, match="claim"):
        Experiment("x", "Paper", " ", run)
    with pytest.raises(TypeError, match="callable"):
        Experiment("x", "Paper", "claim", None)  # type: ignore[arg-type]


def test_discover_fake_distribution(fake_dist: Path) -> None:
    # Only named look-ups: a bare discover() would also import the real workspace experiments.
    assert {"good", "bad", "alias"} <= set(find_entry_points())
    good = discover(["good"])["good"]
    assert isinstance(good, Experiment) and good.distribution == "fake-exp"
    fake = discover(["alias", "bad", "good", "notexp", "nope"])
    assert list(fake) == sorted(fake)
    assert isinstance(fake["bad"], LoadError) and "MISSING" in fake["bad"].message
    assert "AttributeError" in fake["bad"].details
    assert isinstance(fake["alias"], LoadError) and "differs" in fake["alias"].message
    assert isinstance(fake["notexp"], LoadError) and "not an" in fake["notexp"].message
    assert isinstance(fake["nope"], LoadError) and "good" in fake["nope"].message
