"""``llm-methods adl diff`` / ``adl kl``: ADL readouts and per-token KL for a base/finetuned
pair on your texts."""

from __future__ import annotations

import json
from argparse import Namespace
from typing import Any

__all__ = ["adl_diff", "adl_kl"]


def adl_diff(ns: Namespace) -> dict[str, Any]:
    """Writes ``adl.json`` (layer, per-position logit-lens and Patchscope tokens, relevance when
    ``--domain-texts`` is given) into ``ns.out``; returns the summary."""
    import torch

    from llm_methods.adl.diff import (
        activation_difference,
        enriched_tokens,
        lens_token_ids,
        patchscope,
        token_relevance,
    )
    from llm_methods.dispersion.data import read_documents
    from llm_methods.lm import load_lm

    texts = [d.text for d in read_documents(ns.texts)]
    base = load_lm(ns.base, ns.device, ns.dtype)
    ft = load_lm(ns.ft, ns.device, ns.dtype)
    diff = activation_difference(base, ft, texts, ns.layer, ns.positions)
    decode = ft.tokenizer.decode
    lens = [lens_token_ids(ft, v, ns.top_k) for v in diff.delta]
    best = (
        int(torch.stack([v.norm() for v in diff.delta[1:]]).argmax()) + 1 if ns.positions > 1 else 0
    )
    scoped = patchscope(ft, diff.delta[best], diff.layer, ns.scales, ns.top_k)
    out: dict[str, Any] = {
        "layer": diff.layer,
        "n_texts": diff.n_texts,
        "delta_norm": [round(float(v.norm()), 4) for v in diff.delta],
        "lens": [[decode([t]) for t in ids] for ids in lens],
        "patchscope_position": best,
        "patchscope": {str(s): [decode([t]) for t in ids] for s, ids in scoped.items()},
    }
    if ns.domain_texts:
        domain = [d.text for d in read_documents(ns.domain_texts)]
        vocab = enriched_tokens(ft.tokenizer, domain, texts, ns.vocab_size)
        out["relevance_delta"] = [token_relevance(ids, vocab) for ids in lens]
        base_lens = [lens_token_ids(ft, v, ns.top_k) for v in diff.mean_base]
        ft_lens = [lens_token_ids(ft, v, ns.top_k) for v in diff.mean_ft]
        out["relevance_mean_base"] = [token_relevance(ids, vocab) for ids in base_lens]
        out["relevance_mean_ft"] = [token_relevance(ids, vocab) for ids in ft_lens]
    if getattr(ns, "toolkit_dir", None) is not None:
        from llm_methods.adl.toolkit import write_toolkit_results

        out["toolkit_dir"] = str(write_toolkit_results(ns.toolkit_dir, ns.dataset_id, diff, ft))
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "adl.json").write_text(json.dumps(out, indent=1, ensure_ascii=False))
    return out


def adl_kl(ns: Namespace) -> dict[str, Any]:
    """Writes ``kl.json`` (statistics, per-text means, top texts and tokens) into ``ns.out``."""
    from llm_methods.adl.kl import kl_summary
    from llm_methods.dispersion.data import read_documents
    from llm_methods.lm import load_lm

    docs = read_documents(ns.texts)
    base = load_lm(ns.base, ns.device, ns.dtype)
    ft = load_lm(ns.ft, ns.device, ns.dtype)
    res = kl_summary(base, ft, [d.text for d in docs], ns.temperature, ns.top, ns.max_tokens)
    decode = ft.tokenizer.decode
    out: dict[str, Any] = {
        "base": ns.base,
        "ft": ns.ft,
        "temperature": ns.temperature,
        "stats": res.stats,
        "per_text_mean": [
            {"source": d.source, "kl": round(k, 6)}
            for d, k in zip(docs, res.per_text_mean, strict=True)
        ],
        "top_texts": [
            {"source": docs[i].source, "kl": round(k, 6), "text": docs[i].text[:200]}
            for i, k in res.top_texts
        ],
        "top_tokens": [
            {"source": docs[i].source, "position": t, "token": decode([tok]), "kl": round(k, 6)}
            for i, t, tok, k in res.top_tokens
        ],
    }
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "kl.json").write_text(json.dumps(out, indent=1, ensure_ascii=False))
    return out
