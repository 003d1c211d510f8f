"""The release rule (issue 43): tools/release_check.py on temporary workspaces, never on the real
tree — a code change without a bump fails, a bump with its changelog section passes, a rewritten
record fails (by its chain, and against git history), a missing changelog section fails."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "release_check.py"
_spec = importlib.util.spec_from_file_location("release_check", TOOL)
assert _spec is not None and _spec.loader is not None
rc = importlib.util.module_from_spec(_spec)
sys.modules["release_check"] = rc
_spec.loader.exec_module(rc)

LICENSE_TEXT = "BSD 3-Clause License\n\nCopyright (c) 2026, someone\n"


def _changelog(*sections: str) -> str:
    return "# Changelog\n\n" + "\n".join(sections)


def _section(version: str, kind: str = "Added", entry: str = "something") -> str:
    return f"## [{version}] - 2026-12-06\n\n### {kind}\n\n- {entry}\n"


def _pyproject(dist: str, version: str) -> str:
    return (
        f'[project]\nname = "{dist}"\nversion = "{version}"\nlicense = "BSD-3-Clause"\n'
        'readme = "README.md"\nrequires-python = ">=3.11"\n\n'
        '[build-system]\nrequires = ["hatchling>=1.27"]\nbuild-backend = "hatchling.build"\n'
    )


def _make_package(root: Path, folder: str, dist: str, version: str) -> Path:
    pkg = root / "packages" / folder
    module = pkg / "src" / folder.replace("-", "_")
    (module / "configs").mkdir(parents=True)
    (module / "__init__.py").write_text("VALUE = 1\n")
    (module / "configs" / "tiny.yaml").write_text("seed: 0\n")
    (pkg / "tests").mkdir()
    (pkg / "tests" / "test_it.py").write_text("def test_it():\n    pass\n")
    (pkg / "README.md").write_text(f"# {dist}\n")
    (pkg / "pyproject.toml").write_text(_pyproject(dist, version))
    (pkg / "LICENSE").write_text(LICENSE_TEXT)
    (pkg / "CHANGELOG.md").write_text(_changelog(_section(version)))
    return pkg


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace of two packages, not a git repository."""
    (tmp_path / "LICENSE").write_text(LICENSE_TEXT)
    _make_package(tmp_path, "alpha", "alpha-pkg", "0.1.0")
    _make_package(tmp_path, "beta", "beta-pkg", "0.3.0")
    return tmp_path


def _run(root: Path, *args: str, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = rc.main(["--root", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _bump(pkg: Path, dist: str, version: str, *sections: str) -> None:
    (pkg / "pyproject.toml").write_text(_pyproject(dist, version))
    old = (pkg / "CHANGELOG.md").read_text().removeprefix("# Changelog\n\n")
    (pkg / "CHANGELOG.md").write_text(_changelog(*sections) + "\n" + old)


def test_record_then_check_passes(ws: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, err = _run(ws, "check", capsys=capsys)
    assert code == 0, err
    assert "note: alpha-pkg 0.1.0: not recorded yet" in out
    code, out, err = _run(ws, "record", "--all", capsys=capsys)
    assert code == 0, err
    assert "alpha-pkg 0.1.0: recorded" in out and "beta-pkg 0.3.0: recorded" in out
    lines = (ws / rc.RECORD).read_text().splitlines()
    assert [json.loads(line)["dist"] for line in lines] == ["alpha-pkg", "beta-pkg"]
    assert json.loads(lines[0])["prev"] == rc.GENESIS
    assert json.loads(lines[1])["prev"] == rc.line_hash(lines[0])
    assert json.loads(lines[0])["date"] == "2026-12-06"  # the changelog section's date
    code, out, err = _run(ws, "check", capsys=capsys)
    assert (code, err) == (0, "")
    assert "2 packages ok" in out and "not recorded" not in out
    code, out, _ = _run(ws, "record", "--all", capsys=capsys)
    assert code == 0 and "already recorded" in out
    assert len((ws / rc.RECORD).read_text().splitlines()) == 2


def test_a_code_change_without_a_bump_fails_for_that_package_only(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    (ws / "packages/alpha/src/alpha/__init__.py").write_text("VALUE = 2\n")
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1
    problems = [line for line in err.splitlines() if line.startswith("release check:")]
    assert problems == [
        "release check: alpha-pkg 0.1.0: shipped files changed since 0.1.0 was recorded "
        "(2026-12-06): bump the version in alpha/pyproject.toml and add its CHANGELOG.md section"
    ]
    # the command line a CI step runs
    run = subprocess.run(
        [sys.executable, str(TOOL), "--root", str(ws), "check"], capture_output=True, text=True
    )
    assert run.returncode == 1 and "alpha-pkg 0.1.0: shipped files changed" in run.stderr


@pytest.mark.parametrize(
    ("path", "shipped"),
    [
        ("src/alpha/configs/tiny.yaml", True),  # a shipped config
        ("src/alpha/data/table.bin", True),  # embedded data (new file)
        ("pyproject.toml", True),
        ("LICENSE", True),
        ("tests/test_it.py", False),
        ("README.md", False),
        ("BENCHMARKS.md", False),
        ("src/alpha/__pycache__/x.cpython-311.pyc", False),
        ("src/alpha/stray.pyc", False),
    ],
)
def test_what_counts_as_shipped(ws: Path, path: str, shipped: bool) -> None:
    pkg = ws / "packages/alpha"
    before = rc.content_digest(pkg)
    target = pkg / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((target.read_bytes() if target.exists() else b"") + b"\x00changed\n")
    assert (rc.content_digest(pkg) != before) is shipped


def test_the_digest_reads_crlf_as_lf_in_text_files_only(ws: Path) -> None:
    pkg = ws / "packages/alpha"
    module = pkg / "src/alpha/__init__.py"
    before = rc.content_digest(pkg)
    module.write_bytes(b"VALUE = 1\r\n")
    assert rc.content_digest(pkg) == before  # a Windows checkout of the same text
    blob = pkg / "src/alpha/blob.bin"
    blob.write_bytes(b"\x00\r\n")
    with_blob = rc.content_digest(pkg)
    blob.write_bytes(b"\x00\n")
    assert rc.content_digest(pkg) != with_blob  # binary bytes are taken as they are


def test_a_bump_with_its_changelog_section_passes(ws: Path, capsys: pytest.CaptureFixture) -> None:
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    (pkg / "src/alpha/__init__.py").write_text("VALUE = 2\n")
    (pkg / "pyproject.toml").write_text(_pyproject("alpha-pkg", "0.2.0"))
    code, _, err = _run(ws, "check", capsys=capsys)  # bumped, but no changelog section yet
    assert code == 1
    assert (
        "alpha-pkg 0.2.0: CHANGELOG.md has no section for 0.2.0 (its top section is [0.1.0])" in err
    )
    _bump(pkg, "alpha-pkg", "0.2.0", _section("0.2.0", "Changed", "VALUE is 2"))
    code, out, err = _run(ws, "check", capsys=capsys)
    assert (code, err) == (0, "")
    assert "note: alpha-pkg 0.2.0: not recorded yet" in out
    code, _, err = _run(ws, "check", "--require-recorded", capsys=capsys)
    assert code == 1 and "alpha-pkg 0.2.0: not recorded yet" in err
    (pkg / "src/alpha/__init__.py").write_text("VALUE = 3\n")  # more work in the same version
    assert _run(ws, "check", capsys=capsys)[0] == 0
    assert _run(ws, "record", "alpha-pkg", capsys=capsys)[0] == 0
    assert _run(ws, "check", "--require-recorded", capsys=capsys)[0] == 0
    versions = [json.loads(x)["version"] for x in (ws / rc.RECORD).read_text().splitlines()]
    assert versions == ["0.1.0", "0.3.0", "0.2.0"]


def test_a_missing_changelog_or_section_fails(ws: Path, capsys: pytest.CaptureFixture) -> None:
    pkg = ws / "packages/beta"
    (pkg / "CHANGELOG.md").write_text(_changelog(_section("0.2.0")))
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1
    assert (
        "beta-pkg 0.3.0: CHANGELOG.md has no section for 0.3.0 (its top section is [0.2.0])" in err
    )
    assert _run(ws, "record", "beta-pkg", capsys=capsys)[0] == 1  # record refuses too
    assert not (ws / rc.RECORD).exists()
    (pkg / "CHANGELOG.md").write_text(_changelog("## [0.3.0]\n\n### Added\n\n- x\n"))
    assert "the section needs a date" in _run(ws, "check", capsys=capsys)[2]
    (pkg / "CHANGELOG.md").write_text(_changelog("## [0.3.0] - 2026-12-06\n\n### Added\n"))
    assert "lists no change" in _run(ws, "check", capsys=capsys)[2]
    (pkg / "CHANGELOG.md").unlink()
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "beta-pkg 0.3.0: no CHANGELOG.md" in err


def test_a_recorded_version_keeps_its_changelog_section(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    (pkg / "pyproject.toml").write_text(_pyproject("alpha-pkg", "0.2.0"))
    (pkg / "CHANGELOG.md").write_text(_changelog(_section("0.2.0")))  # 0.1.0's section dropped
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "released version 0.1.0 has no CHANGELOG.md section" in err


def test_a_removal_needs_a_minor_bump_below_1_0(ws: Path, capsys: pytest.CaptureFixture) -> None:
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    _bump(pkg, "alpha-pkg", "0.1.1", _section("0.1.1", "Removed", "`--old` (use `--new`)"))
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "alpha-pkg 0.1.1: its changelog removes or renames something" in err
    assert "minor bump from 0.1.0" in err
    _bump(pkg, "alpha-pkg", "0.2.0", _section("0.2.0", "Removed", "`--old` (use `--new`)"))
    assert _run(ws, "check", capsys=capsys)[0] == 0


@pytest.mark.parametrize(
    ("kind", "entry", "message"),
    [
        # a rename described under "Changed" passed with a patch bump (R43 reviews)
        ("Changed", "`--old` renamed to\n  `--new`", "removes or renames something"),
        ("Changed", "`score` no longer writes `plot.png`", "removes or renames something"),
        ("Changed", "`--epochs` is now `--n-epochs`", "removes or renames something"),
        ("Changed", "Dropped `--epochs`", "removes or renames something"),
        ("Changed", "progress lines are shorter", "lists Changed entries"),
        # RELEASING.md's table: a rename that keeps the old spelling, a new flag: minor
        (
            "Deprecated",
            "`--old` renamed to `--new`; the old spelling is removed in 0.3.0",
            "lists Deprecated entries",
        ),
        ("Added", "a `--quiet` flag", "lists Added entries"),
        ("Fixed", "a crash when the file was removed while reading", None),
        ("Security", "refuse pickles", None),
    ],
)
def test_the_bump_a_changelog_section_needs(
    ws: Path, capsys: pytest.CaptureFixture, kind: str, entry: str, message: str | None
) -> None:
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    _bump(pkg, "alpha-pkg", "0.1.1", _section("0.1.1", kind, entry))
    code, _, err = _run(ws, "check", capsys=capsys)
    if message is None:
        assert code == 0, err
    else:
        assert code == 1 and message in err and "needs a minor bump from 0.1.0" in err, err
        _bump(pkg, "alpha-pkg", "0.2.0", _section("0.2.0", kind, entry))
        assert _run(ws, "check", capsys=capsys)[0] == 0


@pytest.mark.parametrize("bullet", ["+ ", "  - ", "* "])
def test_removed_entries_in_any_bullet_style_count(
    ws: Path, capsys: pytest.CaptureFixture, bullet: str
) -> None:
    """R43 review: a "Removed" section written with ``+`` or indented bullets counted no entry
    and passed with a patch bump."""
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    section = f"## [0.1.1] - 2026-12-06\n\n### Removed\n\n{bullet}`--old`\n"
    _bump(pkg, "alpha-pkg", "0.1.1", section)
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "removes or renames something" in err


def test_a_deprecation_names_the_version_that_removes_it(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    _bump(pkg, "alpha-pkg", "0.2.0", _section("0.2.0", "Deprecated", "`--old`: use `--new`"))
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "does not say the version that removes it" in err
    section = (
        "## [0.2.0] - 2026-12-06\n\n### Deprecated\n\nEach spelling below is removed in "
        "alpha-pkg 0.3.0.\n\n- `--old`: use `--new`\n"
    )
    (pkg / "CHANGELOG.md").write_text(_changelog(section, _section("0.1.0")))
    assert _run(ws, "check", capsys=capsys)[0] == 0


def test_a_respelled_distribution_name_keeps_its_records(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    """R43 review: ``name = "Alpha_Pkg"`` (the same distribution) matched no record, so changed
    code passed as "not recorded yet"."""
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    (pkg / "pyproject.toml").write_text(_pyproject("Alpha_Pkg", "0.1.0"))
    (pkg / "src/alpha/__init__.py").write_text("VALUE = 2\n")
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "Alpha_Pkg 0.1.0: shipped files changed" in err


def test_record_names_its_packages(ws: Path, capsys: pytest.CaptureFixture) -> None:
    """A team records its own package: ``record`` alone would record other teams' bumps."""
    with pytest.raises(SystemExit) as info:
        _run(ws, "record", capsys=capsys)
    assert info.value.code == 2 and "name the package(s) to record, or give --all" in (
        capsys.readouterr().err
    )
    assert _run(ws, "record", "alpha-pkg", capsys=capsys)[0] == 0
    assert [json.loads(x)["dist"] for x in (ws / rc.RECORD).read_text().splitlines()] == [
        "alpha-pkg"
    ]


def test_record_refuses_a_package_whose_workspace_lower_bound_is_not_released(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    """beta requires alpha-pkg>=0.2 while only alpha 0.1.0 is recorded: published alone, beta
    would not install (d875146 recorded it: the seven domain packages require iclr26-common>=0.9,
    unreleased). Recording alpha 0.2.0 first, or in the same command, lets it through."""
    assert _run(ws, "record", "alpha-pkg", capsys=capsys)[0] == 0
    beta = ws / "packages" / "beta"
    text = _pyproject("beta-pkg", "0.3.0").replace(
        'requires-python = ">=3.11"\n',
        'requires-python = ">=3.11"\ndependencies = ["alpha-pkg[extra] >= 0.2", "numpy>=1"]\n',
    )
    (beta / "pyproject.toml").write_text(text)
    code, _, err = _run(ws, "record", "beta-pkg", capsys=capsys)
    assert code == 1, err
    assert "beta-pkg 0.3.0: requires alpha-pkg>=0.2, which is not released (recorded: 0.1.0)" in err
    assert len((ws / rc.RECORD).read_text().splitlines()) == 1  # nothing appended
    alpha = ws / "packages" / "alpha"
    _bump(alpha, "alpha-pkg", "0.2.0", _section("0.2.0"))
    (alpha / "src" / "alpha" / "__init__.py").write_text("VALUE = 2\n")
    code, out, err = _run(ws, "record", "beta-pkg", "alpha-pkg", capsys=capsys)
    assert code == 0, err
    assert "beta-pkg 0.3.0: recorded" in out and "alpha-pkg 0.2.0: recorded" in out


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            '\n[tool.hatch.build.targets.wheel]\npackages = ["src/alpha"]\n'
            '[tool.hatch.build.targets.wheel.shared-data]\n"share" = "share/alpha"\n',
            "[tool.hatch.build.targets.wheel] shared-data: a build setting the digest does not",
        ),
        (
            '\n[tool.hatch.build.targets.wheel]\npackages = ["src/alpha", "plugins/x"]\n'
            "only-include = ['plugins']\n",
            "[tool.hatch.build.targets.wheel] only-include: a build setting",
        ),
        ("\n[tool.hatch.build]\ndev-mode-dirs = ['.']\n", "[tool.hatch.build] dev-mode-dirs"),
    ],
)
def test_build_settings_the_digest_cannot_follow_are_refused(
    ws: Path, capsys: pytest.CaptureFixture, edit: str, message: str
) -> None:
    """R43 review: shared-data, only-include and other hatch settings shipped files outside the
    digest, which then changed under a recorded version."""
    pyproject = ws / "packages/alpha/pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[project]", "[project]") + edit)
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and f"alpha-pkg 0.1.0: {message}" in err, err


def test_a_symbolic_link_in_src_is_refused(ws: Path, capsys: pytest.CaptureFixture) -> None:
    """R43 review: a linked folder shipped its target's files, which the digest never saw."""
    (ws / "shared").mkdir()
    (ws / "shared" / "x.py").write_text("X = 1\n")
    (ws / "packages/alpha/src/alpha/ext").symlink_to(ws / "shared")
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "src/alpha/ext is a symbolic link" in err


def test_unshipped_pyproject_tables_need_no_bump_and_force_included_files_do(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    """R43 review: editing [dependency-groups] (never shipped) forced a bump, while a file
    force-included from outside src/ (shipped) could change under a recorded version."""
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    pyproject = pkg / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text()
        + '\n# a comment\n[dependency-groups]\ndev = ["pytest"]\n\n[tool.uv]\npackage = true\n'
    )
    assert _run(ws, "check", capsys=capsys)[0] == 0
    (pkg / "extra").mkdir()
    (pkg / "extra" / "table.csv").write_text("a,b\n")
    pyproject.write_text(
        pyproject.read_text()
        + '\n[tool.hatch.build.targets.wheel.force-include]\n"extra" = "alpha/extra"\n'
    )
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "alpha-pkg 0.1.0: shipped files changed" in err
    before = rc.content_digest(pkg)
    (pkg / "extra" / "table.csv").write_text("a,b\n1,2\n")
    assert rc.content_digest(pkg) != before  # the force-included file is digested


def test_records_of_the_first_digest_scheme_still_match(ws: Path) -> None:
    """Entries written before the pyproject/force-include scheme (``sha256:``) are compared
    under that scheme."""
    pkg = ws / "packages/alpha"
    legacy, _ = rc.content_digest(pkg, legacy=True)
    assert legacy.startswith("sha256:") and rc.recorded_digest_matches({"digest": legacy}, pkg)
    (pkg / "src/alpha/__init__.py").write_text("VALUE = 2\n")
    assert not rc.recorded_digest_matches({"digest": legacy}, pkg)


def test_a_version_below_a_recorded_one_fails(ws: Path, capsys: pytest.CaptureFixture) -> None:
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/beta"
    _bump(pkg, "beta-pkg", "0.2.9", _section("0.2.9"))
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "beta-pkg 0.2.9: not above the newest recorded version 0.3.0" in err


def test_a_rewritten_entry_breaks_the_chain(ws: Path, capsys: pytest.CaptureFixture) -> None:
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    (pkg / "src/alpha/__init__.py").write_text("VALUE = 2\n")
    record = ws / rc.RECORD
    lines = record.read_text().splitlines()
    first = json.loads(lines[0])
    first["digest"] = rc.content_digest(pkg)[0]  # "re-release" the changed code as 0.1.0
    record.write_text("\n".join([rc.encode_entry(first), *lines[1:]]) + "\n")
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1
    assert f"{rc.RECORD} line 2: the chain is broken (beta-pkg 0.3.0's prev" in err
    record.write_text(lines[1] + "\n")  # the first entry removed
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "line 1: the chain is broken" in err
    record.write_text("\n".join([lines[0], lines[0]]) + "\n")
    assert "line 2: the chain is broken" in _run(ws, "check", capsys=capsys)[2]


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def _release(ws: Path, capsys: pytest.CaptureFixture) -> None:
    """git init, commit the packages, record them, commit the record (RELEASING.md's order)."""
    _git(ws, "init", "-q", "-b", "main")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "code")
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "release")


def _commit_forged_record(ws: Path, honest: str) -> None:
    """Change alpha's code, "re-release" it as its recorded version (its digest rewritten, every
    later entry re-chained, so the chain alone cannot see it) and commit that."""
    pkg = ws / "packages/alpha"
    (pkg / "src/alpha/__init__.py").write_text("VALUE = 2\n")
    entries = [json.loads(x) for x in honest.splitlines()]
    entries[0]["digest"] = rc.content_digest(pkg)[0]
    lines: list[str] = []
    for entry in entries:
        entry["prev"] = rc.line_hash(lines[-1]) if lines else rc.GENESIS
        lines.append(rc.encode_entry(entry))
    (ws / rc.RECORD).parent.mkdir(parents=True, exist_ok=True)
    (ws / rc.RECORD).write_text("\n".join(lines) + "\n")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "forge")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_record_refuses_uncommitted_files_of_the_package(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    """An untracked file would be digested (and built) but not committed: the next clean
    checkout would fail. Fails on 7db60f3 (record digested the dirty tree)."""
    _git(ws, "init", "-q", "-b", "main")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "code")
    (ws / "packages/alpha/src/alpha/scratch.py").write_text("X = 1\n")
    code, _, err = _run(ws, "record", "--all", capsys=capsys)
    assert code == 1 and "alpha-pkg: uncommitted or untracked files under packages/alpha/" in err
    assert not (ws / rc.RECORD).exists() or (ws / rc.RECORD).read_text() == ""


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_rewritten_record_merged_from_a_side_branch_fails(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    """A forged record committed on a branch made before the record existed, merged with
    ``-X theirs``: the merge's record equals the branch's, so git's default history
    simplification skipped the merge. Fails on 7db60f3 (check passed)."""
    _git(ws, "init", "-q", "-b", "main")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "code")
    _git(ws, "branch", "forge")
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "release")
    honest = (ws / rc.RECORD).read_text()
    _git(ws, "checkout", "-q", "forge")
    _commit_forged_record(ws, honest)
    _git(ws, "checkout", "-q", "main")
    _git(ws, "merge", "-q", "-X", "theirs", "--no-edit", "forge")
    assert (ws / rc.RECORD).read_text() != honest  # the forged record is what main holds now
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "line 1: rewritten in commit" in err


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_rewritten_record_fast_forwarded_from_a_merge_fails(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    """R43 review: a branch that rewrote the record, merged with ``-s ours`` onto main's history
    and then fast-forwarded into main, passed (each commit was compared with its first parent
    only, the forged branch)."""
    _release(ws, capsys)
    honest = (ws / rc.RECORD).read_text()
    _git(ws, "checkout", "-q", "-b", "forge", "HEAD~1")  # before the record existed
    _commit_forged_record(ws, honest)
    _git(ws, "merge", "-q", "-s", "ours", "--no-edit", "main")
    _git(ws, "checkout", "-q", "main")
    _git(ws, "merge", "-q", "--ff-only", "forge")
    assert (ws / rc.RECORD).read_text() != honest
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "line 1: rewritten in commit" in err, err


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_rewritten_record_fails_against_git_history(
    ws: Path, capsys: pytest.CaptureFixture
) -> None:
    _release(ws, capsys)
    assert _run(ws, "check", capsys=capsys)[0] == 0
    pkg = ws / "packages/alpha"
    (pkg / "src/alpha/__init__.py").write_text("VALUE = 2\n")
    # a consistent rewrite: every entry re-chained, so the chain alone cannot see it
    record = ws / rc.RECORD
    entries = [json.loads(x) for x in record.read_text().splitlines()]
    entries[0]["digest"] = rc.content_digest(pkg)[0]
    lines: list[str] = []
    for entry in entries:
        entry["prev"] = rc.line_hash(lines[-1]) if lines else rc.GENESIS
        lines.append(rc.encode_entry(entry))
    record.write_text("\n".join(lines) + "\n")
    assert rc.load_record(ws)[1] == []  # the chain holds
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "line 1: differs from the committed record (HEAD)" in err
    _git(ws, "commit", "-q", "-am", "rewrite")
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and f"{rc.RECORD} line 1: rewritten in commit" in err


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_appending_passes_against_git_history(ws: Path, capsys: pytest.CaptureFixture) -> None:
    _release(ws, capsys)
    pkg = ws / "packages/alpha"
    _bump(pkg, "alpha-pkg", "0.2.0", _section("0.2.0", "Changed", "VALUE is 2"))
    (pkg / "src/alpha/__init__.py").write_text("VALUE = 2\n")
    _git(ws, "commit", "-q", "-am", "alpha 0.2.0")
    assert _run(ws, "record", "--all", capsys=capsys)[0] == 0
    _git(ws, "commit", "-q", "-am", "record alpha 0.2.0")
    code, _, err = _run(ws, "check", "--require-recorded", capsys=capsys)
    assert (code, err) == (0, "")
    (ws / "packages/alpha/src/alpha/new_module.py").write_text("X = 1\n")  # untracked, shipped
    code, _, err = _run(ws, "check", capsys=capsys)
    assert code == 1 and "alpha-pkg 0.2.0: shipped files changed" in err
    (ws / ".gitignore").write_text("new_module.py\n")  # ignored: the build leaves it out too
    assert _run(ws, "check", capsys=capsys)[0] == 0


def test_the_package_license_is_the_root_license(ws: Path, capsys: pytest.CaptureFixture) -> None:
    (ws / "packages/beta/LICENSE").write_text("MIT\n")
    assert "beta/LICENSE differs from the root LICENSE" in _run(ws, "check", capsys=capsys)[2]
    (ws / "packages/beta/LICENSE").unlink()
    assert "beta-pkg 0.3.0: no LICENSE in beta/" in _run(ws, "check", capsys=capsys)[2]


def test_the_real_packages_on_a_copy(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The workspace's own packages, copied (shipped files, changelog, license): each changelog's
    top entry is the package's version, they record, and a change to rf-matid's code fails for
    rf-matid alone."""
    shutil.copy2(ROOT / "LICENSE", tmp_path / "LICENSE")
    for pyproject in sorted((ROOT / "packages").glob("*/pyproject.toml")):
        src, dst = pyproject.parent, tmp_path / "packages" / pyproject.parent.name
        shutil.copytree(src / "src", dst / "src", ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("pyproject.toml", "LICENSE", "CHANGELOG.md", "README.md"):
            shutil.copy2(src / name, dst / name)
    code, out, err = _run(tmp_path, "record", "--all", capsys=capsys)
    assert code == 0, err
    assert out.count(": recorded (") == len(list((ROOT / "packages").glob("*/pyproject.toml")))
    assert _run(tmp_path, "check", "--require-recorded", capsys=capsys)[0] == 0
    cli = tmp_path / "packages/rf-matid/src/rf_matid/cli.py"
    cli.write_text(cli.read_text() + "\n# a change\n")
    version = next(p.version for p in rc.packages(tmp_path) if p.dist == "rf-matid")
    code, _, err = _run(tmp_path, "check", capsys=capsys)
    assert code == 1
    named = [line.split(":")[1].strip() for line in err.splitlines()]
    assert named == [f"rf-matid {version}"]


def test_the_committed_record_is_a_valid_chain() -> None:
    entries, problems = rc.load_record(ROOT)
    assert problems == []
    dists = {p.dist for p in rc.packages(ROOT)}
    assert {e["dist"] for e in entries} <= dists
