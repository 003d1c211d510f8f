from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_methods.corpora import chunk_ids, docstrings, pydoc_topics, split_names, wordfreq_words
from llm_methods.dispersion.data import (
    CorpusFormatError,
    Document,
    TextChunkDataModule,
    read_documents,
    write_jsonl,
)


def test_jsonl_roundtrip_and_txt(tmp_path: Path) -> None:
    docs = [Document("first text", "a", "x"), Document("second text", "b", "y")]
    write_jsonl(tmp_path / "d.jsonl", docs)
    (tmp_path / "plain.txt").write_text("a plain document")
    back = read_documents([tmp_path])
    assert [(d.text, d.domain) for d in back] == [
        ("first text", "a"),
        ("second text", "b"),
        ("a plain document", "plain"),
    ]
    assert back[1].source.endswith("d.jsonl:2")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"text": "ok"}\n{"text": \n', r"bad\.jsonl:2: not valid JSON"),
        ('{"text": "ok"}\n["a"]\n', r"bad\.jsonl:2: expected a JSON object"),
        ('{"text": 3}\n', r"bad\.jsonl:1: field 'text' missing or not a string"),
        ('{"text": "  "}\n', r"bad\.jsonl:1: field 'text' is empty"),
        ('{"text": "ok", "domain": 5}\n', r"bad\.jsonl:1: field 'domain'"),
        ("\n\n", r"bad\.jsonl: no documents"),
    ],
)
def test_bad_jsonl_names_file_line_field(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(CorpusFormatError, match=match):
        read_documents([path])


def test_bad_files(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(CorpusFormatError, match=r"empty\.txt: empty text file"):
        read_documents([tmp_path / "empty.txt"])
    (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(CorpusFormatError, match=r"latin\.txt: not UTF-8"):
        read_documents([tmp_path / "latin.txt"])
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(CorpusFormatError, match="unsupported suffix"):
        read_documents([tmp_path / "x.csv"])
    with pytest.raises(FileNotFoundError, match="missing"):
        read_documents([tmp_path / "missing"])
    (tmp_path / "sub").mkdir()
    with pytest.raises(CorpusFormatError, match=r"no \.txt or \.jsonl"):
        read_documents([tmp_path / "sub"])


def test_datamodule_splits_by_document_and_keeps_domains(tmp_path: Path) -> None:
    rows = [{"text": f"word{i} " * 80, "domain": "ab"[i % 2]} for i in range(10)]
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    dm = TextChunkDataModule(files=[str(tmp_path)], tokenizer="bpe:300", seq_len=16, batch_size=4)
    assert dm.domain_names == ["a", "b"] and 260 < dm.vocab_size == len(dm.tokenizer) <= 300
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape == (4, 16) and batch["domain"].shape == (4,)
    assert len(dm.train_data) > len(dm.val_data) > 0
    with pytest.raises(ValueError, match="bpe:N"):
        TextChunkDataModule(files=[str(tmp_path)], tokenizer="bpe:10")


def test_corpora_sources() -> None:
    topics = pydoc_topics()
    assert len(topics) >= 70 and sum(map(len, topics.values())) > 300_000
    train, test = split_names(list(topics), 0.2, seed=0)
    assert not set(train) & set(test) and len(test) == round(len(topics) * 0.2)
    assert split_names(list(topics), 0.2, seed=0) == (train, test)  # deterministic
    docs = docstrings(["json"])
    assert docs and all(len(d) >= 40 for d in docs)
    with pytest.raises(ValueError, match="nonexistent_mod"):
        docstrings(["nonexistent_mod"])
    es = wordfreq_words("es", 50)
    assert len(es) == 50 and "que" in es and all(w.isalpha() for w in es)
    with pytest.raises(ValueError, match="xx"):
        wordfreq_words("xx")
    assert chunk_ids(list(range(10)), 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_markov_domains_ground_truth() -> None:
    from llm_methods.zoo.synthetic import markov_domains

    corpus = markov_domains(n_domains=3, words_per_domain=20, docs_per_domain=5, doc_words=30)
    assert len(corpus.texts) == 15 and sorted(set(corpus.domains)) == [0, 1, 2]
    vocab = [set(v) for v in corpus.vocab]
    assert not (vocab[0] & vocab[1]) and not (vocab[1] & vocab[2])
    for text, k in zip(corpus.texts, corpus.domains, strict=True):
        words = set(text.rstrip(".").split())
        others = set().union(*(vocab[j] for j in range(3) if j != k))
        assert words & vocab[k] and not words & others
