"""Claim (a)'s text is prose (issue 40: the paper's chunks are prose; r(D, PPL) ran on 64-token
chunks of code-heavy pydoc): ``dispersion.data.is_prose`` keeps running text and drops code,
doctests, tables and rules; the embedded corpus holds as much prose as the README says; the
experiment's chunks are cut from prose paragraphs only."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from llm_methods.dispersion.data import is_prose, prose_paragraphs

PROSE = (
    "The with statement is used to wrap the execution of a block with methods defined\n"
    "by a context manager. This allows common try and finally usage patterns to be\n"
    "encapsulated for convenient reuse."
)


@pytest.mark.parametrize(
    ("paragraph", "kept"),
    [
        (PROSE, True),
        ("   with open(path) as f:\n       data = f.read()", False),  # indented code block
        (PROSE + "\n    x = 1", False),  # prose followed by an indented line
        (">>> sorted([3, 1, 2]) and then the result is printed for every reader", False),
        ("+-------+-------+\n| name  | value |\n+-------+-------+", False),  # table
        ("| Operator | Description of what it does for the reader here |", False),
        ("=========================== section rule =================", False),
        ("See also the reference manual.", False),  # fewer than 8 words
        # symbol-heavy: 9 words but 70 % letters among the non-space characters (< 80 %)
        ("value = compute(alpha, beta) + offset * scale - bias / 2.0; result[index] == 42", False),
    ],
)
def test_is_prose_keeps_running_text_and_drops_code_tables_and_rules(
    paragraph: str, kept: bool
) -> None:
    assert is_prose(paragraph) is kept


def test_prose_paragraphs_splits_on_blank_lines_and_keeps_order() -> None:
    text = f"{PROSE}\n\n    code()\n    more()\n  \n{PROSE.upper()}\n\n>>> 1 + 1\n2\n"
    assert prose_paragraphs(text) == [PROSE, PROSE.upper()]


def test_embedded_pydoc_corpus_holds_the_prose_the_readme_states() -> None:
    """README (issue 40): the 79 pydoc topics hold 460k characters, of which 197k (43 %, 802
    paragraphs) pass the filter; none of the kept paragraphs has an indented or doctest line."""
    from llm_methods.corpora import pydoc_topics

    topics = pydoc_topics()
    kept = [p for text in topics.values() for p in prose_paragraphs(text)]
    total = sum(len(text) for text in topics.values())
    prose = sum(len(p) for p in kept)
    assert len(topics) == 79 and len(kept) == 802
    assert 455_000 <= total <= 470_000 and 192_000 <= prose <= 202_000
    assert 0.40 <= prose / total <= 0.46  # the corpus is about half code and tables
    assert not any(re.search(r"^(\s|>>>)", line, re.M) for p in kept for line in p.split("\n"))


def test_experiment_chunks_come_from_prose_paragraphs_only() -> None:
    """``experiment._prose_chunks`` tokenises only a text's prose paragraphs: a one-word-per-token
    tokenizer shows no token of the code block in any chunk, chunks of exactly ``length``."""
    from llm_methods.dispersion.experiment import _prose_chunks

    vocab: dict[str, int] = {}

    def tokenizer(text: str, add_special_tokens: bool = False) -> SimpleNamespace:
        return SimpleNamespace(input_ids=[vocab.setdefault(w, len(vocab)) for w in text.split()])

    code = "    secret_code_token = 1\n    another_secret_code_token()"
    texts = [f"{PROSE}\n\n{code}\n\n{PROSE}", code]
    chunks = _prose_chunks(tokenizer, [prose_paragraphs(t) for t in texts], 8)
    assert chunks and all(len(c) == 8 for c in chunks)
    assert len(chunks) == (2 * len(PROSE.split())) // 8  # the code-only text gives none
    code_ids = {vocab[w] for w in code.split() if w in vocab}
    assert not code_ids & {t for c in chunks for t in c}


def test_heldout_paragraphs_drops_every_paragraph_found_in_the_train_texts() -> None:
    """Review of issue 40: pydoc repeats paragraphs across topics, so a topic split left held-out
    prose verbatim in the kNN-LM datastore. A held-out paragraph that occurs in a train text
    (whitespace aside) is dropped; new ones stay, in order."""
    from llm_methods.dispersion.data import heldout_paragraphs

    shared = PROSE
    fresh = "Every new paragraph that only the held-out topic has is kept for the queries."
    other = "Another held-out paragraph of running English text stays in the evaluation set."
    train = [f"{shared}\n\n    code()", "A train-only paragraph of plain English prose goes here."]
    reflowed = shared.replace("\n", " ").replace("  ", " ")  # same words, other line breaks
    test = [f"{fresh}\n\n{reflowed}\n\n{other}", shared]
    kept, dropped = heldout_paragraphs(train, test)
    assert kept == [[fresh, other], []] and dropped == 2


def test_pydoc_split_has_no_heldout_paragraph_in_the_datastore_topics() -> None:
    """The experiment's split (``split_names(topics, 0.2, seed=0)``): 52 of the 107 held-out
    prose paragraphs occur in the train topics (README); after the filter none does."""
    from llm_methods.corpora import pydoc_topics, split_names
    from llm_methods.dispersion.data import heldout_paragraphs

    topics = pydoc_topics()
    train, test = split_names(list(topics), 0.2, seed=0)
    train_texts = [topics[t] for t in train]
    kept, dropped = heldout_paragraphs(train_texts, [topics[t] for t in test])
    before = sum(len(prose_paragraphs(topics[t])) for t in test)
    assert (before, dropped, sum(map(len, kept))) == (107, 52, 55)
    seen = {" ".join(p.split()) for text in train_texts for p in prose_paragraphs(text)}
    assert not any(" ".join(p.split()) in seen for paras in kept for p in paras)
