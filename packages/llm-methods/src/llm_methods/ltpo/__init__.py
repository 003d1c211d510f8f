"""LTPO: test-time Latent Thought Policy Optimization (arXiv 2510.04182).

``data`` (GSM8K / MATH-500 / AIME / ASDiv readers, answer extraction, the offline arithmetic
word-problem generator), ``model`` (intrinsic-confidence reward, cached prefix, zeroth-order and
autograd updates, LatentSeek baseline, decoding from latent thoughts), ``experiment``, ``cli``.
"""
