"""MBOK multi-kernel Boolean weights (arXiv 2505.22811): representation, SVID init, packing.

The main classes and functions are exported here and imported on first use
(``import llm_methods.mbok`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "BooleanLinear": "llm_methods.mbok.model",
    "bits_per_weight": "llm_methods.mbok.model",
    "pack_bits": "llm_methods.mbok.model",
    "svid": "llm_methods.mbok.model",
    "unpack_bits": "llm_methods.mbok.model",
    "BooleanOptimizer": "llm_methods.mbok.optim",
    "MBOKTrainLinear": "llm_methods.mbok.quant",
    "OneBitLinear": "llm_methods.mbok.quant",
    "RTNLinear": "llm_methods.mbok.quant",
    "billm_binarize": "llm_methods.mbok.quant",
    "rtn_quantize": "llm_methods.mbok.quant",
    "DistillConfig": "llm_methods.mbok.distill",
    "compress_model": "llm_methods.mbok.distill",
    "load_compressed": "llm_methods.mbok.distill",
    "save_compressed": "llm_methods.mbok.distill",
    "select_linears": "llm_methods.mbok.distill",
    "teacher_outputs": "llm_methods.mbok.distill",
    "pydoc_split": "llm_methods.mbok.data",
    "read_texts": "llm_methods.mbok.data",
    "token_chunks": "llm_methods.mbok.data",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
