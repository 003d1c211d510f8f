"""Tiny Llama-config models trained here on offline corpora (seeded, cached); see registry.

Importing this package registers the ``"zoo:NAME"`` spec of :func:`llm_methods.lm.load_lm`
and stays cheap: the registry is stdlib-only, the model and tokenizer builders (torch,
transformers, tokenizers) are imported on first use.
"""

from iclr26_common.exports import lazy_exports
from llm_methods.lm.specs import register_spec_prefix
from llm_methods.zoo.registry import ZOO, ZooSpec, build, corpus_texts, ensure_built, zoo_dir

register_spec_prefix("zoo:", ensure_built)

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "tiny_llama": "llm_methods.zoo.models",
    "tiny_lm": "llm_methods.zoo.models",
    "train_bpe": "llm_methods.zoo.tokenizer",
    "markov_domains": "llm_methods.zoo.synthetic",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["ZOO", "ZooSpec", "build", "corpus_texts", "ensure_built", "zoo_dir", *_EXPORTS]
