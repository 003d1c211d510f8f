from __future__ import annotations

import dataclasses

import pytest
import torch

from llm_methods.lm import continuation_logprobs
from llm_methods.lm.threads import one_thread
from llm_methods.suit import world_model as wm
from llm_methods.suit.data import build_requests
from llm_methods.suit.editors import EditConfig, Editor, fresh_copy
from llm_methods.suit.keys import key_second_moments, subject_basis
from llm_methods.suit.world_experiment import EDIT, world_stats_chunks

# small enough to train in a few seconds on one core, big enough to memorise most of its world
SPEC = wm.WorldSpec(n_subjects=6, hidden=32, n_layers=4, steps=100, batch_size=64,
                    vocab_size=512, lr=2e-2)  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("suit-world")
    folder = wm.ensure_world_model(SPEC, cache_dir=root)
    lm, known, info = wm.load_world(folder)
    return root, folder, lm, known, info


def test_model_knows_most_facts_and_targets_are_in_world(world) -> None:  # type: ignore[no-untyped-def]
    _, _, lm, known, info = world
    assert info["facts"] == 3 * SPEC.n_subjects
    assert info["known"] == len(known) >= 0.6 * info["facts"]
    objects = {rel: set(objs) for rel, _, _, objs in wm.world_facts(SPEC)}
    texts = set(wm.world_texts(SPEC))
    for r in known:
        assert r.target_new.strip() in objects[r.relation]
        assert r.target_new != r.target_true
        assert f"{r.text} {r.target_true.strip()}." in texts  # the rewrite prompt was trained on
        for p in r.paraphrase_prompts:  # paraphrases are in-distribution phrasings
            assert f"{p} {r.target_true.strip()}." in texts
        # in-world objects are short token sequences, not spelled byte by byte
        assert len(lm.tokenizer(r.target_new, add_special_tokens=False).input_ids) <= 3


def test_cache_reuses_folder(world, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    root, folder, *_ = world
    stamp = (folder / wm.MARKER).stat().st_mtime_ns

    def boom(spec):  # type: ignore[no-untyped-def]
        raise AssertionError("rebuilt a cached world model")

    monkeypatch.setattr(wm, "train_world_model", boom)
    assert wm.ensure_world_model(SPEC, cache_dir=root) == folder
    assert (folder / wm.MARKER).stat().st_mtime_ns == stamp
    other = dataclasses.replace(SPEC, seed=1)
    assert other.digest() != SPEC.digest()


def test_rebuild_from_the_same_spec_is_identical(world, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 27 saw SUIT's efficacy change (69 -> 84.4) after a rebuild of the same spec: a
    second build in another folder must give the same tokenizer, weights and requests."""
    _, folder, lm, known, info = world
    again = wm.ensure_world_model(SPEC, cache_dir=tmp_path)
    lm2, known2, info2 = wm.load_world(again)
    assert (again / "tokenizer.json").read_text() == (folder / "tokenizer.json").read_text()
    a, b = lm.model.state_dict(), lm2.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert known2 == known and info2["final_loss"] == info["final_loss"]


def _margin(lm, reqs) -> float:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        new = continuation_logprobs(lm, [r.text for r in reqs], [r.target_new for r in reqs])
        true = continuation_logprobs(lm, [r.text for r in reqs], [r.target_true for r in reqs])
    return float((new - true).mean())


def test_locate_then_edit_moves_facts(world, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, _, lm, known, _ = world
    reqs = known[:2]
    cfg = EditConfig(**EDIT)
    with one_thread():
        chunks = world_stats_chunks(lm, SPEC)
        stats = key_second_moments(lm, cfg.layers, chunks, "test", cache_dir=tmp_path)
        basis = subject_basis(
            lm, cfg.layers, ["Zorb", "Quilm"], list(wm.prompts().values()), cfg.tau
        )
        before = _margin(lm, reqs)
        assert before < 0  # known facts: the true object wins
        moved = {}
        for method in ("rome", "memit", "alphaedit", "suit"):
            editor = Editor(fresh_copy(lm), method, cfg, stats, basis)
            editor.edit(reqs)
            moved[method] = _margin(editor.lm, reqs) - before
        # log p(new) - log p(true) rises by more than a nat for every method (measured 8.5 /
        # 8.9 / 3.2 / 3.4 with the official value loop; before issue 27 the value loop reversed
        # the KL and never stopped early, and SUIT lowered the margin, -2.3)
        for method in ("rome", "memit", "alphaedit", "suit"):
            assert moved[method] > 1.0, (method, moved)
        assert _margin(lm, reqs) == pytest.approx(before)  # fresh copies: the model is untouched


def test_bad_input_raises_naming_the_field(tmp_path) -> None:
    with pytest.raises(ValueError, match="n_subjects"):
        wm.WorldSpec(n_subjects=1)
    with pytest.raises(ValueError, match="heads"):
        wm.WorldSpec(hidden=30, heads=4)
    with pytest.raises(ValueError, match="seq_len"):
        wm.train_world_model(dataclasses.replace(SPEC, seq_len=4, steps=1))
    with pytest.raises(ValueError, match="not a world-model folder"):
        wm.load_world(tmp_path)
    with pytest.raises(ValueError, match="relation 'colour'"):
        build_requests([("colour", "A", "red"), ("colour", "B", "blue")])
