"""SeekBench: process-level evaluation of LLM search agents (arXiv 2509.22391)."""
