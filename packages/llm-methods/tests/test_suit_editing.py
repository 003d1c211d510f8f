from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from llm_methods.lm import LMError
from llm_methods.suit.data import read_counterfact, synth_world
from llm_methods.suit.editors import (
    METHODS,
    EditConfig,
    Editor,
    _residual_at_subject,
    _suit_delta,
    fresh_copy,
    kl_to_initial,
    null_space_projector,
    null_space_share,
    value_loss,
    value_targets,
)
from llm_methods.suit.keys import (
    key_second_moments,
    model_fingerprint,
    prompt_with_subject,
    request_keys,
    subject_subspace,
)

# the tiny model is untrained: small residual norms, so no weight decay and a loose clamp
CFG = EditConfig(
    layers=(0,),
    rome_layer=0,
    steps=25,
    templates=("{}",),
    l2=1e-2,
    mom2_weight=1.0,
    null_threshold=1e-3,
    weight_decay=0.0,
    clamp=50.0,
    rome_clamp=50.0,
)


def _margin(lm, reqs):  # type: ignore[no-untyped-def]
    """Mean over requests of log p(new) - log p(true) (per token) on the rewrite prompt."""
    from llm_methods.lm import continuation_logprobs

    with torch.no_grad():
        new = continuation_logprobs(
            lm, [r.text for r in reqs], [r.target_new for r in reqs], reduce="mean"
        )
        true = continuation_logprobs(
            lm, [r.text for r in reqs], [r.target_true for r in reqs], reduce="mean"
        )
    return float((new - true).mean())


@pytest.fixture(scope="module")
def world():  # type: ignore[no-untyped-def]
    return synth_world(6, seed=3)


@pytest.fixture()
def setup(tiny, world, tmp_path):  # type: ignore[no-untyped-def]
    from llm_methods.corpora import chunk_ids

    prose = " ".join(
        [
            "The quick brown fox jumps over the lazy dog.",  # preserved knowledge:
            "Functions are defined with the def statement.",
        ]
        * 4
    )  # 64 unrelated keys
    chunks = chunk_ids(tiny.tokenizer(prose, add_special_tokens=False).input_ids, 16)[:4]
    stats = key_second_moments(tiny, [0, 1], chunks, "t", cache_dir=tmp_path)
    words = [f"Name{i}" for i in range(40)]
    keys = request_keys(tiny, [0, 1], ["The capital of {} is"] * 40, words, ("{}",))
    basis = {i: subject_subspace(keys[i], 0.4) for i in (0, 1)}
    return stats, basis


def test_subject_position(tiny) -> None:  # type: ignore[no-untyped-def]
    ids, i = prompt_with_subject(tiny, "The capital of {} is", "Berlo")
    tok = tiny.tokenizer
    assert tok.decode(ids[: i + 1]).endswith("Berlo") and not tok.decode(ids[: i + 1]).endswith(
        "is"
    )
    with pytest.raises(LMError, match="exactly one"):
        prompt_with_subject(tiny, "The capital of Berlo is", "Berlo")
    with pytest.raises(LMError, match="subject is empty"):
        prompt_with_subject(tiny, "The capital of {} is", "")


def test_stats_cached_per_model_fingerprint(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    chunks = [[1, 5, 7, 9, 11, 13]] * 3
    a = key_second_moments(tiny, [1], chunks, "x", cache_dir=tmp_path)[1]
    assert len(list(tmp_path.glob("*-L1-x-*.pt"))) == 1
    assert torch.equal(key_second_moments(tiny, [1], chunks, "x", cache_dir=tmp_path)[1], a)
    assert torch.allclose(a, a.T) and torch.linalg.eigvalsh(a.double()).min() > -1e-5
    edited = fresh_copy(tiny)
    before = model_fingerprint(edited, 1)
    with torch.no_grad():
        edited.layers[0].mlp.down_proj.weight.add_(0.01)
    assert model_fingerprint(edited, 1) != before  # an edited model never reuses stale stats


def test_stats_cache_keyed_on_the_text_not_the_tag(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 41: the cache was keyed on the caller's tag, so other text under the same tag
    silently reused the first text's C (fails on d9942d3). Same tag, different chunks -> C is
    recomputed and equals the uncached C of those chunks."""
    first = [[1, 5, 7, 9, 11, 13]] * 3
    other = [[2, 4, 6, 8, 10, 12, 14]] * 3
    a = key_second_moments(tiny, [1], first, "same", cache_dir=tmp_path)[1]
    b = key_second_moments(tiny, [1], other, "same", cache_dir=tmp_path)[1]
    fresh = key_second_moments(tiny, [1], other, "same", cache_dir=tmp_path / "empty")[1]
    assert not torch.allclose(a, b)
    assert torch.equal(b, fresh)
    assert len(list(tmp_path.glob("*-L1-same-*.pt"))) == 2


def test_null_space_projector_and_subspace() -> None:
    g = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(8, 8, generator=g))[0]
    c = basis @ torch.diag(torch.tensor([5.0, 3, 1, 0, 0, 0, 0, 0])) @ basis.T
    p = null_space_projector(c, 1e-3)
    assert torch.allclose(p @ p, p, atol=1e-5) and round(float(p.trace())) == 5
    assert (p @ c).abs().max() < 1e-4
    # the official threshold is absolute: eigenvalues 1, 0, ... are below 2 (6 null dims);
    # relative to the largest (5), 0.3 x 5 = 1.5 keeps the same 6, 0.1 x 5 = 0.5 only 5
    assert round(float(null_space_projector(c, 2.0).trace())) == 6
    assert round(float(null_space_projector(c, 0.3, relative=True).trace())) == 6
    assert round(float(null_space_projector(c, 0.1, relative=True).trace())) == 5
    inside = basis[:, :1].T  # a key along C's top eigenvector: none of its energy is null
    assert null_space_share(inside, p) < 1e-6
    assert null_space_share(basis[:, 5:6].T, p) == pytest.approx(1.0)
    keys = torch.randn(50, 1, generator=g) * torch.tensor([10.0, 0, 0, 0]) + 0.1 * torch.randn(
        50, 4, generator=g
    )
    u = subject_subspace(keys, 0.5)
    assert u.shape == (4, 1) and abs(float(u[0, 0])) > 0.99
    with pytest.raises(ValueError, match="tau"):
        subject_subspace(keys, 1.5)


def test_suit_value_form_is_rank_one_in_w1_minus_w2() -> None:
    g = torch.Generator().manual_seed(1)
    h, w1, w2 = (
        torch.randn(3, 6, generator=g),
        torch.randn(6, generator=g),
        torch.randn(6, generator=g),
    )
    v = w1 - w2
    assert torch.allclose(_suit_delta(h, w1, w2), -(h @ v)[:, None] * v, atol=1e-5)
    assert torch.allclose(_suit_delta(h, w1, w1), torch.zeros(3, 6))


def test_value_kl_is_current_to_initial_as_the_official_code() -> None:
    """Issue 27: ours was KL(initial ‖ current); ROME's compute_v and AlphaEdit's compute_z call
    kl_div(initial, current, log_target=True, reduction="batchmean") = KL(current ‖ initial)."""
    g = torch.Generator().manual_seed(0)
    init = torch.log_softmax(torch.randn(1, 11, generator=g), -1)
    cur = torch.log_softmax(3 * torch.randn(1, 11, generator=g), -1)
    official = torch.nn.functional.kl_div(init, cur, log_target=True, reduction="batchmean")
    assert float(kl_to_initial(cur, init)) == pytest.approx(float(official), rel=1e-6)
    reverse = torch.nn.functional.kl_div(cur, init, log_target=True, reduction="batchmean")
    assert abs(float(official) - float(reverse)) > 0.1  # the two directions differ here


def test_value_weight_decay_is_norm_over_squared_norm() -> None:
    """Official: v_weight_decay · ‖δ‖ / ‖h‖² (ours was ‖δ‖² / ‖h‖²)."""
    cfg = EditConfig(weight_decay=0.5, kl_factor=0.0)
    add, h0 = torch.full((4,), 3.0), torch.full((4,), 2.0)  # ‖δ‖ = 6, ‖h‖² = 16
    loss = value_loss(torch.tensor(1.0), torch.tensor(0.0), add, h0, cfg)
    assert float(loss) == pytest.approx(1.0 + 0.5 * 6 / 16)


def test_value_optimisation_stops_early_and_respects_the_clamp(tiny, world, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A loss under the early-stop bound at the first forward leaves δ = 0 (the official loop
    breaks before any update; the bound is raised here, the untrained model predicts nothing
    well); otherwise ‖δ‖ ≤ clamp·‖h‖ after the projection."""
    from dataclasses import replace

    from llm_methods.suit import editors

    req = world[0]
    (h,) = _residual_at_subject(tiny, 0, [req])
    cfg = replace(CFG, steps=6, clamp=0.05, kl_factor=0.0)
    delta = value_targets(tiny, 0, [req], cfg)[0]
    assert 0 < float(delta.norm()) <= 0.05 * float(h.norm()) * (1 + 1e-4)
    d = value_targets(tiny, 0, [req], cfg, suit=True)[0]
    assert 0 < float(d.norm()) <= 0.05 * float(h.norm()) * (1 + 1e-3)
    assert editors.EARLY_STOP_LOSS == 5e-2
    monkeypatch.setattr(editors, "EARLY_STOP_LOSS", 1e9)
    assert float(value_targets(tiny, 0, [req], cfg)[0].norm()) == 0.0


@pytest.mark.parametrize("method", METHODS)
def test_each_method_makes_the_edit(tiny, world, setup, method) -> None:  # type: ignore[no-untyped-def]
    stats, basis = setup
    reqs = [r for r in world if r.relation == "capital"][: 1 if method == "rome" else 2]
    original = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    editor = Editor(fresh_copy(tiny), method, CFG, stats, basis)
    before = _margin(editor.lm, reqs)
    z0 = _residual_at_subject(editor.lm, 0, reqs)
    rome = method == "rome"  # ROME scales clamp and decay by the MLP output (compute_v)
    target = z0 + value_targets(
        editor.lm,
        0,
        reqs,
        CFG,
        suit=method == "suit",
        clamp=CFG.rome_clamp if rome else None,
        reference="ffn" if rome else "residual",
    )
    editor.edit(reqs)
    z1 = _residual_at_subject(editor.lm, 0, reqs)
    err = float((z1 - target).norm() / (target - z0).norm())
    # the closed form moves the residual most of the way to the optimised value (the null-space
    # projection of AlphaEdit/SUIT gives up the part of the change that would touch preserved keys)
    assert err < (0.35 if method in ("rome", "memit") else 0.6), err
    if method == "memit":
        assert _margin(editor.lm, reqs) > before
    assert editor.n_edits == len(reqs)
    for k, v in tiny.model.state_dict().items():  # the source model is untouched
        assert torch.equal(v, original[k])
    changed = [
        i
        for i in range(2)
        if not torch.equal(
            editor.lm.layers[i].mlp.down_proj.weight, tiny.layers[i].mlp.down_proj.weight
        )
    ]
    assert changed == [0]


def test_null_space_projectors_are_shared_not_recomputed(tiny, setup) -> None:  # type: ignore[no-untyped-def]
    stats, basis = setup
    shared: dict = {}
    first = Editor(fresh_copy(tiny), "alphaedit", CFG, stats, basis, projectors=shared)
    second = Editor(fresh_copy(tiny), "suit", CFG, stats, basis, projectors=shared)
    assert second.projectors[0] is first.projectors[0]
    own = Editor(fresh_copy(tiny), "alphaedit", CFG, stats, basis)
    assert own.projectors[0] is not first.projectors[0]
    assert torch.equal(own.projectors[0], first.projectors[0])
    assert not second.cache_c[0].any()  # the edit caches stay per editor


def test_independent_runs_do_not_leak_state(tiny, world, setup) -> None:  # type: ignore[no-untyped-def]
    stats, basis = setup
    reqs = world[:2]
    weights = []
    for _ in range(2):
        editor = Editor(fresh_copy(tiny), "alphaedit", CFG, stats, basis)
        assert all(float(c.abs().sum()) == 0 for c in editor.cache_c.values())
        editor.edit(reqs)
        assert all(float(c.abs().sum()) > 0 for c in editor.cache_c.values())
        weights.append(editor.lm.layers[0].mlp.down_proj.weight.detach().clone())
    assert torch.allclose(weights[0], weights[1])


def test_alphaedit_update_spares_preserved_keys(tiny, world, setup) -> None:  # type: ignore[no-untyped-def]
    stats, basis = setup
    editor = Editor(fresh_copy(tiny), "alphaedit", CFG, stats, basis)
    w0 = editor.lm.layers[0].mlp.down_proj.weight.detach().clone()
    editor.edit(world[:1])
    delta = editor.lm.layers[0].mlp.down_proj.weight.detach() - w0
    evals, evecs = torch.linalg.eigh(stats[0].double())
    kept = evecs[:, evals >= CFG.null_threshold].float()  # preserved-knowledge directions
    assert kept.shape[1] >= 4  # the absolute threshold leaves C a non-trivial range
    assert (delta @ kept).norm() < 1e-3 * delta.norm()


def test_suit_editor_applies_an_update_outside_the_subject_subspace(tiny, world, setup) -> None:  # type: ignore[no-untyped-def]
    """Issue 40 wiring: ``Editor(..., "suit")`` must apply SUIT's update, not AlphaEdit's.
    The ΔW it writes satisfies ΔW U = 0 (keys inside the subject subspace map as before), its
    edit cache holds only the keys' component outside U, and AlphaEdit's ΔW on the same request
    writes along U (so the property can fail) and differs from SUIT's. Fails when the editor path
    drops the key projection and the ΔW(I − UUᵀ) factor (SUIT would silently be AlphaEdit)."""
    stats, basis = setup
    u = basis[0].double()
    reqs = [r for r in world if r.relation == "capital"][:2]
    deltas = {}
    for method in ("suit", "alphaedit"):
        editor = Editor(fresh_copy(tiny), method, CFG, stats, basis)
        w0 = editor.lm.layers[0].mlp.down_proj.weight.detach().double().clone()
        editor.edit(reqs)
        deltas[method] = editor.lm.layers[0].mlp.down_proj.weight.detach().double() - w0
        if method == "suit":
            assert float((editor.cache_c[0].double() @ u).norm()) < 1e-4 * float(
                editor.cache_c[0].norm()
            )
    suit, alpha = deltas["suit"], deltas["alphaedit"]
    assert u.shape[1] >= 1 and float(suit.norm()) > 0  # the edit does something
    assert float((suit @ u).norm()) < 1e-3 * float(suit.norm())
    assert float((alpha @ u).norm()) > 1e-2 * float(alpha.norm())  # AlphaEdit writes along U
    assert float((suit - alpha).norm()) > 1e-2 * float(alpha.norm())


def test_bad_editor_inputs(tiny, setup) -> None:  # type: ignore[no-untyped-def]
    stats, basis = setup
    with pytest.raises(LMError, match="unknown edit method"):
        Editor(tiny, "grace", CFG, stats, basis)
    with pytest.raises(LMError, match="unknown layer 7"):
        Editor(tiny, "memit", EditConfig(layers=(0, 7)), stats, basis)
    with pytest.raises(LMError, match="no key statistics"):
        Editor(tiny, "memit", CFG, {1: stats[1]}, basis)
    with pytest.raises(LMError, match="last layer"):
        Editor(tiny, "memit", EditConfig(layers=(0, 1)), stats, basis)


def test_shipped_smollm2_facts_parse() -> None:
    from llm_methods.suit.experiment import FACTS

    reqs = read_counterfact(FACTS)
    assert len(reqs) >= 100 and {r.relation for r in reqs} == {"capital", "language", "continent"}
    raw = json.loads(FACTS.read_text())
    assert set(raw[0]) >= {
        "case_id",
        "requested_rewrite",
        "paraphrase_prompts",
        "neighborhood_prompts",
        "generation_prompts",
    }


def _scores(suit_spec: float, alpha_spec: float, suit_eff: float, alpha_eff: float) -> dict:
    """Per-request scores (0-100, 48 requests) with planted means: each request's score is its
    method's mean plus the same request noise for both methods (a paired design)."""
    noise = np.random.default_rng(0).normal(0, 8, 48)
    jitter = np.random.default_rng(1).normal(0, 2, 48)

    def arr(mean: float, extra: np.ndarray) -> np.ndarray:
        return mean + noise + extra

    return {
        "suit": {"specificity": arr(suit_spec, jitter), "efficacy": arr(suit_eff, jitter)},
        "alphaedit": {
            "specificity": arr(alpha_spec, 0 * jitter),
            "efficacy": arr(alpha_eff, 0 * jitter),
        },
    }


def test_suit_claims_can_hold_fail_and_be_inconclusive() -> None:
    """Planted per-request scores (issue 40: paired intervals): each criterion both holds and
    fails; a null method (AlphaEdit in SUIT's place: every paired difference 0) is "not held"
    for (a) and, for the within-margin (b), a SUIT worse by far more than 5 points is; a failed
    control (AlphaEdit's edits did not take, or C leaves the edited keys in its null space)
    makes a claim inconclusive."""
    from llm_methods.suit.experiment import suit_claims

    covered = {"1": 0.1, "2": 0.3}
    a, b = suit_claims(_scores(80, 70, 90, 92), covered)
    assert (a.verdict, b.verdict) == ("held", "held")
    a, b = suit_claims(_scores(60, 70, 80, 92), covered)
    assert (a.verdict, b.verdict) == ("not held", "not held")
    null = _scores(70, 70, 92, 92)
    null["suit"] = null["alphaedit"]
    a, _ = suit_claims(null, covered)
    assert a.verdict == "not held" and a.effect.method == "exact"
    a, b = suit_claims(_scores(80, 70, 90, 92), {"1": 0.1, "2": 0.9})
    assert (a.verdict, b.verdict) == ("inconclusive", "held")  # projection inert on layer 2
    a, b = suit_claims(_scores(80, 70, 40, 30), covered)
    assert a.verdict == b.verdict == "inconclusive"  # the baseline's edits did not take
    # a gap of 5.5 points at 48 requests with this spread straddles the 5-point margin
    a, _ = suit_claims(_scores(75.5, 70, 90, 92), covered)
    assert a.verdict == "inconclusive" and a.reason == "underpowered"
    # [worlds, requests]: the world-seed spread enters the interval
    worlds = {
        m: {k: np.stack([v, v + 1.0 * (m == "suit")]) for k, v in d.items()}
        for m, d in _scores(80, 70, 90, 92).items()
    }
    assert suit_claims(worlds, covered)[0].effect.n >= 2


def test_keys_from_a_forward_stopped_after_the_deepest_layer(tiny) -> None:  # type: ignore[no-untyped-def]
    """Issue 40 (run time): the keys of layers 0.. L come from a forward that ends after layer
    L's down_proj input is recorded; they equal those of the whole forward, and the layers
    after L never run."""
    from llm_methods.lm import collate
    from llm_methods.suit.keys import capture_keys, forward_keys

    batch = collate([[1, 5, 7, 9], [2, 4, 6]], tiny.tokenizer.pad_token_id, tiny.device)
    with capture_keys(tiny, [0, 1]) as full:
        tiny.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    calls = []
    handle = tiny.layers[1].register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        stopped = forward_keys(tiny, [0], batch)
    finally:
        handle.remove()
    assert set(stopped) == {0} and torch.equal(stopped[0], full[0])
    assert not calls
    both = forward_keys(tiny, [1, 0], batch)
    assert all(torch.equal(both[i], full[i]) for i in (0, 1))


def test_curve_counts_spread_evenly_and_end_at_the_last_edit() -> None:
    from llm_methods.suit.experiment import curve_counts

    counts = list(range(4, 65, 4))
    assert curve_counts(counts, 4) == [16, 32, 48, 64]
    assert curve_counts(counts, 1) == [64]
    assert curve_counts(counts, None) == counts == curve_counts(counts, 99)
    assert curve_counts(list(range(4, 49, 4)), 3) == [16, 32, 48]
    with pytest.raises(ValueError, match="curve points"):
        curve_counts(counts, 0)


def test_sparse_curve_scores_the_same_final_edits(tiny, world, setup) -> None:  # type: ignore[no-untyped-def]
    """Scoring at fewer counts (``curve_points``) changes neither the edits nor the final
    per-request scores (the claims' units); the curve has one value per scored count."""
    from llm_methods.suit.experiment import sequential_curves

    stats, basis = setup
    reqs = world[:4]
    runs = []
    for points in (None, 1):
        rows: dict = {}
        curves, counts, *_ = sequential_curves(
            tiny, reqs, CFG, stats, basis, 1, 2, None, rows, ("alphaedit",), points
        )
        runs.append((curves, counts, rows))
    (full, all_counts, rows_all), (sparse, last, rows_last) = runs
    assert all_counts == [1, 2, 3, 4] and last == [4]
    assert len(full["alphaedit"]["efficacy"]) == 4 and len(sparse["alphaedit"]["efficacy"]) == 1
    assert rows_all == rows_last
    assert sparse["alphaedit"]["specificity"][-1] == full["alphaedit"]["specificity"][-1]


@pytest.mark.parametrize("stop", [5e-2, None])
def test_batched_value_loops_equal_one_loop_per_request(tiny, world, monkeypatch, stop) -> None:  # type: ignore[no-untyped-def]
    """Issue 40 (run time): the requests of a batch optimise their δ side by side in one
    forward per step; each δ equals the one its own loop gives (the official code runs one
    loop per request), also when the requests stop early at different steps (``stop=None``:
    the early-stop bound between the requests' losses after one update). SUIT's first request
    draws the same (w₁, w₂) in both (the others draw later ones in a batch)."""
    from dataclasses import replace

    from llm_methods.suit import editors

    reqs = [r for r in world if r.relation == "capital"][:3]
    cfg = replace(CFG, steps=8, clamp=5.0)
    if stop is None:
        seen: list[float] = []
        real = editors.value_loss

        def record(*args, **kwargs):  # type: ignore[no-untyped-def]
            out = real(*args, **kwargs)
            seen.append(float(out.detach()))
            return out

        monkeypatch.setattr(editors, "EARLY_STOP_LOSS", 0.0)
        monkeypatch.setattr(editors, "value_loss", record)
        for r in reqs:  # two forwards each: the loss before and after one update
            value_targets(tiny, 0, [r], replace(cfg, steps=2))
        monkeypatch.setattr(editors, "value_loss", real)
        after = seen[1::2]
        stop = float(np.median(after))
        # one request stops after its first update, none before it
        assert min(after) < stop <= max(after) and min(seen[0::2]) >= stop
    monkeypatch.setattr(editors, "EARLY_STOP_LOSS", stop)
    for suit in (False, True):
        for reference in ("residual", "ffn"):
            batched = value_targets(tiny, 0, reqs, cfg, suit=suit, reference=reference)
            one = torch.stack(
                [value_targets(tiny, 0, [r], cfg, suit=suit, reference=reference)[0] for r in reqs]
            )
            assert float(one.norm(dim=1).min()) > 0
            close = torch.isclose(batched, one, rtol=1e-4, atol=1e-6).all(1).tolist()
            expected = [True, False, False] if suit else [True] * 3
            assert close == expected, (suit, reference, close)
