"""The interpretability "agent" interface: name the finetuning domain from ADL outputs.

The paper uses an LLM agent that reads logit-lens / Patchscope tokens and steered generations and
may query the models. Any object with ``name_domain(evidence, candidates) -> str`` plugs in
(e.g. a wrapper around a chat model a user has on GPU). The built-in
:class:`VocabularyOverlapAgent` is deterministic: it scores each candidate domain by how many of
the evidence tokens fall in its vocabulary (weighted by rank) and names the best.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["ADLEvidence", "InterpretabilityAgent", "VocabularyOverlapAgent"]


@dataclass
class ADLEvidence:
    """Token ids surfaced by ADL: per-position logit lens and Patchscope top tokens (ranked),
    and the token ids of steered generations."""

    lens: list[list[int]] = field(default_factory=list)
    patchscope: list[list[int]] = field(default_factory=list)
    steered: list[int] = field(default_factory=list)


class InterpretabilityAgent(Protocol):
    def name_domain(self, evidence: ADLEvidence, candidates: Mapping[str, set[int]]) -> str: ...


class VocabularyOverlapAgent:
    """Score(domain) = Σ over ranked evidence lists of Σ_rank [token ∈ vocab] / (rank + 1),
    plus the fraction of steered tokens in the vocabulary; ties go to the first candidate."""

    def scores(self, evidence: ADLEvidence, candidates: Mapping[str, set[int]]) -> dict[str, float]:
        if not candidates:
            raise ValueError("no candidate domains")
        ranked: Sequence[list[int]] = [*evidence.lens, *evidence.patchscope]
        out = {}
        for name, vocab in candidates.items():
            score = sum(
                sum(1.0 / (r + 1) for r, t in enumerate(lst) if t in vocab) for lst in ranked
            )
            if evidence.steered:
                score += sum(t in vocab for t in evidence.steered) / len(evidence.steered)
            out[name] = score
        return out

    def name_domain(self, evidence: ADLEvidence, candidates: Mapping[str, set[int]]) -> str:
        scores = self.scores(evidence, candidates)
        return max(scores, key=scores.__getitem__)
