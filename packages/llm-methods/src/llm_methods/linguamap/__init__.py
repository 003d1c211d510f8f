"""LinguaMap-style language control (arXiv 2601.20009): diagnosis and selective fine-tuning."""
