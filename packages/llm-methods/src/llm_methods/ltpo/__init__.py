"""LTPO: test-time Latent Thought Policy Optimization (arXiv 2510.04182).

``data`` (GSM8K / MATH-500 / AIME / ASDiv readers, answer extraction, the offline arithmetic
word-problem generator), ``prompts`` (upstream's thought prompt split around the thoughts, the CoT
prompt), ``scorer`` (the confidence reward, greedy decoding and LatentSeek's continuation
gradient on a shared prefix KV cache), ``optimize`` (``LTPOConfig``, the zeroth-order and autograd
updates of the thoughts, decoding from them), ``latentseek`` (the LatentSeek baseline on the same
thoughts), ``experiment``, ``cli`` (``llm-methods ltpo``).
"""
