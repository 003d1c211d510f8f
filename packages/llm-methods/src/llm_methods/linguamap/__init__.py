"""LinguaMap-style language control (arXiv 2601.20009): diagnosis and selective fine-tuning.

The main classes and functions are exported here and imported on first use
(``import llm_methods.linguamap`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "LANGS": "llm_methods.linguamap.data",
    "SCENARIOS": "llm_methods.linguamap.data",
    "Example": "llm_methods.linguamap.data",
    "Lexicon": "llm_methods.linguamap.data",
    "build_lexicon": "llm_methods.linguamap.data",
    "consistent_examples": "llm_methods.linguamap.data",
    "make_example": "llm_methods.linguamap.data",
    "pretraining_examples": "llm_methods.linguamap.data",
    "cross_lingual_cosine": "llm_methods.linguamap.analysis",
    "detect_language": "llm_methods.linguamap.analysis",
    "evaluate": "llm_methods.linguamap.analysis",
    "lens_language_probability": "llm_methods.linguamap.analysis",
    "decision_layer": "llm_methods.linguamap.analysis",
    "diagnosis_prompts": "llm_methods.linguamap.analysis",
    "lens_agreement": "llm_methods.linguamap.analysis",
    "token_languages": "llm_methods.linguamap.analysis",
    "FinetuneResult": "llm_methods.linguamap.finetune",
    "answer_masked_rows": "llm_methods.linguamap.finetune",
    "last_layers": "llm_methods.linguamap.finetune",
    "read_pairs": "llm_methods.linguamap.finetune",
    "selective_finetune": "llm_methods.linguamap.finetune",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
