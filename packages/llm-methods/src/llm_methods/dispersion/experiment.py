"""Miniature dispersion experiments for ``iclr26 reproduce``.

``llm-methods.dispersion.correlation`` (SmolLM2-135M on pydoc topics, plus the zoo model
``pydoc-small`` in the full run): per-chunk perplexity and last-layer dispersion D, the paper's
binned protocol, per-layer D, and kNN-LM layer selection. ``llm-methods.dispersion.pushaway``:
tiny Llamas trained with L = L_CE + λ·(−d_avg), λ ∈ {0, 0.01, 0.1}, three seeds each.

Claims and thresholds, fixed here before any run (module constants):

  (a) Pearson r(bin-mean D, bin-mean PPL) < ``CORR_R_MAX`` (−0.5) on SmolLM2;
  (b) the paper's sub-layer comparison (issue 26; until then (b) searched all layers): of the
      last decoder layer's attention and FFN outputs, the one with the higher dispersion (mean
      per-chunk D on the unlabeled pilot chunks) gives kNN-LM keys whose held-out perplexity is
      <= (1 + ``KNN_PPL_TOL``) x the other's. Precondition: kNN-LM helps at all with one of the
      two (its perplexity < the LM's alone), else the keys cannot be compared;
  (c) push-away: for every λ > 0 the seed-mean held-out perplexity is below λ = 0's;
  (d) push-away: the seed-mean held-out last-layer D at the largest λ is above λ = 0's.

Scale was chosen by timing against the budget (full <= 600 s, quick <= 60 s on 2 shared CPU
cores); one torch thread is used (4-15x faster than two on the loaded machine).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common import Claim, Experiment, Precondition, Result, seed_everything
from iclr26_common.device import choose_device
from llm_methods.lm.threads import one_thread

__all__ = ["CORRELATION", "PUSHAWAY", "judge_sublayers", "run_correlation", "run_pushaway"]

PAPER = "On the Predictive Power of Representation Dispersion in Language Models (arXiv 2506.24106)"
CORR_R_MAX = -0.5
KNN_PPL_TOL = 0.01
KNN_K = 32
KNN_LAMBDA = 0.25
KNN_TEMPERATURE = 1.0
CHUNK_LEN = 64
LAMBDAS = (0.0, 0.01, 0.1)
SEEDS = (0, 1, 2)
PUSH_MODEL = {"n_layers": 2, "hidden": 64, "heads": 4}
PUSH_VOCAB = 512
PUSH_BATCH = 16
PUSH_LR = 3e-3
ZOO_MODEL = "pydoc-small"
ZOO_CHUNKS = 160  # of the held-out topics (187 available with its tokenizer)
ZOO_BIN_SIZE = 10
LM_DTYPE = "float32"  # of the pretrained models (SmolLM2, the zoo model) on every device


def correlation_settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"n_store": 40, "n_eval": 8, "bin_size": 6, "pilot": 8, "zoo": False}
    return {"n_store": 720, "n_eval": 100, "bin_size": 20, "pilot": 32, "zoo": True}


def pushaway_settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"steps": 60, "eval_chunks": 40}
    return {"steps": 600, "eval_chunks": 200}


def _topic_chunks(tokenizer: Any, texts: list[str], seed: int, n: int) -> list[list[int]]:
    from llm_methods.corpora import chunk_ids

    chunks: list[list[int]] = []
    for text in texts:
        chunks += chunk_ids(tokenizer(text, add_special_tokens=False).input_ids, CHUNK_LEN)
    rng = np.random.default_rng(seed)
    pick = rng.permutation(len(chunks))[:n]
    if len(pick) < n:
        raise ValueError(f"only {len(chunks)} chunks of {CHUNK_LEN} tokens, {n} requested")
    return [chunks[i] for i in sorted(pick)]


def _knn_ppl(stats: Any, source: str, n_store_rows: int) -> float:
    from llm_methods.dispersion.knnlm import KNNLM, interpolated_perplexity

    keys = stats.keys[source]
    knn = KNNLM(keys[:n_store_rows], stats.values[:n_store_rows], KNN_K, KNN_TEMPERATURE)
    knn_lp = knn.target_logprobs(keys[n_store_rows:], stats.values[n_store_rows:])
    return interpolated_perplexity(stats.lm_logprobs[n_store_rows:], knn_lp, KNN_LAMBDA)


def _plot_correlation(path: Path, curves: dict[str, tuple[np.ndarray, np.ndarray, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
    for ax, (name, (x, y, r)) in zip(axes[0], curves.items(), strict=True):
        ax.scatter(x, y)
        ax.set(
            xlabel="bin-mean perplexity",
            ylabel="bin-mean dispersion D",
            title=f"{name}: Pearson r = {r:.2f}",
        )
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_layers(path: Path, per_layer: np.ndarray, best: int, knn: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(range(len(per_layer)), per_layer, marker="o")
    a.axvline(best, color="r", ls="--", label=f"max-D layer {best}")
    a.set(xlabel="hidden-state index (0 = embeddings)", ylabel="mean D", title="per-layer D")
    a.legend()
    b.bar(list(knn), list(knn.values()))
    b.set(ylabel="held-out perplexity", title="kNN-LM by key source")
    b.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_correlation(quick: bool, out_dir: Path) -> Result:
    from llm_methods.corpora import pydoc_topics, split_names
    from llm_methods.dispersion.measure import binned, binned_correlation, chunk_statistics
    from llm_methods.lm import load_lm

    seed_everything(0)
    cfg = correlation_settings(quick)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with one_thread():
        # float32 on every device (load_lm's CUDA default is bfloat16): the thresholds were
        # fixed on float32 CPU runs
        device = choose_device()
        lm = load_lm("smollm2", device, LM_DTYPE)
        topics = pydoc_topics()
        train, test = split_names(list(topics), 0.2, seed=0)
        store = _topic_chunks(lm.tokenizer, [topics[t] for t in train], 0, cfg["n_store"])
        evals = _topic_chunks(lm.tokenizer, [topics[t] for t in test], 1, cfg["n_eval"])
        pilot = chunk_statistics(lm, store[: cfg["pilot"]])
        per_layer_pilot = pilot.dispersion.mean(0)
        last = lm.n_layers
        best = 1 + int(np.argmax(per_layer_pilot[1:]))
        sources = list(
            dict.fromkeys(
                [f"hidden:{best}", f"hidden:{last}", f"attn:{last - 1}", f"ffn:{last - 1}"]
            )
        )
        stats = chunk_statistics(lm, store + evals, key_sources=sources, collect=True)
        r = binned_correlation(stats.ppl, stats.dispersion[:, last], cfg["bin_size"])
        bx, by = binned(stats.ppl, stats.dispersion[:, last], cfg["bin_size"])
        n_store_rows = len(store) * (CHUNK_LEN - 1)
        knn = {src: _knn_ppl(stats, src, n_store_rows) for src in sources}
        lm_ppl = float(np.exp(-stats.lm_logprobs[n_store_rows:].double().mean()))
        curves = {"SmolLM2-135M": (bx, by, r)}
        metrics: dict[str, Any] = {}
        if cfg["zoo"]:
            zoo_start = time.perf_counter()
            zoo = load_lm(f"zoo:{ZOO_MODEL}", device, LM_DTYPE)
            zoo_chunks = _topic_chunks(zoo.tokenizer, [topics[t] for t in test], 2, ZOO_CHUNKS)
            zstats = chunk_statistics(zoo, zoo_chunks)
            zr = binned_correlation(zstats.ppl, zstats.dispersion[:, -1], ZOO_BIN_SIZE)
            zx, zy = binned(zstats.ppl, zstats.dispersion[:, -1], ZOO_BIN_SIZE)
            curves[f"zoo:{ZOO_MODEL} (held-out topics)"] = (zx, zy, zr)
            metrics.update(zoo_pearson_r=zr, zoo_s=time.perf_counter() - zoo_start)
    _plot_correlation(out_dir / "dispersion_vs_ppl.png", curves)
    knn_plot = {"LM only": lm_ppl, **{s: v for s, v in knn.items()}}
    _plot_layers(out_dir / "layers_knnlm.png", stats.dispersion.mean(0), best, knn_plot)
    best_key, last_key = f"hidden:{best}", f"hidden:{last}"
    ratio = knn[best_key] / knn[last_key]
    attn, ffn = f"attn:{last - 1}", f"ffn:{last - 1}"
    pilot_d = {src: _chunk_dispersion(stats, src, cfg["pilot"]) for src in (attn, ffn)}
    metrics.update(
        pearson_r=r,
        n_chunks=len(stats.ppl),
        n_bins=len(bx),
        lm_ppl_heldout=lm_ppl,
        max_dispersion_layer=best,
        knn_ppl_max_dispersion=knn[best_key],
        knn_ppl_last=knn[last_key],
        knn_ratio=ratio,
        knn_ppl_attn_last=knn[attn],
        knn_ppl_ffn_last=knn[ffn],
        d_attn_last=float(_source_dispersion(stats, attn)),
        d_ffn_last=float(_source_dispersion(stats, ffn)),
        d_pilot_attn_last=pilot_d[attn],
        d_pilot_ffn_last=pilot_d[ffn],
        per_layer_d=[round(float(v), 4) for v in stats.dispersion.mean(0)],
        wall_s=time.perf_counter() - start,
    )
    claims = [
        Claim(
            text="Last-layer dispersion correlates negatively with perplexity (binned).",
            criterion=f"Pearson r over bins < {CORR_R_MAX} (SmolLM2-135M)",
            measured={"pearson_r": round(r, 4), "n_bins": len(bx)},
            verdict=r < CORR_R_MAX,
        ),
        judge_sublayers(pilot_d[attn], pilot_d[ffn], knn[attn], knn[ffn], lm_ppl),
    ]
    return Result(
        summary=(
            f"SmolLM2-135M on {len(stats.ppl)} pydoc chunks of {CHUNK_LEN} tokens: binned "
            f"r(D, PPL) = {r:.2f}; max-D layer {best} kNN-LM PPL {knn[best_key]:.2f} vs "
            f"last layer {knn[last_key]:.2f} (LM alone {lm_ppl:.2f})."
        ),
        metrics=metrics,
        seeds=[0],
        scale=(
            f"SmolLM2-135M, {cfg['n_store']}+{cfg['n_eval']} chunks x {CHUNK_LEN} tokens, "
            f"bins of {cfg['bin_size']}, kNN k={KNN_K} lambda={KNN_LAMBDA}"
            + (
                f", zoo:{ZOO_MODEL} on {ZOO_CHUNKS} held-out chunks, bins of {ZOO_BIN_SIZE}"
                if cfg["zoo"]
                else ""
            )
        ),
        claims=claims,
    )


def judge_sublayers(
    d_attn: float, d_ffn: float, ppl_attn: float, ppl_ffn: float, lm_ppl: float
) -> Claim:
    """Claim (b): the higher-dispersion sub-layer gives kNN-LM keys at least as good (within
    ``KNN_PPL_TOL``) as the other; inconclusive when kNN-LM helps with neither."""
    pick, other = ("attn", "ffn") if d_attn >= d_ffn else ("ffn", "attn")
    ppl = {"attn": ppl_attn, "ffn": ppl_ffn}
    ratio = ppl[pick] / ppl[other]
    return Claim.judge(
        text="Of the attention and FFN sub-layer outputs, the higher-dispersion one gives the "
        "better kNN-LM keys.",
        criterion=(
            f"kNN-LM PPL(sub-layer with higher pilot D) <= (1 + {KNN_PPL_TOL}) x "
            "PPL(the other), last decoder layer"
        ),
        measured={
            "d_attn": round(d_attn, 4),
            "d_ffn": round(d_ffn, 4),
            "picked": pick,
            "ppl_attn": round(ppl_attn, 3),
            "ppl_ffn": round(ppl_ffn, 3),
            "ratio": round(ratio, 4),
        },
        holds=ratio <= 1 + KNN_PPL_TOL,
        preconditions=[
            Precondition(
                "kNN-LM helps",
                "min(PPL(attn keys), PPL(FFN keys)) < PPL(LM alone)",
                {"lm_ppl": round(lm_ppl, 3), "best_knn": round(min(ppl.values()), 3)},
                min(ppl.values()) < lm_ppl,
            )
        ],
    )


def _chunk_dispersion(stats: Any, source: str, n_chunks: int) -> float:
    """Mean per-chunk D of a key source over the first ``n_chunks`` chunks (the pilot chunks;
    keys are stored in chunk order, ``CHUNK_LEN - 1`` rows per chunk)."""
    from llm_methods.dispersion.metrics import dispersion

    rows = CHUNK_LEN - 1
    keys = stats.keys[source][: n_chunks * rows].reshape(n_chunks, rows, -1)
    return float(dispersion(keys).mean())


def _source_dispersion(stats: Any, source: str) -> float:
    from llm_methods.dispersion.metrics import DispersionAccumulator

    acc = DispersionAccumulator()
    acc.add(stats.keys[source][:4096])
    return acc.value()


def run_pushaway(quick: bool, out_dir: Path) -> Result:
    from llm_methods.corpora import chunk_ids
    from llm_methods.dispersion.measure import chunk_statistics
    from llm_methods.dispersion.model import PushAwayLoss
    from llm_methods.lm import wrap
    from llm_methods.lm.train import train_lm
    from llm_methods.zoo import corpus_texts
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    seed_everything(0)
    cfg = pushaway_settings(quick)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results: dict[float, list[tuple[float, float]]] = {lam: [] for lam in LAMBDAS}
    with one_thread():
        device = choose_device()
        train, test = corpus_texts("pydoc")
        tokenizer = train_bpe(train, PUSH_VOCAB)

        def stream(texts: list[str]) -> list[int]:
            ids: list[int] = []
            for text in texts:
                ids += [
                    tokenizer.bos_token_id,
                    *tokenizer(text, add_special_tokens=False).input_ids,
                ]
            return ids

        chunks = chunk_ids(stream(train), CHUNK_LEN)
        held = chunk_ids(stream(test), CHUNK_LEN, max_chunks=cfg["eval_chunks"], seed=0)
        for seed in SEEDS:
            for lam in LAMBDAS:
                # built (seeded) on the CPU, then moved: the same initial weights on every device
                model = tiny_llama(len(tokenizer), **PUSH_MODEL, seed=seed).to(device)
                extra = PushAwayLoss(lam).as_extra_loss() if lam > 0 else None
                train_lm(
                    model, chunks, cfg["steps"], PUSH_BATCH, PUSH_LR, seed=seed, extra_loss=extra
                )
                stats = chunk_statistics(wrap(tokenizer, model), held, batch_size=32)
                ppl = float(np.exp(np.log(stats.ppl).mean()))  # equal-length chunks: token PPL
                results[lam].append((ppl, float(stats.dispersion[:, -1].mean())))
                del model
    mean_ppl = {lam: float(np.mean([p for p, _ in v])) for lam, v in results.items()}
    mean_d = {lam: float(np.mean([d for _, d in v])) for lam, v in results.items()}
    _plot_pushaway(out_dir / "pushaway.png", results)
    lams = [lam for lam in LAMBDAS if lam > 0]
    held_c = all(mean_ppl[lam] < mean_ppl[0.0] for lam in lams)
    held_d = mean_d[max(LAMBDAS)] > mean_d[0.0]
    metrics = {f"ppl_lambda_{lam}": mean_ppl[lam] for lam in LAMBDAS}
    metrics.update({f"d_lambda_{lam}": mean_d[lam] for lam in LAMBDAS})
    metrics["per_seed"] = {
        str(lam): [[round(p, 3), round(d, 4)] for p, d in v] for lam, v in results.items()
    }
    metrics["wall_s"] = time.perf_counter() - start
    claims = [
        Claim(
            text="Push-away training lowers held-out perplexity.",
            criterion=f"for every lambda in {lams}: seed-mean PPL(lambda) < PPL(0)",
            measured={f"ppl_{lam}": round(mean_ppl[lam], 3) for lam in LAMBDAS},
            verdict=held_c,
        ),
        Claim(
            text="Push-away training increases last-layer dispersion.",
            criterion=f"seed-mean held-out D(lambda={max(LAMBDAS)}) > D(0)",
            measured={f"d_{lam}": round(mean_d[lam], 4) for lam in LAMBDAS},
            verdict=held_d,
        ),
    ]
    arch = f"{PUSH_MODEL['n_layers']}x{PUSH_MODEL['hidden']}"
    return Result(
        summary=(
            f"Tiny Llama ({arch}) on pydoc, {cfg['steps']} steps x {len(SEEDS)} seeds: "
            + ", ".join(
                f"lambda={lam}: PPL {mean_ppl[lam]:.2f}, D {mean_d[lam]:.3f}" for lam in LAMBDAS
            )
        ),
        metrics=metrics,
        seeds=list(SEEDS),
        scale=(
            f"{arch} Llama, BPE {PUSH_VOCAB}, {cfg['steps']} steps x {PUSH_BATCH} x "
            f"{CHUNK_LEN} tokens, {len(held)} held-out chunks, lambdas {list(LAMBDAS)}"
        ),
        claims=claims,
    )


def _plot_pushaway(path: Path, results: dict[float, list[tuple[float, float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for i, rows in enumerate(results.values()):
        a.scatter([i] * len(rows), [p for p, _ in rows])
        b.scatter([i] * len(rows), [d for _, d in rows])
    for ax, label in ((a, "held-out perplexity"), (b, "held-out last-layer D")):
        ax.set_xticks(range(len(results)), [f"λ={lam}" for lam in results])
        ax.set(ylabel=label)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


CORRELATION = Experiment(
    name="llm-methods.dispersion.correlation",
    paper=PAPER,
    claim=(
        "Representation dispersion correlates negatively with perplexity, and the "
        "higher-dispersion sub-layer (attention vs FFN) gives the better kNN-LM keys."
    ),
    run=run_correlation,
)
PUSHAWAY = Experiment(
    name="llm-methods.dispersion.pushaway",
    paper=PAPER,
    claim="Adding the push-away term -lambda*d_avg to training raises dispersion and lowers PPL.",
    run=run_pushaway,
)
