"""Workspace-wide contracts: every member imports, answers --help, declares what it imports,
and never imports another domain package."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))
COMMON_IMPORT = "iclr26_common"


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject(member: Path) -> dict:
    return tomllib.loads((member / "pyproject.toml").read_text())["project"]


def _import_name(member: Path) -> str:
    (package,) = [p.name for p in (member / "src").iterdir() if (p / "__init__.py").exists()]
    return package


def _guarded_import_nodes(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``try: ... except ImportError`` (optional dependencies)."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = {
            name.id
            for handler in node.handlers
            for name in ast.walk(handler.type or ast.Name("BaseException"))
            if isinstance(name, ast.Name)
        }
        if caught & {"ImportError", "ModuleNotFoundError"}:
            guarded |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    return guarded


def _imported_top_levels(member: Path, include_optional: bool = True) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in (member / "src").rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        guarded = set() if include_optional else _guarded_import_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in guarded:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path)
    return found


def _requirement_name(requirement: str) -> str:
    return _normalize(re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0])


IMPORT_NAMES = {member.name: _import_name(member) for member in MEMBERS}


@pytest.mark.parametrize("member", MEMBERS, ids=lambda p: p.name)
def test_member_is_in_the_readme_and_registers_experiments(member: Path) -> None:
    project = _pyproject(member)
    dist = project["name"]
    readme = (ROOT / "README.md").read_text()
    link = f"[`{dist}`](packages/{member.name})"
    rows = [line for line in readme.splitlines() if line.startswith(f"| {link} |")]
    assert len(rows) == 1, f"README table lacks one row for {dist}"
    status = rows[0].rstrip(" |").rsplit("|", 1)[-1].strip()
    assert status in {"ready", "in progress"}, f"README status of {dist}: {status!r}"
    if member.name == "common":
        assert IMPORT_NAMES[member.name] == COMMON_IMPORT
        return
    requirements = {_requirement_name(r) for r in project.get("dependencies", [])}
    assert "iclr26-common" in requirements, f"{dist} does not depend on iclr26-common"
    experiments = project.get("entry-points", {}).get("iclr26.experiments", {})
    if status == "ready":  # a member still being built may not register experiments yet
        assert experiments, f"{dist} registers no iclr26.experiments entry point"
    for name in experiments:
        assert name.startswith(f"{dist}."), f"experiment {name!r} is not named '{dist}.<name>'"


def test_root_depends_on_every_member() -> None:
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {_requirement_name(r) for r in root["project"]["dependencies"]}
    sources = set(root["tool"]["uv"]["sources"])
    for member in MEMBERS:
        dist = _normalize(_pyproject(member)["name"])
        assert dist in declared, f"root pyproject does not depend on {dist}"
        assert dist in {_normalize(s) for s in sources}, f"{dist} missing from [tool.uv.sources]"


@pytest.mark.parametrize("member", MEMBERS, ids=lambda p: p.name)
def test_member_imports_and_cli_answers_help(member: Path, capsys: pytest.CaptureFixture) -> None:
    module = importlib.import_module(IMPORT_NAMES[member.name])
    assert module.__version__ == _pyproject(member)["version"]
    scripts = _pyproject(member).get("scripts", {})
    assert scripts, f"{member.name} declares no console script"
    for script, target in scripts.items():
        module_name, _, attr = target.partition(":")
        main = getattr(importlib.import_module(module_name), attr)
        with pytest.raises(SystemExit) as exit_info:
            main(["--help"])
        assert exit_info.value.code == 0, f"{script} --help exited {exit_info.value.code}"
        assert "usage" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("member", MEMBERS, ids=lambda p: p.name)
def test_no_domain_package_imports_another(member: Path) -> None:
    others = {name for key, name in IMPORT_NAMES.items() if key != member.name} - {COMMON_IMPORT}
    offending = {
        name: str(path) for name, path in _imported_top_levels(member).items() if name in others
    }
    assert not offending, f"{member.name} imports other domain packages: {offending}"


@pytest.mark.parametrize("member", MEMBERS, ids=lambda p: p.name)
def test_member_declares_what_it_imports(member: Path) -> None:
    project = _pyproject(member)
    declared = {_requirement_name(r) for r in project.get("dependencies", [])}
    for extra in project.get("optional-dependencies", {}).values():
        declared |= {_requirement_name(r) for r in extra}
    own = IMPORT_NAMES[member.name]
    distributions = importlib.metadata.packages_distributions()
    # editable workspace installs are not listed by packages_distributions()
    for other in MEMBERS:
        distributions.setdefault(IMPORT_NAMES[other.name], [_pyproject(other)["name"]])
    missing = {}
    for name, path in _imported_top_levels(member, include_optional=False).items():
        if name == own or name in sys.stdlib_module_names or name == "__future__":
            continue
        providers = {_normalize(d) for d in distributions.get(name, [])}
        if not providers:
            missing[name] = f"{path} (no installed distribution provides it)"
        elif not providers & declared:
            missing[name] = f"{path} (provided by {sorted(providers)}, not declared)"
    assert not missing, f"{member.name} imports undeclared modules: {missing}"


def _common_names_imported(member: Path) -> dict[tuple[str, str], Path]:
    """``{(module, name): file}`` for every ``from iclr26_common[.x] import name`` in ``member``."""
    found: dict[tuple[str, str], Path] = {}
    for path in (member / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] == COMMON_IMPORT:
                    for alias in node.names:
                        found.setdefault((node.module, alias.name), path)
    return found


def _common_lower_bound(member: Path) -> tuple[int, ...] | None:
    for requirement in _pyproject(member).get("dependencies", []):
        if _requirement_name(requirement) == "iclr26-common":
            match = re.search(r">=\s*([0-9][0-9.]*)", requirement)
            return tuple(int(p) for p in match.group(1).split(".")) if match else None
    return None


@pytest.mark.parametrize("member", [m for m in MEMBERS if m.name != "common"], ids=lambda p: p.name)
def test_common_lower_bound_provides_what_the_member_imports(member: Path) -> None:
    """A package's ``iclr26-common>=X`` must be a version that has every name it imports.

    The rule that makes this checkable: the lower bound is the common version the package was
    last built against (same major.minor as the workspace's common). Whoever adds a name to
    common bumps its minor version, and a package that starts importing it raises its bound.
    """
    bound = _common_lower_bound(member)
    assert bound is not None, f"{member.name}: iclr26-common has no '>=' lower bound"
    current = tuple(int(p) for p in _pyproject(ROOT / "packages" / "common")["version"].split("."))
    assert bound[:2] == current[:2], (
        f"{member.name} requires iclr26-common>={'.'.join(map(str, bound))} but is built and "
        f"tested against {'.'.join(map(str, current))}: raise the bound"
    )
    for (module, name), path in sorted(_common_names_imported(member).items()):
        imported = importlib.import_module(module)
        # `from iclr26_common import submodule` is fine too
        provided = hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}")
        assert provided, f"{path.relative_to(ROOT)} imports {module}.{name}, which common lacks"


@pytest.mark.parametrize("caller", ["set +euo pipefail", "set -euo pipefail"])
def test_ci_setup_script_restores_the_callers_shell_options(tmp_path: Path, caller: str) -> None:
    """Sourcing .ci/setup-uv-env used to leave `set -euo pipefail` on in the caller's shell."""
    import os
    import subprocess

    stub = tmp_path / "bin" / "uv"
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\nexit 0\n")  # no real lock rewrite
    stub.chmod(0o755)
    script = f'{caller}; source "{ROOT / ".ci" / "setup-uv-env"}"; echo "flags=$-"; set -o | grep pipefail'
    env = {**os.environ, "PATH": f"{stub.parent}:{os.environ['PATH']}"}
    out = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    flags = out.stdout.split("flags=")[1].split()[0]
    pipefail = out.stdout.split()[-1]
    if caller.startswith("set +"):
        assert "e" not in flags and "u" not in flags and pipefail == "off"
    else:
        assert "e" in flags and "u" in flags and pipefail == "on"
