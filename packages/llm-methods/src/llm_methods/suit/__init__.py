"""SUIT subspace knowledge editing (arXiv 2509.24502) with ROME / MEMIT / AlphaEdit baselines."""
