from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from iclr26_common.cachedir import build_once, recipe_digest


@dataclass(frozen=True)
class _Recipe:
    steps: int = 10
    lr: float = 1e-3


def _fill(calls: list[str], content: str):
    def fill(staging: Path) -> str:
        calls.append(content)
        (staging / "data.txt").write_text(content)
        return f"built {content}\n"

    return fill


def test_builds_once_then_reuses(tmp_path: Path) -> None:
    calls: list[str] = []
    target = tmp_path / "cache" / "thing"
    assert build_once(target, "done.txt", _fill(calls, "a")) == target
    assert build_once(target, "done.txt", _fill(calls, "b")) == target
    assert calls == ["a"] and (target / "data.txt").read_text() == "a"
    assert (target / "done.txt").read_text() == "built a\n"
    assert [p.name for p in target.parent.iterdir()] == ["thing"]  # no staging left


def test_rebuild_replaces_and_stale_unmarked_folder_is_replaced(tmp_path: Path) -> None:
    calls: list[str] = []
    target = tmp_path / "thing"
    build_once(target, "done.txt", _fill(calls, "a"))
    build_once(target, "done.txt", _fill(calls, "b"), rebuild=True)
    assert (target / "data.txt").read_text() == "b"
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "half.bin").write_bytes(b"x")  # an interrupted build without its marker
    build_once(stale, "done.txt", _fill(calls, "c"))
    assert sorted(p.name for p in stale.iterdir()) == ["data.txt", "done.txt"]


def test_failed_fill_leaves_nothing(tmp_path: Path) -> None:
    def broken(staging: Path) -> str:
        (staging / "half.bin").write_bytes(b"x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        build_once(tmp_path / "thing", "done.txt", broken)
    assert list(tmp_path.iterdir()) == []


def test_recipe_digest_follows_the_recipe() -> None:
    assert recipe_digest(_Recipe()) == recipe_digest({"lr": 1e-3, "steps": 10})
    assert recipe_digest(_Recipe()) != recipe_digest(_Recipe(steps=11))
    assert len(recipe_digest(_Recipe(), chars=16)) == 16
