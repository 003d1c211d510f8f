"""Representation dispersion (arXiv 2506.24106): metrics, binned protocol, kNN-LM, push-away."""
