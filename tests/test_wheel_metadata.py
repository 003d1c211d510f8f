"""Wheel and sdist metadata a registry would show (issue 43): `uv build --package X` gives an sdist
and a wheel built from it whose metadata validate (tools/release_check.py metadata: the fields
`twine check` reads and more), with classifiers, keywords, the README as long description and the
license file in both; the wheel built straight from the tree equals the one built from the sdist
(`release_check.py same-wheels`, which .ci/run runs on all eight).

twine is not installed in the workspace, so the check is tools/release_check.py's own (email.parser
and, where importable, packaging.metadata's validation). One package (iclr26-common, the smallest)
is built by default; all eight under -m slow (CI validates the eight wheels it builds anyway)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("release_check", ROOT / "tools/release_check.py")
assert _spec is not None and _spec.loader is not None
rc = importlib.util.module_from_spec(_spec)
sys.modules["release_check"] = rc
_spec.loader.exec_module(rc)

DISTS = sorted(
    tomllib.loads(p.read_text())["project"]["name"]
    for p in (ROOT / "packages").glob("*/pyproject.toml")
)
needs_uv = pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv on PATH to build")


def _build(dist: str, out: Path, *extra: str) -> None:
    run = subprocess.run(
        ["uv", "build", "--quiet", "--package", dist, "--out-dir", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"uv build --package {dist} failed:\n{run.stderr[-3000:]}"


def _built_and_checked(dist: str, tmp: Path) -> Path:
    from_sdist, from_tree = tmp / "dist", tmp / "tree"
    _build(dist, from_sdist)  # the sdist, then the wheel built from that sdist
    _build(dist, from_tree, "--wheel")  # the wheel straight from the source tree
    assert rc.metadata(ROOT, from_sdist, [dist]) == []
    (wheel,) = from_sdist.glob("*.whl")
    (direct,) = from_tree.glob("*.whl")
    assert wheel.name == direct.name
    assert rc.same_wheels(from_sdist, from_tree) == []
    assert rc.wheel_members(wheel) == rc.wheel_members(direct), "the sdist builds another wheel"
    return wheel


@pytest.fixture(scope="module")
def common_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """iclr26-common's wheel, built from its sdist, both checked (once for this module)."""
    return _built_and_checked("iclr26-common", tmp_path_factory.mktemp("common"))


@needs_uv
def test_common_builds_a_valid_sdist_and_wheel(common_wheel: Path) -> None:
    wheel = common_wheel
    with zipfile.ZipFile(wheel) as archive:
        (info,) = {n.split("/")[0] for n in archive.namelist() if ".dist-info/" in n}
        message = rc._parse_metadata(archive.read(f"{info}/METADATA").decode())
    assert message["License-Expression"] == "BSD-3-Clause"
    classifiers = message.get_all("Classifier")
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Development Status :: 3 - Alpha" in classifiers
    assert any(c.startswith("Topic :: Scientific/Engineering") for c in classifiers)
    assert message["Description-Content-Type"] == "text/markdown"
    assert message.get_all("Project-URL") is None  # no public address yet, and no placeholder


@needs_uv
@pytest.mark.slow
@pytest.mark.parametrize("dist", DISTS)
def test_every_package_builds_a_valid_sdist_and_wheel(dist: str, tmp_path: Path) -> None:
    _built_and_checked(dist, tmp_path)


def _wheel_with(source: Path, target: Path, edit) -> None:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            data = old.read(item.filename)
            if item.filename.endswith(".dist-info/METADATA"):
                data = edit(data.decode()).encode()
            new.writestr(item, data)


@needs_uv
def test_same_wheels_names_a_member_the_sdist_build_changed_or_lost(
    common_wheel: Path, tmp_path: Path
) -> None:
    """``release_check.py same-wheels`` (what .ci/run runs on all eight packages, issue 43: the
    sdist builds the same wheel; until d875146 only iclr26-common was compared, in this test):
    a changed member, a lost one and a missing wheel are each named."""
    built, tree = tmp_path / "built", tmp_path / "tree"
    built.mkdir()
    tree.mkdir()
    shutil.copy2(common_wheel, tree / common_wheel.name)
    with (
        zipfile.ZipFile(common_wheel) as old,
        zipfile.ZipFile(built / common_wheel.name, "w") as new,
    ):
        names = old.namelist()
        lost = next(n for n in names if n.endswith("/py.typed") or n.endswith("__main__.py"))
        changed = next(n for n in names if n.endswith("/outputs.py"))
        for item in old.infolist():
            if item.filename == lost:
                continue
            data = old.read(item.filename)
            new.writestr(item, data + b"\n# edited\n" if item.filename == changed else data)
    problems = "\n".join(rc.same_wheels(built, tree))
    assert f"only in the wheel built from the tree: {lost}" in problems, problems
    assert f"differs between the two: {changed}" in problems, problems
    (tree / "extra-0.1-py3-none-any.whl").write_bytes((tree / common_wheel.name).read_bytes())
    assert "extra-0.1-py3-none-any.whl: only in" in "\n".join(rc.same_wheels(built, tree))
    shutil.copy2(common_wheel, built / common_wheel.name)
    (tree / "extra-0.1-py3-none-any.whl").unlink()
    assert rc.same_wheels(built, tree) == []


@needs_uv
def test_the_check_names_what_a_registry_would_refuse(common_wheel: Path, tmp_path: Path) -> None:
    wheel = common_wheel
    (sdist,) = wheel.parent.glob("*.tar.gz")
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy2(sdist, bad / sdist.name)

    def edit(text: str) -> str:
        head, _, body = text.partition("\n\n")
        lines = [line for line in head.splitlines() if not line.startswith("Keywords:")]
        lines.append("Classifier: License :: OSI Approved :: BSD License")
        lines.append("Classifier: Programming Language :: Python :: 3.13")  # CI runs 3.11
        lines.append("Classifier: Topic :: Scientific/Engineering :: Alchemy")  # not a trove name
        lines.append("Project-URL: Homepage, https://github.com/your-org/iclr26")
        body += "\n[details](src/iclr26_common/README.md), [ok](https://pypi.org) [ok](#usage)\n"
        return "\n".join(lines) + "\n\n" + body

    _wheel_with(wheel, bad / wheel.name, edit)
    problems = "\n".join(rc.metadata(ROOT, bad, ["iclr26-common"]))
    assert "Keywords missing" in problems
    assert "license classifiers beside License-Expression" in problems
    assert "placeholder URL" in problems
    assert "'Programming Language :: Python :: 3.13': CI tests on Python 3.11 only" in problems
    assert "unknown classifier 'Topic :: Scientific/Engineering :: Alchemy'" in problems
    assert "links to 'src/iclr26_common/README.md': a registry's page cannot" in problems
    assert "'https://pypi.org'" not in problems and "'#usage'" not in problems
    assert "RECORD: wrong hash for" in problems  # METADATA changed after the wheel was built
    assert "PKG-INFO's Classifier differs from the wheel's METADATA" in problems
