"""Constants shared across the package (one definition each)."""

from __future__ import annotations

PAPER_TITLE = "Scaling Laws and Symmetry, Evidence from Neural Force Fields"
ARXIV_ID = "2510.09768"
PAPER = f"{PAPER_TITLE} (arXiv {ARXIV_ID})"
OFFICIAL_CODE = "https://github.com/nnkhang19/scaling-laws-and-symmetry"

#: Default extxyz keys for the reference labels (MACE convention); ``energy``/``forces`` are
#: also accepted (ASE absorbs those into a SinglePointCalculator).
DEFAULT_ENERGY_KEY = "REF_energy"
DEFAULT_FORCES_KEY = "REF_forces"

#: Elements ASE's EMT calculator supports for the synthetic generator.
EMT_ELEMENTS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")

#: Embedding rows: atomic numbers 1..MAX_Z-1 are supported (0 and >= MAX_Z are rejected on read).
MAX_Z = 100

#: Default smallest allowed interatomic distance (Å) when reading structures: closer pairs are
#: physically impossible (the shortest bond, H2, is 0.74 Å) and flag a unit or cell error.
DEFAULT_MIN_DISTANCE = 0.5

#: Generation seed of synthetic validation structures (a stream disjoint from the training one).
SYNTHETIC_VAL_SEED = 10_000

#: Architectures of rising symmetry order (one family: same width/depth knobs).
ARCHITECTURES = ("mpnn", "invariant", "l1", "l2", "l3", "nequip")
#: Messages are summed and divided by this typical neighbour count (keeps activations O(1)).
NEIGHBOR_NORM = 16.0

#: The paper's per-architecture FLOP multipliers kappa in C ~ 3 kappa N D (Sec. 3).
PAPER_KAPPA = {"mpnn": 2.33, "gemnet_oc": 35.18, "mc_egnn": 28.09, "esen": 74.36}
#: The paper's compute-frontier exponents gamma_c.
PAPER_GAMMA = {"mpnn": 0.14, "mc_egnn": 0.17, "gemnet_oc": 0.25, "esen_l2": 0.35, "esen": 0.40}
#: Which of our architectures stands in for which of the paper's.
PAPER_COUNTERPART = {
    "mpnn": "mpnn",
    "invariant": "gemnet_oc",
    "l1": "mc_egnn",
    "l2": "esen",
    "l3": "esen",
    "nequip": "esen",  # the real NequIP: an equivariant tensor-product model, l_max a knob
}
#: A bootstrap whose draws of α, β or a are non-finite (no fit, or α+β <= 0) more often than
#: this is a fit problem: its percentile CIs would describe only the replicates that happened
#: to fit (fixed before any run of design 0.3, review of issue 24).
MAX_NONFINITE = 0.1
#: Each of the two power-law terms ``A x^-α`` has an amplitude and an exponent on top of the
#: shared L∞, so the cells that enter the ``L(N, D)`` fit must span at least this many distinct
#: N and distinct D values (and 2K+1 = 5 points), else the exponent rests on the other axis'
#: extrapolation of L∞ (fixed with the per-cell "learned" rule, before any run).
MIN_LEVELS = 3
