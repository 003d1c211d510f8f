from __future__ import annotations

import dataclasses

import pytest
import torch

from llm_methods.lm import continuation_logprobs
from llm_methods.lm.threads import one_thread
from llm_methods.suit import toy_facts_lm as wm
from llm_methods.suit.data import build_requests
from llm_methods.suit.editors import EditConfig, Editor, fresh_copy
from llm_methods.suit.keys import key_second_moments, subject_basis
from llm_methods.suit.world_experiment import EDIT, world_stats_chunks

# small enough to train in a few seconds on one core, big enough to memorise most of its world
SPEC = wm.WorldSpec(
    n_subjects=6, hidden=32, n_layers=4, steps=100, batch_size=64, vocab_size=512, lr=2e-2
)


#: the rebuild's torch thread count (OMP_NUM_THREADS and the edit's): not this process's one
#: (conftest's one_torch_thread; the edit here runs in one_thread())
CHILD_THREADS = 3
REBUILD_TEST = "test_rebuild_in_another_process_is_identical"


@pytest.fixture(scope="module")
def rebuild(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The rebuild of SPEC in a fresh process (:data:`REBUILD`: another hash seed and thread
    count), started before ``world`` trains so that the two run side by side instead of one
    after the other (it was the default suite's slowest test); the rebuild test, the module's
    last, waits for it. Yields (the process, its cache folder, its stdout and stderr files)."""
    import json
    import os
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("suit-rebuild")
    out, err = folder / "stdout.txt", folder / "stderr.txt"
    (folder / "cache").mkdir()
    env = {**os.environ, "PYTHONHASHSEED": "12345", "OMP_NUM_THREADS": str(CHILD_THREADS)}
    spec = json.dumps(dataclasses.asdict(SPEC))
    with out.open("w") as stdout, err.open("w") as stderr:  # files: a full pipe cannot stall it
        proc = subprocess.Popen(
            [sys.executable, "-c", REBUILD, spec, str(folder / "cache"), str(CHILD_THREADS)],
            env=env,
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
    yield proc, folder / "cache", out, err
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def world(tmp_path_factory, request):  # type: ignore[no-untyped-def]
    if any(item.name == REBUILD_TEST for item in request.session.items):
        request.getfixturevalue("rebuild")  # started first: it trains beside this process
    root = tmp_path_factory.mktemp("suit-world")
    folder = wm.ensure_facts_lm(SPEC, cache_dir=root)
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
        raise AssertionError("rebuilt a cached facts LM")

    monkeypatch.setattr(wm, "train_facts_lm", boom)
    assert wm.ensure_facts_lm(SPEC, cache_dir=root) == folder
    assert (folder / wm.MARKER).stat().st_mtime_ns == stamp
    other = dataclasses.replace(SPEC, seed=1)
    assert other.digest() != SPEC.digest()


REBUILD = """
import hashlib, json, sys
from pathlib import Path
import torch
from llm_methods.lm.threads import one_thread
from llm_methods.suit import toy_facts_lm as wm
from llm_methods.suit.editors import EditConfig, Editor, fresh_copy
from llm_methods.suit.keys import key_second_moments, subject_basis
from llm_methods.suit.world_experiment import EDIT, world_stats_chunks
spec = wm.WorldSpec(**json.loads(sys.argv[1]))
folder = wm.ensure_facts_lm(spec, cache_dir=Path(sys.argv[2]))
lm, known, _ = wm.load_world(folder)
torch.set_num_threads(int(sys.argv[3]))  # the edit too runs with another thread count
cfg = EditConfig(**EDIT)
stats = key_second_moments(lm, cfg.layers, world_stats_chunks(lm, spec), "t", Path(sys.argv[2]))
basis = subject_basis(lm, cfg.layers, ["Zorb", "Quilm"], list(wm.prompts().values()), cfg.tau)
editor = Editor(fresh_copy(lm), "suit", cfg, stats, basis)
editor.edit(known[:2])
w = {k: hashlib.sha256(v.numpy().tobytes()).hexdigest() for k, v in
     editor.lm.model.state_dict().items() if "down_proj" in k}
print(json.dumps({"threads": torch.get_num_threads(), "edited": w}))
"""


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
        wm.train_facts_lm(dataclasses.replace(SPEC, seq_len=4, steps=1))
    with pytest.raises(ValueError, match="not a toy-facts-LM folder"):
        wm.load_world(tmp_path)
    with pytest.raises(ValueError, match="relation 'colour'"):
        build_requests([("colour", "A", "red"), ("colour", "B", "blue")])


def test_general_ability_probe_sees_a_damaged_model(world) -> None:  # type: ignore[no-untyped-def]
    """Review of issue 27, #10: the probe (perplexity of the unedited facts' sentences, 2-shot
    recall of those facts) must move when the model is damaged, not only when edited."""
    from llm_methods.suit.world_experiment import world_probe

    _, _, lm, known, _ = world
    probe = world_probe(lm, SPEC, known[:2])
    base = probe(lm)
    damaged = fresh_copy(lm)
    with torch.no_grad():
        for layer in damaged.layers[:2]:
            layer.mlp.down_proj.weight.mul_(-1.0)
    hurt = probe(damaged)
    assert set(base) == {"ppl", "fewshot_acc"}
    assert base["ppl"] < 4.0 and hurt["ppl"] > 2 * base["ppl"], (base, hurt)
    assert base["fewshot_acc"] > hurt["fewshot_acc"], (base, hurt)
    assert probe(lm) == base  # the probe leaves the model as it was


def test_world_c_drops_only_the_edited_facts_and_starts_rows_with_bos(world) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: C is the world's text without the sentences stating an edited fact; the edited
    subjects' other facts stay (they are knowledge to preserve), and each sentence is its own
    BOS-first row, as the model was trained and as the editors read keys."""
    _, _, lm, known, _ = world
    tok = lm.tokenizer
    edited = known[:2]
    gone = {(r.relation, r.subject) for r in edited}
    all_rows = world_stats_chunks(lm, SPEC)
    rows = world_stats_chunks(lm, SPEC, gone)
    assert len(all_rows) == len(wm.world_texts(SPEC))
    assert all(r[0] == tok.bos_token_id and tok.bos_token_id not in r[1:] for r in rows)
    texts = {tok.decode(r[1:]) for r in rows}
    phrasings = {rel: 1 + len(par) for rel, (_, _, par) in wm.WORLD_RELATIONS.items()}
    assert len(rows) == len(all_rows) - sum(phrasings[r.relation] for r in edited)
    for r in edited:  # the edited fact in none of its phrasings, not even the rewrite prompt
        _, prompt, paraphrases = wm.WORLD_RELATIONS[r.relation]
        for phrasing in (prompt, *paraphrases):
            assert f"{phrasing.format(r.subject)}{r.target_true}." not in texts
        # the same subject's unedited facts stay
        others = [f for f in wm.world_facts(SPEC) if f[1] == r.subject and (f[0], f[1]) not in gone]
        for rel, subj, obj, _ in others:
            assert f"{wm.WORLD_RELATIONS[rel][1].format(subj)} {obj}." in texts
    with pytest.raises(ValueError, match="relation, subject"):
        world_stats_chunks(lm, SPEC, {edited[0].subject})


def test_rebuild_in_another_process_is_identical(world, rebuild) -> None:  # type: ignore[no-untyped-def]
    """Issue 27 saw SUIT's efficacy change (69 -> 84.4) after a rebuild of the same spec. A
    rebuild in a fresh process with another hash seed and thread count (OMP_NUM_THREADS and the
    torch thread count of the edit) gives the same tokenizer, weights, requests and SUIT edit.
    (Measured cause of the 69 -> 84.4 change: see the README, "World-model determinism".) The
    child process is the ``rebuild`` fixture's, started before the module's world trained."""
    import hashlib
    import json

    from safetensors.torch import load_file

    _, folder, lm, known, info = world
    proc, cache, out, err = rebuild
    proc.wait(timeout=300)
    assert proc.returncode == 0, err.read_text()[-2000:]
    child = json.loads(out.read_text().strip().splitlines()[-1])
    assert child["threads"] == CHILD_THREADS != torch.get_num_threads()
    (again,) = (cache / "suit-world").iterdir()
    assert again != folder
    for name in ("tokenizer.json", wm.REQUESTS_FILE):
        assert (again / name).read_text() == (folder / name).read_text(), name
    a, b = load_file(str(folder / "model.safetensors")), load_file(str(again / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((again / wm.MARKER).read_text())["known"] == info["known"]
    # the same SUIT edit here (one thread) as in the child (more threads, other hash seed), on
    # the C the child cached (as before the child moved into the fixture: one cache folder)
    cfg = EditConfig(**EDIT)
    with one_thread():
        stats = key_second_moments(lm, cfg.layers, world_stats_chunks(lm, SPEC), "t", cache)
        basis = subject_basis(
            lm, cfg.layers, ["Zorb", "Quilm"], list(wm.prompts().values()), cfg.tau
        )
        editor = Editor(fresh_copy(lm), "suit", cfg, stats, basis)
        editor.edit(known[:2])
    mine = {
        k: hashlib.sha256(v.numpy().tobytes()).hexdigest()
        for k, v in editor.lm.model.state_dict().items()
        if "down_proj" in k
    }
    assert mine == child["edited"]
