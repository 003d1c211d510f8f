"""Experiment ``llm-methods.ltpo``: LTPO vs zero-shot CoT, CoT-Unk and LatentSeek on SmolLM2.

Offline graded arithmetic word problems (``data.synth_problems``, 1-4 steps, exact answers),
SmolLM2-135M-Instruct (offline GGUF), greedy decoding. Methods: zero-shot CoT (upstream's CoT
prompt: the instruction as the system message, no thoughts), CoT-Unk (the thought prompt with K
unoptimised placeholders, i.e. LTPO with 0 steps), LatentSeek (REINFORCE on the same latent
thoughts with the model's yes/no self-reward), LTPO (zeroth order, run_ltpo.sh values with σ and
η read in units of SmolLM2's embedding scale, the post-update H of the best step kept, as
upstream). Accuracy by difficulty; overall accuracy with Wilson 95 % intervals (SciPy, via
``iclr26_common.effects.mean_interval``). Only a ``\boxed{}`` answer solves; ``answer_sources``
counts per method the decodes answering in each format (boxed, each fallback, none).

Claims and thresholds, fixed here before any run:

  (a) acc(LTPO) − acc(CoT-Unk) >= CLAIM_A_MIN_GAIN (0) over all problems, for the whole 95 %
      paired bootstrap interval over problems (issue 41; a point estimate decided it before);
  (b) LTPO's advantage over the best other method grows with difficulty:
      adv(hard: 3-4 steps) − adv(easy: 1-2 steps) >= CLAIM_B_MIN_GROWTH (5 pts) for the whole
      95 % interval (per-problem LTPO − best-other differences in the two bands, different
      problems: an unpaired bootstrap; the best other method of each band is the most accurate
      one there, chosen on the run's point estimates).

Preconditions (fixed with the fix of issue 26, before the re-run): both claims need the model
to solve the task at all, acc(CoT, easy) >= MIN_COT_EASY; (b) also needs the hard problems not
to be at the floor for every method: some method solves >= MIN_HARD_SOLVED hard problems.
Without them a verdict would compare noise at the floor: the claim is "inconclusive".

Preconditions of (a) added after the last run (review of issue 26; they can only turn a verdict
into "inconclusive", never into "held"): the prompt LTPO is compared with must be solvable,
acc(CoT-Unk, easy) >= MIN_COT_EASY, and LTPO must change at least one answer relative to
CoT-Unk (else LTPO was a no-op and a criterion of >= 0 holds by construction).

The shared control first (a change for the budget, recorded before the run with it): CoT and
CoT-Unk are decoded for every problem before LTPO and LatentSeek, and the control both claims
need, "the model solves the task" (:func:`solves_task`, the same function ``judge`` uses), is
checked on CoT alone. When it fails, LTPO and LatentSeek are not run: both claims are
``Claim.untested`` with that control and its measured value ((a) also with its CoT-Unk control),
and the metrics name the methods not run. A failed shared control makes both claims
"inconclusive" whatever LTPO and LatentSeek do, so the verdicts are those of the full design; on
SmolLM2-135M it fails (it writes no ``\boxed{}`` answer), and the two methods took 193 s of the
2026-12-04 run's 324 s (README, "the shared control first"). When it passes, every method
runs on the same batches and seeds as before (LTPO's noise comes from per-problem generators,
LatentSeek draws none, so running the batches' CoT and CoT-Unk decodes first changes no number;
each batch keeps its prefix cache between the phases).

Scale: on a CPU the budget holds ``settings(quick)["n"]`` = 80 problems (4.9 s per problem for the
four methods, measured); on CUDA the run is the issue's 200 problems with 256 new tokens
(``settings(..., cuda=True)``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common import Claim, Experiment, Precondition, Result, seed_everything
from iclr26_common.effects import difference_effect, mean_interval, points_effect

__all__ = [
    "EXPERIMENT",
    "answer_sources",
    "judge",
    "judge_predictions",
    "read_predictions",
    "run",
    "settings",
    "solves_task",
    "untested_claims",
]

PAPER = (
    "Thinking on the Fly: Test-Time Reasoning Enhancement via Latent Thought Policy "
    "Optimization (arXiv 2510.04182)"
)
METHODS = ("cot", "cot_unk", "latentseek", "ltpo")
#: the methods the shared control gates (run only when the model solves the task)
GATED = ("latentseek", "ltpo")
CLAIM_A_MIN_GAIN = 0.0
# (b) needs a positive smallest growth (issue 41, fixed before any run with it): at 0 a null
# method (LTPO = the best other method on every problem, an exact 0) would hold
CLAIM_B_MIN_GROWTH = 0.05
MIN_COT_EASY = 0.10
MIN_HARD_SOLVED = 3
EASY, HARD = (1, 2), (3, 4)
SEED = 0
CLAIM_A = "LTPO is at least as accurate as CoT-Unk (same placeholders, 0 steps)."
CLAIM_B = "LTPO's advantage grows with difficulty, where the other methods collapse."
GAIN = "acc(LTPO) - acc(CoT-Unk) over all problems"
GROWTH = f"adv(hard {HARD}) - adv(easy {EASY}), adv = acc(LTPO) - max(acc(other methods))"


def settings(quick: bool, cuda: bool = False) -> dict[str, Any]:
    if quick:
        return {"n": 4, "max_new_tokens": 24, "latentseek_iters": 1, "batch": 4}
    if cuda:  # the scale; needs a GPU for the 10-minute budget
        return {"n": 200, "max_new_tokens": 256, "latentseek_iters": 1, "batch": 50}
    # 80 on a CPU: 4.9 s per problem for the four methods (measured at load ~3, 40 problems)
    return {"n": 80, "max_new_tokens": 48, "latentseek_iters": 1, "batch": 20}


def answer_sources(texts: list[str]) -> dict[str, int]:
    """How many of ``texts`` give their answer in each format (``data.ANSWER_SOURCES``: the
    asked-for ``boxed``, then the fallbacks) or in none (``"none"``): a method that writes no
    ``\\boxed{}`` answer can solve nothing, whatever its text says."""
    from llm_methods.ltpo.data import ANSWER_SOURCES, answer_with_source

    counts = dict.fromkeys((*ANSWER_SOURCES, "none"), 0)
    for text in texts:
        counts[answer_with_source(text)[1] or "none"] += 1
    return counts


def _best_other(correct: dict[str, np.ndarray], idx: np.ndarray) -> str:
    """The most accurate method other than LTPO on the problems ``idx`` (ties: METHODS order)."""
    others = [m for m in METHODS if m != "ltpo"]
    return max(others, key=lambda m: (float(correct[m][idx].mean()), -others.index(m)))


def _advantage_rows(correct: dict[str, np.ndarray], idx: np.ndarray) -> np.ndarray:
    """Per problem of ``idx``: LTPO's 0/1 outcome minus the best other method's (their mean is
    adv = acc(LTPO) - max(acc(other methods)) on ``idx``)."""
    best = _best_other(correct, idx)
    return np.asarray(correct["ltpo"][idx], float) - np.asarray(correct[best][idx], float)


def _easy_accuracy(correct: np.ndarray, difficulty: np.ndarray) -> float:
    easy = np.isin(difficulty, EASY)
    return float(correct[easy].mean()) if easy.any() else 0.0


def solves_task(cot: np.ndarray, difficulty: np.ndarray) -> Precondition:
    """The control both claims share, from CoT's per-problem correctness alone: acc(CoT, easy)
    >= MIN_COT_EASY. ``judge`` uses it, and ``run`` checks it before running LTPO and LatentSeek
    (neither claim can be decided when it fails, whatever they do)."""
    acc = _easy_accuracy(cot, difficulty)
    return Precondition(
        "the model solves the task",
        f"acc(CoT, easy {EASY}) >= {MIN_COT_EASY}",
        {"acc_cot_easy": round(acc, 4)},
        acc >= MIN_COT_EASY,
    )


def _unk_solves(unk: np.ndarray, difficulty: np.ndarray) -> Precondition:
    """(a)'s control on the compared prompt: acc(CoT-Unk, easy) >= MIN_COT_EASY."""
    acc = _easy_accuracy(unk, difficulty)
    return Precondition(
        "the compared prompt (CoT-Unk) solves easy problems",
        f"acc(CoT-Unk, easy {EASY}) >= {MIN_COT_EASY} (added after the last run)",
        {"acc_cot_unk_easy": round(acc, 4)},
        acc >= MIN_COT_EASY,
    )


def untested_claims(cot: np.ndarray, cot_unk: np.ndarray, difficulty: np.ndarray) -> list[Claim]:
    """The two claims when the shared control (:func:`solves_task`) failed and LTPO and
    LatentSeek were not run: "inconclusive", not measured, carrying the failed control with its
    value ((a) also its CoT-Unk control, measured from the decodes that ran)."""
    can_solve = solves_task(cot, difficulty)
    if can_solve.passed:
        raise ValueError("the shared control passed: the claims are measured (judge)")
    rule = "the whole 95 % interval over problems on that side (not measured)"
    return [
        Claim.untested(
            text=CLAIM_A,
            criterion=f"{GAIN} >= {100 * CLAIM_A_MIN_GAIN:g} pts: {rule}",
            preconditions=[can_solve, _unk_solves(cot_unk, difficulty)],
            measured={"cot_unk": round(float(cot_unk.mean()), 4)},
        ),
        Claim.untested(
            text=CLAIM_B,
            criterion=f"{GROWTH} >= {100 * CLAIM_B_MIN_GROWTH:g} pts: {rule}",
            preconditions=[can_solve],
        ),
    ]


def judge(
    correct: dict[str, np.ndarray],
    difficulty: np.ndarray,
    changed: int | None = None,
) -> list[Claim]:
    """The two claims from per-problem correctness (0/1 per method) and difficulties.

    ``changed`` = number of problems whose LTPO answer text differs from CoT-Unk's; None counts
    the problems whose correctness differs (a lower bound: text can change, correctness not)."""
    easy, hard = np.isin(difficulty, EASY), np.isin(difficulty, HARD)
    adv_easy, adv_hard = _advantage_rows(correct, easy), _advantage_rows(correct, hard)
    hard_solved = max(int(correct[m][hard].sum()) for m in METHODS)
    if changed is None:
        changed = int((correct["ltpo"] != correct["cot_unk"]).sum())
    can_solve = solves_task(correct["cot"], difficulty)
    unk_solves = _unk_solves(correct["cot_unk"], difficulty)
    off_floor = Precondition(
        "hard problems are not at the floor",
        f"max over methods of hard problems solved >= {MIN_HARD_SOLVED}",
        {"hard_solved": hard_solved},
        hard_solved >= MIN_HARD_SOLVED,
    )
    ltpo_acts = Precondition(
        "LTPO changes at least one answer relative to CoT-Unk",
        "problems whose LTPO answer differs from CoT-Unk's >= 1 (added after the last run)",
        {"answers_changed": changed},
        changed >= 1,
    )
    gain = correct["ltpo"] - correct["cot_unk"]
    return [
        Claim.test(
            text=CLAIM_A,
            effect=points_effect(
                correct["ltpo"],
                correct["cot_unk"],
                name=GAIN,
                threshold=100 * CLAIM_A_MIN_GAIN,
                direction=">=",
                seed=SEED,
            ),
            preconditions=[can_solve, unk_solves, ltpo_acts],
            measured={
                "ltpo": round(float(correct["ltpo"].mean()), 4),
                "cot_unk": round(float(correct["cot_unk"].mean()), 4),
                "gain": round(float(gain.mean()), 4),
            },
        ),
        Claim.test(
            text=CLAIM_B,
            effect=difference_effect(
                adv_hard,
                adv_easy,
                name=GROWTH,
                unit="pts",
                scale=100,
                threshold=100 * CLAIM_B_MIN_GROWTH,
                direction=">=",
                seed=SEED,
                units="problems per difficulty band (LTPO - the band's best other method)",
            ),
            preconditions=[can_solve, off_floor],
            measured={
                "adv_easy": round(float(adv_easy.mean()), 4) if adv_easy.size else 0.0,
                "adv_hard": round(float(adv_hard.mean()), 4) if adv_hard.size else 0.0,
                "best_other_easy": _best_other(correct, easy),
                "best_other_hard": _best_other(correct, hard),
            },
        ),
    ]


#: the fields ``ltpo judge`` reads from each row of a ``predictions.jsonl`` (``ltpo solve``)
PREDICTION_FIELDS = ("id", "difficulty", "question", "gold", "correct", "output")


def read_predictions(path: str | Path, method: str) -> tuple[list[dict[str, Any]], dict]:
    """The rows of one method's ``ltpo solve`` output (``PREDICTION_FIELDS`` checked per row:
    ``difficulty`` an integer 1-4, ``correct`` a bool, ``id`` unique) and its summary. Errors are
    one line naming ``FILE:LINE`` and the field."""
    return _read_run(path, method)[1:]


def _read_run(path: str | Path, method: str) -> tuple[Path, list[dict[str, Any]], dict]:
    """:func:`read_predictions` with the ``predictions.jsonl`` it read first."""
    from llm_methods.jsonl import finished_run, read_jsonl

    predictions, summary = finished_run(path, method, "ltpo solve")
    summary_path = predictions.parent / "summary.json"
    rows, seen = [], set()
    for where, row in read_jsonl(predictions, PREDICTION_FIELDS, ValueError, what="predictions"):
        steps = row["difficulty"]
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 4:
            raise ValueError(
                f"{where}: field 'difficulty' is {steps!r}, expected 1-4 arithmetic steps (the "
                "claims' bands need each problem's difficulty: solve a file that carries it, "
                "e.g. from ltpo synth)"
            )
        if not isinstance(row["correct"], bool):
            raise ValueError(f"{where}: field 'correct' is {row['correct']!r}, expected a bool")
        if not isinstance(row["output"], str):
            raise ValueError(f"{where}: field 'output' is not a string")
        if row["id"] in seen:
            raise ValueError(f"{where}: field 'id' {row['id']!r} repeats an earlier row")
        seen.add(row["id"])
        rows.append(row)
    if summary.get("n") != len(rows):
        raise ValueError(
            f"{summary_path}: field 'n' is {summary.get('n')!r} but {predictions} has "
            f"{len(rows)} rows"
        )
    return predictions, rows, summary


def judge_predictions(paths: dict[str, str | Path]) -> tuple[list[Claim], dict[str, Any]]:
    """The two claims from the four methods' ``ltpo solve`` outputs (``paths``: method ->
    its ``--out`` folder or ``predictions.jsonl``), by :func:`judge`, the experiment's own
    definition: rows paired by problem id, each problem's difficulty from the rows, LTPO's
    answers changed = problems whose output text differs from CoT-Unk's (as ``run`` counts them).

    Refused in one line naming the file: a method missing, a run of another method or model, or
    a different problem set (ids, or a problem's question, gold or difficulty, differ from the
    first method's run). Also returns the numbers behind the claims: accuracy per method with
    its Wilson 95 % interval, per difficulty, and fallback matches (never solves)."""
    missing = [m for m in METHODS if m not in paths]
    if missing:
        raise ValueError(f"judge needs the runs of {list(METHODS)}; missing {missing}")
    runs = {m: _read_run(paths[m], m) for m in METHODS}
    ref_method = METHODS[0]
    ref_file, ref_rows, ref_summary = runs[ref_method]
    order = [r["id"] for r in ref_rows]
    by_id: dict[str, dict[str, dict[str, Any]]] = {}
    for m in METHODS:
        file, rows, summary = runs[m]
        if summary.get("model") != ref_summary.get("model"):
            raise ValueError(
                f"{file.parent / 'summary.json'}: field 'model' is {summary.get('model')!r}, "
                f"but the {ref_method} run used {ref_summary.get('model')!r}"
            )
        ids = {r["id"] for r in rows}
        if ids != set(order):
            extra, lost = sorted(ids - set(order), key=str), sorted(set(order) - ids, key=str)
            raise ValueError(
                f"{file}: not the problem set of {ref_file} ({len(rows)} vs {len(order)} "
                f"problems; only here: {extra[:3]}, only there: {lost[:3]})"
            )
        by_id[m] = {r["id"]: r for r in rows}
        for pid in order:
            mine, ref = by_id[m][pid], by_id[ref_method][pid]
            for field in ("question", "gold", "difficulty"):
                if mine[field] != ref[field]:
                    raise ValueError(
                        f"{file}: problem {pid!r} has {field} {mine[field]!r}, but {ref_file} "
                        f"has {ref[field]!r} (not the same problem set)"
                    )
    difficulty = np.array([by_id[ref_method][pid]["difficulty"] for pid in order])
    correct = {m: np.array([float(by_id[m][pid]["correct"]) for pid in order]) for m in METHODS}
    changed = sum(by_id["ltpo"][pid]["output"] != by_id["cot_unk"][pid]["output"] for pid in order)
    claims = judge(correct, difficulty, changed)
    levels = sorted(set(difficulty.tolist()))
    accuracy: dict[str, dict[str, Any]] = {}
    for m in METHODS:
        acc: dict[str, Any] = {
            f"d{d}": round(float(correct[m][difficulty == d].mean()), 4) for d in levels
        }
        acc["all"] = round(float(correct[m].mean()), 4)
        if len(order) > 1:
            ci = mean_interval(correct[m], seed=SEED, units="problems")
            acc["all_ci95"] = [round(ci.low, 4), round(ci.high, 4)]
        accuracy[m] = acc
    metrics = {
        "n_problems": len(order),
        "model": ref_summary.get("model"),
        "accuracy": accuracy,
        "fallback_matches": {
            m: sum(bool(by_id[m][pid].get("fallback_match")) for pid in order) for m in METHODS
        },
        "ltpo_answers_changed_vs_cot_unk": int(changed),
        "inputs": {m: str(runs[m][0]) for m in METHODS},
    }
    return claims, metrics


def run(quick: bool, out_dir: Path) -> Result:
    import torch

    from iclr26_common.device import choose_device
    from llm_methods.lm import load_lm
    from llm_methods.lm.threads import one_thread
    from llm_methods.ltpo.data import Problem, grade, normalize_answer, synth_problems
    from llm_methods.ltpo.latentseek import latentseek_batch
    from llm_methods.ltpo.optimize import (
        BatchThoughtScorer,
        LTPOConfig,
        decode_rows,
        embedding_scale,
        initial_thoughts,
        ltpo_optimize_batch,
        prompt_ids,
        thought_prompt,
    )

    seed_everything(SEED)
    device = choose_device()
    cfg = settings(quick, device.type == "cuda")
    ltpo_cfg = LTPOConfig(embedding_units=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    records = synth_problems(cfg["n"], seed=SEED)
    problems = [
        Problem(r["question"], normalize_answer(r["answer"].rsplit("####", 1)[1]), r["difficulty"])
        for r in records
    ]
    diff = np.array([p.difficulty for p in problems])
    texts: dict[str, list[str]] = {m: [] for m in METHODS}
    seconds: dict[str, float] = dict.fromkeys(("prefix", *METHODS), 0.0)
    traces: list[list[float]] = []
    norms: list[float] = []
    new, K = cfg["max_new_tokens"], ltpo_cfg.n_thoughts
    batches = [
        range(b, min(b + cfg["batch"], len(problems)))
        for b in range(0, len(problems), cfg["batch"])
    ]
    with one_thread():
        lm = load_lm("smollm2", device, "float32")
        scale = embedding_scale(lm)
        cots = [prompt_ids(lm, p.question, reserve=new) for p in problems]
        thought = [thought_prompt(lm, p.question, K, reserve=new) for p in problems]
        suffix = thought[0].suffix
        assert all(t.suffix == suffix for t in thought)  # the template's end of turn + header
        # first the method-free baselines: CoT and CoT-Unk of every batch, each batch's thought
        # prefixes encoded once and kept for LTPO and LatentSeek
        scorers: list[BatchThoughtScorer | None] = []
        for rows in batches:
            t = time.perf_counter()
            texts["cot"] += decode_rows(BatchThoughtScorer(lm, [cots[i] for i in rows]), None, new)
            seconds["cot"] += time.perf_counter() - t
            t = time.perf_counter()  # the batch's thought prefixes, once for three methods
            scorer = BatchThoughtScorer(
                lm, [thought[i].prefix for i in rows], ltpo_cfg.top_k, suffix
            )
            seconds["prefix"] += time.perf_counter() - t
            t = time.perf_counter()
            texts["cot_unk"] += decode_rows(scorer, initial_thoughts(lm, scorer.B, K), new)
            seconds["cot_unk"] += time.perf_counter() - t
            scorers.append(scorer)
        gate = solves_task(_solves(texts["cot"], problems), diff)
        for b, rows in enumerate(batches if gate.passed else []):
            scorer, scorers[b] = scorers[b], None  # freed after its batch
            assert scorer is not None
            t = time.perf_counter()
            hs, tr = ltpo_optimize_batch(
                lm, [thought[i].prefix for i in rows], ltpo_cfg, list(rows), scorer=scorer
            )
            traces += tr
            norms += [float(h.norm(dim=-1).mean()) for h in hs]
            texts["ltpo"] += decode_rows(scorer, torch.stack(hs), new)
            seconds["ltpo"] += time.perf_counter() - t
            t = time.perf_counter()
            answers, _ = latentseek_batch(
                scorer,
                [problems[i].question for i in rows],
                K,
                iterations=cfg["latentseek_iters"],
                max_new_tokens=new,
                initial_answers=[texts["cot_unk"][i] for i in rows],
                score_final=False,  # the rewards are not read here: the answers are the same
            )
            texts["latentseek"] += answers
            seconds["latentseek"] += time.perf_counter() - t
        scorers.clear()
        placeholder_norm = float(initial_thoughts(lm, 1, K)[0].norm(dim=-1).mean())
        row_norm = float(lm.model.get_input_embeddings().weight.detach().norm(dim=-1).mean())
    ran = METHODS if gate.passed else tuple(m for m in METHODS if m not in GATED)
    correct = {m: _solves(texts[m], problems) for m in ran}
    fallback = {  # answers matched only by a fallback (no \\boxed{}): counted apart, not solves
        m: int(
            sum(grade(t, p.answer) == "fallback" for t, p in zip(texts[m], problems, strict=True))
        )
        for m in ran
    }
    sources = {m: answer_sources(texts[m]) for m in ran}
    levels = sorted(set(diff.tolist()))
    acc = {m: {f"d{d}": round(float(correct[m][diff == d].mean()), 4) for d in levels} for m in ran}
    for m in ran:
        ci = mean_interval(correct[m], seed=SEED, units="problems")  # Wilson on 0/1 outcomes
        acc[m]["all"] = round(float(correct[m].mean()), 4)
        acc[m]["all_ci95"] = [round(ci.low, 4), round(ci.high, 4)]
    _plot(out_dir / "ltpo_accuracy.png", acc, levels)
    sigma, lr = ltpo_cfg.scaled(scale)
    metrics: dict[str, Any] = {}
    if gate.passed:
        reward_gain = float(np.mean([max(tr[1:] or tr) - tr[0] for tr in traces]))
        changed = sum(a != b for a, b in zip(texts["ltpo"], texts["cot_unk"], strict=True))
        metrics["ltpo_answers_changed_vs_cot_unk"] = changed
    metrics |= {
        "accuracy": acc,
        "fallback_matches": fallback,
        "answer_sources": sources,
        "seconds": {k: round(v, 1) for k, v in seconds.items() if k in ("prefix", *ran)},
    }
    if gate.passed:
        metrics["ltpo_mean_best_reward_gain"] = round(reward_gain, 4)
    metrics |= {
        "embedding_scale": round(scale, 5),
        "embedding_row_norm": round(row_norm, 4),
        "placeholder_norm": round(placeholder_norm, 4),
    }
    if gate.passed:
        metrics["kept_thought_norm"] = round(float(np.mean(norms)), 4)
    metrics |= {
        "sigma_abs": round(sigma, 5),
        "lr_abs": round(lr, 7),
        "wall_s": round(time.perf_counter() - start, 1),
        "examples": {m: texts[m][0][-160:] for m in ran},
        "methods_run": list(ran),
        "shared_control": gate.to_dict(),
    }
    if not gate.passed:
        metrics["not_run"] = {
            "methods": list(GATED),
            "why": (
                f"the control both claims need, '{gate.name}' ({gate.criterion}), failed "
                f"(acc(CoT, easy) = {gate.measured['acc_cot_easy']}): neither claim can be "
                "decided whatever LTPO and LatentSeek do, so they were not run (budget)"
            ),
        }
    line = ", ".join(f"{m} {acc[m]['all']:.3f}" for m in ran)
    if gate.passed:
        tail = (
            f"LTPO raised the confidence reward by {reward_gain:.3f} on average; kept thoughts "
            f"have norm {np.mean(norms):.2f} (embedding rows {row_norm:.2f})."
        )
        claims = judge(correct, diff, changed)
    else:
        tail = (
            f"LTPO and LatentSeek were not run: the control both claims need, '{gate.name}' "
            f"({gate.criterion}), failed at {gate.measured['acc_cot_easy']:.3f}, so neither "
            "claim can be decided whatever they do."
        )
        claims = untested_claims(correct["cot"], correct["cot_unk"], diff)
    not_run = "" if gate.passed else " (not run: the shared control failed)"
    return Result(
        summary=(
            f"SmolLM2-135M-Instruct on {len(problems)} synthetic 1-4 step word problems, "
            f"accuracy: {line}. {tail}"
        ),
        metrics=metrics,
        seeds=[SEED],
        scale=(
            f"{len(problems)} problems ({len(problems) // len(levels)} per difficulty), greedy "
            f"{new} new tokens, LTPO K={K} T={ltpo_cfg.steps} sigma={ltpo_cfg.sigma} "
            f"gamma={ltpo_cfg.sigma_decay} eta={ltpo_cfg.lr} in embedding units "
            f"(s={scale:.4f}: sigma {sigma:.4f}, eta {lr:.2e}), LatentSeek "
            f"{cfg['latentseek_iters']} iteration(s){not_run}, {device.type}"
        ),
        claims=claims,
    )


def _solves(texts: list[str], problems: list[Any]) -> np.ndarray:
    """0/1 per problem: the text's ``\\boxed{}`` answer is the problem's (``data.is_correct``)."""
    from llm_methods.ltpo.data import is_correct

    pairs = zip(texts, problems, strict=True)
    return np.array([is_correct(t, p.answer) for t, p in pairs], dtype=float)


def _plot(path: Path, acc: dict[str, dict[str, Any]], levels: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for m in acc:  # the methods that ran
        ax.plot(levels, [acc[m][f"d{d}"] for d in levels], marker="o", label=m)
    ax.set_xlabel("arithmetic steps")
    ax.set_ylabel("accuracy")
    ax.set_xticks(levels)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


EXPERIMENT = Experiment(
    name="llm-methods.ltpo",
    paper=PAPER,
    claim="Optimising latent thought embeddings at test time with an intrinsic confidence "
    "reward improves reasoning accuracy over the same placeholders unoptimised, most on hard "
    "problems.",
    run=run,
)
