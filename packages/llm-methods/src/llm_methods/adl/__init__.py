"""Activation Difference Lens (arXiv 2510.13900): model diffing of narrow finetunes.

The main functions are exported here and imported on first use (``import llm_methods.adl``
does not import torch)::

    from llm_methods.adl import activation_difference, lens_token_ids, kl_summary
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "ADLDifference": "llm_methods.adl.diff",
    "activation_difference": "llm_methods.adl.diff",
    "activation_difference_ids": "llm_methods.adl.diff",
    "coherence": "llm_methods.adl.diff",
    "enriched_tokens": "llm_methods.adl.diff",
    "token_counts": "llm_methods.adl.diff",
    "lens_token_ids": "llm_methods.adl.diff",
    "max_coherent_alpha": "llm_methods.adl.diff",
    "patchscope": "llm_methods.adl.diff",
    "projection_loss_change": "llm_methods.adl.diff",
    "relative_layer": "llm_methods.adl.diff",
    "token_relevance": "llm_methods.adl.diff",
    "KLResult": "llm_methods.adl.kl",
    "kl_summary": "llm_methods.adl.kl",
    "per_token_kl": "llm_methods.adl.kl",
    "write_toolkit_results": "llm_methods.adl.toolkit",
    "ADLEvidence": "llm_methods.adl.agent",
    "InterpretabilityAgent": "llm_methods.adl.agent",
    "VocabularyOverlapAgent": "llm_methods.adl.agent",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
