"""MBOK multi-kernel Boolean weights (arXiv 2505.22811): representation, SVID init, packing."""
