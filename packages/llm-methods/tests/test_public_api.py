"""Each method package exports its public API from its ``__init__`` and imports it lazily
(issue 36): ``from llm_methods.suit import Editor`` works, while ``import llm_methods.suit`` alone
imports neither torch nor the other heavy libraries."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "transformers", "peft", "lightning", "pandas", "sklearn", "scipy")
# the name a README's main example imports from each package, and the submodule defining it
DOCUMENTED = {
    "adl": ("activation_difference", "llm_methods.adl.diff"),
    "antibody": ("align", "llm_methods.antibody.pipeline"),
    "bed": ("eig_estimate", "llm_methods.bed.eig"),
    "dispersion": ("chunk_statistics", "llm_methods.dispersion.measure"),
    "linguamap": ("evaluate", "llm_methods.linguamap.analysis"),
    "lm": ("load_lm", "llm_methods.lm.loading"),
    "ltpo": ("ltpo_optimize", "llm_methods.ltpo.optimize"),
    "mas2": ("parse_workflow", "llm_methods.mas2.dsl"),
    "mbok": ("BooleanLinear", "llm_methods.mbok.model"),
    "meta_router": ("MetaRouter", "llm_methods.meta_router.model"),
    "perk": ("PERK", "llm_methods.perk.model"),
    "remix": ("RLRunner", "llm_methods.remix.runner"),
    "seekbench": ("analyze", "llm_methods.seekbench.metrics"),
    "suit": ("Editor", "llm_methods.suit.editors"),
    "zoo": ("tiny_llama", "llm_methods.zoo.models"),
}
#: the method packages and the shared ``lm`` / ``zoo``: every one has a documented name above
PACKAGES = tuple(DOCUMENTED)
PROBE = """
import json, sys
import llm_methods.{name} as package
print(json.dumps({{"loaded": sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r}),
                  "all": list(package.__all__)}}))
"""


@pytest.mark.parametrize("name", PACKAGES)
def test_importing_a_method_package_is_cheap(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(name=name, heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["loaded"] == [], f"import llm_methods.{name} imported {out['loaded']}"
    assert out["all"], f"llm_methods.{name} exports nothing"


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name: str) -> None:
    package = importlib.import_module(f"llm_methods.{name}")
    assert len(set(package.__all__)) == len(package.__all__), "a name is listed twice"
    missing = [n for n in package.__all__ if getattr(package, n, None) is None]
    assert missing == [], f"llm_methods.{name}: {missing} do not resolve"
    assert set(package.__all__) <= set(dir(package))
    documented, source = DOCUMENTED[name]
    assert documented in package.__all__
    assert getattr(package, documented) is getattr(importlib.import_module(source), documented)
    with pytest.raises(AttributeError, match="no_such_name"):
        package.no_such_name  # noqa: B018


@pytest.mark.parametrize("name", PACKAGES)
def test_no_exported_name_is_also_a_submodule(name: str) -> None:
    """Importing submodule ``pkg.x`` sets the package attribute ``x`` to the module, so an
    exported function ``x`` defined in ``pkg/x.py`` would turn into a module once anything
    imported that file (``from pkg import x`` would then depend on import order)."""
    package = importlib.import_module(f"llm_methods.{name}")
    folder = Path(package.__file__).parent
    submodules = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir()}
    assert set(package.__all__) & submodules == set()


def test_the_issue_example_imports() -> None:
    from llm_methods.suit import Editor
    from llm_methods.suit.editors import Editor as Defined

    assert Editor is Defined
