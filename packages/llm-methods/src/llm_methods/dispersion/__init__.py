"""Representation dispersion (arXiv 2506.24106): metrics, binned protocol, kNN-LM, push-away.

The main classes and functions are exported here and imported on first use
(``import llm_methods.dispersion`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "DispersionAccumulator": "llm_methods.dispersion.metrics",
    "cross_mean_cosine": "llm_methods.dispersion.metrics",
    "dispersion": "llm_methods.dispersion.metrics",
    "mean_pairwise_cosine": "llm_methods.dispersion.metrics",
    "ChunkStats": "llm_methods.dispersion.measure",
    "binned": "llm_methods.dispersion.measure",
    "binned_correlation": "llm_methods.dispersion.measure",
    "chunk_statistics": "llm_methods.dispersion.measure",
    "KNNLM": "llm_methods.dispersion.knnlm",
    "interpolated_perplexity": "llm_methods.dispersion.knnlm",
    "PushAwayLoss": "llm_methods.dispersion.model",
    "PushAwayLM": "llm_methods.dispersion.lit_module",
    "CorpusFormatError": "llm_methods.dispersion.data",
    "Document": "llm_methods.dispersion.data",
    "TextChunkDataModule": "llm_methods.dispersion.data",
    "chunk_documents": "llm_methods.dispersion.data",
    "read_documents": "llm_methods.dispersion.data",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
