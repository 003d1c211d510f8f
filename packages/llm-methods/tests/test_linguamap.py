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

    _, last = _variant(fresh(), "last_k", 0)
    _, rand = _variant(fresh(), "random_layers", 0)
    lm, full = _variant(fresh(), "full", 0)
    _, lora = _variant(fresh(), "lora", 0)
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
