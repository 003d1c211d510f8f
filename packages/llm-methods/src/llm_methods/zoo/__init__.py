"""Tiny Llama-config models trained here on offline corpora (seeded, cached); see registry."""

from llm_methods.lm.loading import register_spec_prefix
from llm_methods.zoo.registry import ZOO, ZooSpec, build, corpus_texts, ensure_built, zoo_dir

register_spec_prefix("zoo:", ensure_built)

__all__ = ["ZOO", "ZooSpec", "build", "corpus_texts", "ensure_built", "zoo_dir"]
