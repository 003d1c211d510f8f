"""Meta-Router: the official CSV and efficiency gain, overlap diagnostics, the R-learner, and
the official learners (the claims' planted-signal tests: test_meta_router_claims.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main
from llm_methods.meta_router.data import RouterDataError
from llm_methods.meta_router.official import (
    GRID,
    efficiency_curve,
    efficiency_gain,
    overlap_diagnostics,
    read_official_csv,
    split_run,
)


def _official_csv(path: Path, n: int = 700, pcs: int = 5, seed: int = 0) -> Path:
    """The official layout: embd.PC1.., GL (gold gain), PL (biased preference gain)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, pcs))
    gl = 0.3 * x[:, 0] - 0.1 + rng.normal(0, 0.2, n)
    pl = gl - 0.2 * (1 + x[:, 1]) + rng.normal(0, 0.1, n)
    cols = {f"embd.PC{i + 1}": x[:, i] for i in range(pcs)}
    import pandas as pd

    pd.DataFrame({"question": [f"q{i}" for i in range(n)], **cols, "GL": gl, "PL": pl}).to_csv(
        path, index=False
    )
    return path


def test_read_official_csv_and_split(tmp_path: Path) -> None:
    x, gl, pl = read_official_csv(_official_csv(tmp_path / "1_PC50_varstd.csv", pcs=12))
    assert x.shape == (700, 12) and gl.shape == pl.shape == (700,)
    test, gold, pref = split_run(700, 42)
    assert (len(test), len(gold), len(pref)) == (500, 100, 100)
    assert len(set(test) | set(gold) | set(pref)) == 700
    assert np.array_equal(test, np.random.RandomState(42).permutation(700)[:500])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("embd.PC1,GL\n1,2\n", r"missing column\(s\) PL"),
        ("GL,PL\n1,2\n", r"missing column\(s\) embd.PC1"),
        ("embd.PC1,GL,PL\n" + "1,2,3\n" * 10, "10 rows; the official split needs more"),
    ],
)
def test_official_csv_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "o.csv"
    path.write_text(text)
    with pytest.raises(RouterDataError, match=message):
        read_official_csv(path)


def test_efficiency_curve_and_gain_by_hand() -> None:
    labels = np.array([0.5, -0.2, 0.1, 0.3])
    ratios, totals = efficiency_curve(np.array([0.9, -0.5, 0.1, 0.4]), labels)
    # order by m-hat: 0.5, 0.3, 0.1 (then the negative prediction is never included)
    assert ratios.tolist() == [0.0, 0.25, 0.5, 0.75] and totals.tolist() == pytest.approx(
        [0.0, 0.5, 0.8, 0.9]
    )
    flat = efficiency_curve(np.array([-1.0, -1, -1, -1]), labels)
    assert flat[1].max() == 0.0 and flat[0].max() == 1.0
    rnd = (np.linspace(0, 1, 5), np.array([0.0, 0.1, 0.2, 0.3, 0.4]))
    gain = efficiency_gain([(ratios, totals)], [rnd], grid=np.array([0.25, 0.5, 0.8]))
    assert gain[:2].tolist() == pytest.approx([0.5 - 0.1, 0.8 - 0.2]) and np.isnan(gain[2])
    # medians over runs, not means
    runs = [(ratios, totals), (ratios, 2 * totals), (ratios, 10 * totals)]
    assert efficiency_gain(runs, [rnd], grid=np.array([0.5]))[0] == pytest.approx(1.6 - 0.2)


def test_overlap_diagnostics_planted() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 3))
    separated = (x[:, 0] > 0.8).astype(int)
    random = (rng.random(2000) < 0.3).astype(int)
    sep, rnd = overlap_diagnostics(x, separated), overlap_diagnostics(x, random)
    assert sep["cv_accuracy"] > 0.95 and sep["cv_auc"] > 0.95
    assert abs(rnd["cv_accuracy"] - rnd["majority_rate"]) < 0.03 and rnd["cv_auc"] < 0.6


def test_cli_official_and_r_learner(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    csv = _official_csv(tmp_path / "1_PC50_varstd.csv")
    out = tmp_path / "off"
    assert (
        main(
            [
                "meta_router",
                "official",
                "--csv",
                str(csv),
                "--runs",
                "2",
                "--learner",
                "dr",
                "r",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "overlap: T predicted from x at CV accuracy" in text
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["methods"]) == {
        "gold_only",
        "preference_only",
        "pooled",
        "dr_corrected_dr",
        "dr_corrected_r",
    }
    table = (out / "efficiency_gain.csv").read_text().splitlines()
    assert table[0].startswith("ratio,gold_only") and len(table) == len(GRID) + 1
    line = assert_one_line_error(
        main,
        ["meta_router", "official", "--csv", str(tmp_path / "none.csv"), "--out", str(out) + "2"],
        capsys,
    )
    assert "none.csv: no such file" in line
