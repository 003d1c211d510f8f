"""Meta-Router: causal LLM routing from gold + preference data (arXiv 2509.25535)."""
