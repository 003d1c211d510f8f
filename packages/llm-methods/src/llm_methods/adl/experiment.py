"""Miniature ADL experiment ``llm-methods.adl.narrow_finetune``.

A 4-layer Llama is pretrained here on pydoc topics (real English technical prose), then narrowly
finetuned (all weights) on the docstrings of the standard library's email modules, with the
finetuning data mixed with pretraining data at 1:0, 1:0.1 and 1:1. On unrelated held-out pydoc
text, δ̄ (mean finetuned − base activation, layer at relative depth 0.5, positions 0..4) is read
with the logit lens and Patchscope, and its tokens are graded against the email domain's
vocabulary (the 100 tokens most enriched in email docstrings vs pydoc). Baselines: the logit lens
of the mean base activation and of the mean finetuned activation at the same layer/positions.

Claims and thresholds, fixed here before any run:

  (a) at 1:0, the per-seed gap of the top-20 token relevance of δ̄'s logit lens (best position)
      over the better baseline (best position) is >= ``RELEVANCE_MARGIN`` (0.1): the whole
      95 % t-interval over seeds at or above it;
  (b) at 1:1 mixing, that gap is <= ``RELEVANCE_MARGIN`` (the trace is removed): the whole
      interval at or below it.

Issue 40: both claims on intervals (they were seed-mean point comparisons against 0); the
margin makes the null method (a baseline in δ̄'s place, gap 0) "not held" for (a).

Issue 26 (recorded before the re-run): the first design finetuned on 459 chunks of email-module
docstrings, i.e. 5.2 epochs at 1:0 and still 2.6 at 1:1, so mixing hardly changed the exposure.
The email domain is now the docstrings of ``EMAIL_MODULES`` (the email package's modules and the
mail protocols / mailbox), enough distinct chunks that 1:1 mixing takes the domain below one
epoch. (b) has two preconditions: the 1:1 finetune sees the domain for <= MAX_MIXED_EPOCHS
epochs (mixing changes the exposure), and the trace exists at 1:0 ((a)'s criterion met: one
cannot remove what is not there). The criteria are unchanged.

The built-in agent's domain naming, Patchscope relevance, the causal projection test and (full
run) steering are reported as metrics, not claims.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr26_common import Claim, Experiment, Precondition, Result, seed_everything
from iclr26_common.device import choose_device
from iclr26_common.effects import t_effect

if TYPE_CHECKING:
    import torch

    from llm_methods.adl.diff import ADLDifference
    from llm_methods.lm.loading import LM

__all__ = ["EMAIL_MODULES", "EXPERIMENT", "judge", "run"]

PAPER = (
    "Narrow Finetuning Leaves Clearly Readable Traces in Activation Differences (arXiv 2510.13900)"
)
DOMAIN = "email"
#: the finetuning domain's modules (issue 26: enough distinct chunks for mixing to matter)
EMAIL_MODULES = (
    "email.message",
    "email.utils",
    "email.parser",
    "email.headerregistry",
    "smtplib",
    "email._header_value_parser",
    "email.policy",
    "email._policybase",
    "email.feedparser",
    "email.generator",
    "email.header",
    "email.charset",
    "email.contentmanager",
    "email.mime.multipart",
    "email.mime.text",
    "email.mime.base",
    "email.iterators",
    "email.quoprimime",
    "email.base64mime",
    "email.errors",
    "email._parseaddr",
    "imaplib",
    "poplib",
    "mailbox",
    "mimetypes",
)
MAX_MIXED_EPOCHS = 1.0
FT_BATCH = 16
MIXES = (0.0, 0.1, 1.0)  # pretraining chunks per finetuning chunk
SEEDS = (0, 1, 2)
TOP_K = 20
#: claims (a)/(b): the relevance gap that counts as a trace (2 of the top-20 tokens; fixed before
#: the issue-40 run, which knew the earlier gaps of 0.77 at 1:0 and 0.83 at 1:1)
RELEVANCE_MARGIN = 0.1
VOCAB_TOP_N = 100
BPE_VOCAB = 1024
SEQ_LEN = 64
BASE_MODEL = {"n_layers": 4, "hidden": 64, "heads": 4}
N_UNRELATED = 200
PATCH_SCALES = (0.5, 1.0, 2.0, 4.0)
COHERENCE_DROP = 1.0  # nats/token below the unsteered outputs' coherence


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        # two seeds: a t-interval over seeds needs at least two
        return {"base_steps": 150, "ft_steps": 40, "seeds": SEEDS[:2], "steer": False}
    return {"base_steps": 600, "ft_steps": 150, "seeds": SEEDS, "steer": True}


def _encode(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Each text's token ids, without special tokens."""
    return [list(tokenizer(text, add_special_tokens=False).input_ids) for text in texts]


def _stream_chunks(tokenizer: Any, rows: list[list[int]]) -> list[list[int]]:
    """``SEQ_LEN``-token chunks of the texts' ids (:func:`_encode`), each text after a BOS."""
    from llm_methods.corpora import chunk_ids

    ids: list[int] = []
    for row in rows:
        ids += [tokenizer.bos_token_id, *row]
    return chunk_ids(ids, SEQ_LEN)


def _snippets(texts: list[str], n: int, seed: int) -> list[str]:
    """``n`` unrelated text pieces (~160 characters) from ``texts``."""
    pieces = [t[i : i + 160] for t in texts for i in range(0, len(t) - 160, 400)]
    pick = np.random.default_rng(seed).permutation(len(pieces))[:n]
    return [pieces[i] for i in sorted(pick)]


def _best_relevance(lm: LM, vectors: torch.Tensor, vocab: set[int]) -> float:
    from llm_methods.adl.diff import lens_token_ids, token_relevance

    return max(token_relevance(lens_token_ids(lm, v, TOP_K), vocab) for v in vectors)


def run(quick: bool, out_dir: Path) -> Result:
    import copy
    from collections import Counter

    from llm_methods.adl.agent import ADLEvidence, VocabularyOverlapAgent
    from llm_methods.adl.diff import (
        activation_difference,
        base_residuals,
        enriched_tokens,
        lens_token_ids,
        patchscope,
        projection_loss_change,
        token_relevance,
    )
    from llm_methods.corpora import DOCSTRING_DOMAINS, docstrings, split_names
    from llm_methods.lm import wrap
    from llm_methods.lm.threads import one_thread
    from llm_methods.lm.train import train_lm
    from llm_methods.zoo import corpus_texts
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    seed_everything(0)
    cfg = settings(quick)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows: dict[float, list[dict[str, float]]] = {m: [] for m in MIXES}
    extra: dict[str, Any] = {}
    with one_thread():
        pre_train, pre_test = corpus_texts("pydoc")
        domains = {name: docstrings(mods) for name, mods in DOCSTRING_DOMAINS.items()}
        domains[DOMAIN] = docstrings(EMAIL_MODULES)
        tokenizer = train_bpe(pre_train + [t for d in domains.values() for t in d], BPE_VOCAB)
        dom_train_idx, dom_test_idx = split_names(
            [str(i) for i in range(len(domains[DOMAIN]))], 0.1, seed=0
        )
        dom_train = [domains[DOMAIN][int(i)] for i in dom_train_idx]
        dom_test = [domains[DOMAIN][int(i)] for i in dom_test_idx]
        pre_ids = _encode(tokenizer, pre_train)  # tokenised once: the background and the data
        pre_counts = Counter(t for row in pre_ids for t in row)
        vocab = {
            n: enriched_tokens(tokenizer, d, pre_train, VOCAB_TOP_N, background_counts=pre_counts)
            for n, d in domains.items()
        }
        pre_chunks = _stream_chunks(tokenizer, pre_ids)
        dom_chunks = _stream_chunks(tokenizer, _encode(tokenizer, dom_train))
        epochs = {
            f"domain_epochs_1:{m}": round(cfg["ft_steps"] * FT_BATCH / (1 + m) / len(dom_chunks), 3)
            for m in MIXES
        }
        epochs.update(
            domain_chunks=len(dom_chunks),
            pretraining_chunks=len(pre_chunks),
            base_epochs=round(cfg["base_steps"] * 16 / len(pre_chunks), 3),
        )
        unrelated = _snippets(pre_test, N_UNRELATED, seed=0)
        # built (seeded) on the CPU, then moved: the same initial weights on every device;
        # the finetunes below are deep copies, on the same device
        device = choose_device()
        base_model = tiny_llama(len(tokenizer), **BASE_MODEL, seed=0).to(device)
        train_lm(base_model, pre_chunks, cfg["base_steps"], 16, 3e-3, seed=0)
        base = wrap(tokenizer, base_model, "base")
        agent = VocabularyOverlapAgent()
        base_states: dict[str, list[torch.Tensor]] = {}
        for seed in cfg["seeds"]:
            rng = np.random.default_rng(seed)
            for mix in MIXES:
                n_pre = round(mix * len(dom_chunks))
                data = dom_chunks + [pre_chunks[i] for i in rng.choice(len(pre_chunks), n_pre)]
                ft_model = copy.deepcopy(base_model)
                train_lm(ft_model, data, cfg["ft_steps"], FT_BATCH, 1e-3, seed=seed, warmup=5)
                ft = wrap(tokenizer, ft_model, "ft")
                diff = activation_difference(base, ft, unrelated)
                row = {
                    "delta": _best_relevance(ft, diff.delta, vocab[DOMAIN]),
                    "mean_base": _best_relevance(ft, diff.mean_base, vocab[DOMAIN]),
                    "mean_ft": _best_relevance(ft, diff.mean_ft, vocab[DOMAIN]),
                }
                lens = [lens_token_ids(ft, v, TOP_K) for v in diff.delta]
                best_j = int(np.argmax([token_relevance(t, vocab[DOMAIN]) for t in lens]))
                scoped = patchscope(ft, diff.delta[best_j], diff.layer, PATCH_SCALES, TOP_K)
                row["patchscope"] = max(token_relevance(t, vocab[DOMAIN]) for t in scoped.values())
                named = agent.name_domain(
                    ADLEvidence(lens=lens, patchscope=list(scoped.values())), vocab
                )
                row["agent_correct"] = float(named == DOMAIN)
                direction = diff.delta[1:].mean(0)
                if not base_states:  # the frozen base's residuals: the same for every finetune
                    base_states["ft"] = base_residuals(base, diff.layer, dom_test[:20])
                    base_states["pre"] = base_residuals(base, diff.layer, unrelated[:20])
                row["proj_dloss_ft_text"] = projection_loss_change(
                    base, ft, direction, diff.layer, dom_test[:20], base_states["ft"]
                )
                row["proj_dloss_pre_text"] = projection_loss_change(
                    base, ft, direction, diff.layer, unrelated[:20], base_states["pre"]
                )
                rows[mix].append(row)
                if cfg["steer"] and mix == 0.0 and seed == cfg["seeds"][0]:
                    extra.update(_steering(base, ft, diff, vocab[DOMAIN], best_j))
                del ft_model
    mean = {m: {k: float(np.mean([r[k] for r in v])) for k in v[0]} for m, v in rows.items()}
    _plot(out_dir / "adl_relevance.png", mean)
    pure, mixed = mean[0.0], mean[1.0]
    metrics: dict[str, Any] = {
        f"mix_{m}": {k: round(v, 4) for k, v in d.items()} for m, d in mean.items()
    }
    metrics.update(extra)
    metrics["exposure"] = epochs
    metrics["wall_s"] = time.perf_counter() - start
    claims = judge(rows[0.0], rows[1.0], epochs[f"domain_epochs_1:{max(MIXES)}"])
    return Result(
        summary=(
            f"Pydoc-pretrained 4x64 Llama finetuned on {DOMAIN} docstrings: delta-lens "
            f"relevance {pure['delta']:.2f} vs baselines {pure['mean_base']:.2f}/"
            f"{pure['mean_ft']:.2f} (1:0); {mixed['delta']:.2f} vs "
            f"{mixed['mean_base']:.2f}/{mixed['mean_ft']:.2f} at 1:1; agent named the "
            f"domain in {pure['agent_correct']:.0%} of 1:0 finetunes."
        ),
        metrics=metrics,
        seeds=list(cfg["seeds"]),
        scale=(
            f"4x64 Llama, BPE {BPE_VOCAB}, base {cfg['base_steps']} steps, finetunes "
            f"{cfg['ft_steps']} steps x mixes {list(MIXES)} x {len(cfg['seeds'])} seed(s), "
            f"{N_UNRELATED} unrelated texts, top-{TOP_K} tokens"
        ),
        claims=claims,
    )


def _gaps(rows: list[dict[str, float]]) -> np.ndarray:
    """Per seed: relevance(δ̄ lens) − max(relevance(mean base), relevance(mean finetuned))."""
    return np.array([r["delta"] - max(r["mean_base"], r["mean_ft"]) for r in rows])


def judge(
    pure: list[dict[str, float]], mixed: list[dict[str, float]], mixed_epochs: float
) -> list[Claim]:
    """The two claims from the per-seed relevances at 1:0 (``pure``) and 1:1 (``mixed``), rows
    ``{"delta", "mean_base", "mean_ft"}`` of the same seeds, and the 1:1 finetune's domain
    epochs. Effect: the per-seed gap of δ̄'s relevance over the better baseline, with a
    t-interval over seeds, against ``RELEVANCE_MARGIN``: (a) ``>=`` it at 1:0, (b) ``<=`` it at
    1:1 (the trace is gone: δ̄ reads no more of the domain than the baselines, within the
    margin)."""
    keys = ("delta", "mean_base", "mean_ft")
    if len(pure) < 2 or len(mixed) != len(pure):
        raise ValueError(f"need the same >= 2 seeds at both mixes, got {len(pure)}, {len(mixed)}")
    name = f"top-{TOP_K} relevance gap of the delta lens over the better baseline"
    effect_a = t_effect(
        _gaps(pure), name=f"{name}, mix 1:0", threshold=RELEVANCE_MARGIN, binary=False
    )
    effect_b = t_effect(
        _gaps(mixed),
        name=f"{name}, mix 1:1",
        threshold=RELEVANCE_MARGIN,
        direction="<=",
        binary=False,
    )

    def means(rows: list[dict[str, float]]) -> dict[str, float]:
        return {k: round(float(np.mean([r[k] for r in rows])), 4) for k in keys}

    return [
        Claim.test(
            text="The logit lens of the activation difference surfaces the finetuning domain.",
            effect=effect_a,
            measured=means(pure),
        ),
        Claim.test(
            text="Mixing pretraining data 1:1 into the finetune removes the trace.",
            effect=effect_b,
            measured=means(mixed),
            preconditions=[
                Precondition(
                    "mixing changes the exposure",
                    f"domain epochs of the 1:1 finetune <= {MAX_MIXED_EPOCHS}",
                    {"epochs": mixed_epochs},
                    mixed_epochs <= MAX_MIXED_EPOCHS,
                ),
                Precondition(
                    "the trace exists at 1:0",
                    "claim (a) held",
                    means(pure),
                    effect_a.decide() == "held",
                ),
            ],
        ),
    ]


def _steering(base: LM, ft: LM, diff: ADLDifference, vocab: set[int], j: int) -> dict[str, float]:
    """Max coherent α for δ̄_j and the baselines' vectors (rescaled to δ̄_j's norm); the domain
    relevance of the steered generations (base model steered, judged by the base model)."""
    from llm_methods.adl.diff import coherence, max_coherent_alpha
    from llm_methods.lm import generate

    prompts = ["The", "In this", "A", "We"]
    plain = generate(base, prompts, max_new_tokens=16)
    floor = coherence(base, plain) - COHERENCE_DROP
    out = {}
    target = diff.delta[j].norm()
    for name, vec in (
        ("delta", diff.delta[j]),
        ("mean_base", diff.mean_base[j]),
        ("mean_ft", diff.mean_ft[j]),
    ):
        vec = vec / vec.norm().clamp_min(1e-12) * target
        alpha, texts = max_coherent_alpha(
            base, vec, diff.layer, prompts, base, floor, alpha_max=16.0, steps=4
        )
        ids = [
            t for text in texts for t in base.tokenizer(text, add_special_tokens=False).input_ids
        ]
        out[f"steer_alpha_{name}"] = alpha
        out[f"steer_relevance_{name}"] = sum(t in vocab for t in ids) / max(1, len(ids))
    return out


def _plot(path: Path, mean: dict[float, dict[str, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("delta", "mean_base", "mean_ft", "patchscope")
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.2
    for i, key in enumerate(keys):
        ax.bar(
            [m + i * width for m in range(len(mean))],
            [mean[m][key] for m in mean],
            width,
            label=key,
        )
    ax.set_xticks([m + 1.5 * width for m in range(len(mean))], [f"1:{m}" for m in mean])
    ax.set(xlabel="finetune : pretraining mix", ylabel=f"top-{TOP_K} token relevance")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


EXPERIMENT = Experiment(
    name="llm-methods.adl.narrow_finetune",
    paper=PAPER,
    claim=(
        "The mean activation difference between a narrowly finetuned model and its base, "
        "read with the logit lens, reveals the finetuning domain; mixing pretraining data "
        "into the finetune removes this trace."
    ),
    run=run,
)
