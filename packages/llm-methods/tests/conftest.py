from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The models here are tiny: on the shared 2-core machine two intra-op threads made forwards
    4-15x slower than one. Restored after each test."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A list is a mutable sequence; a tuple is an immutable one.",
    "Functions are defined with the def statement and return values.",
    "Exceptions are raised with raise and handled with try and except.",
] * 5


@pytest.fixture(scope="session")
def tiny():  # type: ignore[no-untyped-def]
    """A 2-layer 64-d Llama with a 300-token BPE tokenizer, built in the test (untrained)."""
    from llm_methods.zoo.models import tiny_lm

    return tiny_lm(TEXTS, vocab_size=300, n_layers=2, hidden=64, heads=4, seed=0)
