"""Sequential knowledge editing on a zoo model of a synthetic fact world, experiment
``llm-methods.suit.world`` (the issue's second offline testbed).

Model: :mod:`llm_methods.suit.toy_facts_lm`, a 4x128 tiny Llama with its own BPE tokenizer,
trained from scratch on every true fact of an invented world in four phrasings (built once,
cached). Requests: facts the trained model knows (true object first among the relation's
in-world objects), ``target_new`` another in-world object of the same relation. ROME, MEMIT,
AlphaEdit and SUIT each edit a fresh copy sequentially in batches; after every batch efficacy /
generalisation / specificity / S are measured on all requests edited so far. Key statistics C
come from the world's own text, SUIT's subject subspace from invented names (not in the world)
as subjects of the world's rewrite prompts.

Claims and thresholds: the two of :mod:`llm_methods.suit.experiment`, imported unchanged
(fixed there before any run): (a) SUIT's specificity exceeds AlphaEdit's by at least
``SPECIFICITY_MARGIN`` (5) points at the final edit count; (b) SUIT's efficacy is within
``EFFICACY_GAP_MAX`` (5) points of AlphaEdit's (or above it). Since issue 40 on paired 95 %
intervals over the per-request scores ``[worlds, requests]`` (the wider of a bootstrap over
request slots and a t-interval over worlds; ``WorldSpec.seed``: the invented table, the
tokenizer, the model and the requests all change), with the preconditions of
:func:`suit_claims` (AlphaEdit's edits took; C covers the edited subjects, on every world); C
comes from the world's text without the sentences that state an edited fact, one BOS-first row
per sentence (:func:`world_stats_chunks`); the null space of C uses
AlphaEdit's absolute threshold, and every method gets the same value budget (``EDIT["steps"]``
with the official early stop).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr26_common import Experiment, Result, seed_everything
from llm_methods.suit.experiment import (
    EFFICACY_GAP_MAX,
    PAPER,
    SPECIFICITY_MARGIN,
    final_scores,
    measure_edits,
    methods_summary,
    plot_curves,
    suit_claims,
)

if TYPE_CHECKING:
    from collections.abc import Collection

    from llm_methods.lm.loading import LM
    from llm_methods.suit.data import EditRequest
    from llm_methods.suit.toy_facts_lm import WorldSpec

__all__ = [
    "EDIT",
    "EFFICACY_GAP_MAX",
    "EXPERIMENT",
    "SPECIFICITY_MARGIN",
    "STATS_LEN",
    "run",
    "settings",
    "world_probe",
    "world_stats_chunks",
]

# Edit hyper-parameters for the world's facts LM (chosen on a pilot run of the full setting, see
# the README's deviations): layers valid for a 4-layer model (not the last), MLP of layer 1 for
# ROME, a clamp of 2‖h‖ and mom2_weight 100 (the key scale of a 128-wide model); 25 value steps
# (AlphaEdit's Llama-3 budget; the official loop stops early below a loss of 5e-2).
EDIT = {
    "layers": (1, 2),
    "rome_layer": 1,
    "steps": 25,
    "clamp": 2.0,
    "mom2_weight": 100.0,
    "templates": ("{}",),
}
STATS_LEN = 32


def settings(quick: bool) -> dict[str, Any]:
    """Quick: a 4x64 model of 8 subjects (builds in ~15 s); full: the default 4x128 world."""
    from llm_methods.suit.toy_facts_lm import WorldSpec

    if quick:
        spec = WorldSpec(n_subjects=8, hidden=64, steps=150, vocab_size=768, lr=5e-3)
        return {
            "spec": spec,
            "world_seeds": [0],
            "n_edits": 4,
            "batch": 2,
            "basis_names": 50,
            "gen_tokens": 6,
        }
    return {
        "spec": WorldSpec(),
        "world_seeds": [0, 1, 2],
        "n_edits": 32,
        "batch": 4,
        "basis_names": 200,
        "gen_tokens": 12,
    }


def world_stats_chunks(
    lm: LM, spec: WorldSpec, edited: Collection[tuple[str, str]] = ()
) -> list[list[int]]:
    """Token rows for C (AlphaEdit's K0, the knowledge to preserve): one BOS-first row per
    sentence of the world's text (every phrasing of every true fact, as the model was trained
    on it) that does not state an ``edited`` fact, ``(relation, subject)`` pairs (e.g.
    ``(r.relation, r.subject)`` of the edited requests), each cut to ``STATS_LEN`` tokens.

    Issue 40: C first held the edited facts themselves (only 2-3 % of the edited keys' energy
    lay in C's null space, AlphaEdit's projected edits barely moved them); then every sentence
    about an edited *subject* went, which also removed that subject's unedited facts (at 32
    edits most of the 24 subjects: 480 tokens left), and C's rows were 32-token windows cut
    across sentences without the BOS that every prompt the editors read keys from starts with
    (the SmolLM2 testbed's C had the same two defects: :func:`~llm_methods.suit.experiment.stats_chunks`)."""
    from llm_methods.suit.toy_facts_lm import world_texts

    tok = lm.tokenizer
    bos = [] if tok.bos_token_id is None else [int(tok.bos_token_id)]
    rows = [tok(t, add_special_tokens=False).input_ids for t in world_texts(spec, edited)]
    return [(bos + list(r))[:STATS_LEN] for r in rows]


def world_probe(lm: LM, spec: WorldSpec, edited: list[EditRequest], shots: int = 2) -> Any:
    """The general-ability probe on a facts LM (reported, not judged): perplexity of the
    world's sentences about subjects that were not edited (every phrasing, one sequence each)
    and ``shots``-shot recall of their facts (``"Capital of A Rabat. Capital of B"`` -> the true
    object among the relation's in-world objects; shots: the next unedited facts of the same
    relation)."""
    from llm_methods.suit.metrics import general_ability
    from llm_methods.suit.toy_facts_lm import WORLD_RELATIONS, world_facts

    gone = {r.subject for r in edited}
    facts = [f for f in world_facts(spec) if f[1] not in gone]
    chunks = []
    for rel, subj, obj, _ in facts:
        _, prompt, paraphrases = WORLD_RELATIONS[rel]
        for t in (prompt, *paraphrases):
            ids = lm.tokenizer(f"{t.format(subj)} {obj}.", add_special_tokens=False).input_ids
            chunks.append([lm.tokenizer.bos_token_id, *ids])
    items = []
    for rel in WORLD_RELATIONS:
        mine = [f for f in facts if f[0] == rel]
        if len(mine) <= shots:
            continue
        tpl = WORLD_RELATIONS[rel][1]
        for i, (_, subj, obj, objs) in enumerate(mine):
            demo = [mine[(i + j) % len(mine)] for j in range(1, shots + 1)]
            prompt = " ".join(f"{tpl.format(d[1])} {d[2]}." for d in demo) + f" {tpl.format(subj)}"
            items.append((prompt, [f" {o}" for o in objs], objs.index(obj)))
    return lambda model: general_ability(model, chunks, items)


def _one_world(spec: Any, s: dict[str, Any], cfg: Any) -> dict[str, Any]:
    """Build (or load) one world's model and run the four editors on it."""
    from llm_methods.suit.data import synth_names
    from llm_methods.suit.keys import key_second_moments, subject_basis
    from llm_methods.suit.toy_facts_lm import ensure_facts_lm, load_world, prompts

    t0 = time.perf_counter()
    folder = ensure_facts_lm(spec)
    build_s = time.perf_counter() - t0
    lm, known, info = load_world(folder)
    if len(known) < s["n_edits"]:
        raise ValueError(
            f"the facts LM (seed {spec.seed}) knows {len(known)} facts, fewer "
            f"than n_edits={s['n_edits']}"
        )
    order = np.random.default_rng(0).permutation(len(known))
    requests = [known[i] for i in order[: s["n_edits"]]]
    layers = tuple(sorted(set(cfg.layers) | {cfg.rome_layer}))
    chunks = world_stats_chunks(lm, spec, {(r.relation, r.subject) for r in requests})
    stats = key_second_moments(lm, layers, chunks, f"world-{spec.digest()}-{len(chunks)}rows")
    names = synth_names(
        s["basis_names"], seed=spec.seed + 1000, exclude=frozenset(r.subject for r in known)
    )
    basis = subject_basis(lm, cfg.layers, names, list(prompts().values()), cfg.tau)
    final_rows: dict[str, list[dict[str, Any]]] = {}
    before, coverage, curves, counts, seconds, flu, ability = measure_edits(
        lm, requests, cfg, stats, basis, s, lambda: world_probe(lm, spec, requests), final_rows
    )
    final = {m: {k: v[-1] for k, v in c.items()} for m, c in curves.items()}
    return {
        "curves": curves,
        "counts": counts,
        "final": final,
        "scores": final_scores(final_rows),
        "before": before,
        "seconds_per_edit": seconds,
        "fluency": flu,
        "null_space_share": coverage,
        "general_ability": ability,
        "model_build_s": round(build_s, 1),
        "world_model": info,
        "subject_basis_dims": {str(i): int(b.shape[1]) for i, b in basis.items()},
        "stats_tokens": sum(map(len, chunks)),
        "stats_rows": len(chunks),
        "model_folder": str(folder),
        "basis_keys": len(names) * len(prompts()),
    }


def run(quick: bool, out_dir: Path) -> Result:
    import dataclasses

    from llm_methods.lm.threads import one_thread
    from llm_methods.suit.editors import EditConfig

    seed_everything(0)
    s = settings(quick)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    cfg = EditConfig(**EDIT)
    worlds = {}
    with one_thread():
        for seed in s["world_seeds"]:
            worlds[seed] = _one_world(dataclasses.replace(s["spec"], seed=seed), s, cfg)
    methods = list(worlds[s["world_seeds"][0]]["final"])
    keys = list(worlds[s["world_seeds"][0]]["final"][methods[0]])
    final = {
        m: {k: round(float(np.mean([w["final"][m][k] for w in worlds.values()])), 2) for k in keys}
        for m in methods
    }
    counts = worlds[s["world_seeds"][0]]["counts"]
    curves = {
        m: {
            k: [
                round(float(np.mean([w["curves"][m][k][i] for w in worlds.values()])), 2)
                for i in range(len(counts))
            ]
            for k in keys
        }
        for m in methods
    }
    plot_curves(curves, counts, out_dir)
    coverage = {
        layer: max(w["null_space_share"][layer] for w in worlds.values())
        for layer in worlds[s["world_seeds"][0]]["null_space_share"]
    }
    wall = time.perf_counter() - start
    spec = s["spec"]
    infos = [w["world_model"] for w in worlds.values()]
    world = (
        f"{spec.n_layers}x{spec.hidden} world models, {len(worlds)} world seed(s) (facts "
        f"known: {', '.join(str(i['known']) + '/' + str(i['facts']) for i in infos)})"
    )
    summary = (
        f"{s['n_edits']} sequential edits (batches of {s['batch']}) on {world}, seed means: "
        + methods_summary(final)
    )
    per_seed = {
        str(k): {
            "final": w["final"],
            "before": w["before"],
            "null_space_share": w["null_space_share"],
            "subject_basis_dims": w["subject_basis_dims"],
            "world_model": w["world_model"],
            "model_build_s": w["model_build_s"],
            "seconds_per_edit": w["seconds_per_edit"],
            "fluency": w["fluency"],
            "general_ability_after_edits": w["general_ability"],
        }
        for k, w in worlds.items()
    }
    probed = [w["general_ability"] for w in worlds.values()]
    ability = {
        m: {k: round(float(np.mean([a[m][k] for a in probed])), 3) for k in probed[0][m]}
        for m in probed[0]
    }
    metrics = {
        "final": final,
        "general_ability_after_edits": ability,
        "curves": curves,
        "edit_counts": counts,
        "per_world_seed": per_seed,
        "null_space_share_max_over_worlds": coverage,
        "wall_s": round(wall, 1),
    }
    w0 = worlds[s["world_seeds"][0]]
    metric_keys = list(w0["scores"]["suit"])
    return Result(
        summary=summary,
        metrics=metrics,
        seeds=list(s["world_seeds"]),
        scale=f"zoo tiny Llama {spec.n_layers}x{spec.hidden} trained {spec.steps} steps on the "
        f"fact sentences of {spec.n_subjects} invented subjects, one model per world seed "
        f"{s['world_seeds']}; {s['n_edits']} known facts edited per world in batches of "
        f"{s['batch']}; layers {list(cfg.layers)} (ROME {cfg.rome_layer}), {cfg.steps} "
        f"value steps (early stop), C from {w0['stats_tokens']} world tokens in {w0['stats_rows']} BOS-first sentence rows (null space: "
        f"eigenvalues < {cfg.null_threshold}), U from {w0['basis_keys']} invented-subject "
        "keys",
        claims=suit_claims(
            {
                m: {k: np.stack([w["scores"][m][k] for w in worlds.values()]) for k in metric_keys}
                for m in ("suit", "alphaedit")
            },
            coverage,
        ),
    )


EXPERIMENT = Experiment(
    name="llm-methods.suit.world",
    paper=PAPER,
    claim="SUIT keeps neighbourhood facts better than AlphaEdit at equal efficacy under "
    "sequential editing (on a zoo model of a synthetic fact world)",
    run=run,
)
