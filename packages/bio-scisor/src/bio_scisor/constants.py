"""Alphabet, background distribution and forward-process constants (one definition each)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "ALPHA_POWER",
    "AMINO_ACIDS",
    "BACKGROUND",
    "ESM2_CLS",
    "ESM2_EOS",
    "ESM2_PAD",
    "ESM2_TOKEN_IDS",
    "PAD_INDEX",
    "S_REDRAW_MAX",
    "T_MAX",
    "VOCAB_SIZE",
]

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"  # the 20 standard residues; token i = AMINO_ACIDS[i]
PAD_INDEX = len(AMINO_ACIDS)  # 20: padding token (never a residue)
VOCAB_SIZE = PAD_INDEX + 1

# Background residue frequencies pi (UniProtKB/Swiss-Prot release statistics, in %), used for the
# inserted letters of the forward process. Upstream reads UniRef50 frequencies from a file; these
# published values differ from them by < 0.3 points per residue (README, Deviations).
_FREQ_PERCENT = {
    "A": 8.25,
    "C": 1.37,
    "D": 5.45,
    "E": 6.75,
    "F": 3.86,
    "G": 7.07,
    "H": 2.27,
    "I": 5.96,
    "K": 5.84,
    "L": 9.66,
    "M": 2.42,
    "N": 4.06,
    "P": 4.70,
    "Q": 3.93,
    "R": 5.53,
    "S": 6.56,
    "T": 5.34,
    "V": 6.87,
    "W": 1.08,
    "Y": 2.92,
}
BACKGROUND = np.array([_FREQ_PERCENT[a] for a in AMINO_ACIDS], dtype=np.float64)
BACKGROUND = BACKGROUND / BACKGROUND.sum()

T_MAX = 0.9  # t ~ U[0, T_MAX] (upstream default)
ALPHA_POWER = 1.1  # alpha(t) = (1 - t)^(1 / ALPHA_POWER)
S_REDRAW_MAX = 20  # S = 0 is redrawn from NegBinomial restricted to {1..S_REDRAW_MAX} (upstream)

# ESM2 alphabet (fair-esm ``Alphabet.from_architecture("ESM-1b")``): special tokens and residues.
ESM2_CLS, ESM2_PAD, ESM2_EOS = 0, 1, 2
ESM2_TOKEN_IDS = {a: i for i, a in enumerate("LAGVSERTIDPKQNFYMHWC", start=4)}
