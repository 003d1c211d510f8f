"""LTPO: test-time Latent Thought Policy Optimization (arXiv 2510.04182).

``data`` (GSM8K / MATH-500 / AIME / ASDiv readers, answer extraction, the offline arithmetic
word-problem generator), ``prompts`` (upstream's thought prompt split around the thoughts, the CoT
prompt), ``scorer`` (the confidence reward, greedy decoding and LatentSeek's continuation
gradient on a shared prefix KV cache), ``optimize`` (``LTPOConfig``, the zeroth-order and autograd
updates of the thoughts, decoding from them), ``latentseek`` (the LatentSeek baseline on the same
thoughts), ``experiment``, ``cli`` (``llm-methods ltpo``).

The main classes and functions are exported here and imported on first use
(``import llm_methods.ltpo`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "Problem": "llm_methods.ltpo.data",
    "extract_answer": "llm_methods.ltpo.data",
    "is_correct": "llm_methods.ltpo.data",
    "read_problems": "llm_methods.ltpo.data",
    "synth_problems": "llm_methods.ltpo.data",
    "ThoughtPrompt": "llm_methods.ltpo.prompts",
    "thought_prompt": "llm_methods.ltpo.prompts",
    "BatchThoughtScorer": "llm_methods.ltpo.scorer",
    "ThoughtScorer": "llm_methods.ltpo.scorer",
    "confidence_reward": "llm_methods.ltpo.scorer",
    "LTPOConfig": "llm_methods.ltpo.optimize",
    "decode_with_thoughts": "llm_methods.ltpo.optimize",
    "ltpo_optimize": "llm_methods.ltpo.optimize",
    "ltpo_optimize_batch": "llm_methods.ltpo.optimize",
    "latentseek_batch": "llm_methods.ltpo.latentseek",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
