"""Miniature LinguaMap experiment ``llm-methods.linguamap.selective_ft``.

A 10-layer × 64 Llama is pretrained here on the synthetic multilingual "repeat" task with real
English/Spanish/German words (``linguamap.data``) under a failure-inducing mixture (Spanish and
German questions answered in English with probability ``P_FAIL``). It is then fine-tuned on
language-consistent data (all four scenarios, loss masked to the answer tokens) with the same
data, steps and learning rate in four ways: only the last ``LAST_K`` layer(s), all weights, the
same number of randomly chosen other layers, and LoRA (rank ``LORA_R`` on q/v of every layer).
Evaluation on Spanish/German questions of the four scenarios: language consistency (py3langid,
restricted to en/es/de) and task accuracy (concepts, any language), separately.

Claims and thresholds, fixed here before any run:

  (a) last-k selective FT reaches seed-mean language consistency within ``CONSISTENCY_GAP_MAX``
      (2 points) of full FT (or above) while training <= ``PARAM_FRACTION_MAX`` (10 %) of the
      parameters;
  (b) its seed-mean task accuracy is not lower than full FT's minus ``ACCURACY_GAP_MAX`` (2 points).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr26_common import Claim, Experiment, Result, seed_everything
from iclr26_common.device import choose_device

if TYPE_CHECKING:
    from llm_methods.linguamap.data import Example, Lexicon
    from llm_methods.lm.loading import LM

__all__ = ["EXPERIMENT", "run"]

PAPER = "LinguaMap: language control in multilingual LLMs (arXiv 2601.20009)"
CONSISTENCY_GAP_MAX = 0.02
ACCURACY_GAP_MAX = 0.02
PARAM_FRACTION_MAX = 0.10
P_FAIL = 0.7
LAST_K = 1
LORA_R = 16
MODEL = {"n_layers": 10, "hidden": 64, "heads": 4}
BPE_VOCAB = 512
SEQ_LEN = 64
FT_LEN = 40
VARIANTS = ("last_k", "full", "random_layers", "lora")


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"pre_steps": 120, "ft_steps": 20, "eval_per_scenario": 16, "seeds": (0,)}
    return {"pre_steps": 1000, "ft_steps": 150, "eval_per_scenario": 64, "seeds": (0, 1)}


def _pack(tokenizer: Any, examples: list[Example]) -> list[list[int]]:
    from llm_methods.corpora import chunk_ids

    text = "".join(e.prompt + e.answer + "\n" for e in examples)
    return chunk_ids(tokenizer(text, add_special_tokens=False).input_ids, SEQ_LEN)


def _masked(tokenizer: Any, examples: list[Example]) -> tuple[list[list[int]], list[list[int]]]:
    """One example per row, padded to ``FT_LEN``; loss mask 1 on answer (+ newline) tokens."""
    rows, masks = [], []
    pad = tokenizer.pad_token_id
    for e in examples:
        head = tokenizer(e.prompt, add_special_tokens=False).input_ids
        tail = tokenizer(e.answer + "\n", add_special_tokens=False).input_ids
        ids = (head + tail)[:FT_LEN]
        mask = ([0] * len(head) + [1] * len(tail))[:FT_LEN]
        rows.append(ids + [pad] * (FT_LEN - len(ids)))
        masks.append(mask + [0] * (FT_LEN - len(mask)))
    return rows, masks


def _eval_set(lex: Lexicon, per_scenario: int, seed: int) -> list[Example]:
    from llm_methods.linguamap.data import LANGS, SCENARIOS, make_example

    rng = np.random.default_rng(seed)
    out = []
    for scenario in SCENARIOS:
        for i in range(per_scenario):
            q = ("es", "de")[i % 2]
            a = LANGS[int(rng.integers(3))] if scenario == "bilingual" else q
            out.append(make_example(lex, rng, q, a, scenario))
    return out


def _variant(lm: LM, name: str, seed: int) -> tuple[LM, float]:
    from llm_methods.lm import add_lora, count_parameters, train_only_layers

    if name == "full":
        trainable, total = count_parameters(lm.model)
        return lm, trainable / total
    if name == "lora":
        _, total = count_parameters(lm.model)
        lora = add_lora(lm, r=LORA_R, alpha=2 * LORA_R)
        return lora, count_parameters(lora.model)[0] / total
    if name == "last_k":
        layers = list(range(lm.n_layers - LAST_K, lm.n_layers))
    else:
        rng = np.random.default_rng(seed)
        layers = sorted(int(i) for i in rng.choice(lm.n_layers - LAST_K, LAST_K, replace=False))
    trainable, total = train_only_layers(lm, layers)
    return lm, trainable / total


def run(quick: bool, out_dir: Path) -> Result:
    from llm_methods.linguamap.analysis import (
        cross_lingual_cosine,
        evaluate,
        lens_language_probability,
    )
    from llm_methods.linguamap.data import (
        build_lexicon,
        consistent_examples,
        make_example,
        pretraining_examples,
    )
    from llm_methods.lm import wrap
    from llm_methods.lm.threads import one_thread
    from llm_methods.lm.train import train_lm
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    seed_everything(0)
    cfg = settings(quick)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    with one_thread():
        lex = build_lexicon()
        pre = pretraining_examples(lex, 6000, P_FAIL, seed=0)
        tokenizer = train_bpe([e.prompt + e.answer for e in pre], BPE_VOCAB)
        # built (seeded) on the CPU, then moved: the same initial weights on every device; the
        # fine-tuned variants are deep copies (LoRA adapters: peft places them with their layer)
        device = choose_device()
        base_model = tiny_llama(len(tokenizer), **MODEL, seed=0).to(device)
        train_lm(base_model, _pack(tokenizer, pre), cfg["pre_steps"], 16, 3e-3, seed=0)
        base = wrap(tokenizer, base_model, "pretrained")
        evals = _eval_set(lex, cfg["eval_per_scenario"], seed=123)
        before = evaluate(base, evals, lex)
        es_prompts = [
            make_example(lex, np.random.default_rng(i), "es", "es").prompt for i in range(32)
        ]
        lens_before = lens_language_probability(base, es_prompts, lex)
        rng = np.random.default_rng(7)
        par = [make_example(lex, rng, "en", "en") for _ in range(32)]
        parallel = {
            lang: [" ".join(lex.words[lang][c] for c in e.concepts) for e in par]
            for lang in ("en", "es", "de")
        }
        cosine = cross_lingual_cosine(base, parallel)
        lens_after = None
        for seed in cfg["seeds"]:
            rows, masks = _masked(tokenizer, consistent_examples(lex, 4000, seed=100 + seed))
            for name in VARIANTS:
                lm, fraction = _variant(wrap(tokenizer, copy.deepcopy(base_model)), name, seed)
                train_lm(
                    lm.model, rows, cfg["ft_steps"], 16, 2e-3, seed=seed, warmup=5, loss_mask=masks
                )
                scores = evaluate(lm, evals, lex)
                results[name].append({**scores, "param_fraction": fraction})
                if name == "last_k" and lens_after is None:
                    lens_after = lens_language_probability(lm, es_prompts, lex)
    mean = {
        v: {k: float(np.mean([r[k] for r in rows])) for k in rows[0]} for v, rows in results.items()
    }
    assert lens_after is not None
    _plot(out_dir, mean, lens_before, lens_after, cosine)
    sel, full = mean["last_k"], mean["full"]
    held_a = (
        sel["consistency"] >= full["consistency"] - CONSISTENCY_GAP_MAX
        and sel["param_fraction"] <= PARAM_FRACTION_MAX
    )
    held_b = sel["accuracy"] >= full["accuracy"] - ACCURACY_GAP_MAX
    metrics: dict[str, Any] = {
        "before_ft": before,
        **{v: m for v, m in mean.items()},
        "lens_es_before": lens_before.round(3).tolist(),
        "lens_es_after_last_k": lens_after.round(3).tolist(),
        "cross_lingual_cosine": cosine.round(3).tolist(),
        "wall_s": time.perf_counter() - start,
    }
    claims = [
        Claim(
            text="Fine-tuning only the last layers restores language consistency like full FT.",
            criterion=(
                f"consistency(last {LAST_K}) >= consistency(full) - "
                f"{CONSISTENCY_GAP_MAX} and trained fraction <= {PARAM_FRACTION_MAX}"
            ),
            measured={
                "last_k": round(sel["consistency"], 4),
                "full": round(full["consistency"], 4),
                "fraction": round(sel["param_fraction"], 4),
            },
            verdict=held_a,
        ),
        Claim(
            text="Selective fine-tuning keeps task accuracy.",
            criterion=f"accuracy(last {LAST_K}) >= accuracy(full) - {ACCURACY_GAP_MAX}",
            measured={"last_k": round(sel["accuracy"], 4), "full": round(full["accuracy"], 4)},
            verdict=held_b,
        ),
    ]
    return Result(
        summary=(
            f"10x64 Llama with an induced failure (consistency {before['consistency']:.2f}, "
            f"accuracy {before['accuracy']:.2f}); after FT: "
            + "; ".join(
                f"{v}: consistency {m['consistency']:.2f}, accuracy "
                f"{m['accuracy']:.2f}, {100 * m['param_fraction']:.1f}% params"
                for v, m in mean.items()
            )
        ),
        metrics=metrics,
        seeds=list(cfg["seeds"]),
        scale=(
            f"10x64 Llama, BPE {BPE_VOCAB}, pretraining {cfg['pre_steps']} steps "
            f"(p_fail {P_FAIL}), FT {cfg['ft_steps']} steps x {len(VARIANTS)} variants x "
            f"{len(cfg['seeds'])} seed(s), {len(evals)} eval prompts"
        ),
        claims=claims,
    )


def _plot(
    out_dir: Path,
    mean: dict[str, dict[str, float]],
    lens_before: np.ndarray,
    lens_after: np.ndarray,
    cosine: np.ndarray,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    for v, m in mean.items():
        ax.scatter(
            100 * m["param_fraction"], m["consistency"], marker="o", label=f"{v} consistency"
        )
        ax.scatter(100 * m["param_fraction"], m["accuracy"], marker="x", label=f"{v} accuracy")
    ax.set(xscale="log", xlabel="% parameters trained", ylabel="rate", title="after fine-tuning")
    ax.legend(fontsize=7)
    for lens, style, tag in ((lens_before, "--", "before"), (lens_after, "-", "after last-k FT")):
        for i, lang in enumerate(("en", "es", "de")):
            axes[1].plot(lens[:, i], style, label=f"{lang} ({tag})")
    axes[1].set(
        xlabel="layer",
        ylabel="logit-lens language probability",
        title="Spanish questions, answer position",
    )
    axes[1].legend(fontsize=7)
    axes[2].plot(cosine, marker="o")
    axes[2].set(
        xlabel="hidden-state index",
        ylabel="mean cross-lingual cosine",
        title="parallel word lists (pretrained)",
    )
    fig.tight_layout()
    fig.savefig(out_dir / "linguamap.png", dpi=100)
    plt.close(fig)


EXPERIMENT = Experiment(
    name="llm-methods.linguamap.selective_ft",
    paper=PAPER,
    claim=(
        "Fine-tuning only the last layers of a multilingual LM (loss on answer tokens) restores "
        "language consistency as well as full fine-tuning, with a fraction of the parameters "
        "and without losing task accuracy."
    ),
    run=run,
)
