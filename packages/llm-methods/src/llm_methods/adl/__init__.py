"""Activation Difference Lens (arXiv 2510.13900): model diffing of narrow finetunes."""
