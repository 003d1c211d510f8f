"""What a record says: resume keyed on the source digest, provenance measured after run(),
non-finite values as errors, quick and full apart, inconclusive claims end to end."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from iclr26_common import Claim, Experiment, Precondition, Result, cli, registry
from iclr26_common.index import write_index
from iclr26_common.report import nonfinite_claims, strict_json, write_result
from iclr26_common.worker import run_experiment

SRC_EXPERIMENT = """
from iclr26_common import Claim, Experiment, Result
from srcpkg.shared import GAIN


def run(quick, out_dir):
    claim = Claim("The gain is positive.", "gain > 0", {"gain": GAIN}, GAIN > 0)
    return Result(claims=[claim], summary="s", metrics={}, seeds=[0], scale="t")


EXP = Experiment("src-exp", "Paper", "Gains are positive.", run)
"""


def _strict(path: Path) -> dict:
    """Parse as strict JSON: NaN / Infinity literals are an error."""

    def refuse(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture
def src_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_dist: Path, site_maker) -> Path:
    site = site_maker(
        tmp_path / "srcsite",
        {
            "srcpkg/__init__.py": "",
            "srcpkg/shared.py": "GAIN = 0.1\n",
            "srcpkg/unused.py": "X = 1\n",
            "srcpkg/configs/c.yaml": "a: 1\n",
            "srcpkg/experiment.py": SRC_EXPERIMENT,
        },
        "[iclr26.experiments]\nsrc-exp = srcpkg.experiment:EXP\n",
        "fake-src",
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site), prepend=":")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # edits below must be seen at once
    return site


def test_resume_is_keyed_on_the_source_that_ran(src_site: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    folder = out / "quick"

    def reproduce() -> dict:
        assert cli.main(["reproduce", "src-exp", "--out", str(out), "--quick", "--resume"]) == 0
        return _strict(folder / "src-exp" / "result.json")

    first = reproduce()
    source = first["source"]
    assert source["module"] == "srcpkg.experiment" and len(source["digest"]) == 64
    assert source["files"] == ["__init__.py", "experiment.py", "shared.py"]  # imported ones
    assert reproduce()["run_id"] == first["run_id"]  # nothing changed: resumed

    (src_site / "srcpkg" / "unused.py").write_text("X = 2  # never imported by the experiment\n")
    assert reproduce()["run_id"] == first["run_id"]

    # A shared helper changed, the distribution's version did not: the stale result is rerun.
    (src_site / "srcpkg" / "shared.py").write_text("GAIN = 0.25\n")
    second = reproduce()
    assert second["run_id"] != first["run_id"]
    assert second["claims"][0]["measured"] == {"gain": 0.25}
    assert second["source"]["digest"] != source["digest"]

    (src_site / "srcpkg" / "configs" / "c.yaml").write_text("a: 2\n")
    third = reproduce()
    assert third["run_id"] != second["run_id"]

    metadata = next(src_site.glob("fake_src-*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 0.1", "Version: 0.2"))
    assert reproduce()["run_id"] != third["run_id"]


def test_source_digest_is_none_when_a_recorded_file_is_gone(src_site: Path) -> None:
    files = ["__init__.py", "experiment.py", "shared.py"]
    digest = registry.source_digest("srcpkg.experiment", files, "fake-src")
    assert digest is not None and len(digest) == 64
    assert registry.source_digest("srcpkg.experiment", files, "fake-src") == digest
    assert registry.source_digest("srcpkg.experiment", [*files, "gone.py"], "fake-src") is None
    assert registry.source_digest("nosuchpkg.mod", ["x.py"], None) is None


def test_source_digest_keys_iclr26_commons_own_code(
    src_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit to common's code (same version in an editable checkout) must not resume."""
    fake_common = tmp_path / "fake_common"
    fake_common.mkdir()
    (fake_common / "seeding.py").write_text("SEED = 0\n")
    real = registry._package_roots

    def roots(top: str):  # type: ignore[no-untyped-def]
        return ([fake_common], None) if top == "iclr26_common" else real(top)

    monkeypatch.setattr(registry, "_package_roots", roots)
    files = ["__init__.py", "experiment.py", "shared.py"]
    before = registry.source_digest("srcpkg.experiment", files, "fake-src")
    (fake_common / "seeding.py").write_text("SEED = 1\n")
    after = registry.source_digest("srcpkg.experiment", files, "fake-src")
    assert before is not None and after is not None and before != after


def _nothing(quick: bool, out_dir: Path) -> Result:
    claim = Claim("Something.", "x >= 0", {"x": 1.0}, True)
    return Result(claims=[claim], summary="s", metrics={}, seeds=[0], scale="t")


def test_provenance_is_what_run_used_not_what_the_machine_offers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch imported and a GPU visible, but run() neither recorded nor initialised CUDA.
    fake_torch = SimpleNamespace(
        cuda=SimpleNamespace(
            is_available=lambda: True,
            is_initialized=lambda: False,
            get_device_name=lambda index=0: "FakeGPU",
        ),
        get_num_threads=lambda: 3,
        set_num_threads=lambda n: None,
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    exp = Experiment("prov", "Paper", "Claim.", _nothing)
    assert run_experiment(exp, tmp_path / "prov", True, threads=5) == 0
    data = _strict(tmp_path / "prov" / "result.json")
    assert data["devices"] == ["cpu"] and data["device"] == "cpu"  # old readers' field
    assert data["threads"] == [3]  # measured after run(), not the 5 it was offered
    assert (
        "**Used by run():** cpu; torch threads: 3" in (tmp_path / "prov" / "report.md").read_text()
    )


def test_recorded_thread_count_wins(
    fake_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the worker is offered 3 threads ...
    assert cli.main(["reproduce", "onethread", "--out", str(tmp_path)]) == 0  # not held
    data = _strict(tmp_path / "full" / "onethread" / "result.json")
    assert data["threads"] == [1]  # ... run() recorded that it used 1
    assert data["metrics"]["omp"] == "3"  # and the user's setting reached it unchanged


def test_nonfinite_measured_value_is_an_error_naming_it(fake_dist: Path, tmp_path: Path) -> None:
    assert cli.main(["reproduce", "nonfinite", "--out", str(tmp_path), "--quick"]) == 1
    folder = tmp_path / "quick" / "nonfinite"
    data = _strict(folder / "result.json")  # strict JSON: no bare NaN / Infinity
    assert data["status"] == "error" and data["verdict"] is None
    assert "claim 2 measured.per.s1" in data["error"]
    assert [c["verdict"] for c in data["claims"]] == ["held", "error"]
    assert data["claims"][1]["measured"] == {"per": {"s1": "NaN"}}
    assert data["metrics"] == {"loss": "Infinity", "ok": 1.0}
    assert data["nonfinite_metrics"] == ["loss"]
    md = (folder / "report.md").read_text()
    assert "**Error**" in md and "claim 2 measured.per.s1" in md
    assert "Non-finite metric values (written as strings): `loss`." in md


def test_strict_json_and_nonfinite_claims_name_the_values(tmp_path: Path) -> None:
    clean, paths = strict_json({"a": [1.0, math.nan], "b": {"c": -math.inf}, "d": "x"})
    assert clean == {"a": [1.0, "NaN"], "b": {"c": "-Infinity"}, "d": "x"}
    assert paths == ["a[1]", "b.c"]
    pre = Precondition("baseline learned", "gap >= 0.1", math.inf, True)
    claims = [Claim("A.", "x", {"x": 1.0}, True, [pre]), Claim("B.", "y", {"y": [math.nan]}, 0)]
    assert nonfinite_claims(claims) == [
        "claim 1 precondition 'baseline learned' measured",
        "claim 2 measured.y[0]",
    ]
    result = Result(claims=claims, summary="s", metrics={}, seeds=[0], scale="t")
    exp = Experiment("nf", "Paper", "Claim.", _nothing)
    with pytest.raises(ValueError, match=r"claim 2 measured\.y\[0\]"):
        write_result(tmp_path, exp, result, status="not held", duration_s=0, quick=True)
    assert list(tmp_path.iterdir()) == []


def test_quick_and_full_never_overwrite_each_other(fake_dist: Path, tmp_path: Path) -> None:
    assert cli.main(["reproduce", "good", "--out", str(tmp_path), "--quick"]) == 0
    assert cli.main(["reproduce", "good", "notheld", "--out", str(tmp_path)]) == 0
    quick = _strict(tmp_path / "quick" / "good" / "result.json")
    full = _strict(tmp_path / "full" / "good" / "result.json")
    assert quick["quick"] is True and full["quick"] is False
    assert quick["scale"].endswith("(quick)") and not full["scale"].endswith("(quick)")

    # Leftovers (an unregistered experiment, a result of the other mode) are not counted.
    ghost = Experiment("ghost", "Paper", "Gone.", _nothing)
    result = _nothing(True, tmp_path)
    write_result(
        tmp_path / "quick" / "ghost", ghost, result, status="held", duration_s=0, quick=True
    )
    moved = Experiment("notheld", "Paper", "Moved.", _nothing)
    write_result(
        tmp_path / "quick" / "notheld", moved, result, status="held", duration_s=0, quick=False
    )
    registered = list(registry.entry_point_info())
    index = write_index(tmp_path / "quick", registered=registered, mode="quick").read_text()
    n = len(registered)
    assert f"**1 of {n} registered experiments (quick mode): 1 held, 0 not held, " in index
    counted = index.split("## Not counted")[0]
    assert "| good |" in counted and "| ghost |" not in counted and "| notheld |" not in counted
    not_counted = index.split("## Not counted")[1].split("## Not run")[0]
    assert "| ghost | held |" in not_counted and "not a registered experiment" in not_counted
    assert "a full result in the quick folder" in not_counted
    full_index = (tmp_path / "full" / "index.md").read_text()
    assert f"**2 of {n} registered experiments (full mode): 1 held, 1 not held, " in full_index


def test_inconclusive_end_to_end(fake_dist: Path, tmp_path: Path, capsys) -> None:
    assert cli.main(["reproduce", "inconclusive", "--out", str(tmp_path), "--quick"]) == 0
    folder = tmp_path / "quick"
    data = _strict(folder / "inconclusive" / "result.json")
    assert data["status"] == data["verdict"] == "inconclusive"
    first, second = data["claims"]
    assert first["verdict"] == "held" and first["preconditions"][0]["passed"] is True
    assert second["verdict"] == "inconclusive" and second["criterion_met"] is True
    assert second["preconditions"] == [
        {
            "name": "baseline learned",
            "criterion": "acc(baseline) - acc(trivial) >= 0.1",
            "measured": {"baseline": 0.5, "trivial": 0.5},
            "passed": False,
        }
    ]
    md = (folder / "inconclusive" / "report.md").read_text()
    assert "**Verdict: inconclusive at this scale**" in md
    assert "| 2 | baseline learned | acc(baseline) - acc(trivial) >= 0.1 |" in md
    assert "baseline = 0.5; trivial = 0.5 | **failed** |" in md
    assert "Claim 2 is **inconclusive**: its control baseline learned failed" in md
    assert (
        "its criterion alone was met" in md
        and "1 of 2 claims held (1 inconclusive (control failed))" in md
    )
    index = (folder / "index.md").read_text()
    assert (
        "0 held, 0 not held, 1 inconclusive (control failed), 0 inconclusive (underpowered), 0 error"
        in index
    )
    assert (
        "Claims (2): 1 held, 0 not held, 1 inconclusive (control failed), 0 inconclusive" in index
    )
    assert "| inconclusive | 1/2 (1 inconclusive) |" in index
    assert (
        "| 2 | Ours beats the baseline. | — (point estimate: acc - baseline >= 0.05) | "
        "inconclusive (control failed: " in index
    )
    printed = capsys.readouterr().out
    assert "0 held, 0 not held, 1 inconclusive, 0 error" in printed
