"""LTPO: test-time Latent Thought Policy Optimization (arXiv 2510.04182).

``data`` (GSM8K / MATH-500 / AIME / ASDiv readers, answer extraction, the offline arithmetic
word-problem generator), ``prompts`` (upstream's thought prompt split around the thoughts, the CoT
prompt), ``scorer`` (the confidence reward and decoding on a shared prefix KV cache), ``model``
(zeroth-order and autograd updates, decoding from latent thoughts), ``latentseek`` (baseline),
``experiment``, ``cli``.
"""
