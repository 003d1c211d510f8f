"""``llm-methods adl diff`` / ``adl kl``: ADL readouts and per-token KL for a base/finetuned
pair on your texts: ``--model`` is the finetuned model under study, ``--base-model`` the
reference it is compared with (``--ft`` / ``--base`` before 0.8.0; abbreviations are off, so
``--base`` is refused, not read as ``--base-model``).

``diff`` writes the mean activation difference's logit-lens and Patchscope tokens
(:func:`adl_diff`), ``kl`` the per-token KL statistics (:func:`adl_kl`); :func:`main` only parses
and prints.
"""

from __future__ import annotations

import argparse
import json
from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.device import add_device_option

__all__ = ["ABOUT", "adl_diff", "adl_kl", "main"]

ABOUT = "Activation Difference Lens model diffing (arXiv 2510.13900)"
PROG = "llm-methods adl"


def adl_diff(ns: Namespace) -> dict[str, Any]:
    """Writes ``adl.json`` (layer, per-position logit-lens and Patchscope tokens, relevance when
    ``--domain-texts`` is given) into ``ns.out``; returns the summary."""
    import torch

    from iclr26_common.outputs import write_text
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
    base = load_lm(ns.base_model, ns.device, ns.dtype)
    ft = load_lm(ns.model, ns.device, ns.dtype)
    quiet = getattr(ns, "quiet", True)
    overwrite = bool(getattr(ns, "overwrite", False))
    if getattr(ns, "toolkit_dir", None) is not None:  # before the activations are computed
        from llm_methods.adl.diff import relative_layer
        from llm_methods.adl.toolkit import check_toolkit_target

        layer = relative_layer(ft) if ns.layer is None else ft.layer_index(ns.layer)
        check_toolkit_target(ns.toolkit_dir, ns.dataset_id, layer, overwrite=overwrite)
    diff = activation_difference(base, ft, texts, ns.layer, ns.positions, quiet=quiet)
    decode = ft.tokenizer.decode
    lens = [lens_token_ids(ft, v, ns.top_k) for v in diff.delta]
    best = (
        int(torch.stack([v.norm() for v in diff.delta[1:]]).argmax()) + 1 if ns.positions > 1 else 0
    )
    scoped = patchscope(ft, diff.delta[best], diff.layer, ns.scales, ns.top_k)
    out: dict[str, Any] = {
        "base": ns.base_model,
        "ft": ns.model,
        "seed": getattr(ns, "seed", 0),
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

        written = write_toolkit_results(
            ns.toolkit_dir, ns.dataset_id, diff, ft, overwrite=overwrite
        )
        out["toolkit_dir"] = str(written)
    write_text(ns.out / "adl.json", json.dumps(out, indent=1, ensure_ascii=False))
    return out


def adl_kl(ns: Namespace) -> dict[str, Any]:
    """Writes ``kl.json`` (statistics, per-text means, top texts and tokens) into ``ns.out``."""
    from iclr26_common.outputs import write_text
    from llm_methods.adl.kl import kl_summary
    from llm_methods.dispersion.data import read_documents
    from llm_methods.lm import load_lm

    docs = read_documents(ns.texts)
    base = load_lm(ns.base_model, ns.device, ns.dtype)
    ft = load_lm(ns.model, ns.device, ns.dtype)
    res = kl_summary(
        base,
        ft,
        [d.text for d in docs],
        ns.temperature,
        ns.top,
        ns.max_tokens,
        quiet=getattr(ns, "quiet", True),
    )
    decode = ft.tokenizer.decode
    out: dict[str, Any] = {
        "base": ns.base_model,
        "ft": ns.model,
        "seed": getattr(ns, "seed", 0),
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
    write_text(ns.out / "kl.json", json.dumps(out, indent=1, ensure_ascii=False))
    return out


def _pair_args(parser: argparse.ArgumentParser) -> None:
    """``--model`` (the finetuned model under study), ``--base-model`` (the reference),
    ``--device``, ``--dtype``, ``--seed`` and ``--quiet``: the options both commands share."""
    from llm_methods.method_cli import seed_args

    parser.add_argument(
        "--model", required=True, help="the finetuned model under study (a model spec)"
    )
    parser.add_argument(
        "--base-model",
        required=True,
        help="the reference model it is compared with (a model spec, same tokenizer)",
    )
    add_device_option(parser)
    parser.add_argument("--dtype", default=None, help="float32 / bf16 / fp16 (default: per device)")
    seed_args(parser)


def _parser() -> argparse.ArgumentParser:
    from iclr26_common.cli_support import finite_float
    from llm_methods.method_cli import ArgumentParser, out_args, show_defaults

    parser = ArgumentParser(prog=PROG, description=ABOUT)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # no abbreviations: ``--base`` (removed in 0.8.0) is refused, not read as ``--base-model``
    diff = sub.add_parser(
        "diff",
        allow_abbrev=False,
        help="mean activation difference of a finetuned vs base model: logit lens + Patchscope",
        description="Mean activation difference (finetuned - base) over the first positions of "
        "--texts at one layer, read with the logit lens and Patchscope; writes OUT/adl.json.",
    )
    _pair_args(diff)
    diff.add_argument(
        "--texts", nargs="+", required=True, help="unrelated texts: .txt/.jsonl files or folders"
    )
    diff.add_argument(
        "--domain-texts",
        nargs="*",
        default=[],
        help="finetuning-domain texts to grade token relevance (optional)",
    )
    out_args(diff, "output folder", required=True)
    diff.add_argument("--layer", type=int, default=None, help="default: relative depth 0.5")
    diff.add_argument("--positions", type=int, default=5)
    diff.add_argument("--top-k", type=int, default=20)
    diff.add_argument("--vocab-size", type=int, default=100, help="domain vocabulary size")
    diff.add_argument("--scales", type=finite_float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    diff.add_argument(
        "--toolkit-dir",
        type=Path,
        default=None,
        help="also write diffing-toolkit's layout (mean_pos_{j}.pt, "
        "logit_lens_pos_{j}.pt, ...) there, for its dashboard and agent",
    )
    diff.add_argument(
        "--dataset-id", default="texts", help="dataset name in the toolkit layout (layer_L/NAME/)"
    )
    kl = sub.add_parser(
        "kl",
        allow_abbrev=False,
        help="per-token KL(finetuned || base) on texts: statistics and top texts / tokens",
        description="Per-token KL divergence of the finetuned from the base model's next-token "
        "distributions on --texts (diffing-toolkit's kl method); writes OUT/kl.json.",
    )
    _pair_args(kl)
    kl.add_argument("--texts", nargs="+", required=True, help=".txt/.jsonl files or folders")
    out_args(kl, "output folder", required=True)
    kl.add_argument("--temperature", type=finite_float, default=1.0)
    kl.add_argument("--top", type=int, default=20, help="texts / tokens to list")
    kl.add_argument("--max-tokens", type=int, default=1024, help="tokens per text")
    return show_defaults(parser)


def main(argv: Sequence[str]) -> int:
    from iclr26_common.outputs import check_out_folder
    from iclr26_common.seeding import seed_everything

    parser = _parser()
    ns = parser.parse_args(list(argv))
    seed_everything(ns.seed)
    if ns.command == "kl":
        if not ns.temperature > 0 or ns.top < 1 or ns.max_tokens < 1:
            parser.error("--temperature must be > 0, --top and --max-tokens >= 1")
        with check_out_folder(ns.out, overwrite=ns.overwrite):  # before loading the models
            result = adl_kl(ns)
        print(
            f"mean per-token KL {result['stats']['mean']:.4g} nats over "
            f"{result['stats']['tokens']} tokens; wrote {ns.out / 'kl.json'}"
        )
        return 0
    if ns.positions < 1 or ns.top_k < 1:
        parser.error("--positions and --top-k must be >= 1")
    folder = check_out_folder(ns.out, overwrite=ns.overwrite)  # before loading the models
    if ns.toolkit_dir is not None:  # a layout that collects runs: a folder it can write into
        check_out_folder(ns.toolkit_dir, option="--toolkit-dir", overwrite=True)
    with folder:
        out = adl_diff(ns)
    for j, tokens in enumerate(out["lens"]):
        print(f"position {j}: {' | '.join(t.strip() or repr(t) for t in tokens[:10])}")
    print(f"wrote {ns.out / 'adl.json'}")
    return 0
