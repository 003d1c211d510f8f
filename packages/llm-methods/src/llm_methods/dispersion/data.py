"""Text corpora for training/measuring: readers for plain text and JSON Lines, chunking, and a
LightningDataModule.

Formats (what users bring):

- ``*.txt``: one document per file, UTF-8; its domain is the file stem;
- ``*.jsonl``: one JSON object per line with a string field ``text`` (required) and an optional
  string field ``domain`` (default: the file stem).

Bad input raises :class:`CorpusFormatError` naming the file, the line and the field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from llm_methods.corpora import split_names
from llm_methods.jsonl import read_jsonl, read_text

__all__ = [
    "CorpusFormatError",
    "Document",
    "TextChunkDataModule",
    "chunk_documents",
    "is_prose",
    "prose_paragraphs",
    "read_documents",
    "write_jsonl",
]


class CorpusFormatError(ValueError):
    """A text corpus file is malformed (message names file, line and field)."""


@dataclass(frozen=True)
class Document:
    text: str
    domain: str
    source: str  # "file:line" or "corpus:name"


def _read_jsonl(path: Path) -> list[Document]:
    docs = []
    for where, row in read_jsonl(path, error=CorpusFormatError, what="documents"):
        text = row.get("text")
        if not isinstance(text, str):
            raise CorpusFormatError(f"{where}: field 'text' missing or not a string")
        if not text.strip():
            raise CorpusFormatError(f"{where}: field 'text' is empty")
        domain = row.get("domain", path.stem)
        if not isinstance(domain, str) or not domain:
            raise CorpusFormatError(f"{where}: field 'domain' is not a non-empty string")
        docs.append(Document(text, domain, where))
    return docs


def read_documents(paths: Sequence[str | Path]) -> list[Document]:
    """Documents from ``.txt`` / ``.jsonl`` files or folders of them (sorted)."""
    files: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            files += sorted(p for p in entry.iterdir() if p.suffix in (".txt", ".jsonl"))
        elif entry.is_file():
            files.append(entry)
        else:
            raise FileNotFoundError(f"{entry}: no such file or folder")
    if not files:
        raise CorpusFormatError(f"no .txt or .jsonl files in {', '.join(map(str, paths))}")
    docs: list[Document] = []
    for path in files:
        if path.suffix == ".jsonl":
            docs += _read_jsonl(path)
        elif path.suffix == ".txt":
            text = read_text(path, CorpusFormatError)  # not UTF-8: one line naming the byte
            if not text.strip():
                raise CorpusFormatError(f"{path}: empty text file")
            docs.append(Document(text, path.stem, str(path)))
        else:
            raise CorpusFormatError(f"{path}: unsupported suffix (expected .txt or .jsonl)")
    return docs


def write_jsonl(path: Path, docs: Sequence[Document]) -> Path:
    """Write documents as JSON Lines (``text``, ``domain``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps({"text": doc.text, "domain": doc.domain}) + "\n")
    return path


def builtin_documents(corpus: str) -> list[Document]:
    """Documents of a built-in offline corpus (``pydoc``: one document per topic)."""
    if corpus == "pydoc":
        from llm_methods.corpora import pydoc_topics

        return [Document(t, name, f"pydoc:{name}") for name, t in pydoc_topics().items()]
    raise ValueError(f"unknown built-in corpus {corpus!r}; known: pydoc")


def chunk_documents(
    tokenizer: Any, docs: Sequence[Document], seq_len: int, domains: dict[str, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-overlapping ``seq_len`` chunks inside each document (BOS first when the tokenizer has
    one): (ids ``[N, seq_len]``, domain index ``[N]``)."""
    bos = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    rows, labels = [], []
    for doc in docs:
        ids = bos + tokenizer(doc.text, add_special_tokens=False).input_ids
        for i in range(0, len(ids) - seq_len + 1, seq_len):
            rows.append(ids[i : i + seq_len])
            labels.append(domains[doc.domain])
    if not rows:
        raise CorpusFormatError(f"no document is at least {seq_len} tokens long")
    return torch.tensor(rows, dtype=torch.long), torch.tensor(labels, dtype=torch.long)


class _Chunks(Dataset):
    def __init__(self, ids: torch.Tensor, domains: torch.Tensor) -> None:
        self.ids, self.domains = ids, domains

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "domain": self.domains[i]}


try:
    import lightning as L

    _Base: Any = L.LightningDataModule
except ImportError:  # pragma: no cover - lightning is a dependency
    _Base = object


class TextChunkDataModule(_Base):
    """Fixed-length token chunks of a corpus, split by document into train/val.

    Args:
        files: ``.txt`` / ``.jsonl`` files or folders; if empty, the built-in ``corpus``.
        corpus: built-in corpus used when ``files`` is empty (``pydoc``).
        tokenizer: ``bpe:N`` (train a byte-level BPE of N tokens on the train documents) or a
            model spec for :func:`llm_methods.lm.load_lm` (its tokenizer only: ``smollm2`` or a
            local HF folder).
        seq_len, batch_size: chunk length in tokens and batch size.
        val_fraction: fraction of documents held out (split by document name, seeded).
    """

    def __init__(
        self,
        files: list[str] | None = None,
        corpus: str = "pydoc",
        tokenizer: str = "bpe:512",
        seq_len: int = 64,
        batch_size: int = 16,
        val_fraction: float = 0.2,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        if seq_len < 2:
            raise ValueError(f"seq_len must be >= 2, got {seq_len}")
        self.files, self.corpus, self.tokenizer_spec = list(files or []), corpus, tokenizer
        self.seq_len, self.batch_size = seq_len, batch_size
        self.val_fraction, self.seed, self.num_workers = val_fraction, seed, num_workers
        self._prepared = False
        self._setup()

    def _setup(self) -> None:
        docs = read_documents(self.files) if self.files else builtin_documents(self.corpus)
        keys = [d.source for d in docs]
        train_keys, val_keys = split_names(keys, self.val_fraction, self.seed)
        train_set, val_set = set(train_keys), set(val_keys)
        train = [d for d in docs if d.source in train_set]
        val = [d for d in docs if d.source in val_set]
        self.tokenizer = self._tokenizer(train)
        self.domain_names = sorted({d.domain for d in docs})
        index = {name: i for i, name in enumerate(self.domain_names)}
        self.train_data = _Chunks(*chunk_documents(self.tokenizer, train, self.seq_len, index))
        self.val_data = _Chunks(*chunk_documents(self.tokenizer, val, self.seq_len, index))

    def _tokenizer(self, train: list[Document]) -> Any:
        spec = self.tokenizer_spec
        if spec.startswith("bpe:"):
            from llm_methods.zoo.tokenizer import train_bpe

            size = spec[4:]
            if not size.isdigit() or int(size) < 260:
                raise ValueError(f"tokenizer {spec!r}: expected bpe:N with N >= 260")
            return train_bpe([d.text for d in train], int(size))
        from transformers import AutoTokenizer

        from llm_methods.lm.loading import _folder_for

        folder, _ = _folder_for(spec)
        return AutoTokenizer.from_pretrained(folder, local_files_only=True)

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def train_dataloader(self) -> DataLoader:
        gen = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            self.train_data,
            self.batch_size,
            shuffle=True,
            generator=gen,
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_data, self.batch_size, num_workers=self.num_workers)

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()


#: a prose paragraph: at least this share of its non-space characters are letters
PROSE_MIN_ALPHA = 0.8
#: ... and at least this many words of two or more letters
PROSE_MIN_WORDS = 8
_CODE_STARTS = (">>>", "...", "+-", "|", "==", "--")


def is_prose(paragraph: str) -> bool:
    """True for a paragraph of running English text: no indented line (pydoc's code blocks and
    grammar rules are indented), no doctest / table / rule line, >= ``PROSE_MIN_ALPHA`` letters
    among its non-space characters and >= ``PROSE_MIN_WORDS`` words (issue 40: the paper's
    chunks are prose; pydoc topics are about half code and tables)."""
    import re

    lines = [line for line in paragraph.split("\n") if line.strip()]
    if not lines or any(line[0] in " \t" for line in lines):
        return False
    if any(line.lstrip().startswith(_CODE_STARTS) for line in lines):
        return False
    text = " ".join(lines)
    chars = [c for c in text if not c.isspace()]
    letters = sum(c.isalpha() for c in chars) / max(1, len(chars))
    return letters >= PROSE_MIN_ALPHA and len(re.findall(r"[A-Za-z]{2,}", text)) >= PROSE_MIN_WORDS


def prose_paragraphs(text: str) -> list[str]:
    """The :func:`is_prose` paragraphs (blank-line separated) of ``text``, in order."""
    import re

    return [p.strip() for p in re.split(r"\n\s*\n", text) if is_prose(p)]


def _normalised(paragraph: str) -> str:
    return " ".join(paragraph.split())


def heldout_paragraphs(
    train_texts: Sequence[str], test_texts: Sequence[str]
) -> tuple[list[list[str]], int]:
    """The prose paragraphs of each of ``test_texts`` that occur in none of ``train_texts``'
    prose paragraphs (compared with whitespace normalised), and how many were dropped. pydoc
    repeats paragraphs across topics, so a topic split alone leaves held-out text verbatim in
    the kNN-LM datastore (review of issue 40)."""
    seen = {_normalised(p) for text in train_texts for p in prose_paragraphs(text)}
    kept: list[list[str]] = []
    dropped = 0
    for text in test_texts:
        paragraphs = prose_paragraphs(text)
        fresh = [p for p in paragraphs if _normalised(p) not in seen]
        dropped += len(paragraphs) - len(fresh)
        kept.append(fresh)
    return kept, dropped
