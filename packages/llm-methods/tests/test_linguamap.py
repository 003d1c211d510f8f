from __future__ import annotations

import numpy as np
import pytest

from llm_methods.linguamap.analysis import (
    answer_concepts,
    cross_lingual_cosine,
    detect_language,
    evaluate,
    lens_language_probability,
)
from llm_methods.linguamap.data import (
    INSTRUCTION,
    LANGS,
    SCENARIOS,
    build_lexicon,
    consistent_examples,
    make_example,
    pretraining_examples,
)


@pytest.fixture(scope="module")
def lex():  # type: ignore[no-untyped-def]
    return build_lexicon(n_concepts=24)


def test_lexicon_is_disjoint_real_words_detected_by_language(lex) -> None:  # type: ignore[no-untyped-def]
    sets = {lang: set(lex.words[lang]) for lang in LANGS}
    assert all(len(s) == 24 for s in sets.values())
    assert not (sets["en"] & sets["es"]) and not (sets["es"] & sets["de"])
    texts = [" ".join(lex.words[lang][i : i + 4]) for lang in LANGS for i in range(0, 20, 4)]
    detected = detect_language(texts)
    expected = [lang for lang in LANGS for _ in range(5)]
    assert np.mean([d == e for d, e in zip(detected, expected, strict=True)]) >= 0.9
    assert detect_language([" "]) == [""]


def test_scenarios(lex) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    en = set(lex.words["en"])
    mixed = make_example(lex, rng, "es", "es", "code_mixed")
    shown = mixed.prompt.split(": ")[1].split()[:-1]
    assert sum(w in en for w in shown) == 2 and mixed.prompt.startswith(INSTRUCTION["es"])
    tagged = make_example(lex, rng, "de", "es", "bilingual")
    assert "[es]" in tagged.prompt and all(w in lex.words["es"] for w in tagged.answer.split())
    distract = make_example(lex, rng, "de", "de", "english_distractor")
    assert distract.prompt.split(". ")[0].split()[0] in en
    assert answer_concepts(tagged.answer, lex) == tagged.concepts
    with pytest.raises(ValueError, match="unknown scenario"):
        make_example(lex, rng, "en", "en", "poetry")


def test_induced_failure_mixture(lex) -> None:  # type: ignore[no-untyped-def]
    fail = pretraining_examples(lex, 200, p_fail=1.0, seed=0, p_bilingual=0.0)
    assert all(e.a_lang == "en" for e in fail)
    good = pretraining_examples(lex, 200, p_fail=0.0, seed=0, p_bilingual=0.0)
    assert all(e.a_lang == e.q_lang for e in good)
    ft = consistent_examples(lex, 40, seed=0)
    assert {e.scenario for e in ft} == set(SCENARIOS)
    assert all(e.a_lang == e.q_lang for e in ft if e.scenario != "bilingual")


def test_answer_mask_covers_answer_tokens_only(lex, tiny) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.linguamap.experiment import FT_LEN, _masked

    ex = consistent_examples(lex, 4, seed=1)
    rows, masks = _masked(tiny.tokenizer, ex)
    assert all(len(r) == FT_LEN == len(m) for r, m in zip(rows, masks, strict=True))
    head = tiny.tokenizer(ex[0].prompt, add_special_tokens=False).input_ids
    tail = tiny.tokenizer(ex[0].answer + "\n", add_special_tokens=False).input_ids
    if len(head) + len(tail) <= FT_LEN:
        assert masks[0][: len(head)] == [0] * len(head)
        assert masks[0][len(head) : len(head) + len(tail)] == [1] * len(tail)
        assert sum(masks[0]) == len(tail)


def test_selective_variants_parameter_fractions(tiny) -> None:  # type: ignore[no-untyped-def]
    import copy

    from llm_methods.linguamap.experiment import _variant
    from llm_methods.lm import wrap

    def fresh():  # type: ignore[no-untyped-def]
        return wrap(tiny.tokenizer, copy.deepcopy(tiny.model))

    _, last = _variant(fresh(), "last_k", 0, 1)
    _, rand = _variant(fresh(), "random_layers", 0, 1)
    lm, full = _variant(fresh(), "full", 0, 1)
    _, lora = _variant(fresh(), "lora", 0, 1)
    assert 0 < last == rand < full == 1.0 and 0 < lora < 1
    assert all(p.requires_grad for p in lm.model.parameters())


def test_analysis_shapes(lex, tiny) -> None:  # type: ignore[no-untyped-def]
    ex = [make_example(lex, np.random.default_rng(i), "es", "es") for i in range(4)]
    lens = lens_language_probability(tiny, [e.prompt for e in ex], lex, k=50)
    assert lens.shape == (2, 3) and np.all((lens >= 0) & (lens <= 1 + 1e-9))
    same = ["alpha beta", "gamma delta"]
    cos = cross_lingual_cosine(tiny, {"en": same, "es": same})
    assert cos.shape == (3,) and np.allclose(cos, 1.0, atol=1e-5)
    scores = evaluate(tiny, ex, lex)
    assert {"consistency", "accuracy", "monolingual/accuracy"} <= set(scores)
    assert 0 <= scores["accuracy"] <= 1 and scores["monolingual/consistency"] in (
        0,
        0.25,
        0.5,
        0.75,
        1,
    )


def test_a_correct_long_answer_scores_correct_in_every_language(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 26: generation stopped after 12 tokens, so correct Spanish / German answers (3.1 /
    2.6 BPE tokens per word) were cut before scoring. A model that answers correctly (then
    rambles) must score accuracy 1 and consistency 1 in each language."""
    import numpy as np

    from llm_methods.linguamap import analysis
    from llm_methods.linguamap.data import make_example, pretraining_examples
    from llm_methods.lm import wrap
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    lex = build_lexicon()  # the experiment's 48 concepts
    pre = pretraining_examples(lex, 1500, 0.7, seed=0)
    tok = train_bpe([e.prompt + e.answer for e in pre], 512)  # the experiment's tokenizer
    lm = wrap(tok, tiny_llama(len(tok), n_layers=1, hidden=16, heads=2, seed=0))
    rng = np.random.default_rng(0)
    examples = {
        lang: max(
            (make_example(lex, rng, lang, lang) for _ in range(200)),
            key=lambda e: len(tok(e.answer).input_ids),
        )
        for lang in ("en", "es", "de")
    }
    gold = {e.prompt: e.answer for e in examples.values()}

    def perfect(lm_, prompts, max_new_tokens, **_):  # type: ignore[no-untyped-def]
        out = []
        for p in prompts:
            ids = tok(gold[p] + "\nrepeat: more words follow here", add_special_tokens=False)
            out.append(tok.decode(ids.input_ids[:max_new_tokens]))
        return out

    monkeypatch.setattr(analysis, "generate", perfect)
    for lang, example in examples.items():
        scores = analysis.evaluate(lm, [example], lex)
        assert scores["accuracy"] == 1.0, (lang, example.answer)
        assert scores["consistency"] == 1.0, lang
    assert len(tok(examples["es"].answer).input_ids) > 12  # the old cut would have failed


PARALLEL_SENTENCES = [
    (
        "The cat sleeps on the warm sofa.",
        "El gato duerme en el sofá caliente.",
        "Die Katze schläft auf dem warmen Sofa.",
    ),
    (
        "My brother works in a large hospital.",
        "Mi hermano trabaja en un hospital grande.",
        "Mein Bruder arbeitet in einem großen Krankenhaus.",
    ),
    (
        "It rained all day in the city.",
        "Llovió todo el día en la ciudad.",
        "Es hat den ganzen Tag in der Stadt geregnet.",
    ),
    (
        "We eat bread and cheese for breakfast.",
        "Comemos pan y queso en el desayuno.",
        "Wir essen Brot und Käse zum Frühstück.",
    ),
    (
        "The train leaves at seven in the morning.",
        "El tren sale a las siete de la mañana.",
        "Der Zug fährt um sieben Uhr morgens ab.",
    ),
    (
        "She reads a book about old ships.",
        "Ella lee un libro sobre barcos antiguos.",
        "Sie liest ein Buch über alte Schiffe.",
    ),
    (
        "The children play football in the park.",
        "Los niños juegan al fútbol en el parque.",
        "Die Kinder spielen Fußball im Park.",
    ),
    (
        "I need a new phone for my work.",
        "Necesito un teléfono nuevo para mi trabajo.",
        "Ich brauche ein neues Telefon für meine Arbeit.",
    ),
    (
        "The river is very cold in winter.",
        "El río está muy frío en invierno.",
        "Der Fluss ist im Winter sehr kalt.",
    ),
    (
        "Our teacher speaks three languages.",
        "Nuestra profesora habla tres idiomas.",
        "Unsere Lehrerin spricht drei Sprachen.",
    ),
    (
        "The doctor closed the window of the room.",
        "El médico cerró la ventana de la habitación.",
        "Der Arzt schloss das Fenster des Zimmers.",
    ),
    (
        "They bought flowers for their mother.",
        "Compraron flores para su madre.",
        "Sie kauften Blumen für ihre Mutter.",
    ),
]


def test_cross_lingual_cosine_tells_parallel_from_shuffled_on_smollm2(smollm2) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: the per-layer cosine pooled over every token including the ``<|im_start|>`` BOS,
    whose middle-layer state (norm ~25000 against ~165) dominates the mean, so en/es/de
    translations and the same sentences shuffled (no item paired with its translation) scored
    alike (layer 15: 0.9997 vs 0.9996, a gap of ~1e-4). Fails on d9942d3. Pooled over the text's
    own tokens, translations score above mismatched sentences at every middle layer (measured
    gap 0.007-0.010, on a shared ~0.88: SmolLM2-135M aligns languages weakly); with ``center``
    (each language's mean removed) the gap is ~0.13 (0.12 vs -0.02)."""
    lm = smollm2  # the session fixture of conftest.py (skips without the GGUF)
    en, es, de = (list(column) for column in zip(*PARALLEL_SENTENCES, strict=True))
    matched = {"en": en, "es": es, "de": de}
    mismatched = {"en": en, "es": es[1:] + es[:1], "de": de[5:] + de[:5]}  # no translation meets
    layers = lm.n_layers
    middle = slice(layers // 3, 2 * layers // 3 + 1)
    parallel = cross_lingual_cosine(lm, matched)
    shuffled = cross_lingual_cosine(lm, mismatched)
    assert parallel.shape == (layers + 1,)
    gap = parallel[middle] - shuffled[middle]
    assert np.all(gap > 0.003), gap  # d9942d3: ~1e-4 at layer 15
    assert gap.mean() > 0.005, (parallel.round(4), shuffled.round(4))
    centred = cross_lingual_cosine(lm, matched, center=True)[middle]
    centred_shuffled = cross_lingual_cosine(lm, mismatched, center=True)[middle]
    assert np.all(centred - centred_shuffled > 0.05), (centred, centred_shuffled)


def test_decision_layer_is_where_the_top_language_settles() -> None:
    from llm_methods.linguamap.analysis import decision_layer

    # columns en/es/de: es on top until layer 5, English from layer 6 of 8 on -> k = 2
    lens = np.array([[0.2, 0.7, 0.1]] * 6 + [[0.8, 0.1, 0.1]] * 2)
    assert decision_layer(lens) == 6
    assert decision_layer(np.array([[0.8, 0.1, 0.1]] * 4)) == 0  # settled from the start
    flip = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.8, 0.1, 0.1]])
    assert decision_layer(flip) == 2  # the last change counts, not the first agreement


def _outcomes(rate: float, seeds: int = 3, items: int = 256, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).random((seeds, items)) < rate).astype(float)


def test_linguamap_claims_hold_fail_and_are_gated() -> None:
    """Planted outcomes (issue 40): non-inferiority within 2 points on paired items and seeds
    holds for equal variants, fails for one worse by far more than the margin; the controls
    (task learned, selective fraction, localised decision) make the claims inconclusive."""
    from llm_methods.linguamap.experiment import TASK_LEARNED_MIN, judge

    full = _outcomes(0.9)
    same = {"last_k": full.copy(), "full": full}
    worse = {"last_k": full * (_outcomes(0.7, seed=1)), "full": full}  # ~27 points lower
    ok = {"fraction": 0.08, "decided": 22, "n_layers": 24, "task_accuracy": 0.8}
    a, b = judge(same, same, **ok)
    assert (a.verdict, b.verdict) == ("held", "held")  # the null: full FT in last-k's place
    a, b = judge(worse, worse, **ok)
    assert (a.verdict, b.verdict) == ("not held", "not held")
    a, b = judge(same, same, **{**ok, "fraction": 0.19})  # 2 of 10 layers
    assert a.verdict == "inconclusive" and b.verdict == "held"
    a, b = judge(same, same, **{**ok, "decided": 8})  # decided mid-model
    assert a.verdict == b.verdict == "inconclusive" and "localised" in b.reason
    # the model never learned the task (accuracy just under the bar): nothing to compare
    a, b = judge(worse, worse, **{**ok, "task_accuracy": TASK_LEARNED_MIN - 0.01})
    assert a.verdict == b.verdict == "inconclusive" and "task learned" in a.reason
    assert judge(same, same, **{**ok, "task_accuracy": TASK_LEARNED_MIN})[1].verdict == "held"


def test_localisation_needs_enough_questions_answered_in_the_target_language() -> None:
    """Issue 40 (fourth session): the diagnosis reads only questions the model answers in the
    target language; with fewer than ``DIAGNOSIS_MIN`` of them the localisation control fails
    (a late decision layer on a handful of prompts is no diagnosis)."""
    from llm_methods.linguamap.experiment import DIAGNOSIS_MIN, judge

    full = _outcomes(0.9)
    same = {"last_k": full.copy(), "full": full}
    ok = {"fraction": 0.08, "decided": 22, "n_layers": 24, "task_accuracy": 0.8}
    a, b = judge(same, same, **ok, diagnosis_n=DIAGNOSIS_MIN)
    assert (a.verdict, b.verdict) == ("held", "held")
    a, b = judge(same, same, **ok, diagnosis_n=DIAGNOSIS_MIN - 1)
    assert a.verdict == b.verdict == "inconclusive" and "localised" in b.reason


def test_diagnosis_prompts_are_those_answered_in_the_expected_language(monkeypatch, lex) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.linguamap import analysis

    rng = np.random.default_rng(0)
    examples = [make_example(lex, rng, "es", "es") for _ in range(5)]
    answered = np.array([1.0, 0.0, 1.0, 0.0, 0.0])  # consistent (es), or not (e.g. English)
    monkeypatch.setattr(
        analysis, "evaluate_items", lambda lm, ex, lx: (answered, np.zeros(len(ex)))
    )
    got = analysis.diagnosis_prompts(None, examples, lex)  # type: ignore[arg-type]
    assert got == [examples[0].prompt, examples[2].prompt]


def test_experiment_diagnoses_on_spanish_questions_answered_in_spanish(
    monkeypatch, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """The decision layer comes from the lens of the diagnosis set, not of every Spanish
    question (issue 40: over all of them English led at every layer, decision layer 0)."""
    from llm_methods.linguamap import analysis, experiment
    from llm_methods.lm import train

    class Stop(Exception):
        pass

    seen: dict[str, object] = {}
    monkeypatch.setattr(train, "train_lm", lambda *a, **k: None)
    monkeypatch.setattr(analysis, "evaluate", lambda lm, ex, lx: {"monolingual/accuracy": 0.9})
    monkeypatch.setattr(analysis, "cross_lingual_cosine", lambda lm, par: np.zeros(3))

    def pick(lm, examples, lx):  # type: ignore[no-untyped-def]
        seen["pool"] = examples
        return [e.prompt for e in examples[: experiment.DIAGNOSIS_MIN]]

    lenses = np.array([[0.9, 0.05, 0.05]] * 17 + [[0.1, 0.8, 0.1]] * 3)  # es from layer 17

    def lens(lm, prompts, lx, k=20, per_prompt=False, langs=None):  # type: ignore[no-untyped-def]
        seen.setdefault("lens_calls", []).append(list(prompts))  # type: ignore[union-attr]
        seen.setdefault("lens_langs", []).append(langs)  # type: ignore[union-attr]
        return np.stack([lenses] * len(prompts)) if per_prompt else lenses

    def stop(lens_arr):  # type: ignore[no-untyped-def]
        seen["decided_on"] = lens_arr
        raise Stop

    monkeypatch.setattr(analysis, "diagnosis_prompts", pick)
    monkeypatch.setattr(analysis, "lens_language_probability", lens)
    monkeypatch.setattr(analysis, "decision_layer", stop)
    with pytest.raises(Stop):
        experiment.run(True, tmp_path)
    pool = seen["pool"]
    assert len(pool) == experiment.settings(True)["diagnosis_pool"]  # type: ignore[arg-type]
    assert {(e.q_lang, e.a_lang, e.scenario) for e in pool} == {("es", "es", "monolingual")}  # type: ignore[union-attr]
    all_prompts, diagnosis = seen["lens_calls"]  # type: ignore[misc]
    assert all_prompts == [e.prompt for e in pool]  # type: ignore[union-attr]
    assert diagnosis == all_prompts[: experiment.DIAGNOSIS_MIN]
    assert np.allclose(seen["decided_on"], lenses)  # the diagnosis set's lens, averaged
    # Spanish questions are answered in Spanish or English: the lens maps between those two
    assert seen["lens_langs"] == [("en", "es")] * 2 == [experiment.LENS_LANGS] * 2


@pytest.mark.parametrize("quick", [False, True])
def test_base_pretraining_recipe_reaches_train_lm(monkeypatch, tmp_path, quick) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: the 20 x 48 base model learned the task only with a longer warm-up (the
    task-learned control failed at 1000 steps with 20 warm-up steps); the full run must hand
    1500 steps and 200 warm-up steps at lr 3e-3 to the pretraining, and the quick run a
    warm-up shorter than its steps."""
    from llm_methods.linguamap import experiment
    from llm_methods.lm import train

    seen = {}

    class Stop(Exception):
        pass

    def fake(model, chunks, steps, batch_size=16, lr=3e-3, seed=0, warmup=20, **kw):  # type: ignore[no-untyped-def]
        seen.update(steps=steps, lr=lr, warmup=warmup, batch=batch_size)
        raise Stop

    monkeypatch.setattr(train, "train_lm", fake)
    with pytest.raises(Stop):
        experiment.run(quick, tmp_path)
    if quick:
        assert seen["warmup"] < seen["steps"]
    else:
        assert seen == {"steps": 1500, "lr": 3e-3, "warmup": 200, "batch": 16}


class _FirstLetterTokenizer:
    """`" " + word` -> one token per character, the first being `" " + word[0]` (the short
    word-initial pieces a small BPE gives Spanish and German words)."""

    def __call__(self, text, add_special_tokens=False):  # type: ignore[no-untyped-def]
        from types import SimpleNamespace

        return SimpleNamespace(input_ids=[ord(text[1])] + [ord(c) for c in text[2:]])


def test_token_languages_counts_the_answers_first_tokens_with_a_ratio() -> None:
    """Issue 40 (fifth session): a token counts for the language whose lexicon words it starts
    at least ``FIRST_TOKEN_RATIO`` times as often as any other's; one-letter first pieces (which
    the old prefix map never mapped) count, ties are ambiguous."""
    from llm_methods.linguamap.analysis import FIRST_TOKEN_RATIO, token_languages
    from llm_methods.linguamap.data import Lexicon

    lex = Lexicon(
        {
            "en": ["cat", "dog", "tree"],
            "es": ["casa", "cosa", "nube"],
            "de": ["kuh", "nacht", "tal"],
        }
    )
    got = token_languages(_FirstLetterTokenizer(), lex)
    assert FIRST_TOKEN_RATIO == 2.0
    assert got[ord("c")] == "es"  # es 2, en 1: 2 >= 2 x 1
    assert got[ord("d")] == "en" and got[ord("k")] == "de"
    assert got[ord("n")] is None and got[ord("t")] is None  # es 1 vs de 1, en 1 vs de 1
    assert ord("z") not in got  # starts no lexicon word
    assert token_languages(_FirstLetterTokenizer(), lex, ratio=2.5)[ord("c")] is None


def test_token_languages_between_the_languages_a_question_is_answered_in() -> None:
    """Issue 40 (sixth session): a Spanish question is answered in Spanish or English, so the
    lens's map chooses between those: a piece that starts Spanish and German words equally
    counts as Spanish, a German-only piece counts for none, English and the ratio as before."""
    from llm_methods.linguamap.analysis import token_languages
    from llm_methods.linguamap.data import Lexicon

    lex = Lexicon(
        {
            "en": ["cat", "dog", "tree", "nail", "nose"],
            "es": ["casa", "cosa", "nube", "tal", "sopa"],
            "de": ["kuh", "nacht", "tag", "sahne"],
        }
    )
    every = token_languages(_FirstLetterTokenizer(), lex)
    assert every[ord("c")] == "es" and every[ord("k")] == "de"
    assert every[ord("t")] is None  # en 1, es 1, de 1
    assert every[ord("s")] is None  # es 1, de 1: the fifth session's ' de', ' s', ' a'
    two = token_languages(_FirstLetterTokenizer(), lex, langs=("en", "es"))
    assert two[ord("c")] == "es" and two[ord("d")] == "en"
    assert two[ord("t")] is None  # en 1 vs es 1: still a tie without German
    assert ord("k") not in two  # starts German words only: counts for none
    assert two[ord("s")] == "es"  # es 1 vs en 0 (German's "sahne" not counted)
    assert two[ord("n")] == every[ord("n")] == "en"  # en 2 vs es 1 (and de 1)
    with pytest.raises(ValueError, match="langs must be"):
        token_languages(_FirstLetterTokenizer(), lex, langs=("en", "fr"))
    with pytest.raises(ValueError, match="langs must be"):
        token_languages(_FirstLetterTokenizer(), lex, langs=())


def test_lens_between_two_languages_leaves_the_third_column_empty(lex, tiny) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.linguamap.analysis import lens_language_probability

    prompts = [make_example(lex, np.random.default_rng(i), "es", "es").prompt for i in range(4)]
    lens = lens_language_probability(tiny, prompts, lex, k=50, per_prompt=True, langs=("en", "es"))
    assert lens.shape == (4, tiny.n_layers, 3) and not lens[..., 2].any()
    sums = lens.sum(-1)
    assert np.allclose(sums[sums > 0], 1.0) and (sums > 0).any()


def test_lens_agreement_is_the_share_whose_last_layer_reads_the_expected_language() -> None:
    from llm_methods.linguamap.analysis import lens_agreement

    es, en = [0.1, 0.8, 0.1], [0.7, 0.2, 0.1]
    lens = np.array(
        [
            [en, es],  # decided at the last layer: agrees
            [es, en],  # English at the output: disagrees
            [es, [0.0, 0.0, 0.0]],  # nothing mapped at the output: disagrees
            [en, es],
        ]
    )
    assert lens_agreement(lens, "es") == 0.5
    assert lens_agreement(lens, ["es", "en", "es", "en"]) == 0.5
    with pytest.raises(ValueError):
        lens_agreement(lens.mean(0), "es")
    with pytest.raises(ValueError):
        lens_agreement(lens, ["es"])


def test_last_layer_lens_reads_the_token_the_model_writes(monkeypatch, lex, tiny) -> None:  # type: ignore[no-untyped-def]
    """The lens reads the prompt as ``generate`` does (no BOS): its last layer's top-1 token is
    the greedy answer's first token on every prompt (issue 40: with a BOS in front, 22 of 28)."""
    from llm_methods.linguamap import analysis
    from llm_methods.lm import generate

    prompts = [make_example(lex, np.random.default_rng(i), "es", "es").prompt for i in range(8)]
    first = [tiny.tokenizer(g).input_ids[0] for g in generate(tiny, prompts, max_new_tokens=1)]
    mapping = dict.fromkeys(range(len(tiny.tokenizer)), "en") | dict.fromkeys(first, "es")
    monkeypatch.setattr(analysis, "token_languages", lambda tok, lx, **kw: mapping)
    encoded = []
    real_encode = analysis.encode_texts

    def spy(lm, texts, prepend_bos=True):  # type: ignore[no-untyped-def]
        encoded.append(prepend_bos)
        return real_encode(lm, texts, prepend_bos=prepend_bos)

    monkeypatch.setattr(analysis, "encode_texts", spy)
    lens = analysis.lens_language_probability(tiny, prompts, lex, k=1, per_prompt=True)
    assert encoded == [False]  # the untrained tiny model's top-1 is the same with a BOS
    assert lens.shape == (8, 2, 3)
    assert analysis.lens_agreement(lens, "es") == 1.0
    assert np.allclose(lens.mean(0), analysis.lens_language_probability(tiny, prompts, lex, k=1))


def test_claims_need_a_lens_that_reads_the_models_language() -> None:
    """Issue 40 (fifth session): below ``LENS_AGREEMENT_MIN`` the last-layer lens disagrees with
    the model's own answers, so it cannot localise: both claims inconclusive."""
    from llm_methods.linguamap.experiment import LENS_AGREEMENT_MIN, judge

    full = _outcomes(0.9)
    same = {"last_k": full.copy(), "full": full}
    ok = {"fraction": 0.08, "decided": 22, "n_layers": 24, "task_accuracy": 0.8}
    a, b = judge(same, same, **ok, diagnosis_n=28, lens_agreement=LENS_AGREEMENT_MIN)
    assert (a.verdict, b.verdict) == ("held", "held")
    a, b = judge(same, same, **ok, diagnosis_n=28, lens_agreement=LENS_AGREEMENT_MIN - 0.01)
    assert a.verdict == b.verdict == "inconclusive" and "lens reads" in a.reason
    assert "lens reads" in b.reason


def test_readme_states_the_lens_map_ratio_and_agreement_threshold() -> None:
    from pathlib import Path

    from llm_methods.linguamap import analysis, experiment

    readme = (Path(experiment.__file__).parent / "README.md").read_text()
    assert f"`LENS_AGREEMENT_MIN` = {experiment.LENS_AGREEMENT_MIN:g}" in readme
    assert f"`FIRST_TOKEN_RATIO` = {analysis.FIRST_TOKEN_RATIO:g}" in readme
    flat = " ".join(readme.split())
    assert f"`LENS_LANGS` = ({', '.join(experiment.LENS_LANGS)})" in flat
