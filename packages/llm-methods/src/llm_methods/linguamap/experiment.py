"""Miniature LinguaMap experiment ``llm-methods.linguamap.selective_ft``.

A ``MODEL`` Llama (20 layers x 48, issue 40: deep enough that one or two layers are <= 10 % of
the parameters) is pretrained here on the synthetic multilingual "repeat" task with real
English/Spanish/German words (``linguamap.data``) under a failure-inducing mixture (Spanish and
German questions answered in English with probability ``P_FAIL``). The logit lens of the
pretrained model at the answer position of the Spanish questions it answers in Spanish (issue
40, fourth session: the language decision the paper localises is the one that produces the
target language, absent from questions answered in English) diagnoses the layer from which the
output language is decided (:func:`~llm_methods.linguamap.analysis.decision_layer`); k = the
layers from it on (at most ``K_MAX``). The model is then fine-tuned on language-consistent data (all four
scenarios, loss masked to the answer tokens) with the same data, steps and learning rate in four
ways: only the last k layers, all weights, k randomly chosen other layers, and LoRA (rank
``LORA_R`` on q/v of every layer). Evaluation on Spanish/German questions of the four scenarios
(the same items for every variant and seed): language consistency (py3langid, restricted to
en/es/de) and task accuracy (concepts, any language), separately.

Claims and thresholds, fixed here before any run (issue 40: on paired 95 % intervals over the
shared eval items and seeds, :func:`iclr26_common.effects.points_effect`):

  (a) consistency(last k) − consistency(full) >= −``CONSISTENCY_GAP_MAX`` (2 points);
      preconditions: the pretrained model learned the task (its accuracy on the monolingual
      evaluation items, answers in any language counted, is >= ``TASK_LEARNED_MIN``), the last
      k layers are <= ``PARAM_FRACTION_MAX`` (10 %) of the parameters, and the language
      decision is localised in the last k layers (the diagnosis, on at least
      ``DIAGNOSIS_MIN`` Spanish questions answered in Spanish, gives k <= ``K_MAX``), and the
      lens reads the model's language (on those questions the last layer's top language is
      Spanish for a share >= ``LENS_AGREEMENT_MIN``; else the lens cannot localise);
  (b) accuracy(last k) − accuracy(full) >= −``ACCURACY_GAP_MAX`` (2 points); preconditions: the
      task-learned, localisation and lens-agreement controls of (a).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr26_common import Claim, Experiment, Precondition, Result, seed_everything
from iclr26_common.device import choose_device
from iclr26_common.effects import points_effect

if TYPE_CHECKING:
    from llm_methods.linguamap.data import Example, Lexicon
    from llm_methods.lm.loading import LM

__all__ = ["EXPERIMENT", "judge", "run"]

PAPER = "LinguaMap: language control in multilingual LLMs (arXiv 2601.20009)"
CONSISTENCY_GAP_MAX = 0.02
ACCURACY_GAP_MAX = 0.02
PARAM_FRACTION_MAX = 0.10
P_FAIL = 0.7
K_MAX = 4  # the most layers "selective" finetuning may train (the localisation control)
TASK_LEARNED_MIN = 0.5  # the pretrained model's monolingual accuracy (the "task learned" control)
#: issue 40 (fourth session, fixed before its run): the logit-lens diagnosis reads the Spanish
#: monolingual questions (a pool of ``diagnosis_pool`` prompts, :func:`settings`) that the
#: pretrained model answers in Spanish; with fewer than ``DIAGNOSIS_MIN`` of them there is no
#: diagnosis and the localisation control fails
DIAGNOSIS_MIN = 16
#: issue 40 (fifth session, fixed before its run): the lens can localise only if its last layer
#: reads the language the model writes: on the diagnosis set (all answered in Spanish), the share
#: of questions whose last-layer top language (per question) is Spanish must be >= this
LENS_AGREEMENT_MIN = 0.8
#: issue 40 (sixth session, fixed before its run): the lens reads Spanish questions, which the
#: pretraining mixture answers in Spanish or English only (``pretraining_examples``: only tagged
#: bilingual examples answer in a third language), so its token -> language map chooses between
#: these two (``analysis.token_languages(langs=...)``); with German counted too, the first
#: pieces that start Spanish and German words about equally were ambiguous, English never
LENS_LANGS = ("en", "es")
LORA_R = 16
MODEL = {"n_layers": 20, "hidden": 48, "heads": 4}
BPE_VOCAB = 512
SEQ_LEN = 64
FT_LEN = 40
VARIANTS = ("last_k", "full", "random_layers", "lora")
#: variants no claim uses (reported only): fine-tuned on the first seed alone in the full run
#: (issue 40: the longer pretraining recipe would otherwise put the run over its 600 s budget)
DESCRIPTIVE = ("random_layers", "lora")


#: pretraining recipe of the testbed's base model (not part of the paper, which starts from a
#: pretrained Qwen/Bloom): 3e-3 peak, ``PRE_WARMUP`` warm-up steps, then cosine to 0.1x.
#: Issue 40: with 1000 steps and 20 warm-up steps the 20 x 48 model never learned to copy
#: (monolingual accuracy 0.11, the task-learned control failed); the rule fixed before the
#: pilot (README) picked 1500 steps with 200 warm-up steps
PRE_LR = 3e-3
PRE_WARMUP = 200
FT_LR = 2e-3
FT_WARMUP = 5


def settings(quick: bool) -> dict[str, Any]:
    if quick:  # a smoke run: its model does not learn the task (warm-up scaled to its steps)
        return {
            "pre_steps": 120,
            "pre_warmup": 20,
            "ft_steps": 20,
            "eval_per_scenario": 16,
            "seeds": (0,),
            "descriptive_seeds": (0,),
            "diagnosis_pool": 32,  # the 32 of the lens before issue 40 (quick is a smoke test)
        }
    return {
        "pre_steps": 1500,
        "pre_warmup": PRE_WARMUP,
        "ft_steps": 150,
        "eval_per_scenario": 64,
        "seeds": (0, 1, 2),
        "descriptive_seeds": (0,),
        "diagnosis_pool": 256,
    }


def _pack(tokenizer: Any, examples: list[Example]) -> list[list[int]]:
    from llm_methods.corpora import chunk_ids

    text = "".join(e.prompt + e.answer + "\n" for e in examples)
    return chunk_ids(tokenizer(text, add_special_tokens=False).input_ids, SEQ_LEN)


def _masked(tokenizer: Any, examples: list[Example]) -> tuple[list[list[int]], list[list[int]]]:
    """One example per row, padded to ``FT_LEN``; loss mask 1 on answer (+ newline) tokens
    (:func:`~llm_methods.linguamap.finetune.answer_masked_rows`)."""
    from llm_methods.linguamap.finetune import answer_masked_rows

    pairs = [(e.prompt, e.answer + "\n") for e in examples]
    rows, masks, _ = answer_masked_rows(tokenizer, pairs, FT_LEN)
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


def _variant(lm: LM, name: str, seed: int, k: int) -> tuple[LM, float]:
    from llm_methods.lm import add_lora, count_parameters, train_only_layers

    if name == "full":
        trainable, total = count_parameters(lm.model)
        return lm, trainable / total
    if name == "lora":
        _, total = count_parameters(lm.model)
        lora = add_lora(lm, r=LORA_R, alpha=2 * LORA_R)
        return lora, count_parameters(lora.model)[0] / total
    if name == "last_k":
        from llm_methods.linguamap.finetune import last_layers

        layers = last_layers(lm.n_layers, k)
    else:
        rng = np.random.default_rng(seed)
        layers = sorted(int(i) for i in rng.choice(lm.n_layers - k, k, replace=False))
    trainable, total = train_only_layers(lm, layers)
    return lm, trainable / total


def run(quick: bool, out_dir: Path) -> Result:
    from llm_methods.linguamap.analysis import (
        cross_lingual_cosine,
        decision_layer,
        diagnosis_prompts,
        evaluate,
        evaluate_items,
        lens_agreement,
        lens_language_probability,
        summarize_items,
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
        t0 = time.perf_counter()
        train_lm(
            base_model,
            _pack(tokenizer, pre),
            cfg["pre_steps"],
            16,
            PRE_LR,
            seed=0,
            warmup=cfg["pre_warmup"],
        )
        phase_s = {"pretraining": time.perf_counter() - t0, **dict.fromkeys(VARIANTS, 0.0)}
        base = wrap(tokenizer, base_model, "pretrained")
        evals = _eval_set(lex, cfg["eval_per_scenario"], seed=123)
        before = evaluate(base, evals, lex)
        pool = [
            make_example(lex, np.random.default_rng(i), "es", "es")
            for i in range(cfg["diagnosis_pool"])
        ]
        es_prompts = [e.prompt for e in pool]
        lens_before = lens_language_probability(base, es_prompts, lex, langs=LENS_LANGS)
        diagnosis = diagnosis_prompts(base, pool, lex)
        lens_diagnosis = agreement = None
        if len(diagnosis) >= DIAGNOSIS_MIN:
            per_prompt = lens_language_probability(
                base, diagnosis, lex, per_prompt=True, langs=LENS_LANGS
            )
            lens_diagnosis = per_prompt.mean(0)
            agreement = lens_agreement(per_prompt, "es")  # every diagnosis answer is Spanish
        rng = np.random.default_rng(7)
        par = [make_example(lex, rng, "en", "en") for _ in range(32)]
        parallel = {
            lang: [" ".join(lex.words[lang][c] for c in e.concepts) for e in par]
            for lang in ("en", "es", "de")
        }
        cosine = cross_lingual_cosine(base, parallel)
        # no diagnosis (too few questions answered in Spanish): no layer decides -> k capped,
        # and the localisation control fails on the count
        decided = decision_layer(lens_diagnosis) if lens_diagnosis is not None else 0
        k = min(K_MAX, max(1, MODEL["n_layers"] - decided))
        items: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {v: [] for v in VARIANTS}
        lens_after = None
        for seed in cfg["seeds"]:
            rows, masks = _masked(tokenizer, consistent_examples(lex, 4000, seed=100 + seed))
            for name in VARIANTS:
                if name in DESCRIPTIVE and seed not in cfg["descriptive_seeds"]:
                    continue
                t0 = time.perf_counter()
                lm, fraction = _variant(wrap(tokenizer, copy.deepcopy(base_model)), name, seed, k)
                train_lm(
                    lm.model,
                    rows,
                    cfg["ft_steps"],
                    16,
                    FT_LR,
                    seed=seed,
                    warmup=FT_WARMUP,
                    loss_mask=masks,
                )
                consistent, correct = evaluate_items(lm, evals, lex)
                items[name].append((consistent, correct))
                scores = summarize_items(evals, consistent, correct)
                results[name].append({**scores, "param_fraction": fraction})
                if name == "last_k" and lens_after is None:
                    lens_after = lens_language_probability(lm, es_prompts, lex, langs=LENS_LANGS)
                phase_s[name] += time.perf_counter() - t0
    mean = {
        v: {m: float(np.mean([r[m] for r in rows])) for m in rows[0]} for v, rows in results.items()
    }
    assert lens_after is not None
    _plot(out_dir, mean, lens_before, lens_after, cosine, lens_diagnosis)
    arch = f"{MODEL['n_layers']}x{MODEL['hidden']}"
    metrics: dict[str, Any] = {
        "before_ft": before,
        **{v: m for v, m in mean.items()},
        "decision_layer": decided,
        "k": k,
        "lens_es_before": lens_before.round(3).tolist(),
        "diagnosis_prompts": len(diagnosis),
        "diagnosis_pool": len(pool),
        "lens_es_diagnosis": None if lens_diagnosis is None else lens_diagnosis.round(3).tolist(),
        "lens_agreement": None if agreement is None else round(agreement, 4),
        "lens_langs": list(LENS_LANGS),
        "lens_es_after_last_k": lens_after.round(3).tolist(),
        "cross_lingual_cosine": cosine.round(3).tolist(),
        "per_seed": {
            v: [{m: round(x, 4) for m, x in r.items() if "/" not in m} for r in rows]
            for v, rows in results.items()
        },
        "phase_s": {name: round(x, 1) for name, x in phase_s.items()},
        "wall_s": time.perf_counter() - start,
    }
    claims = judge(
        {v: np.stack([c for c, _ in rows]) for v, rows in items.items()},
        {v: np.stack([a for _, a in rows]) for v, rows in items.items()},
        mean["last_k"]["param_fraction"],
        decided,
        MODEL["n_layers"],
        before["monolingual/accuracy"],
        diagnosis_n=len(diagnosis),
        lens_agreement=0.0 if agreement is None else agreement,
    )
    return Result(
        summary=(
            f"{arch} Llama (language decided from layer {decided}, k = {k}) with an induced failure "
            f"(consistency {before['consistency']:.2f}, "
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
            f"{arch} Llama, BPE {BPE_VOCAB}, pretraining {cfg['pre_steps']} steps "
            f"(lr {PRE_LR:g}, {cfg['pre_warmup']} warm-up steps, p_fail {P_FAIL}), "
            f"FT {cfg['ft_steps']} steps: last k and full x {len(cfg['seeds'])} seed(s), "
            "random layers and LoRA x "
            f"{len(cfg['descriptive_seeds'])} seed(s), {len(evals)} eval prompts"
        ),
        claims=claims,
    )


def judge(
    consistency: dict[str, np.ndarray],
    accuracy: dict[str, np.ndarray],
    fraction: float,
    decided: int,
    n_layers: int,
    task_accuracy: float,
    diagnosis_n: int | None = None,
    lens_agreement: float | None = None,
) -> list[Claim]:
    """The two claims from per-item 0/1 outcomes ``[seeds, items]`` per variant (``"last_k"``
    and ``"full"`` on the same items and seeds), the trained fraction of the last k layers, the
    diagnosed decision layer of an ``n_layers`` model, the pretrained model's accuracy on the
    monolingual evaluation items and the number of prompts the diagnosis read (``None``: not
    checked; fewer than ``DIAGNOSIS_MIN`` fail the localisation control) and the share of them
    whose last-layer lens reads the language the model wrote (``None``: not checked; below
    ``LENS_AGREEMENT_MIN`` the lens cannot localise and both claims are inconclusive)
    (thresholds: module doc)."""
    learned = Precondition(
        "task learned",
        f"pretrained model's monolingual accuracy (before FT) >= {TASK_LEARNED_MIN}",
        {"monolingual_accuracy": round(float(task_accuracy), 4)},
        task_accuracy >= TASK_LEARNED_MIN,
    )
    k_needed = n_layers - decided
    diagnosed = diagnosis_n is None or diagnosis_n >= DIAGNOSIS_MIN
    localised = Precondition(
        "language decision localised in the last k layers",
        f"logit-lens decision layer >= n_layers - {K_MAX} (k <= {K_MAX}), read on >= "
        f"{DIAGNOSIS_MIN} Spanish questions the pretrained model answers in Spanish",
        {
            "decision_layer": decided,
            "n_layers": n_layers,
            **({} if diagnosis_n is None else {"diagnosis_prompts": diagnosis_n}),
        },
        k_needed <= K_MAX and diagnosed,
    )
    reads = Precondition(
        "lens reads the model's language",
        f"share of the diagnosis questions whose last-layer lens top language is the greedy "
        f"answer's (Spanish) >= {LENS_AGREEMENT_MIN}",
        {"lens_agreement": None if lens_agreement is None else round(float(lens_agreement), 4)},
        lens_agreement is None or lens_agreement >= LENS_AGREEMENT_MIN,
    )
    small = Precondition(
        "selective",
        f"trained fraction of the last k layers <= {PARAM_FRACTION_MAX}",
        {"fraction": round(float(fraction), 4)},
        fraction <= PARAM_FRACTION_MAX,
    )
    effects = {
        metric: points_effect(
            scores["last_k"],
            scores["full"],
            name=f"{metric}(last k) - {metric}(full FT)",
            threshold=-100 * gap,
            direction=">=",
            seed=0,
        )
        for metric, scores, gap in (
            ("consistency", consistency, CONSISTENCY_GAP_MAX),
            ("accuracy", accuracy, ACCURACY_GAP_MAX),
        )
    }

    def rates(scores: dict[str, np.ndarray]) -> dict[str, float]:
        return {v: round(float(np.mean(scores[v])), 4) for v in ("last_k", "full")}

    return [
        Claim.test(
            text="Fine-tuning only the last layers restores language consistency like full FT.",
            effect=effects["consistency"],
            measured=rates(consistency),
            preconditions=[learned, small, localised, reads],
        ),
        Claim.test(
            text="Selective fine-tuning keeps task accuracy.",
            effect=effects["accuracy"],
            measured=rates(accuracy),
            preconditions=[learned, localised, reads],
        ),
    ]


def _plot(
    out_dir: Path,
    mean: dict[str, dict[str, float]],
    lens_before: np.ndarray,
    lens_after: np.ndarray,
    cosine: np.ndarray,
    lens_diagnosis: np.ndarray | None = None,
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
    curves = [(lens_before, "--", "before"), (lens_after, "-", "after last-k FT")]
    if lens_diagnosis is not None:
        curves.append((lens_diagnosis, ":", "before, answered in es"))
    for lens, style, tag in curves:
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
