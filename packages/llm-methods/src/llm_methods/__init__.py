"""llm-methods: see README.md.

Each method package (``llm_methods.suit``, ``llm_methods.mbok``, ...) and the shared core
(``llm_methods.lm``, ``llm_methods.zoo``) export their main classes and functions and import them
on first use: ``from llm_methods.suit import Editor``.
"""

from iclr26_common.exports import distribution_version

__version__ = distribution_version("llm-methods")

__all__ = ["__version__"]
