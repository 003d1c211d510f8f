"""``reuse_prefix`` and ``forward_residual``: less of the forward, the same numbers bit for bit."""

from __future__ import annotations

import pytest
import torch

from llm_methods.lm import (
    LMError,
    capture_residual,
    collate,
    final_hidden,
    forward_residual,
    replace_residual,
    reuse_prefix,
)


def _batch(tiny):  # type: ignore[no-untyped-def]
    rows = [
        tiny.tokenizer("The quick brown fox jumps", add_special_tokens=False).input_ids,
        tiny.tokenizer("over the lazy dog", add_special_tokens=False).input_ids,
    ]
    return collate(rows, tiny.tokenizer.pad_token_id)


def _loop(tiny, batch, reuse: bool, steps: int = 3):  # type: ignore[no-untyped-def]
    """A value-vector loop at layer 0: forward with v added after layer 0, backward, step."""
    v = torch.zeros(tiny.hidden_size, requires_grad=True)
    opt = torch.optim.Adam([v], lr=0.1)
    for p in tiny.model.parameters():
        p.requires_grad_(False)
    outs, grads = [], []
    try:
        with reuse_prefix(tiny, 0) if reuse else torch.enable_grad():
            for _ in range(steps):
                with replace_residual(tiny, 0, lambda h: h + v):
                    hidden = final_hidden(tiny, batch)
                loss = hidden[:, -1].square().mean()
                opt.zero_grad()
                loss.backward()
                outs.append(hidden.detach().clone())
                grads.append(v.grad.clone())
                opt.step()
    finally:
        for p in tiny.model.parameters():
            p.requires_grad_(True)
    return outs, grads


def test_reuse_prefix_gives_the_full_forwards_numbers(tiny) -> None:  # type: ignore[no-untyped-def]
    batch = _batch(tiny)
    calls = []
    handle = tiny.sublayer(0, "attn").register_forward_hook(lambda *a: calls.append(1))
    try:
        plain = _loop(tiny, batch, reuse=False)
        n_plain = len(calls)
        reused = _loop(tiny, batch, reuse=True)
        n_reused = len(calls) - n_plain
        with torch.no_grad():
            final_hidden(tiny, batch)  # after the context: layer 0 runs again
        n_after = len(calls) - n_plain - n_reused
    finally:
        handle.remove()
    for a, b in zip(plain[0] + plain[1], reused[0] + reused[1], strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(plain[0][0], plain[0][-1])  # v moved: the steps differ
    assert (n_plain, n_reused) == (3, 1)  # layer 0 ran once under reuse_prefix
    assert n_after == 1
    for layer in tiny.layers:  # restored on exit
        assert "forward" not in layer.__dict__


def test_reuse_prefix_refuses_another_batch(tiny) -> None:  # type: ignore[no-untyped-def]
    batch = _batch(tiny)
    with torch.no_grad(), reuse_prefix(tiny, 0):
        final_hidden(tiny, batch)
        with pytest.raises(LMError, match="same batch"):
            final_hidden(tiny, collate([[5, 6, 7]], tiny.tokenizer.pad_token_id))


def test_forward_residual_stops_after_the_layer(tiny) -> None:  # type: ignore[no-untyped-def]
    batch = _batch(tiny)
    with torch.no_grad(), capture_residual(tiny, [0, 1]) as full:
        tiny.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    calls = []
    handle = tiny.layers[1].register_forward_hook(lambda *a: calls.append(1))
    try:
        got = forward_residual(tiny, [0], batch.input_ids, batch.attention_mask)
    finally:
        handle.remove()
    assert list(got) == [0] and torch.equal(got[0], full[0]) and not calls
    both = forward_residual(tiny, [-1, 0], batch.input_ids, batch.attention_mask)
    assert torch.equal(both[1], full[1]) and torch.equal(both[0], full[0])
