"""BED-LLM: sequential Bayesian experimental design for multi-turn questioning (arXiv 2508.21184).

Light imports only: ``eig`` (estimators), ``belief`` (sample-then-filter), ``worlds`` (tasks),
``game`` (20 Questions / preference loops), ``llm`` (LLM answer likelihoods, prompt-only / CoT).
"""
