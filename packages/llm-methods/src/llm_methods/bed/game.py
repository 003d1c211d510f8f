"""Game loops: 20 Questions over a finite world and preference elicitation (paper Sec. 5).

Each turn: the belief (sample-then-filter, ``belief.FilterBelief``) holds up to N hypotheses; M
candidate questions are drawn from the unasked bank; the strategy picks one; the answerer answers
by sampling its own p(yes | target, question); the belief filters. Strategies:

- ``bed``: max estimated EIG (``eig.eig_estimate``) under the belief;
- ``entropy``: max H[p̂] (no conditional term); ``split``: p̂(yes) nearest 0.5;
- ``random``: a uniformly random candidate;
- ``prompt_sim`` (exact world only, no text there): a simulated prompt-only questioner that
  holds one hypothesis "in mind" (sampled from the belief) and asks the candidate it most
  expects a "yes" to (the un-tailored, confirmation-style questions the paper reports);
- ``prompt`` / ``cot``: an LLM picks the question (``llm.LLMQuestioner``); these yield a
  :class:`Request` so many games can be batched in lockstep (``play_lockstep``).

Guessing is the same rule for every strategy, so strategies differ only in the questions they
ask: guess (it costs a turn) when one hypothesis survives, or in the last ``GUESS_TAIL`` turns
(at most one guess per survivor). A belief emptied by contradictory answers ends the game with status
``"emptied"`` (reported, never retried).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from llm_methods.bed.belief import EmptyBelief, FilterBelief
from llm_methods.bed.eig import score_questions
from llm_methods.bed.worlds import PreferenceWorld, World

__all__ = [
    "LLM_STRATEGIES",
    "STRATEGIES",
    "GameResult",
    "Request",
    "choose",
    "game_20q",
    "play_20q",
    "play_lockstep",
    "play_preference",
]

STRATEGIES = ("bed", "entropy", "split", "random", "prompt_sim")
LLM_STRATEGIES = ("prompt", "cot")
GUESS_TAIL = 3  # the last turns go to guessing the survivors when several remain


@dataclass
class Request:
    """An LLM strategy's turn: pick one of ``candidates`` given ``history`` [(qid, answer)]."""

    candidates: np.ndarray
    history: list[tuple[int, bool]]


@dataclass
class GameResult:
    success: bool
    turns: int  # questions asked, guesses included
    status: str  # "found" | "out_of_turns" | "emptied"
    questions: list[int] = field(default_factory=list)
    n_hypotheses: list[int] = field(default_factory=list)
    message: str = ""


def choose(
    strategy: str,
    probs: np.ndarray,
    candidates: np.ndarray,
    rng: np.random.Generator,
) -> int:
    """The candidate question id chosen by a scoring / random / prompt_sim strategy.
    ``probs`` ``[N, M, 2]`` = p(yes/no | θ_n, candidate m) under the belief's likelihood."""
    if strategy == "random":
        return int(rng.choice(candidates))
    if strategy == "prompt_sim":
        p_yes = probs[rng.integers(len(probs)), :, 0]
        best = np.flatnonzero(p_yes >= p_yes.max() - 1e-9)
        return int(candidates[rng.choice(best)])
    scores = score_questions(strategy, probs)
    best = np.flatnonzero(scores >= scores.max() - 1e-9)  # ties broken at random
    return int(candidates[rng.choice(best)])


def _likelihood(p_yes_table: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def p_yes(hyps: np.ndarray, qids: np.ndarray) -> np.ndarray:
        return p_yes_table[np.asarray(hyps)][:, np.asarray(qids)]

    return p_yes


def game_20q(
    answerer: World,
    model_p_yes: np.ndarray,
    target: int,
    strategy: str,
    rng: np.random.Generator,
    n_hyp: int = 32,
    m_cand: int = 10,
    max_turns: int = 20,
) -> Generator[Request, int, GameResult]:
    """One 20 Questions game as a generator: LLM strategies yield a :class:`Request` and
    receive the chosen question id; returns the :class:`GameResult`.

    ``answerer.p_yes[target]`` answers; ``model_p_yes`` ``[E, Q]`` is the likelihood the belief
    and the scores use (the same table in the oracle mode; SmolLM2's in task 2)."""
    if strategy not in STRATEGIES + LLM_STRATEGIES:
        raise ValueError(
            f"unknown strategy {strategy!r}; choose from {STRATEGIES + LLM_STRATEGIES}"
        )
    n_e, n_q = model_p_yes.shape
    belief = FilterBelief(
        propose=lambda k, g: g.integers(0, n_e, k),
        p_yes=_likelihood(model_p_yes),
        n=n_hyp,
        resample_below=max(2, n_hyp // 4),
        max_proposals=64 * n_e,
    )
    asked: list[int] = []
    sizes: list[int] = []
    turn = 0
    try:
        kept = belief.start(rng)
        while turn < max_turns:
            sizes.append(len(kept))
            left = max_turns - turn
            if len(kept) == 1 or left <= min(len(kept), GUESS_TAIL):
                guess = int(kept[0])
                turn += 1
                if guess == target:
                    return GameResult(True, turn, "found", asked, sizes)
                belief.exclude(guess, rng)
                kept = belief.hypotheses  # type: ignore[assignment]
                continue
            pool = np.setdiff1d(np.arange(n_q), asked)
            if len(pool) == 0:
                kept = kept[:1]  # nothing left to ask: guess from here on
                continue
            cand = rng.choice(pool, min(m_cand, len(pool)), replace=False)
            if strategy in LLM_STRATEGIES:
                q = yield Request(cand, list(zip(asked, belief.answers, strict=True)))
                q = int(q)
            else:
                p = model_p_yes[kept][:, cand]
                q = choose(strategy, np.stack([p, 1.0 - p], -1), cand, rng)
            answer = bool(rng.random() < answerer.p_yes[target, q])
            asked.append(q)
            turn += 1
            kept = belief.update(q, answer, rng)
    except EmptyBelief as err:
        return GameResult(False, turn, "emptied", asked, sizes, str(err))
    return GameResult(False, turn, "out_of_turns", asked, sizes)


def play_20q(*args: object, **kwargs: object) -> GameResult:
    """Run :func:`game_20q` for a non-LLM strategy."""
    gen = game_20q(*args, **kwargs)  # type: ignore[arg-type]
    try:
        next(gen)
    except StopIteration as stop:
        return stop.value
    raise ValueError("an LLM strategy needs play_lockstep (it asks for question choices)")


def play_lockstep(
    games: Sequence[Generator[Request, int, GameResult]],
    choose_batch: Callable[[list[Request]], list[int]],
    *,
    quiet: bool = True,
) -> list[GameResult]:
    """Advance many LLM-strategy games together: each round, all pending requests go to
    ``choose_batch`` at once (one batched LLM call). ``quiet=False``: progress lines on stderr
    over the games' starts (where a game without LLM questions is played whole) and over the
    LLM rounds (:func:`iclr26_common.progress.progress`)."""
    from iclr26_common.progress import progress

    results: list[GameResult | None] = [None] * len(games)
    pending: dict[int, Request] = {}
    for i, g in progress(list(enumerate(games)), description="bed games", quiet=quiet):
        try:
            pending[i] = next(g)
        except StopIteration as stop:
            results[i] = stop.value

    def rounds() -> Iterator[None]:
        while pending:
            yield None

    quiet_rounds = quiet or not pending
    for _ in progress(rounds(), description="bed LLM question rounds", quiet=quiet_rounds):
        ids = sorted(pending)
        choices = choose_batch([pending[i] for i in ids])
        nxt: dict[int, Request] = {}
        for i, q in zip(ids, choices, strict=True):
            try:
                nxt[i] = games[i].send(int(q))
            except StopIteration as stop:
                results[i] = stop.value
        pending = nxt
    return results  # type: ignore[return-value]


def play_preference(
    world: PreferenceWorld,
    w_true: np.ndarray,
    strategy: str,
    rng: np.random.Generator,
    n_hyp: int = 64,
    m_cand: int = 10,
    turns: int = 10,
    k: int = 5,
) -> tuple[np.ndarray, str]:
    """Preference elicitation: top-k accuracy |recommended top-k ∩ true top-k| / k after each of
    0..``turns`` questions (``[turns + 1]``) and the status (``"ok"`` or ``"emptied"``: accuracy
    then stays at the last recommendation). Hypotheses w ~ N(0, I) from the prior, filtered."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r} for preference elicitation")
    dim = world.features.shape[1]
    belief = FilterBelief(
        propose=lambda n, g: g.standard_normal((n, dim)),
        p_yes=world.p_yes,
        n=n_hyp,
        resample_below=n_hyp // 4,
        max_proposals=20000,
        batch=2048,
        distinct=False,
    )
    true_top = set(np.argsort(-world.utilities(w_true)[0])[:k].tolist())

    def accuracy(hyps: np.ndarray) -> float:
        rec = np.argsort(-world.utilities(hyps).mean(0))[:k]
        return len(true_top & set(rec.tolist())) / k

    out = np.zeros(turns + 1)
    asked: list[int] = []
    n_q = len(world.questions)
    status = "ok"
    try:
        kept = belief.start(rng)
        out[0] = accuracy(kept)
        for t in range(1, turns + 1):
            pool = np.setdiff1d(np.arange(n_q), asked)
            cand = rng.choice(pool, min(m_cand, len(pool)), replace=False)
            p = world.p_yes(kept, cand)
            q = choose(strategy, np.stack([p, 1.0 - p], -1), cand, rng)
            answer = bool(rng.random() < world.p_yes(w_true, np.array([q]))[0, 0])
            asked.append(q)
            kept = belief.update(q, answer, rng)
            out[t] = accuracy(kept)
    except EmptyBelief:
        status = "emptied"
        last = out[: len(asked) + 1][-1] if asked else out[0]
        out[len(asked) :] = last
    return out, status
