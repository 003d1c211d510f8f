"""Deprecations end when they promised to (issues 36/43).

A renamed flag (``method_cli.renamed_flags(..., removed_in="0.9.0")``) or a moved public name
(``iclr26_common.exports.moved_names(..., removed_in="llm-methods 0.9.0")``) keeps working for
one minor version and names the version that removes it. The promises are read from the source
(:func:`promises`, with :mod:`ast`), so a test fails

- once llm-methods reaches a promised version while the old spelling is still there (on 7db60f3
  the promised version moved with every release: "until the next minor version"), and
- once llm-methods reaches the version that deprecated a spelling (one minor before its removal)
  while the changelog's "Deprecated" section of that version does not name it with the same
  removal version (e.g. ``--stage.seed`` announced as "removed in 0.8.0" in code released with
  0.8.0).

The renames of 0.7.0 (``perk eval --ckpt``, ``mas2 --local-model``, ``adl --ft``/``--base``,
``mbok eval --text``, ``mbok finetune --model.X``/``--data.X``, ``remix fit
--model.init_args.policy``, ``remix.model.RLRunner``/``collate_rollouts``) were removed in 0.8.0;
the CLI tests of each command family check that the old spelling is refused as an unknown option.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import llm_methods

SOURCE = Path(llm_methods.__file__).parent
CHANGELOG = SOURCE.parents[1] / "CHANGELOG.md"
#: the calls that keep an old spelling working, with the argument holding the old names
DEPRECATING_CALLS = {"renamed_flags": 1, "moved_names": 1}


@dataclass(frozen=True)
class Promise:
    """Old spellings kept working by one call, and the version that removes them."""

    where: str  # file:line
    names: tuple[str, ...]  # the old spellings (flags or public names)
    removed_in: str  # "0.9.0"


def key(version: str) -> tuple[int, ...]:
    """``"llm-methods 0.9.0"`` / ``"0.9.0"`` -> ``(0, 9, 0)``."""
    numbers = re.findall(r"\d+", version)[:3]
    assert len(numbers) == 3, f"not a version: {version!r}"
    return tuple(int(x) for x in numbers)


def _constants(tree: ast.Module) -> dict[str, object]:
    """Module-level ``NAME = <literal>`` assignments (strings, dicts of strings)."""
    found: dict[str, object] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name):
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:
                pass
    return found


def _value(node: ast.expr, constants: dict[str, object], where: str) -> object:
    """A literal, or a module-level constant named by ``node``; anything else fails the test
    (a promise this test cannot read would escape it)."""
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise AssertionError(
            f"{where}: give the old names and removed_in as literals or module constants"
        ) from None


def _line(node: ast.Call) -> int:
    return node.lineno


def promises(source: Path) -> list[Promise]:
    """Every :data:`DEPRECATING_CALLS` call under ``source``, read without importing it."""
    found = []
    for path in sorted(source.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _constants(tree)
        calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=_line)
        for node in calls:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in DEPRECATING_CALLS:
                continue
            where = f"{path.relative_to(source.parent)}:{node.lineno}"
            keywords = {k.arg: k.value for k in node.keywords}
            assert "removed_in" in keywords, f"{where}: {name}() without removed_in"
            removed_in = _value(keywords["removed_in"], constants, where)
            old = _value(node.args[DEPRECATING_CALLS[name]], constants, where)
            assert isinstance(removed_in, str) and isinstance(old, dict), where
            version = ".".join(map(str, key(removed_in)))
            found.append(Promise(where, tuple(sorted(old)), version))
    return found


def changelog_sections(text: str) -> dict[str, str]:
    """``{"0.8.0": "<the section's Deprecated text>"}`` of a Keep a Changelog file."""
    sections = {}
    for part in re.split(r"^## \[", text, flags=re.M)[1:]:
        version, _, body = part.partition("]")
        deprecated = body.split("\n### Deprecated", 1)
        sections[version] = deprecated[1].split("\n### ", 1)[0] if len(deprecated) == 2 else ""
    return sections


def problems(version: str, found: list[Promise], changelog: str | None) -> list[str]:
    """What is wrong at llm-methods ``version``: a promise that is due, or (with a changelog) a
    due deprecation the changelog does not name with the same removal version."""
    sections = changelog_sections(changelog) if changelog is not None else {}
    out = []
    for promise in found:
        removal = key(promise.removed_in)
        if key(version) >= removal:
            out.append(f"{promise.where}: {promise.names} promised removal in {promise.removed_in}")
        deprecated_in = f"{removal[0]}.{removal[1] - 1}.0"  # one minor version before
        if changelog is None or key(version) < key(deprecated_in):
            continue
        text = sections.get(deprecated_in, "")
        said = re.search(rf"removed in (llm-methods )?{re.escape(promise.removed_in)}\b", text)
        missing = [name for name in promise.names if name not in text]
        if missing or not said:
            out.append(
                f"CHANGELOG [{deprecated_in}] Deprecated: name {missing or promise.names} "
                f"'removed in {promise.removed_in}' ({promise.where})"
            )
    return out


def test_no_deprecation_outlives_its_promised_version() -> None:
    """At the installed version: nothing due remains, and the changelog (in a source checkout)
    names each deprecation with its removal version once that version is released."""
    changelog = CHANGELOG.read_text(encoding="utf-8") if CHANGELOG.is_file() else None
    assert problems(llm_methods.__version__, promises(SOURCE), changelog) == []


def test_at_0_8_0_the_renames_of_0_7_0_are_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """llm-methods 0.8.0 (patched in before the release bump): every 0.7.0 rename and moved name
    is gone (the changelog of 0.8.0 is checked by the test above once the version is bumped).
    The one rename left is ``antibody --stage.seed``, removed in 0.9.0 (read from the source,
    so the reader is seen to find a promise)."""
    monkeypatch.setattr(llm_methods, "__version__", "0.8.0")
    found = promises(SOURCE)
    assert problems(llm_methods.__version__, found, None) == []
    assert [(p.names, p.removed_in) for p in found] == [(("--stage.seed",), "0.9.0")]
    assert found[0].where.startswith("llm_methods/antibody/cli.py:")


PLANTED = """
from iclr26_common.exports import moved_names
from llm_methods.method_cli import renamed_flags

REMOVED_IN = "0.9.0"
RENAMES = {"--old": "--new"}


def main(argv):
    return renamed_flags(argv, RENAMES, "prog", removed_in=REMOVED_IN)


__getattr__ = moved_names(__name__, {"Thing": "pkg.new"}, removed_in="llm-methods 0.9.0")
"""


def test_a_planted_promise_fails_when_due_or_missing_from_the_changelog(tmp_path: Path) -> None:
    """The check can hold and fail: a rename promising 0.9.0 is fine at 0.8.x when the 0.8.0
    changelog names it with 0.9.0; it fails at 0.9.0 (still there), when the changelog names
    another version (the ``--stage.seed`` mistake: "removed in 0.8.0") or leaves it out; an
    unreadable promise (a computed version) fails rather than escaping the check."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "cli.py").write_text(PLANTED)
    found = promises(tmp_path / "pkg")
    assert [(p.names, p.removed_in) for p in found] == [
        (("--old",), "0.9.0"),
        (("Thing",), "0.9.0"),
    ]
    good = "## [0.8.0]\n\n### Deprecated\n\n- `--old`, `Thing`: removed in 0.9.0.\n\n### Fixed\n"
    assert problems("0.7.0", found, None) == [] and problems("0.8.1", found, good) == []
    assert problems("0.7.0", found, "## [0.7.0]\n") == []  # not yet released: not yet listed
    assert len(problems("0.9.0", found, good)) == 2  # due and still there
    assert len(problems("0.8.0", found, good.replace("0.9.0.", "0.8.0."))) == 2
    assert len(problems("0.8.0", found, good.replace("`--old`, ", ""))) == 1
    assert (
        len(problems("0.8.0", found, "## [0.8.0]\n\n### Added\n\n- `--old` removed in 0.9.0")) == 2
    )
    (tmp_path / "pkg" / "cli.py").write_text(PLANTED.replace('"0.9.0"\n', 'f"0.{9}.0"\n', 1))
    with pytest.raises(AssertionError, match="as literals or module constants"):
        promises(tmp_path / "pkg")
