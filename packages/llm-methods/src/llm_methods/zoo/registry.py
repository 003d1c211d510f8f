"""The tiny-model zoo: named, seeded recipes (corpus, tokenizer, Llama config, steps), built once
and cached under ``iclr26_common.smollm2.cache_root() / "zoo" / "<name>-<recipe hash>"``.

A recipe change gives a new hash, so a stale build is never reused. A build writes into a
temporary sibling folder and renames it into place (two concurrent builds never leave a
half-written model). Each folder is a normal HF model folder (``load_lm(folder)`` works) plus
``zoo.json`` (recipe, held-out documents, loss curve, wall time).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from iclr26_common.cachedir import build_once, recipe_digest
from llm_methods.lm.errors import LMError

__all__ = ["ZOO", "ZooSpec", "build", "corpus_texts", "ensure_built", "zoo_dir"]

MARKER = "zoo.json"


@dataclass(frozen=True)
class ZooSpec:
    name: str
    corpus: str  # key of CORPORA
    description: str
    vocab_size: int = 1024
    n_layers: int = 2
    hidden: int = 64
    heads: int = 4
    seq_len: int = 128
    steps: int = 300
    batch_size: int = 16
    lr: float = 3e-3
    seed: int = 0

    def digest(self) -> str:
        return recipe_digest(self)


def _pydoc() -> tuple[list[str], list[str]]:
    from llm_methods.corpora import pydoc_topics, split_names

    topics = pydoc_topics()
    train, test = split_names(list(topics), 0.2, seed=0)
    return [topics[t] for t in train], [topics[t] for t in test]


def _markov() -> tuple[list[str], list[str]]:
    from llm_methods.zoo.synthetic import markov_domains

    corpus = markov_domains(seed=0)
    test = [t for i, t in enumerate(corpus.texts) if i % 10 == 0]
    train = [t for i, t in enumerate(corpus.texts) if i % 10 != 0]
    return train, test


CORPORA: dict[str, Callable[[], tuple[list[str], list[str]]]] = {
    "pydoc": _pydoc,
    "markov-domains": _markov,
}

ZOO: dict[str, ZooSpec] = {
    spec.name: spec
    for spec in (
        ZooSpec(
            "micro",
            "pydoc",
            "2 layers x 64, vocab 512, pydoc topics; seconds to build",
            vocab_size=512,
            n_layers=2,
            hidden=64,
            heads=4,
            seq_len=64,
            steps=120,
        ),
        ZooSpec(
            "pydoc-small",
            "pydoc",
            "4 layers x 128, vocab 2048, pydoc topics; ~2-3 min",
            vocab_size=2048,
            n_layers=4,
            hidden=128,
            heads=4,
            seq_len=128,
            steps=500,
            batch_size=16,
            lr=2e-3,
        ),
        ZooSpec(
            "markov-small",
            "markov-domains",
            "4 layers x 128, 4 synthetic Markov domains",
            vocab_size=1024,
            n_layers=4,
            hidden=128,
            heads=4,
            seq_len=128,
            steps=400,
        ),
    )
}


def corpus_texts(corpus: str) -> tuple[list[str], list[str]]:
    """(train, held-out) documents of a zoo corpus."""
    if corpus not in CORPORA:
        raise LMError(f"unknown corpus {corpus!r}; known: {', '.join(CORPORA)}")
    return CORPORA[corpus]()


def _spec(name: str, seed: int | None = None) -> ZooSpec:
    """The recipe ``name``; with ``seed``, the same recipe with that seed (another hash)."""
    if name not in ZOO:
        raise LMError(f"unknown zoo model {name!r}; known: {', '.join(ZOO)}")
    spec = ZOO[name]
    return spec if seed is None else dataclasses.replace(spec, seed=seed)


def zoo_dir(name: str, cache_dir: Path | None = None, seed: int | None = None) -> Path:
    """The folder of zoo model ``name``: ``cache_dir / "NAME-<recipe hash>"``; ``cache_dir`` is
    the folder of the zoo models (``llm-methods zoo build --cache-dir``), by default
    ``iclr26_common.smollm2.cache_root() / "zoo"`` (where ``--model zoo:NAME`` looks). ``seed``:
    the recipe with another seed, whose hash differs (``--model zoo:NAME`` finds only the
    recipe's own seed; pass such a folder as ``--model``)."""
    from iclr26_common.smollm2 import cache_root

    spec = _spec(name, seed)
    root = Path(cache_dir) if cache_dir is not None else cache_root() / "zoo"
    return root / f"{spec.name}-{spec.digest()}"


def build(
    name: str,
    cache_dir: Path | None = None,
    force: bool = False,
    quiet: bool = True,
    *,
    seed: int | None = None,
    device: str | None = None,
) -> Path:
    """Train zoo model ``name`` (seeded) and cache it in :func:`zoo_dir` (``cache_dir``: the
    folder of the zoo models); returns its folder. ``quiet=False``: progress lines over the
    training steps on stderr. ``seed``: the recipe with that seed (initial weights and batches;
    its own folder, see :func:`zoo_dir`); ``device``: where it trains (default: the CPU, so a
    recipe gives the same weights everywhere; the weights are initialised on the CPU either
    way)."""

    from llm_methods.corpora import chunk_ids
    from llm_methods.lm.threads import one_thread
    from llm_methods.lm.train import train_lm
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    spec = _spec(name, seed)
    target = zoo_dir(name, cache_dir, seed)
    if device is not None:
        from llm_methods.lm.loading import resolve_device

        device = str(resolve_device(device))  # ``--device gpu``: one line before any work
    if (target / MARKER).is_file() and not force:
        return target
    start = time.perf_counter()
    train, test = corpus_texts(spec.corpus)
    tokenizer = train_bpe(train, spec.vocab_size)
    stream: list[int] = []
    for text in train:
        stream += [tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False).input_ids]
    chunks = chunk_ids(stream, spec.seq_len)
    model = tiny_llama(
        len(tokenizer),
        spec.n_layers,
        spec.hidden,
        spec.heads,
        max_len=max(256, spec.seq_len),
        seed=spec.seed,
    )
    if device is not None:
        model = model.to(device)
    with one_thread():  # tiny matmuls: extra threads only add synchronisation (4-15x slower)
        log = train_lm(
            model, chunks, spec.steps, spec.batch_size, spec.lr, seed=spec.seed, quiet=quiet
        )

    def fill(staging: Path) -> str:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        info = {
            "recipe": dataclasses.asdict(spec),
            "train_docs": len(train),
            "test_docs": len(test),
            "train_tokens": len(stream),
            "final_loss": sum(log.losses[-20:]) / len(log.losses[-20:]),
            "losses": log.losses[:: max(1, len(log.losses) // 50)],
            "wall_s": time.perf_counter() - start,
        }
        return json.dumps(info, indent=1)

    return build_once(target, MARKER, fill, rebuild=force)


def ensure_built(name: str, cache_dir: Path | None = None) -> Path:
    """The cached folder of ``name``, building it first if needed."""
    return build(name, cache_dir)
