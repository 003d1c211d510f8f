#!/usr/bin/env python3
"""The release rule of the workspace's packages, checked against a committed, append-only record.

Every member under ``packages/`` releases on its own. A released version is one line of
``releases/records.jsonl``: the distribution, its version, the digest of the files it ships, how
many files, the date, and the hash of the line before it (a chain). Commands:

``check``
    CI's step. For every package, one line per problem, exit 1 if there is any:

    - its shipped files differ from the digest recorded for its current version (code changed
      without a version bump);
    - its version is not above every version recorded for it, or a "Removed" entry comes with a
      bump smaller than the one semantic versioning asks (minor below 1.0, major from 1.0 on);
    - ``CHANGELOG.md`` is missing, its top version section is not the current version, that
      section has no date or no entry, or a recorded version has no section;
    - ``LICENSE`` is missing or differs from the root ``LICENSE``;
    - the record was rewritten: a broken chain, a duplicate version, or (where git history is
      there) a committed version of the record that is not a prefix of a later one or of the
      working tree's.

    A version that is bumped but not yet recorded passes (it is being prepared); ``check`` says
    so in a note line, and ``--require-recorded`` turns those notes into failures.
``record [DIST ...] [--date YYYY-MM-DD]``
    Appends one line per package (all, or those named) whose current version is not recorded yet;
    refuses while ``check`` finds a problem with that package. The date defaults to the date of
    the version's changelog section.
``digest [DIST ...]``
    Prints each package's current digest and file count.
``metadata DIR [--only DIST ...]``
    Validates the wheels and sdists that ``uv build`` wrote into DIR (what ``twine check`` would
    look at and more): core metadata fields, classifiers, the README as long description, the
    license file in both, the wheel's RECORD, and the sdist's PKG-INFO equal to the wheel's.

Shipped files of a package: ``pyproject.toml``, ``LICENSE``, every file under ``src/`` (code,
shipped configs, embedded data, READMEs inside the import package) and what a hatch
``force-include`` table ships from elsewhere, less ``__pycache__/``, ``*.pyc``/``*.pyo``,
``*.egg-info/`` and OS litter (``.DS_Store``, ``Thumbs.db``). The digest is the SHA-256 over the
sorted POSIX relative paths, each with the SHA-256 of its bytes (CRLF read as LF in files without
NUL bytes, so a Windows checkout gives the same digest); ``pyproject.toml`` counts by its parsed
content less ``[dependency-groups]`` and ``[tool.uv]``, which never ship (``sha256-2:`` digests;
records of the first scheme, ``sha256:``, are compared under it). Tests, benchmarks,
``README.md``, ``BENCHMARKS.md`` and ``CHANGELOG.md`` of the package folder are not shipped code.

Standard library only (``packaging``, when importable, adds its own metadata validation).
"""

from __future__ import annotations

import argparse
import base64
import csv
import datetime as dt
import email.message
import email.parser
import hashlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The Python versions ``.ci/run`` tests the packages on (``.ci/setup-uv-env``'s interpreter):
#: the only ``Programming Language :: Python :: 3.N`` classifiers a package may claim.
TESTED_PYTHONS = ("3.11",)
RECORD = "releases/records.jsonl"
GENESIS = "sha256:" + "0" * 64
EXCLUDED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
EXCLUDED_NAMES = {".DS_Store", "Thumbs.db"}
EXCLUDED_SUFFIXES = {".pyc", ".pyo"}
ENTRY_KEYS = ("dist", "version", "digest", "files", "date", "prev")
CHANGE_KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
SECTION = re.compile(r"^## \[(?P<version>[^\]]+)\](?:[ \t]+-[ \t]+(?P<date>\S+))?[ \t]*$")
SUBSECTION = re.compile(r"^### (?P<kind>.+?)[ \t]*$")
VERSION = re.compile(
    r"^(?P<release>\d+(?:\.\d+)*)(?:(?P<pre>a|b|rc)(?P<pre_n>\d+))?"
    r"(?:\.post(?P<post>\d+))?(?:\.dev(?P<dev>\d+))?$"
)
#: A Markdown link or image whose target is neither an absolute URL nor an in-page anchor.
RELATIVE_LINK = re.compile(r"\]\((?!\s*(?:[a-z][a-z0-9+.-]*:|#))\s*<?([^)\s>]+)")
PLACEHOLDER_URL = re.compile(
    r"example\.(?:com|org|net)|localhost|127\.0\.0\.1|your[-_]?(?:org|name|user)|<|TODO|USERNAME",
    re.I,
)


# ---------------------------------------------------------------------------------------------
# packages, digests, versions


@dataclass(frozen=True)
class Package:
    dist: str
    version: str
    path: Path  # the package folder
    project: dict


def packages(root: Path) -> list[Package]:
    found = []
    for pyproject in sorted((root / "packages").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        found.append(
            Package(
                str(project.get("name")), str(project.get("version")), pyproject.parent, project
            )
        )
    return found


def _not_ignored(package_dir: Path) -> set[str] | None:
    """Paths (relative to the package folder) of the files git does not ignore there, tracked or
    not, as the build backend sees them; None outside a git work tree."""
    # .gitignore files only (what hatchling reads), not .git/info/exclude or core.excludesFile: a
    # file only those hide still ships, so it is digested
    listing = _git(
        package_dir,
        "-c",
        "core.excludesFile=",
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-per-directory=.gitignore",
    )
    if listing is None or listing.returncode != 0:
        return None
    return {name for name in listing.stdout.split("\0") if name}


def shipped_files(package_dir: Path) -> list[str]:
    """POSIX paths, relative to the package folder, of the files the package ships (sorted):
    pyproject.toml, LICENSE and src/, less caches and bytecode, and less what git ignores where
    the folder is in a git work tree (hatchling does not ship those either)."""
    files = [name for name in ("pyproject.toml", "LICENSE") if (package_dir / name).is_file()]
    src = package_dir / "src"
    if src.is_dir():
        for path in src.rglob("*"):
            rel = path.relative_to(package_dir)
            if any(p in EXCLUDED_DIRS or p.endswith(".egg-info") for p in rel.parts[:-1]):
                continue
            if not path.is_file() or path.name in EXCLUDED_NAMES:
                continue
            if path.suffix in EXCLUDED_SUFFIXES or path.name.endswith(".egg-info"):
                continue
            files.append(rel.as_posix())
    visible = _not_ignored(package_dir)
    if visible is not None:
        files = [name for name in files if name in visible]
    return sorted(files)


def file_digest(path: Path) -> str:
    data = path.read_bytes()
    if b"\0" not in data:
        data = data.replace(b"\r\n", b"\n")
    return hashlib.sha256(data).hexdigest()


#: The prefix of digests of the current scheme (pyproject.toml without its unshipped tables,
#: force-included files); records written before it carry ``sha256:`` (whole files).
DIGEST_PREFIX = "sha256-2:"


def _force_included(package_dir: Path) -> list[str]:
    """Files hatchling ships from outside ``src/`` (``force-include`` of the wheel or sdist
    target), relative to the package folder; a folder stands for every file under it."""
    try:
        data = tomllib.loads((package_dir / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    targets = data.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {})
    found: set[str] = set()
    for target in ("wheel", "sdist"):
        for source in targets.get(target, {}).get("force-include") or {}:
            path = (package_dir / source).resolve()
            items = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for item in items:
                if item.is_file():
                    try:
                        found.add(item.relative_to(package_dir.resolve()).as_posix())
                    except ValueError:  # outside the package folder: digested by its own path
                        found.add(os.path.relpath(item, package_dir.resolve()).replace(os.sep, "/"))
    return sorted(found)


#: The hatch wheel/sdist settings the digest follows; any other build setting (``shared-data``,
#: ``only-include``, ``sources``, ``artifacts``, build hooks, another build backend) could ship
#: files the digest does not see, and is refused.
ALLOWED_TARGET_KEYS = {"packages", "force-include", "exclude"}


def build_problems(package_dir: Path) -> list[str]:
    """Build settings under which the digest would not cover what the wheel ships: a symbolic
    link among the shipped files (its target ships, and changes unseen), a build backend other
    than hatchling, hatch settings beyond :data:`ALLOWED_TARGET_KEYS`, a hatch build hook."""
    problems = []
    src = package_dir / "src"
    for path in sorted(src.rglob("*")) if src.is_dir() else []:
        if path.is_symlink():
            problems.append(
                f"{path.relative_to(package_dir).as_posix()} is a symbolic link: the wheel ships "
                "its target, which the digest cannot follow (put the files themselves there)"
            )
    try:
        data = tomllib.loads((package_dir / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        return [*problems, f"pyproject.toml: not readable TOML ({error})"]
    backend = data.get("build-system", {}).get("build-backend")
    if backend != "hatchling.build":
        problems.append(f"build backend {backend!r}: the release rule knows hatchling.build only")
    hatch = data.get("tool", {}).get("hatch", {}).get("build", {})
    for key in sorted(set(hatch) - {"targets"}):
        problems.append(f"[tool.hatch.build] {key}: a build setting the digest does not follow")
    for target, settings in sorted(hatch.get("targets", {}).items()):
        for key in sorted(set(settings) - ALLOWED_TARGET_KEYS):
            problems.append(
                f"[tool.hatch.build.targets.{target}] {key}: a build setting the digest does "
                f"not follow (allowed: {', '.join(sorted(ALLOWED_TARGET_KEYS))})"
            )
    if (package_dir / "hatch_build.py").exists():
        problems.append("hatch_build.py: a build hook the digest does not follow")
    return problems


def _pyproject_digest(path: Path) -> str:
    """SHA-256 of pyproject.toml's shipped content: the parsed TOML less ``[dependency-groups]``
    and ``[tool.uv]`` (the wheel's metadata never reads them: editing them needs no bump), as
    canonical JSON (formatting and comments do not count either)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError:  # not TOML: its bytes stand for it
        return file_digest(path)
    data.pop("dependency-groups", None)
    tool = data.get("tool")
    if isinstance(tool, dict):
        tool.pop("uv", None)
        if not tool:  # a table left empty is as if it were never there
            data.pop("tool")
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def content_digest(package_dir: Path, legacy: bool = False) -> tuple[str, int]:
    """``("sha256-2:...", number of files)`` of the package's shipped files: pyproject.toml by
    :func:`_pyproject_digest`, every other file by its bytes, force-included files too.
    ``legacy``: the first scheme (``"sha256:..."``, whole pyproject.toml, ``src/`` only), to
    compare with records written under it."""
    files = shipped_files(package_dir)
    if not legacy:
        files = sorted(set(files) | set(_force_included(package_dir)))
    total = hashlib.sha256()
    for rel in files:
        path = package_dir / rel
        digest = (
            _pyproject_digest(path) if rel == "pyproject.toml" and not legacy else file_digest(path)
        )
        total.update(rel.encode("utf-8") + b"\0" + digest.encode() + b"\n")
    return ("sha256:" if legacy else DIGEST_PREFIX) + total.hexdigest(), len(files)


def recorded_digest_matches(entry: dict, package_dir: Path) -> bool:
    """Whether the package's shipped files are those the record entry digested (under the
    scheme the entry was written with)."""
    legacy = not str(entry["digest"]).startswith(DIGEST_PREFIX)
    return content_digest(package_dir, legacy=legacy)[0] == entry["digest"]


def version_key(version: str) -> tuple | None:
    """Sort key of a PEP 440 version of the plain forms (X.Y.Z, aN/bN/rcN, .postN, .devN)."""
    match = VERSION.match(version)
    if match is None:
        return None
    release = tuple(int(p) for p in match["release"].split("."))
    release = release + (0,) * (4 - len(release)) if len(release) < 4 else release
    pre = (("a", "b", "rc").index(match["pre"]), int(match["pre_n"])) if match["pre"] else (3, 0)
    if match["dev"] is not None and match["pre"] is None and match["post"] is None:
        pre = (-1, 0)  # X.Y.devN sorts before X.YaN
    post = int(match["post"]) if match["post"] is not None else -1
    dev = int(match["dev"]) if match["dev"] is not None else sys.maxsize
    return release, pre, post, dev


def bump_kind(old: str, new: str) -> str:
    """ "major", "minor" or "patch": the largest release component old -> new raises."""
    old_key, new_key = version_key(old), version_key(new)
    if old_key is None or new_key is None:
        return "patch"
    (o_major, o_minor, *_), (n_major, n_minor, *_) = old_key[0], new_key[0]
    if n_major > o_major:
        return "major"
    return "minor" if n_minor > o_minor else "patch"


def required_bump(section: Section, old: str) -> tuple[str, str] | None:
    """The bump ``section``'s entries need from ``old`` and why, or None for a patch: a removal
    or rename (every "Removed" entry, a "Changed" entry that says so) is minor below 1.0 and
    major from 1.0 on; an "Added", "Changed" or "Deprecated" entry is minor (RELEASING.md's
    table)."""
    breaking = section.breaking()
    old_key = version_key(old)
    if breaking:
        major = old_key is not None and old_key[0][0] >= 1
        return (
            "major" if major else "minor"
        ), f"removes or renames something ({breaking[0][:60]!r})"
    kinds = sorted({kind for kind, _ in section.entries} & set(MINOR_KINDS))
    if kinds:
        return "minor", f"lists {', '.join(kinds)} entries"
    return None


# ---------------------------------------------------------------------------------------------
# changelogs


#: Words that make an entry under "Changed" a breaking change (a rename or removal described as
#: a change): such a section needs the bump a "Removed" entry needs.
BREAKING_WORDS = re.compile(
    r"\b(?:renam\w*|remov\w*|drop\w*|delet\w*|replac\w*|no longer|breaking|incompatible"
    r"|is now|are now)\b",
    re.I,
)
#: Headings whose entries need at least a minor bump (new or changed interface, a deprecation);
#: a section with only "Fixed" / "Security" entries may be a patch.
MINOR_KINDS = ("Added", "Changed", "Deprecated", "Removed")
#: What a "Deprecated" entry (or the paragraph under the heading) must say.
REMOVED_IN = re.compile(r"removed in (?:[\w-]+ )?\d+\.\d+", re.I)
ENTRY = re.compile(r"^\s*[-*+] \S")


@dataclass
class Section:
    version: str
    date: str | None
    line: int
    kinds: dict[str, int]  # change kind -> number of entries
    entries: list[tuple[str, str]] = field(default_factory=list)  # (kind, the entry's text)
    notes: dict[str, str] = field(default_factory=dict)  # kind -> text under it before entries

    def breaking(self) -> list[str]:
        """The entries that remove or rename something: every "Removed" entry, and "Changed"
        entries that say so (:data:`BREAKING_WORDS`)."""
        return [
            text
            for kind, text in self.entries
            if kind == "Removed" or (kind == "Changed" and BREAKING_WORDS.search(text))
        ]


def changelog_sections(text: str) -> list[Section]:
    sections: list[Section] = []
    kind = None
    for number, line in enumerate(text.splitlines(), 1):
        heading = SECTION.match(line)
        if heading:
            sections.append(Section(heading["version"], heading["date"], number, {}))
            kind = None
            continue
        sub = SUBSECTION.match(line)
        if sub and sections:
            kind = sub["kind"]
            sections[-1].kinds.setdefault(kind, 0)
            continue
        if sections and kind is not None and ENTRY.match(line):
            sections[-1].kinds[kind] += 1
            sections[-1].entries.append((kind, line.strip()[2:].strip()))
        elif sections and kind is not None and line.strip():
            entries = sections[-1].entries
            if entries and entries[-1][0] == kind:  # an entry's continuation line
                entries[-1] = (kind, f"{entries[-1][1]} {line.strip()}")
            else:  # a paragraph under the heading, before its entries
                notes = sections[-1].notes
                notes[kind] = f"{notes.get(kind, '')} {line.strip()}".strip()
    return sections


def changelog_problems(package: Package, recorded_versions: list[str]) -> list[str]:
    name = f"{package.dist} {package.version}"
    path = package.path / "CHANGELOG.md"
    if not path.is_file():
        return [f"{name}: no CHANGELOG.md ({path.name} in {package.path.name}/)"]
    sections = changelog_sections(path.read_text(encoding="utf-8"))
    released = [s for s in sections if s.version.lower() != "unreleased"]
    if not released:
        return [f"{name}: CHANGELOG.md has no version section ('## [{package.version}] - DATE')"]
    problems = []
    top = released[0]
    if top.version != package.version:
        has = any(s.version == package.version for s in released)
        problems.append(
            f"{name}: CHANGELOG.md's top section is [{top.version}], not [{package.version}]"
            if has
            else f"{name}: CHANGELOG.md has no section for {package.version} "
            f"(its top section is [{top.version}])"
        )
    else:
        try:
            dt.date.fromisoformat(top.date or "")
        except ValueError:
            problems.append(
                f"{name}: CHANGELOG.md line {top.line}: the section needs a date "
                f"('## [{top.version}] - YYYY-MM-DD')"
            )
        unknown = sorted(set(top.kinds) - set(CHANGE_KINDS))
        if unknown:
            problems.append(
                f"{name}: CHANGELOG.md section [{top.version}] has unknown headings "
                f"{', '.join(unknown)} (use {', '.join(CHANGE_KINDS)})"
            )
        unnamed = [
            text
            for kind, text in top.entries
            if kind == "Deprecated"
            and not REMOVED_IN.search(text)
            and not REMOVED_IN.search(top.notes.get("Deprecated", ""))
        ]
        if unnamed:
            problems.append(
                f"{name}: CHANGELOG.md section [{top.version}]: the deprecation {unnamed[0][:50]!r} "
                "does not say the version that removes it ('removed in X.Y.Z')"
            )
        if not sum(top.kinds.values()):
            problems.append(
                f"{name}: CHANGELOG.md section [{top.version}] lists no change "
                "('### Added' ... with '- ' entries)"
            )
    seen: set[str] = set()
    for before, after in itertools.pairwise(released):
        a, b = version_key(before.version), version_key(after.version)
        if a is not None and b is not None and not a > b:
            problems.append(
                f"{name}: CHANGELOG.md sections out of order: [{before.version}] above "
                f"[{after.version}] (newest first)"
            )
    for section in released:
        if section.version in seen:
            problems.append(f"{name}: CHANGELOG.md has two sections [{section.version}]")
        seen.add(section.version)
    for version in recorded_versions:
        if version not in seen:
            problems.append(f"{name}: released version {version} has no CHANGELOG.md section")
    return problems


# ---------------------------------------------------------------------------------------------
# the record


def line_hash(line: str) -> str:
    return "sha256:" + hashlib.sha256(line.encode("utf-8")).hexdigest()


def record_lines(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.split("\n") if line.strip()]


def encode_entry(entry: dict) -> str:
    return json.dumps({key: entry[key] for key in ENTRY_KEYS}, ensure_ascii=True)


def load_record(root: Path) -> tuple[list[dict], list[str]]:
    """The entries of the record and the problems found in it (broken chain, bad lines)."""
    path = root / RECORD
    if not path.is_file():
        return [], []
    entries, problems = [], []
    prev = GENESIS
    for number, line in enumerate(record_lines(path.read_text(encoding="utf-8")), 1):
        where = f"{RECORD} line {number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"{where}: not JSON ({error.msg})")
            prev = line_hash(line)
            continue
        if not isinstance(entry, dict) or set(entry) != set(ENTRY_KEYS):
            problems.append(f"{where}: an entry has exactly the keys {', '.join(ENTRY_KEYS)}")
        elif entry["prev"] != prev:
            problems.append(
                f"{where}: the chain is broken ({entry['dist']} {entry['version']}'s prev is not "
                "the hash of the line before it): a recorded entry was rewritten or removed"
            )
        else:
            entries.append(entry)
        prev = line_hash(line)
    seen: set[tuple[str, str]] = set()
    for entry in entries:
        key = (entry["dist"], entry["version"])
        if key in seen:
            problems.append(f"{RECORD}: {key[0]} {key[1]} is recorded twice")
        seen.add(key)
    return entries, problems


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, encoding="utf-8", check=False
        )
    except OSError:
        return None


def _is_prefix(old: str, new: str) -> int | None:
    """None when the lines of ``old`` open ``new``, else the first line number that differs."""
    old_lines, new_lines = record_lines(old), record_lines(new)
    for number, line in enumerate(old_lines, 1):
        if number > len(new_lines) or new_lines[number - 1] != line:
            return number
    return None


def history_problems(root: Path) -> tuple[list[str], list[str]]:
    """Problems and notes from git: each commit that touched the record only appended to it,
    and the working tree's record extends HEAD's."""
    inside = _git(root, "rev-parse", "--show-toplevel")
    if inside is None or inside.returncode != 0:
        return [], [f"note: no git history here: {RECORD} checked by its chain only"]
    if Path(inside.stdout.strip()).resolve() != root.resolve():
        return [], [f"note: {root} is not a repository root: {RECORD} checked by its chain only"]
    problems: list[str] = []
    path = root / RECORD
    head = _git(root, "show", f"HEAD:{RECORD}")
    if head is not None and head.returncode == 0:
        if not path.is_file():
            problems.append(f"{RECORD}: committed at HEAD but missing from the working tree")
        else:
            differs = _is_prefix(head.stdout, path.read_text(encoding="utf-8"))
            if differs is not None:
                problems.append(
                    f"{RECORD} line {differs}: differs from the committed record (HEAD): "
                    "entries are appended, never rewritten"
                )
    notes: list[str] = []
    shallow = _git(root, "rev-parse", "--is-shallow-repository")
    if shallow is not None and shallow.stdout.strip() == "true":
        notes.append(
            f"note: shallow clone: the history of {RECORD} is checked only as far as it goes "
            "(git fetch --unshallow checks all of it)"
        )
    # --full-history: a merge whose result equals one parent's record is listed too (the default
    # history simplification would follow that parent alone and skip the merge). Each commit is
    # compared with every parent: a merge (even one a fast-forward later put on the main line)
    # must extend the record of each side it joins, so a side branch that rewrote the record,
    # merged with "-s ours", still fails.
    log = _git(root, "log", "--full-history", "--format=%H %P", "--", RECORD)
    for line in log.stdout.splitlines() if log is not None and log.returncode == 0 else []:
        commit, *parents = line.split()
        after = _git(root, "show", f"{commit}:{RECORD}")
        for parent in parents:
            before = _git(root, "show", f"{parent}:{RECORD}")
            if before is None or before.returncode != 0:
                continue  # a side without a record yet, or the edge of a shallow clone
            if after is None or after.returncode != 0:
                problems.append(f"{RECORD}: deleted in commit {commit[:10]}")
                break
            differs = _is_prefix(before.stdout, after.stdout)
            if differs is not None:
                problems.append(
                    f"{RECORD} line {differs}: rewritten in commit {commit[:10]} (against its "
                    f"parent {parent[:10]}; entries are appended, never rewritten)"
                )
                break
    return problems, notes


# ---------------------------------------------------------------------------------------------
# check / record


def package_problems(package: Package, entries: list[dict], root: Path) -> tuple[list[str], bool]:
    """The package's problems, and whether its current version is recorded."""
    name = f"{package.dist} {package.version}"
    problems: list[str] = []
    if version_key(package.version) is None:
        problems.append(f"{name}: the version is not of the form X.Y.Z (PEP 440)")
    mine = [e for e in entries if normalize(e["dist"]) == normalize(package.dist)]
    problems += changelog_problems(package, [e["version"] for e in mine])
    license_file, root_license = package.path / "LICENSE", root / "LICENSE"
    if not license_file.is_file():
        problems.append(f"{name}: no LICENSE in {package.path.name}/ (copy the root LICENSE)")
    elif root_license.is_file() and file_digest(license_file) != file_digest(root_license):
        problems.append(f"{name}: {package.path.name}/LICENSE differs from the root LICENSE")
    problems += [f"{name}: {p}" for p in build_problems(package.path)]
    current = [e for e in mine if e["version"] == package.version]
    if current:
        if not recorded_digest_matches(current[0], package.path):
            problems.append(
                f"{name}: shipped files changed since {package.version} was recorded "
                f"({current[0]['date']}): bump the version in {package.path.name}/pyproject.toml "
                "and add its CHANGELOG.md section"
            )
        return problems, True
    newest = max(
        (e["version"] for e in mine if version_key(e["version"]) is not None),
        key=version_key,
        default=None,
    )
    key = version_key(package.version)
    if newest is not None and key is not None:
        if not key > version_key(newest):
            problems.append(f"{name}: not above the newest recorded version {newest}")
        else:
            sections = changelog_sections(
                (package.path / "CHANGELOG.md").read_text(encoding="utf-8")
                if (package.path / "CHANGELOG.md").is_file()
                else ""
            )
            top = next((s for s in sections if s.version == package.version), None)
            needed = required_bump(top, newest) if top is not None else None
            order = ("patch", "minor", "major")
            if needed and order.index(bump_kind(newest, package.version)) < order.index(needed[0]):
                problems.append(
                    f"{name}: its changelog {needed[1]}, which needs a {needed[0]} bump "
                    f"from {newest}"
                )
    return problems, False


def check(root: Path, require_recorded: bool = False) -> tuple[list[str], list[str]]:
    entries, problems = load_record(root)
    more, notes = history_problems(root)
    problems += more
    for package in packages(root):
        found, recorded = package_problems(package, entries, root)
        problems += found
        if not recorded:
            line = (
                f"{package.dist} {package.version}: not recorded yet (record it when it is "
                f"released: python tools/release_check.py record {package.dist})"
            )
            if require_recorded:
                problems.append(line)
            else:
                notes.append(f"note: {line}")
    return problems, notes


_LOWER_BOUND = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9_.-]*)\s*(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9.]*)"
)


def unreleased_requirements(
    package: Package, entries: list[dict], known: dict[str, Package], recording: set[str]
) -> list[str]:
    """Problems for ``package``'s lower bounds on workspace packages (``iclr26-common[lightning]
    >=0.9``) that no recorded release satisfies: published alone, the package would not
    install. A bound met by a package recorded in the same command counts as released."""
    problems = []
    by_name = {normalize(dist): dist for dist in known}
    for requirement in package.project.get("dependencies", []):
        match = _LOWER_BOUND.match(requirement)
        if match is None or normalize(match.group(1)) not in by_name:
            continue
        dist, bound = by_name[normalize(match.group(1))], match.group(2)
        wanted = version_key(bound)
        released = [e["version"] for e in entries if e.get("dist") == dist]
        if dist in recording:
            released.append(known[dist].version)
        keys = [version_key(v) for v in released]
        if wanted is None or any(k is not None and k >= wanted for k in keys):
            continue
        problems.append(
            f"{package.dist} {package.version}: requires {dist}>={bound}, which is not released "
            f"(recorded: {', '.join(released) or 'none'}); record {dist} first or in the same "
            "command"
        )
    return problems


def record(root: Path, names: list[str], date: str | None) -> tuple[list[str], list[str]]:
    """Appends entries; returns (problems, lines written to the user)."""
    entries, problems = load_record(root)
    more, _ = history_problems(root)
    problems += more
    if problems:
        return problems, []
    known = {p.dist: p for p in packages(root)}
    unknown = [n for n in names if n not in known]
    if unknown:
        return [f"unknown package {n} (packages: {', '.join(sorted(known))})" for n in unknown], []
    chosen = [known[n] for n in names] if names else list(known.values())
    for package in chosen:
        # The digest must be that of committed files: an untracked or modified file would be
        # recorded (and built) but not committed, and the next clean checkout would fail.
        status = _git(root, "status", "--porcelain", "--", str(package.path.relative_to(root)))
        if status is not None and status.returncode == 0 and status.stdout.strip():
            problems.append(
                f"{package.dist}: uncommitted or untracked files under "
                f"{package.path.relative_to(root).as_posix()}/ (commit or remove them first)"
            )
    recording = {package.dist for package in chosen}
    for package in chosen:
        problems += unreleased_requirements(package, entries, known, recording)
    if problems:
        return problems, []
    out: list[str] = []
    path = root / RECORD
    lines = record_lines(path.read_text(encoding="utf-8")) if path.is_file() else []
    new_lines: list[str] = []
    for package in chosen:
        found, recorded = package_problems(package, entries, root)
        if found:
            problems += found
            continue
        if recorded:
            out.append(f"{package.dist} {package.version}: already recorded")
            continue
        section = next(
            s
            for s in changelog_sections((package.path / "CHANGELOG.md").read_text(encoding="utf-8"))
            if s.version == package.version
        )
        digest, count = content_digest(package.path)
        entry = {
            "dist": package.dist,
            "version": package.version,
            "digest": digest,
            "files": count,
            "date": date or section.date,
            "prev": line_hash((lines + new_lines)[-1]) if lines + new_lines else GENESIS,
        }
        new_lines.append(encode_entry(entry))
        out.append(f"{package.dist} {package.version}: recorded ({digest[:19]}..., {count} files)")
    if problems:
        return problems, []
    if new_lines:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines + new_lines), encoding="utf-8")
    return [], out


# ---------------------------------------------------------------------------------------------
# metadata of built wheels and sdists


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _parse_metadata(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text)


def _description(message: email.message.Message) -> str:
    payload = message.get_payload()
    return (payload if isinstance(payload, str) else "").replace("\r\n", "\n").strip()


def metadata_problems(message: email.message.Message, text: str, package: Package) -> list[str]:
    problems: list[str] = []
    version = message.get("Metadata-Version", "")
    if version_key(version) is None or version_key(version) < version_key("2.4"):
        problems.append(
            f"Metadata-Version {version or '(none)'}: 2.4 needed for License-Expression"
        )
    if normalize(message.get("Name", "")) != normalize(package.dist):
        problems.append(f"Name {message.get('Name')!r} is not {package.dist!r}")
    if message.get("Version") != package.version:
        problems.append(f"Version {message.get('Version')!r} is not {package.version!r}")
    summary = message.get("Summary", "")
    if not summary.strip() or "\n" in summary:
        problems.append("Summary missing or on several lines")
    if not message.get("Requires-Python"):
        problems.append("Requires-Python missing")
    license_expression = package.project.get("license")
    if message.get("License-Expression") != license_expression:
        problems.append(
            f"License-Expression {message.get('License-Expression')!r} is not {license_expression!r}"
        )
    if message.get("License") is not None:
        problems.append("the legacy License field beside License-Expression")
    if "LICENSE" not in message.get_all("License-File", []):
        problems.append("no License-File: LICENSE")
    classifiers = message.get_all("Classifier", [])
    if len(set(classifiers)) != len(classifiers):
        problems.append("duplicate classifiers")
    for prefix in ("Development Status :: ", "Programming Language :: Python :: 3.", "Topic :: "):
        if not any(c.startswith(prefix) for c in classifiers):
            problems.append(f"no classifier '{prefix}...'")
    for c in classifiers:
        version = c.removeprefix("Programming Language :: Python :: ")
        if re.fullmatch(r"3\.\d+", version) and version not in TESTED_PYTHONS:
            problems.append(
                f"classifier {c!r}: CI tests on Python {', '.join(TESTED_PYTHONS)} only "
                "(claim only the versions .ci/run tests)"
            )
    licensed = [c for c in classifiers if c.startswith("License ::")]
    if licensed:
        problems.append(
            f"license classifiers beside License-Expression ({'; '.join(licensed)}): "
            "PEP 639 replaces them, indexes refuse both"
        )
    try:
        import trove_classifiers  # type: ignore[import-not-found]
    except ImportError:
        problems.append(
            "classifiers not validated: install trove-classifiers (the root dev group has it)"
        )
    else:
        for c in classifiers:
            if c not in trove_classifiers.classifiers and not c.startswith("Private ::"):
                problems.append(f"unknown classifier {c!r}")
    for requirement in message.get_all("Requires-Dist", []):
        if re.search(r"\s@\s", requirement.split(";", 1)[0]):
            problems.append(f"Requires-Dist {requirement!r}: a direct URL, which indexes refuse")
    if len(message.get("Summary", "")) > 512:
        problems.append("Summary longer than 512 characters (indexes refuse it)")
    if not message.get("Keywords", "").strip():
        problems.append("Keywords missing")
    if not message.get("Description-Content-Type", "").startswith("text/markdown"):
        problems.append(
            f"Description-Content-Type {message.get('Description-Content-Type')!r} "
            "is not text/markdown"
        )
    readme = package.path / "README.md"
    description = _description(message)
    if not description:
        problems.append("no long description (the README)")
    elif readme.is_file():
        text_of_readme = readme.read_text(encoding="utf-8").replace("\r\n", "\n").strip()
        if description != text_of_readme:
            problems.append("the long description is not the package's README.md")
    for target in RELATIVE_LINK.findall(description):
        problems.append(
            f"the long description links to {target!r}: a registry's page cannot resolve a "
            "relative link (name the file as text, or link an absolute https:// address)"
        )
    for url in [message.get("Home-page", ""), *message.get_all("Project-URL", [])]:
        if url and PLACEHOLDER_URL.search(url):
            problems.append(f"placeholder URL {url!r}")
    try:
        from packaging.metadata import Metadata  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        try:
            Metadata.from_email(text, validate=True)
        except Exception as error:  # an ExceptionGroup of InvalidMetadata
            errors = getattr(error, "exceptions", [error])
            problems += [f"packaging: {e}" for e in errors]
    return problems


def wheel_problems(path: Path, package: Package) -> tuple[list[str], str | None]:
    """Problems of one wheel, and its METADATA text."""
    problems = []
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        info = sorted(
            {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
        )
        if len(info) != 1:
            return [f"{len(info)} .dist-info folders"], None
        (info_dir,) = info
        text = wheel.read(f"{info_dir}/METADATA").decode("utf-8")
        problems += metadata_problems(_parse_metadata(text), text, package)
        license_name = f"{info_dir}/licenses/LICENSE"
        if license_name not in names:
            problems.append(f"{license_name} is not in the wheel")
        elif (package.path / "LICENSE").is_file() and wheel.read(license_name).replace(
            b"\r\n", b"\n"
        ) != (package.path / "LICENSE").read_bytes().replace(b"\r\n", b"\n"):
            problems.append(f"{license_name} is not the package's LICENSE")
        wheel_file = wheel.read(f"{info_dir}/WHEEL").decode("utf-8")
        if "Root-Is-Purelib: true" not in wheel_file:
            problems.append("WHEEL: not Root-Is-Purelib: true")
        rows = list(csv.reader(io.StringIO(wheel.read(f"{info_dir}/RECORD").decode("utf-8"))))
        listed = {row[0]: row[1] for row in rows if row}
        for name in names:
            if name.endswith("/") or name == f"{info_dir}/RECORD":
                continue
            if name not in listed:
                problems.append(f"RECORD does not list {name}")
                continue
            digest = (
                "sha256="
                + base64.urlsafe_b64encode(hashlib.sha256(wheel.read(name)).digest())
                .rstrip(b"=")
                .decode()
            )
            if listed[name] != digest:
                problems.append(f"RECORD: wrong hash for {name}")
    return problems, text


COMPARED = (
    "Metadata-Version",
    "Name",
    "Version",
    "Summary",
    "Keywords",
    "License-Expression",
    "License-File",
    "Classifier",
    "Requires-Python",
    "Requires-Dist",
    "Provides-Extra",
    "Description-Content-Type",
    "Project-URL",
)


def sdist_problems(path: Path, package: Package, wheel_text: str | None) -> list[str]:
    problems = []
    base = path.name.removesuffix(".tar.gz")
    with tarfile.open(path) as sdist:
        members = {m.name for m in sdist.getmembers()}
        for needed in ("PKG-INFO", "LICENSE", "README.md", "pyproject.toml"):
            if f"{base}/{needed}" not in members:
                problems.append(f"{needed} is not in the sdist")
        if f"{base}/PKG-INFO" not in members:
            return problems
        handle = sdist.extractfile(f"{base}/PKG-INFO")
        text = handle.read().decode("utf-8") if handle else ""
    message = _parse_metadata(text)
    problems += [f"PKG-INFO: {p}" for p in metadata_problems(message, text, package)]
    if wheel_text is not None:
        wheel_message = _parse_metadata(wheel_text)
        for field in COMPARED:
            if message.get_all(field, []) != wheel_message.get_all(field, []):
                problems.append(f"PKG-INFO's {field} differs from the wheel's METADATA")
        if _description(message) != _description(wheel_message):
            problems.append("PKG-INFO's description differs from the wheel's")
    return problems


def metadata(root: Path, folder: Path, only: list[str]) -> list[str]:
    problems = []
    chosen = [p for p in packages(root) if not only or p.dist in only]
    missing = sorted(set(only) - {p.dist for p in chosen})
    problems += [f"unknown package {name}" for name in missing]
    for package in chosen:
        stem = f"{normalize(package.dist).replace('-', '_')}-{package.version}"
        wheels = sorted(folder.glob(f"{stem}-*.whl"))
        sdist = folder / f"{stem}.tar.gz"
        name = f"{package.dist} {package.version}"
        if len(wheels) != 1:
            problems.append(f"{name}: {len(wheels)} wheels {stem}-*.whl in {folder} (one expected)")
            wheel_text = None
        else:
            found, wheel_text = wheel_problems(wheels[0], package)
            problems += [f"{wheels[0].name}: {p}" for p in found]
        if not sdist.is_file():
            problems.append(f"{name}: no sdist {sdist.name} in {folder}")
        else:
            problems += [f"{sdist.name}: {p}" for p in sdist_problems(sdist, package, wheel_text)]
    return problems


# ---------------------------------------------------------------------------------------------


def wheel_members(path: Path) -> dict[str, str]:
    """``{member name: sha256 of its bytes}`` of a wheel (zip timestamps and order ignored)."""
    with zipfile.ZipFile(path) as archive:
        return {name: hashlib.sha256(archive.read(name)).hexdigest() for name in archive.namelist()}


def same_wheels(built: Path, direct: Path) -> list[str]:
    """Problems where the wheels in ``built`` (each built from its sdist, ``uv build``) and in
    ``direct`` (built from the source tree, ``uv build --wheel``) differ: a wheel missing from
    either folder, or members added, removed or changed (an sdist that leaves out a file the
    wheel needs, or a build that reads files outside the sdist)."""
    problems = []
    ours = {p.name: p for p in built.glob("*.whl")}
    theirs = {p.name: p for p in direct.glob("*.whl")}
    for name in sorted(ours.keys() ^ theirs.keys()):
        where = built if name in ours else direct
        problems.append(f"{name}: only in {where}")
    for name in sorted(ours.keys() & theirs.keys()):
        a, b = wheel_members(ours[name]), wheel_members(theirs[name])
        changed = sorted(m for m in a.keys() & b.keys() if a[m] != b[m])
        for label, members in (
            ("only in the wheel built from the sdist", sorted(a.keys() - b.keys())),
            ("only in the wheel built from the tree", sorted(b.keys() - a.keys())),
            ("differs between the two", changed),
        ):
            if members:
                problems.append(f"{name}: {label}: {', '.join(members[:5])}")
    if not ours:
        problems.append(f"{built}: no wheel")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="release_check.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="workspace root (default: %(default)s)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check_parser = commands.add_parser("check", help="the release rule of every package (CI)")
    check_parser.add_argument(
        "--require-recorded",
        action="store_true",
        help="fail for a version that is not recorded yet (a release job)",
    )
    record_parser = commands.add_parser("record", help="append the current versions to the record")
    record_parser.add_argument("dists", nargs="*", metavar="DIST")
    record_parser.add_argument(
        "--all",
        action="store_true",
        help="every package whose version is not recorded yet (a team names its own package)",
    )
    record_parser.add_argument("--date", help="YYYY-MM-DD (default: the changelog section's date)")
    digest_parser = commands.add_parser("digest", help="print the shipped files' digests")
    digest_parser.add_argument("dists", nargs="*", metavar="DIST")
    metadata_parser = commands.add_parser("metadata", help="validate built wheels and sdists")
    metadata_parser.add_argument("folder", type=Path, metavar="DIR")
    metadata_parser.add_argument("--only", nargs="*", default=[], metavar="DIST")
    same_parser = commands.add_parser(
        "same-wheels", help="the wheels built from the sdists equal those built from the tree"
    )
    same_parser.add_argument("built", type=Path, metavar="DIR", help="uv build's output")
    same_parser.add_argument("direct", type=Path, metavar="TREE_DIR", help="uv build --wheel's")
    args = parser.parse_args(argv)
    root = args.root.resolve()

    if args.command == "same-wheels":
        problems = same_wheels(args.built, args.direct)
        for line in problems:
            print(f"same wheels: {line}", file=sys.stderr)
        if not problems:
            count = len(list(args.built.glob("*.whl")))
            print(f"same wheels: {count} wheel(s) built from their sdists equal the tree's")
        return 1 if problems else 0

    if args.command == "check":
        problems, notes = check(root, args.require_recorded)
        for line in notes:
            print(line)
        for line in problems:
            print(f"release check: {line}", file=sys.stderr)
        count = len(packages(root))
        print(
            f"release check: {len(problems)} problem(s) in {count} packages"
            if problems
            else f"release check: {count} packages ok"
        )
        return 1 if problems else 0
    if args.command == "record":
        if args.date is not None:
            try:
                dt.date.fromisoformat(args.date)
            except ValueError:
                parser.error(f"--date {args.date!r} is not YYYY-MM-DD")
        if bool(args.dists) == args.all:
            parser.error("record: name the package(s) to record, or give --all (not both)")
        problems, lines = record(root, args.dists, args.date)
        for line in problems:
            print(f"release record: {line}", file=sys.stderr)
        for line in lines:
            print(line)
        return 1 if problems else 0
    if args.command == "digest":
        for package in packages(root):
            if not args.dists or package.dist in args.dists:
                digest, count = content_digest(package.path)
                print(f"{package.dist} {package.version} {digest} {count} files")
        return 0
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")
    problems = metadata(root, args.folder.resolve(), args.only)
    for line in problems:
        print(f"release metadata: {line}", file=sys.stderr)
    if not problems:
        print(f"release metadata: the wheels and sdists in {args.folder} are valid")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
