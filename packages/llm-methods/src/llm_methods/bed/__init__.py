"""BED-LLM: sequential Bayesian experimental design for multi-turn questioning (arXiv 2508.21184).

Light imports only: ``eig`` (estimators), ``belief`` (sample-then-filter), ``worlds`` (tasks),
``game`` (20 Questions / preference loops), ``llm`` (LLM answer likelihoods, prompt-only / CoT).

The main classes and functions are exported here and imported on first use
(``import llm_methods.bed`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "eig_estimate": "llm_methods.bed.eig",
    "entropy": "llm_methods.bed.eig",
    "exact_eig": "llm_methods.bed.eig",
    "predictive": "llm_methods.bed.eig",
    "score_questions": "llm_methods.bed.eig",
    "split_score": "llm_methods.bed.eig",
    "EmptyBelief": "llm_methods.bed.belief",
    "FilterBelief": "llm_methods.bed.belief",
    "consistent": "llm_methods.bed.belief",
    "PreferenceWorld": "llm_methods.bed.worlds",
    "World": "llm_methods.bed.worlds",
    "animal_world": "llm_methods.bed.worlds",
    "preference_world": "llm_methods.bed.worlds",
    "read_world": "llm_methods.bed.worlds",
    "synthetic_world": "llm_methods.bed.worlds",
    "write_world": "llm_methods.bed.worlds",
    "STRATEGIES": "llm_methods.bed.game",
    "GameResult": "llm_methods.bed.game",
    "game_20q": "llm_methods.bed.game",
    "play_20q": "llm_methods.bed.game",
    "play_lockstep": "llm_methods.bed.game",
    "play_preference": "llm_methods.bed.game",
    "LLMQuestioner": "llm_methods.bed.llm",
    "answer_probs": "llm_methods.bed.llm",
    "answer_probs_loop": "llm_methods.bed.llm",
    "eig_agreement": "llm_methods.bed.analysis",
    "exact_posterior": "llm_methods.bed.analysis",
    "table_informativeness": "llm_methods.bed.analysis",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
