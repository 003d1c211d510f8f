from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from llm_methods.dispersion import experiment as exp

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def test_registered_entry_points_match_experiment_names() -> None:
    """Every entry point names an Experiment whose own name is the entry point's name."""
    import importlib

    entry = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["iclr26.experiments"]
    assert {"llm-methods.dispersion.correlation", "llm-methods.dispersion.pushaway"} <= set(entry)
    for name, target in entry.items():
        module, _, attr = target.partition(":")
        experiment = getattr(importlib.import_module(module), attr)
        assert experiment.name == name, (name, target)
        assert experiment.paper and experiment.claim and callable(experiment.run)
    assert "2506.24106" in exp.CORRELATION.paper


def test_thresholds_and_scales_are_fixed() -> None:
    assert exp.CORR_R_MAX == -0.5 and exp.KNN_PPL_TOL == 0.01
    assert exp.LAMBDAS == (0.0, 0.01, 0.1) and len(exp.SEEDS) >= 3
    quick, full = exp.correlation_settings(True), exp.correlation_settings(False)
    assert quick["n_store"] < full["n_store"] and not quick["zoo"] and full["zoo"]
    assert exp.pushaway_settings(True)["steps"] < exp.pushaway_settings(False)["steps"]


@pytest.mark.slow
def test_pushaway_quick_run(tmp_path: Path) -> None:
    result = exp.run_pushaway(True, tmp_path)
    assert len(result.claims) == 2 and result.seeds == [0, 1, 2]
    assert (tmp_path / "pushaway.png").stat().st_size > 0
    assert all(len(v) == 3 for v in result.metrics["per_seed"].values())


@pytest.mark.slow
def test_correlation_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    result = exp.run_correlation(True, tmp_path)
    assert len(result.claims) == 2
    assert -1 <= result.metrics["pearson_r"] <= 1
    assert 1 <= result.metrics["max_dispersion_layer"] <= 30
    assert (tmp_path / "dispersion_vs_ppl.png").is_file()
    assert (tmp_path / "layers_knnlm.png").is_file()


def test_other_experiments_fixed_thresholds() -> None:
    from llm_methods.adl import experiment as adl
    from llm_methods.langcontrol import experiment as lc

    assert adl.MIXES == (0.0, 0.1, 1.0) and adl.TOP_K == 20
    assert adl.settings(True)["ft_steps"] < adl.settings(False)["ft_steps"]
    assert lc.CONSISTENCY_GAP_MAX == lc.ACCURACY_GAP_MAX == 0.02 and lc.PARAM_FRACTION_MAX == 0.1
    assert lc.settings(True)["pre_steps"] < lc.settings(False)["pre_steps"]
    assert adl.EXPERIMENT.name == "llm-methods.adl.narrow_finetune"
    assert lc.EXPERIMENT.name == "llm-methods.langcontrol.selective_ft"


@pytest.mark.slow
def test_adl_and_langcontrol_quick_runs(tmp_path: Path) -> None:
    from llm_methods.adl import experiment as adl
    from llm_methods.langcontrol import experiment as lc

    for module, png in ((adl, "adl_relevance.png"), (lc, "langcontrol.png")):
        result = module.run(True, tmp_path / png)
        assert len(result.claims) == 2 and (tmp_path / png / png).stat().st_size > 0
