"""SUIT subspace knowledge editing (arXiv 2509.24502) with ROME / MEMIT / AlphaEdit baselines.

The main classes and functions are exported here and imported on first use (``import
llm_methods.suit`` does not import torch)::

    from llm_methods.suit import EditConfig, Editor, fresh_copy
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    # editors (ROME / MEMIT / AlphaEdit / SUIT)
    "METHODS": "llm_methods.suit.editors",
    "EditConfig": "llm_methods.suit.editors",
    "Editor": "llm_methods.suit.editors",
    "fresh_copy": "llm_methods.suit.editors",
    "null_space_projector": "llm_methods.suit.editors",
    # keys, key statistics C, SUIT's subject subspace U_m
    "key_second_moments": "llm_methods.suit.keys",
    "request_keys": "llm_methods.suit.keys",
    "subject_basis": "llm_methods.suit.keys",
    "subject_subspace": "llm_methods.suit.keys",
    # requests (CounterFact / zsRE) and synthetic worlds
    "EditRequest": "llm_methods.suit.data",
    "build_requests": "llm_methods.suit.data",
    "read_counterfact": "llm_methods.suit.data",
    "read_requests": "llm_methods.suit.data",
    "read_zsre": "llm_methods.suit.data",
    "synth_names": "llm_methods.suit.data",
    "synth_table": "llm_methods.suit.data",
    "write_counterfact": "llm_methods.suit.data",
    # metrics, causal tracing, the facts-LM testbed
    "edit_metrics": "llm_methods.suit.metrics",
    "general_ability": "llm_methods.suit.metrics",
    "known_facts": "llm_methods.suit.metrics",
    "request_metrics": "llm_methods.suit.metrics",
    "token_accuracy": "llm_methods.suit.metrics",
    "causal_trace": "llm_methods.suit.tracing",
    "choose_rome_layer": "llm_methods.suit.tracing",
    "WorldSpec": "llm_methods.suit.toy_facts_lm",
    "ensure_facts_lm": "llm_methods.suit.toy_facts_lm",
    "load_world": "llm_methods.suit.toy_facts_lm",
    # the edited weights of `suit edit` (HF parameter names) applied onto the base model
    "apply_edited_weights": "llm_methods.suit.weights",
    "load_edited": "llm_methods.suit.weights",
    # AlphaEdit's C / P files
    "read_official_stats": "llm_methods.suit.official_io",
    "read_projection": "llm_methods.suit.official_io",
    "write_official_stats": "llm_methods.suit.official_io",
    "write_projection": "llm_methods.suit.official_io",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
