"""Sample-then-filter belief over hypotheses (paper Sec. 4, "belief updating").

The hypothesis proposer (the LLM given the history, or a stand-in) proposes candidates θ; a
candidate is rejected when it contradicts a past answer under the likelihood model:
p(yes | θ, x) > ``REJECT_ABOVE`` when the answer was no, or < ``REJECT_BELOW`` when it was yes.
The kept set (at most N, uniform weights) is the belief; it is refilled by proposing again when
it falls below ``resample_below``. Proposals are bounded by ``max_proposals`` per refill, so a
history that no proposable hypothesis satisfies ends in :class:`EmptyBelief` instead of a loop.

Hypotheses are rows of a numpy array: ints (indices into a finite space) or ``[d]`` vectors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["REJECT_ABOVE", "REJECT_BELOW", "EmptyBelief", "FilterBelief", "consistent"]

REJECT_ABOVE = 0.8  # answer "no" rejects θ with p(yes | θ, x) above this
REJECT_BELOW = 0.2  # answer "yes" rejects θ with p(yes | θ, x) below this

# p_yes(hypotheses [n, ...], question ids [q]) -> [n, q] probabilities of "yes"
Likelihood = Callable[[np.ndarray, np.ndarray], np.ndarray]
Proposer = Callable[[int, np.random.Generator], np.ndarray]


class EmptyBelief(RuntimeError):
    """Every proposed hypothesis contradicts the answers so far (reported, never retried forever)."""


def consistent(p_yes: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """``[n]`` mask of hypotheses consistent with all answers: ``p_yes`` ``[n, t]`` under the
    asked questions, ``answers`` ``[t]`` booleans (True = yes)."""
    answers = np.asarray(answers, dtype=bool)
    if p_yes.shape[1] == 0:
        return np.ones(p_yes.shape[0], dtype=bool)
    bad_yes = answers[None, :] & (p_yes < REJECT_BELOW)
    bad_no = ~answers[None, :] & (p_yes > REJECT_ABOVE)
    return ~(bad_yes | bad_no).any(1)


@dataclass
class FilterBelief:
    """``n`` kept hypotheses at most; refilled below ``resample_below``; ``distinct`` dedups
    (finite hypothesis spaces); ``max_proposals`` bounds each refill."""

    propose: Proposer
    p_yes: Likelihood
    n: int = 32
    resample_below: int = 8
    max_proposals: int = 4096
    batch: int = 256
    distinct: bool = True
    hypotheses: np.ndarray | None = None
    questions: list[int] = field(default_factory=list)
    answers: list[bool] = field(default_factory=list)
    proposals: int = 0  # total proposals made (cost accounting)
    excluded: list[int] = field(default_factory=list)  # wrong guesses

    def _filter(self, hyps: np.ndarray) -> np.ndarray:
        if self.excluded and hyps.ndim == 1:
            hyps = hyps[~np.isin(hyps, self.excluded)]
        if len(hyps) == 0 or not self.questions:
            return hyps
        p = self.p_yes(hyps, np.asarray(self.questions))
        return hyps[consistent(p, np.asarray(self.answers))]

    def refill(self, rng: np.random.Generator) -> None:
        kept = self.hypotheses
        made = 0
        while (kept is None or len(kept) < self.n) and made < self.max_proposals:
            cand = self._filter(self.propose(self.batch, rng))
            made += self.batch
            kept = cand if kept is None else np.concatenate([kept, cand])
            if self.distinct and len(kept):
                _, first = np.unique(kept, axis=0, return_index=True)
                kept = kept[np.sort(first)]
        self.proposals += made
        self.hypotheses = kept[: self.n] if kept is not None else kept
        if self.hypotheses is None or len(self.hypotheses) == 0:
            raise EmptyBelief(
                f"hypothesis set emptied: none of {made} proposals is consistent with the "
                f"{len(self.questions)} answers so far"
            )

    def start(self, rng: np.random.Generator) -> np.ndarray:
        self.hypotheses = None
        self.refill(rng)
        return self.hypotheses  # type: ignore[return-value]

    def update(self, question: int, answer: bool, rng: np.random.Generator) -> np.ndarray:
        """Condition on one answer: filter the kept set, refill when it runs low."""
        self.questions.append(int(question))
        self.answers.append(bool(answer))
        assert self.hypotheses is not None, "call start() first"
        self.hypotheses = self._filter(self.hypotheses)
        if len(self.hypotheses) < self.resample_below:
            self.refill(rng)
        return self.hypotheses

    def exclude(self, hypothesis: int, rng: np.random.Generator) -> None:
        """Drop a wrongly guessed hypothesis (finite spaces) now and from later proposals."""
        self.excluded.append(int(hypothesis))
        assert self.hypotheses is not None, "call start() first"
        self.hypotheses = self._filter(self.hypotheses)
        if len(self.hypotheses) < self.resample_below:
            self.refill(rng)
