from __future__ import annotations

import json

import pytest

from llm_methods.suit.data import (
    RELATIONS,
    EditRequest,
    build_requests,
    read_counterfact,
    read_requests,
    read_zsre,
    synth_world,
    write_counterfact,
)
from llm_methods.suit.metrics import harmonic_mean, ngram_entropy


def _record(**rw):  # type: ignore[no-untyped-def]
    base = {
        "prompt": "The capital of {} is",
        "subject": "Kalo",
        "target_new": {"str": " Paris"},
        "target_true": {"str": " Rome"},
    }
    base.update(rw)
    return {
        "case_id": 7,
        "requested_rewrite": base,
        "paraphrase_prompts": ["Kalo's capital is"],
        "neighborhood_prompts": ["The capital of Italy is"],
        "generation_prompts": [],
    }


def test_counterfact_roundtrip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reqs = synth_world(12, seed=1)
    assert len(reqs) == 36 and {r.relation for r in reqs} == set(RELATIONS)
    for r in reqs:
        assert r.target_new != r.target_true and len(r.paraphrase_prompts) == 2
        assert len(r.neighbour_answers()) == len(r.neighborhood_prompts) > 0
        assert r.subject not in " ".join(r.neighborhood_prompts)
    path = write_counterfact(reqs, tmp_path / "cf.json")
    assert read_counterfact(path) == reqs
    assert read_requests(path) == reqs
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps(_record()) + "\n")
    (r,) = read_counterfact(plain)
    assert r.case_id == 7 and r.text == "The capital of Kalo is"
    assert r.neighbour_answers() == [" Rome"]  # standard CounterFact: neighbours share the truth


# the first record of the released counterfact.json (ROME), targets without a leading space
REAL_COUNTERFACT = {
    "case_id": 0,
    "pararel_idx": 2796,
    "requested_rewrite": {
        "prompt": "The mother tongue of {} is",
        "relation_id": "P103",
        "target_new": {"str": "English", "id": "Q1860"},
        "target_true": {"str": "French", "id": "Q150"},
        "subject": "Danielle Darrieux",
    },
    "paraphrase_prompts": [
        "Shayna does this and Yossel goes still and dies. Danielle Darrieux, a native",
        "An album was released. Danielle Darrieux is a native speaker of",
    ],
    "neighborhood_prompts": [
        "The mother tongue of Léon Blum is",
        "The native language of Montesquieu is",
    ],
    "attribute_prompts": ["J. R. R. Tolkien is a native speaker of"],
    "generation_prompts": ["Danielle Darrieux's mother tongue is"],
}


def test_real_counterfact_targets_read_with_rome_leading_space(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 27: the released file stores "English"; ROME tokenises " English". Read without the
    space, the rewrite was scored as "...Darrieux isEnglish"."""
    path = tmp_path / "counterfact.json"
    path.write_text(json.dumps([REAL_COUNTERFACT]))
    (r,) = read_counterfact(path)
    assert r.target_new == " English" and r.target_true == " French"
    assert r.text + r.target_new == "The mother tongue of Danielle Darrieux is English"
    assert r.neighbour_answers() == [" French", " French"]
    assert r.relation == "P103"
    out = write_counterfact([r], tmp_path / "again.json")  # written in the released layout
    row = json.loads(out.read_text())[0]["requested_rewrite"]
    assert row["target_new"] == {"str": "English"} and row["target_true"] == {"str": "French"}
    assert read_counterfact(out) == [r]


@pytest.mark.parametrize(
    ("rw", "match"),
    [
        ({"prompt": "The capital of Kalo is"}, "must contain exactly one '{}'"),
        ({"subject": " "}, "subject is empty"),
        ({"target_new": " Paris"}, "must be {'str'"),
        ({"target_new": {"str": " Rome"}}, "target_new equals target_true"),
    ],
)
def test_counterfact_bad_records_name_file_and_field(tmp_path, rw, match) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([_record(), _record(**rw)]))
    with pytest.raises(ValueError, match=match) as err:
        read_counterfact(path)
    assert "bad.json:record 1" in str(err.value)


def test_counterfact_missing_field_and_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"case_id": 0}]))
    with pytest.raises(ValueError, match="record 0: missing field 'requested_rewrite'"):
        read_counterfact(path)
    with pytest.raises(ValueError, match="no such file"):
        read_counterfact(tmp_path / "none.json")
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_counterfact(path)


def test_zsre_reader(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rec = {
        "subject": "Kalo",
        "src": "What is the capital of Kalo?",
        "rephrase": "Kalo's capital?",
        "alt": "Paris",
        "answers": ["Rome"],
        "loc": "nq question: who wrote hamlet",
        "loc_ans": "Shakespeare",
    }
    path = tmp_path / "zsre.json"
    path.write_text(json.dumps([rec]))
    (r,) = read_requests(path)
    assert r.prompt == "What is the capital of {}?" and r.target_new == " Rome"  # answers[0]
    assert r.neighbour_answers() == [" Shakespeare"]
    path.write_text(json.dumps([dict(rec, subject="Zorb")]))
    with pytest.raises(ValueError, match="record 0: subject 'Zorb' does not occur in src"):
        read_zsre(path)


def test_build_requests_neighbours_exclude_new_target() -> None:
    known = [("capital", s, o) for s, o in [("A", "X"), ("B", "Y"), ("C", "Z"), ("D", "W")]]
    for r in build_requests(known, seed=0):
        assert r.target_true != r.target_new
        assert r.target_new not in r.neighbour_answers()
        assert isinstance(r, EditRequest)


def test_metric_helpers() -> None:
    assert harmonic_mean([50.0, 50.0, 50.0]) == pytest.approx(50.0)
    assert harmonic_mean([100.0, 0.0]) == 0.0
    assert harmonic_mean([100.0, 50.0]) == pytest.approx(200 / 3)
    assert ngram_entropy("a a a a a a") == 0.0
    varied = ngram_entropy("the cat sat on the mat and the dog ran off home")
    assert varied > ngram_entropy("the cat the cat the cat the cat the cat") > 0


def test_c_text_holds_no_edited_fact_but_the_edited_subjects_other_facts() -> None:
    """Issue 40: C (the knowledge AlphaEdit preserves) comes from the unedited records'
    prompts, paraphrases and neighbourhood prompts with their answers, one document per record;
    no sentence states an edited fact (its prompt is an edited request's prompt or
    paraphrase), and the edited subjects' other facts stay (they are knowledge to preserve;
    the first version dropped every sentence naming an edited subject)."""
    from llm_methods.suit.data import read_counterfact
    from llm_methods.suit.experiment import FACTS, stats_texts, without_subjects

    records = read_counterfact(FACTS)
    edited = records[:12]
    docs = stats_texts(records, edited)
    text = " ".join(docs)
    for r in edited:
        for p in (r.text, *r.paraphrase_prompts):
            assert f"{p} " not in text, p
    # an unedited fact of an edited subject stays (France's capital is edited, its language not)
    france = [r for r in records if r.subject == edited[0].subject and r not in edited]
    assert france and f"{france[0].text} {france[0].target_true.strip()}." in text
    kept = records[20]
    for p in (kept.text, *kept.paraphrase_prompts):
        assert f"{p} {kept.target_true.strip()}." in text
    sentences = [s for d in docs for s in d.split(". ")]
    assert len(sentences) == len(set(sentences))  # each sentence once over all documents
    everything = stats_texts(records, [])
    assert len(everything) == len(records) and len(" ".join(everything)) > len(text)
    assert without_subjects(["Paris is big.", "Rome is old."], {"Paris"}) == ["Rome is old."]


def test_c_rows_start_with_bos_like_the_editors_prompts(tiny) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: the rows C is computed from start with BOS, as every prompt the editors read
    keys from (and the official layer_stats' tokenised documents); they had none."""
    from llm_methods.suit.experiment import DOC_LEN, stats_chunks

    tok = tiny.tokenizer
    assert tok.bos_token_id is not None
    rows = stats_chunks(tiny, ["The capital of Spain is Madrid.", "x " * 400])
    bos = [tok.bos_token_id]
    assert (
        rows[0] == bos + tok("The capital of Spain is Madrid.", add_special_tokens=False).input_ids
    )
    assert len(rows[1]) == DOC_LEN and rows[1][: len(bos)] == bos


def test_mean_logprobs_equal_the_pairwise_continuation_logprobs(tiny) -> None:  # type: ignore[no-untyped-def]
    """Issue 40 (run time): the edit metrics score each distinct token row once (p(new) and
    p(true) after one prompt share it; so do neighbourhood prompts common to many requests) and
    unembed the continuation's positions only; the values are those of the core's pair-by-pair
    ``continuation_logprobs(reduce="mean")``, multi-token continuations included."""
    import numpy as np
    import torch

    from llm_methods.lm import LMError, continuation_logprobs
    from llm_methods.suit.metrics import mean_logprobs

    prompts = ["The capital of Spain is", "The capital of Spain is", "A list is", "A list is"]
    prompts += ["Functions are defined with", "The capital of Spain is"]
    conts = [
        " Madrid",
        " Paris",
        " a mutable sequence",
        " mutable",
        " the def statement",
        " Madrid",
    ]
    ours = mean_logprobs(tiny, prompts, conts)
    with torch.no_grad():
        core = continuation_logprobs(tiny, prompts, conts, reduce="mean").numpy()
    assert ours.shape == (6,) and np.allclose(ours, core, rtol=0, atol=1e-5), (ours, core)
    assert ours[0] == ours[5] and ours[0] != ours[1]
    with pytest.raises(LMError, match="continuation 0 has no tokens"):
        mean_logprobs(tiny, ["A list is"], [""])
