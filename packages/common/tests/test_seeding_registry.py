from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from iclr26_common import (
    Claim,
    Experiment,
    LoadError,
    Result,
    derive_verdict,
    discover,
    seed_everything,
)
from iclr26_common.registry import entry_point_info, find_entry_points


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


def test_result_validates_fields() -> None:
    claims = [_claim(False)]
    ok = Result(claims=claims, summary="s", metrics={"x": 1}, seeds=(np.int64(3),), scale="t")
    assert ok.seeds == [3] and type(ok.seeds[0]) is int and ok.verdict == "not held"
    with pytest.raises(TypeError, match="metrics"):
        Result(claims=claims, summary="s", metrics=[1], seeds=[0], scale="t")  # type: ignore[arg-type]


def test_result_verdict_parameter_is_gone() -> None:
    # The single-verdict form was unused by every package: the verdict is always derived.
    with pytest.raises(TypeError, match="verdict"):
        Result(verdict="held", summary="s", metrics={}, seeds=[0], scale="t", claims=[_claim(1)])  # type: ignore[call-arg]


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


def _claim(verdict: object) -> Claim:
    return Claim("X beats Y.", "acc(X) - acc(Y) >= 0.05", {"gap": 0.07}, verdict)  # type: ignore[arg-type]


def test_claim_accepts_bool_or_verdict_and_validates() -> None:
    assert _claim(True).verdict == "held" and _claim(False).verdict == "not held"
    assert _claim("not held").held is False and _claim("held").to_dict()["verdict"] == "held"
    with pytest.raises(ValueError, match="verdict"):
        _claim("maybe")
    with pytest.raises(ValueError, match="criterion"):
        Claim("X beats Y.", "  ", {}, True)
    with pytest.raises(TypeError, match="measured"):
        Claim("X beats Y.", "rule", [0.1], True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([True], "held"),
        ([True, True, True], "held"),
        ([True, False], "not held"),
        ([False], "not held"),
    ],
)
def test_result_verdict_is_derived_from_claims(verdicts: list[bool], expected: str) -> None:
    result = Result(
        summary="s", metrics={}, seeds=[0], scale="t", claims=[_claim(v) for v in verdicts]
    )
    assert result.verdict == expected == derive_verdict(result.claims)


def test_result_rejects_missing_claims() -> None:
    with pytest.raises(ValueError, match="Claim"):
        Result(summary="s", metrics={}, seeds=[0], scale="t", claims=[])
    with pytest.raises(TypeError, match="Claim"):
        Result(summary="s", metrics={}, seeds=[0], scale="t", claims=[{"verdict": "held"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="empty"):
        derive_verdict([])


def test_entry_point_info_reads_metadata_without_importing(fake_dist: Path) -> None:
    info = entry_point_info()
    assert info["good"].distribution == "fake-exp" and info["good"].version == "0.1"
    assert info["good"].value == "fakepkg:EXP" and info["good"].module == "fakepkg"
    assert not hasattr(info["good"], "problem")  # dead field removed
    assert "fakepkg" not in sys.modules
