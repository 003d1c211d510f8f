"""BED-LLM: EIG estimator, sample-then-filter belief, games, worlds, LLM likelihoods, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from llm_methods.bed.analysis import eig_agreement, exact_posterior, table_informativeness
from llm_methods.bed.belief import EmptyBelief, FilterBelief, consistent
from llm_methods.bed.eig import eig_estimate, entropy, exact_eig, predictive, score_questions
from llm_methods.bed.game import choose, game_20q, play_20q, play_lockstep, play_preference
from llm_methods.bed.worlds import (
    ANIMAL_TRUTH,
    World,
    animal_world,
    preference_world,
    read_world,
    synthetic_world,
    write_world,
)


def _binary(p_yes: np.ndarray) -> np.ndarray:
    return np.stack([p_yes, 1 - p_yes], -1)


# ---------------------------------------------------------------- estimator


def test_eig_deterministic_likelihood_equals_marginal_entropy() -> None:
    p = _binary(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0]]))  # [N=4, M=2]
    np.testing.assert_allclose(eig_estimate(p), [math.log(2), math.log(2)], atol=1e-9)


def test_eig_is_zero_for_pure_noise_question_where_entropy_is_maximal() -> None:
    p = _binary(np.full((5, 1), 0.5))
    assert abs(eig_estimate(p)[0]) < 1e-12
    assert abs(score_questions("entropy", p)[0] - math.log(2)) < 1e-12


def test_eig_bounds_and_weighted_form() -> None:
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), (7, 4))  # [N, M, K=3]
    e = eig_estimate(p)
    assert (e >= -1e-12).all() and (e <= math.log(3) + 1e-12).all()
    w = rng.random(7)
    manual = entropy(predictive(p, w)) - (w / w.sum()) @ entropy(p)
    np.testing.assert_allclose(exact_eig(p, w), manual)


def test_split_and_entropy_pick_the_same_binary_question() -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        p = _binary((rng.random((6, 8)) < 0.4).astype(float))
        a = np.argmax(score_questions("split", p))
        b = np.argmax(score_questions("entropy", p))
        assert score_questions("entropy", p)[a] == pytest.approx(score_questions("entropy", p)[b])


def test_unknown_strategy_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="unknown scoring strategy"):
        score_questions("nope", _binary(np.ones((2, 2))))
    with pytest.raises(ValueError, match=r"\[N, M, K\]"):
        eig_estimate(np.ones((2, 2)))


def test_estimator_converges_to_exact_eig(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The former claim (b) (issue 42: Monte Carlo consistency is a unit test, not a claim):
    the estimated EIG ranking approaches the exact one as N grows; an estimator without the
    conditional-entropy term (entropy-only in its place) does not."""
    from llm_methods.bed import analysis
    from llm_methods.bed.eig import entropy_only

    world = synthetic_world(32, 20, n_vague=6, seed=3)
    agree = eig_agreement(world, [2, 256], n_states=8, seed=0)
    assert agree["posterior"][256] > 0.9
    assert agree["posterior"][256] > agree["posterior"][2]
    monkeypatch.setattr(analysis, "eig_estimate", lambda probs, *a, **k: entropy_only(probs))
    assert eig_agreement(world, [256], n_states=8, seed=0)["posterior"][256] < 0.9


# ---------------------------------------------------------------- belief


def test_filter_thresholds() -> None:
    p = np.array([[0.85], [0.79], [0.15], [0.21]])
    np.testing.assert_array_equal(consistent(p, np.array([False])), [False, True, True, True])
    np.testing.assert_array_equal(consistent(p, np.array([True])), [True, True, False, True])


def test_belief_filters_resamples_and_reports_emptied() -> None:
    table = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    belief = FilterBelief(
        propose=lambda k, g: g.integers(0, 4, k),
        p_yes=lambda h, q: table[h][:, q],
        n=4,
        resample_below=2,
    )
    rng = np.random.default_rng(0)
    assert sorted(belief.start(rng).tolist()) == [0, 1, 2, 3]
    assert sorted(belief.update(0, True, rng).tolist()) == [0, 1]
    assert belief.update(1, True, rng).tolist() == [1]
    with pytest.raises(EmptyBelief, match="emptied"):
        belief.update(0, False, rng)  # contradicts the first answer
    assert belief.proposals <= 3 * belief.max_proposals  # bounded, no endless loop


# ---------------------------------------------------------------- games


def test_bed_beats_entropy_on_exact_world() -> None:
    """The consequence of the mechanism above on whole games (reported in the experiment,
    not judged: it is built into the world)."""
    world = synthetic_world(64, 40, n_vague=24, seed=0)
    rng = np.random.default_rng(0)
    targets = rng.integers(0, 64, 30)
    wins = {
        s: [
            play_20q(world, world.p_yes, int(t), s, np.random.default_rng(i)).success
            for i, t in enumerate(targets)
        ]
        for s in ("bed", "entropy")
    }
    assert np.mean(wins["bed"]) > np.mean(wins["entropy"]) + 0.3


def test_entropy_only_is_built_to_waste_turns_on_vague_questions() -> None:
    """Issue 42 review: BED over entropy-only on the exact world (the former claim (a2) / (b),
    +80.8 pts) is designed into the world, so it is this unit test, not a claim. Every vague
    attribute has p(yes) in [0.3, 0.7] for every entity, inside the filter's keep band
    [0.2, 0.8]: no answer to a vague question ever removes a hypothesis from the belief; yet its
    predictive p-hat is near 0.5, the maximum of entropy-only's score. So entropy-only picks
    the vague candidate whenever one is offered (nearly always), and BED almost never does."""
    world = synthetic_world(64, 40, n_vague=24, seed=0)
    vague = np.array(["vague" in q for q in world.questions])
    assert vague.sum() == 24
    p_vague = world.p_yes[:, vague]
    assert 0.3 <= p_vague.min() and p_vague.max() <= 0.7
    for answer in (True, False):  # any answers to all 24 vague questions keep every entity
        assert consistent(p_vague, np.full(24, answer)).all()
    rng = np.random.default_rng(0)
    picks = {"entropy": [], "bed": []}
    for _ in range(500):
        kept = rng.choice(64, rng.integers(2, 33), replace=False)
        cand = rng.choice(40, 5, replace=False)
        if not (vague[cand].any() and (~vague[cand]).any()):
            continue  # only candidate sets that offer both kinds
        p = world.p_yes[kept][:, cand]
        for s in picks:
            picks[s].append(vague[cand[np.argmax(score_questions(s, _binary(p)))]])
    assert np.mean(picks["entropy"]) > 0.8
    assert np.mean(picks["bed"]) < 0.1


def test_bed_gap_over_entropy_needs_the_vague_attributes() -> None:
    """Issue 28: claim (a)'s gap comes from the noisy (vague) attributes; in the same world with
    every attribute crisp the EIG's conditional term vanishes and BED asks like entropy-only."""
    world = synthetic_world(64, 40, n_vague=0, seed=0)
    targets = np.random.default_rng(0).integers(0, 64, 30)
    turns = {
        s: [
            play_20q(world, world.p_yes, int(t), s, np.random.default_rng(i))
            for i, t in enumerate(targets)
        ]
        for s in ("bed", "entropy")
    }
    assert all(g.success for games in turns.values() for g in games)
    mean = {s: np.mean([g.turns for g in games]) for s, games in turns.items()}
    assert abs(mean["bed"] - mean["entropy"]) < 1.0


def test_llm_docstring_names_the_default_prompt_style() -> None:
    import inspect

    from llm_methods.bed import llm

    default = inspect.signature(llm.answer_prompts).parameters["style"].default
    assert f'``style="{default}"`` (the default)' in " ".join(llm.__doc__.split())


def test_contradicting_likelihood_empties_and_is_reported() -> None:
    answerer = World(["a", "b"], ["q0", "q1"], np.array([[1.0, 1.0], [0.0, 0.0]]))
    model = np.array([[0.0, 0.0], [1.0, 1.0]])  # the belief's model contradicts every answer
    res = play_20q(answerer, model, 0, "bed", np.random.default_rng(0), n_hyp=2)
    assert res.status == "emptied" and not res.success and "emptied" in res.message


def test_lockstep_llm_strategy_and_guessing() -> None:
    world = animal_world()
    games = [game_20q(world, world.p_yes, t, "prompt", np.random.default_rng(t)) for t in range(4)]
    seen = []

    def first(reqs):  # type: ignore[no-untyped-def]
        seen.append(len(reqs))
        return [int(r.candidates[0]) for r in reqs]

    results = play_lockstep(games, first)
    assert all(r.status in ("found", "out_of_turns") for r in results)
    assert seen[0] == 4 and all(r.turns <= 20 for r in results)


def test_prompt_sim_asks_a_question_its_hypothesis_answers_yes() -> None:
    probs = _binary(np.array([[0.0, 1.0, 0.0]]))
    assert choose("prompt_sim", probs, np.array([7, 8, 9]), np.random.default_rng(0)) == 8


def test_preference_elicitation_improves_with_questions() -> None:
    world = preference_world(seed=0)
    rng = np.random.default_rng(0)
    acc = np.stack(
        [play_preference(world, rng.standard_normal(8), "bed", rng, turns=8)[0] for _ in range(20)]
    )
    assert acc.shape == (20, 9)
    assert acc[:, -1].mean() > acc[:, 0].mean() + 0.1


# ---------------------------------------------------------------- worlds


def test_worlds_are_well_formed() -> None:
    w = synthetic_world(64, 40, n_vague=24, seed=0)
    crisp = np.isin(w.p_yes, (0.0, 1.0)).all(0)
    assert crisp.sum() == 16 and len(np.unique(w.p_yes[:, crisp], axis=0)) == 64
    assert len(np.unique(ANIMAL_TRUTH, axis=0)) == len(ANIMAL_TRUTH)
    post = exact_posterior(w.p_yes, [0, 1], [True, False])
    assert post.sum() == pytest.approx(1.0)


def test_world_json_roundtrip_and_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    w = synthetic_world(8, 6, n_vague=2, seed=0)
    back = read_world(write_world(w, tmp_path / "w.json"))
    np.testing.assert_allclose(back.p_yes, w.p_yes, atol=1e-6)
    cases = {
        "missing": ({"entities": ["a"], "questions": ["q"]}, "missing field 'p_yes'"),
        "rows": (
            {"entities": ["a", "b"], "questions": ["q"], "p_yes": [[0.1]]},
            "1 rows, expected 2",
        ),
        "cell": ({"entities": ["a"], "questions": ["q"], "p_yes": [["x"]]}, r"p_yes\[0\]\[0\]"),
        "nan": (
            {"entities": ["a"], "questions": ["q"], "p_yes": [[float("nan")]]},
            "not a probability",
        ),
        "dup": ({"entities": ["a", "a"], "questions": ["q"], "p_yes": [[0], [1]]}, "unique"),
    }
    for name, (data, msg) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match=msg) as err:
            read_world(path)
        assert str(path) in str(err.value)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_world(tmp_path / "broken.json")


def test_table_informativeness() -> None:
    truth = ANIMAL_TRUTH[:6, :8]
    perfect = table_informativeness(truth * 0.9 + 0.05, truth)
    assert perfect["auc"] == 1.0 and perfect["false_reject_fraction"] == 0.0
    flipped = table_informativeness(1 - truth, truth)
    assert flipped["auc"] == 0.0 and flipped["false_reject_fraction"] == 1.0


# ---------------------------------------------------------------- LLM likelihoods


def test_batched_llm_scoring_matches_loop_and_normalises(tiny) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.bed.llm import answer_probs, answer_probs_loop, ask_about

    hyps, qs = ["dog", "owl"], ["Is it a mammal?", "Can it fly?", "Does it live in water?"]
    batched = answer_probs(tiny, hyps, qs, batch_size=6)
    loop = answer_probs_loop(tiny, hyps, qs)
    assert batched.shape == (2, 3, 2)
    np.testing.assert_allclose(batched.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(batched, loop, atol=1e-4)
    assert ask_about("Can it fly?", "owl") == "Can an owl fly?"
    assert ask_about("Is it big?", "dog") == "Is a dog big?"


def test_llm_questioner_picks_a_candidate(tiny) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.bed.game import Request
    from llm_methods.bed.llm import LLMQuestioner

    q = LLMQuestioner(tiny, ["Is it a mammal?", "Can it fly?", "Is it big?"], mode="prompt")
    reqs = [Request(np.array([0, 2]), []), Request(np.array([1]), [(0, True)])]
    out = q(reqs)
    assert out[0] in (0, 2) and out[1] == 1
    with pytest.raises(ValueError, match="unknown questioner mode"):
        LLMQuestioner(tiny, ["q"], mode="x")


# ---------------------------------------------------------------- CLI


def test_cli_play_eig_world_and_errors(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from iclr26_common.testing import lightning_logs_to_current_stderr
    from llm_methods.cli import main

    lightning_logs_to_current_stderr()
    world = tmp_path / "w.json"
    assert main(["bed", "world", "--kind", "animals", "--out", str(world)]) == 0
    assert (
        main(["bed", "play", "--world", str(world), "--games", "5", "--out", str(tmp_path / "p")])
        == 0
    )
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["games"] == 5 and 0 <= summary["success"] <= 1
    assert len((tmp_path / "p" / "games.jsonl").read_text().splitlines()) == 5
    eig_out = tmp_path / "eig.json"
    assert main(["bed", "eig", "--ns", "2,16", "--states", "3", "--out", str(eig_out)]) == 0
    assert "| 16 |" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"entities": ["a"], "questions": ["q"], "p_yes": [[2]]}))
    for argv in (
        ["bed", "play", "--world", str(bad), "--out", str(tmp_path / "x")],
        ["bed", "eig", "--ns", "a,b", "--out", str(tmp_path / "e.json")],
        ["bed", "play", "--games", "0", "--out", str(tmp_path / "y")],
    ):
        with pytest.raises(SystemExit) as err:
            main(argv)
        assert err.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("llm-methods: error:")


def test_play_warns_that_model_and_device_are_unused_with_the_oracle(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``play --likelihood oracle`` with a strategy that asks no LLM loads none: a given
    ``--model`` / ``--device`` is one warning line on stderr naming them, and the games still
    run (the review of issue 36: exit 0 with both silently unused); not given, no line."""
    from llm_methods.cli import main

    base = ["bed", "play", "--likelihood", "oracle", "--games", "2", "--quiet"]
    extra = ["--model", "other-model", "--device", "cpu"]
    assert main([*base, *extra, "--out", str(tmp_path / "a")]) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("llm-methods bed play: warning: --model and --device unused")
    assert (tmp_path / "a" / "summary.json").is_file()
    assert main([*base, "--device", "cpu", "--out", str(tmp_path / "b")]) == 0
    assert "warning: --device unused" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "c")]) == 0
    assert capsys.readouterr().err.strip() == ""


@pytest.mark.slow
def test_quick_experiment_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.bed.experiment import run

    res = run(True, tmp_path)
    assert len(res.claims) == 2  # (a) and (b); BED over entropy-only is reported, not judged
    # the summary's letters follow the report's order (1 = (a), 2 = (b)), as the README's do
    assert " (a) " in res.summary and " (b) " in res.summary and "(c)" not in res.summary
    # claim (a)'s 60 % world is stated and listed with the vague-share curve, between 50 and 75 %
    assert "24 of 40 attributes vague (60%" in res.claims[0].text
    listed = res.summary.split("vague share", 1)[1]
    assert listed.index("50% vague:") < listed.index("60% vague (claim (a)'s 100 games):")
    assert listed.index("60% vague (claim (a)") < listed.index("75% vague:")
    assert all(c.effect is not None for c in res.claims)
    assert (tmp_path / "bed_success.png").is_file()
    assert "entropy" in res.metrics["exact_world"]["bed_minus_pts"]
    auc = res.claims[1].preconditions[0].measured["auc"]
    assert auc == round(res.metrics["animals"]["table"]["auc"], 4)
    curve = res.metrics["vague_share_curve"]
    assert list(curve) == ["0", "0.25", "0.5", "0.75"]
    assert set(curve["0"]["bed_minus_pts"]) == {"prompt_sim", "entropy"}
