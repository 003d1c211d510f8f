"""Offline text sources: what is available on any machine with this package, and its licence.

- ``pydoc``: the 79 topics of ``pydoc_data.topics`` shipped with CPython (~465k characters of
  English technical prose); PSF License 2.0.
- ``docstrings``: module, class and function docstrings of installed standard-library modules
  (real English prose in distinct domains: email, json, http, ...); PSF License 2.0.
- ``wordfreq``: word-frequency lists for dozens of languages from the ``wordfreq`` wheel
  (code Apache-2.0; data CC BY-SA 4.0, built from Wikipedia, subtitles, news, books, ...).

:data:`SOURCES` lists them for ``llm-methods corpora``.
"""

from __future__ import annotations

import importlib
import inspect
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "DOCSTRING_DOMAINS",
    "SOURCES",
    "Source",
    "chunk_ids",
    "docstrings",
    "pydoc_topics",
    "wordfreq_words",
]


@dataclass(frozen=True)
class Source:
    name: str
    description: str
    licence: str


SOURCES = (
    Source("pydoc", "pydoc_data.topics: 79 topics of the CPython reference (English)", "PSF-2.0"),
    Source("docstrings", "docstrings of installed standard-library modules (English)", "PSF-2.0"),
    Source(
        "wordfreq",
        "wordfreq word-frequency lists, 40+ languages",
        "Apache-2.0 code, CC-BY-SA-4.0 data",
    ),
)

# standard-library modules grouped into domains with distinct vocabulary
DOCSTRING_DOMAINS: dict[str, tuple[str, ...]] = {
    "email": ("email.message", "email.utils", "email.parser", "email.headerregistry", "smtplib"),
    "http": ("http.client", "http.server", "http.cookies", "urllib.request", "urllib.parse"),
    "numbers": ("decimal", "fractions", "statistics", "random", "math", "cmath"),
    "files": ("pathlib", "shutil", "os", "tempfile", "zipfile", "tarfile"),
    "text": ("string", "textwrap", "difflib", "re", "codecs", "unicodedata"),
}


def pydoc_topics() -> dict[str, str]:
    """``{topic: text}`` from ``pydoc_data.topics`` (79 topics)."""
    from pydoc_data.topics import topics

    return {name: text for name, text in sorted(topics.items()) if text.strip()}


def docstrings(modules: Sequence[str], min_chars: int = 40) -> list[str]:
    """Docstrings (module, classes, functions, methods) of the named importable modules.

    Raises ``ValueError`` naming a module that cannot be imported.
    """
    out: list[str] = []
    seen: set[int] = set()
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise ValueError(f"module {name!r} cannot be imported ({error})") from error
        objects = [module]
        for _, member in inspect.getmembers(module):
            if getattr(member, "__module__", None) == module.__name__:
                objects.append(member)
                if inspect.isclass(member):
                    objects += [m for _, m in inspect.getmembers(member, inspect.isfunction)]
        for obj in objects:
            doc = inspect.getdoc(obj)
            if doc and len(doc) >= min_chars and id(doc) not in seen:
                seen.add(id(doc))
                out.append(doc)
    return out


def wordfreq_words(lang: str, n: int = 2000, alpha_only: bool = True) -> list[str]:
    """The ``n`` most frequent words of ``lang`` (ISO code), letters only by default."""
    import wordfreq

    if lang not in wordfreq.available_languages():
        raise ValueError(f"wordfreq has no list for language {lang!r}")
    words = wordfreq.top_n_list(lang, n * 2 if alpha_only else n)
    if alpha_only:
        words = [w for w in words if w.isalpha()]
    return words[:n]


def chunk_ids(
    ids: Sequence[int], length: int, max_chunks: int | None = None, seed: int | None = None
) -> list[list[int]]:
    """Cut a token stream into non-overlapping chunks of exactly ``length`` tokens (a shorter
    tail is dropped); ``seed`` shuffles before ``max_chunks`` keeps the first ones."""
    if length < 2:
        raise ValueError(f"chunk length must be >= 2, got {length}")
    chunks = [list(ids[i : i + length]) for i in range(0, len(ids) - length + 1, length)]
    if seed is not None:
        random.Random(seed).shuffle(chunks)
    return chunks if max_chunks is None else chunks[:max_chunks]


def split_names(
    names: Sequence[str], test_fraction: float = 0.2, seed: int = 0
) -> tuple[list[str], list[str]]:
    """Deterministic (train, test) split of document names (e.g. pydoc topics), test non-empty."""
    order = sorted(names)
    random.Random(seed).shuffle(order)
    n_test = max(1, round(len(order) * test_fraction))
    return sorted(order[n_test:]), sorted(order[:n_test])
