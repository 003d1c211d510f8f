"""Meta-Router: causal LLM routing from gold + preference data (arXiv 2509.25535).

The main classes and functions are exported here and imported on first use
(``import llm_methods.meta_router`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "RouterDataError": "llm_methods.meta_router.data",
    "features": "llm_methods.meta_router.data",
    "read_mtbench": "llm_methods.meta_router.data",
    "read_responses_csv": "llm_methods.meta_router.data",
    "simulate": "llm_methods.meta_router.data",
    "MetaRouter": "llm_methods.meta_router.model",
    "cost_quality_curve": "llm_methods.meta_router.model",
    "estimate_bias": "llm_methods.meta_router.model",
    "fit_method": "llm_methods.meta_router.model",
    "predict_gain": "llm_methods.meta_router.model",
    "efficiency_gain": "llm_methods.meta_router.official",
    "overlap_diagnostics": "llm_methods.meta_router.official",
    "read_official_csv": "llm_methods.meta_router.official",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
