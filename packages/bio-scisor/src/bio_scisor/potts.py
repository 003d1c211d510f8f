"""A synthetic family outside the profile-HMM class: a Potts model with pairwise couplings.

A profile HMM scores each column on its own, so a family sampled from one (``synth.py``) makes
the HMM baseline nearly the true model. Here the family is sampled from a Potts model over
``n_columns`` aligned columns with 21 states (20 residues + gap):

    log P(x) = sum_c h_c(x_c) + sum_{(c, d) in contacts} J_cd(x_c, x_d) - log Z,

with fields ``h`` (C, 21) and couplings ``J`` (K, 21, 21) on K random contacts (|c - d| >=
``MIN_CONTACT_SEPARATION``; J = 0 for a gap at either end). The motif columns have peaked
fields (0.9 on one residue) and gap probability ``MOTIF_GAP``; the other columns mix the
background with a random profile and have gap probability ``LINKER_GAP``. Members are Gibbs
samples (``GIBBS_SWEEPS`` sweeps of every column, one chain per member), written ungapped;
deletions in the family come from the gap state, insertions do not occur.

The fitness of a deletion variant of the WT is the Potts log-probability ratio log P(variant) -
log P(WT), with each deleted residue's column set to gap: the loss of its field and of every
coupling it takes part in. It depends on the contacts, which a profile HMM cannot represent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bio_scisor.constants import AMINO_ACIDS, BACKGROUND
from bio_scisor.synth import SynthFamily

__all__ = ["PottsFamily", "make_potts_family", "potts_energy"]

GAP = len(AMINO_ACIDS)  # state 20
N_STATES = GAP + 1
MOTIF_GAP = 0.001  # gap probability of a motif column's field
LINKER_GAP = 0.12  # gap probability of any other column's field
MIN_CONTACT_SEPARATION = 4  # contacts join columns at least this far apart
GIBBS_SWEEPS = 60  # sweeps over every column per member (each chain starts from the fields)


@dataclass
class PottsFamily(SynthFamily):
    """A :class:`SynthFamily` sampled from a Potts model: ``fields`` (C, 21), ``contacts`` (K, 2)
    column pairs, ``couplings`` (K, 21, 21) and ``wt_columns`` (len(wt),), the column of each
    WT residue."""

    fields: np.ndarray = field(default_factory=lambda: np.zeros((0, N_STATES)))
    contacts: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    couplings: np.ndarray = field(default_factory=lambda: np.zeros((0, N_STATES, N_STATES)))
    wt_columns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def wt_states(self) -> np.ndarray:
        """The WT as a row of column states (C,), gap where the WT has none."""
        x = np.full(len(self.fields), GAP, dtype=np.int64)
        x[self.wt_columns] = [AMINO_ACIDS.index(c) for c in self.wt]
        return x

    def deletion_fitness(self, deleted: set[int] | frozenset[int]) -> float:
        """log P(WT with positions ``deleted`` gapped) - log P(WT) under the Potts model."""
        wt = self.wt_states()
        variant = wt.copy()
        variant[self.wt_columns[sorted(deleted)]] = GAP
        return potts_energy(self, variant) - potts_energy(self, wt)


def potts_energy(family: PottsFamily, states: np.ndarray) -> float:
    """sum_c h_c(x_c) + sum_k J_k(x_{c_k}, x_{d_k}) of one aligned row (C,) of states."""
    c, d = family.contacts[:, 0], family.contacts[:, 1]
    pair = family.couplings[np.arange(len(c)), states[c], states[d]]
    return float(family.fields[np.arange(len(states)), states].sum() + pair.sum())


def _fields(rng: np.random.Generator, n_columns: int, motif: np.ndarray) -> np.ndarray:
    probs = 0.5 * BACKGROUND + 0.5 * rng.dirichlet(np.full(len(AMINO_ACIDS), 0.3), n_columns)
    out = np.empty((n_columns, N_STATES))
    for col in range(n_columns):
        residues = probs[col]
        gap = LINKER_GAP
        if motif[col]:
            residues = np.full(len(AMINO_ACIDS), 0.1 / (len(AMINO_ACIDS) - 1))
            residues[rng.integers(len(AMINO_ACIDS))] = 0.9
            gap = MOTIF_GAP
        out[col, :GAP] = np.log((1 - gap) * residues)
        out[col, GAP] = np.log(gap)
    return out


def _gibbs(rng, fields, contacts, couplings, n_chains: int) -> np.ndarray:
    """``n_chains`` independent Gibbs chains, ``GIBBS_SWEEPS`` sweeps each: (n_chains, C)."""
    n_columns = len(fields)
    logits = fields[None].repeat(n_chains, 0)
    x = np.argmax(logits + rng.gumbel(size=logits.shape), axis=2)  # start: the fields alone
    partners: list[list[tuple[int, int, bool]]] = [[] for _ in range(n_columns)]
    for k, (c, d) in enumerate(contacts):
        partners[c].append((k, d, True))
        partners[d].append((k, c, False))
    rows = np.arange(n_chains)
    for _ in range(GIBBS_SWEEPS):
        for col in rng.permutation(n_columns):
            logit = logits[:, col].copy()
            for k, other, first in partners[col]:
                table = couplings[k] if first else couplings[k].T
                logit += table[:, x[:, other]].T
            g = rng.gumbel(size=logit.shape)
            x[rows, col] = np.argmax(logit + g, axis=1)
    return x


def make_potts_family(
    n_sequences: int = 400,
    n_columns: int = 72,
    n_motifs: int = 3,
    motif_len: int = 6,
    contacts_per_column: float = 1.0,
    coupling_sd: float = 1.0,
    seed: int = 0,
) -> PottsFamily:
    """Sample ``n_sequences`` members plus a WT with complete motifs from a random Potts model.

    ``contacts_per_column`` x ``n_columns`` contacts, couplings N(0, ``coupling_sd``^2) between
    residues (0 with a gap). ``aligned`` holds the A2M rows (upper case / ``-``, no inserts)."""
    rng = np.random.default_rng(seed)
    gap = n_columns // n_motifs
    if gap < motif_len + 2:
        raise ValueError(f"n_columns={n_columns} too short for {n_motifs} motifs of {motif_len}")
    starts = [i * gap + (gap - motif_len) // 2 for i in range(n_motifs)]
    motifs = [(s, s + motif_len) for s in starts]
    motif = np.zeros(n_columns, dtype=bool)
    for a, b in motifs:
        motif[a:b] = True
    fields = _fields(rng, n_columns, motif)
    pairs = [(c, d) for c in range(n_columns) for d in range(c + MIN_CONTACT_SEPARATION, n_columns)]
    n_contacts = round(contacts_per_column * n_columns)
    chosen = rng.choice(len(pairs), size=n_contacts, replace=False)
    contacts = np.array(sorted(pairs[i] for i in chosen), dtype=np.int64)
    couplings = np.zeros((n_contacts, N_STATES, N_STATES))
    couplings[:, :GAP, :GAP] = rng.normal(0.0, coupling_sd, size=(n_contacts, GAP, GAP))
    rows = _gibbs(rng, fields, contacts, couplings, n_sequences + 64)
    complete = [r for r in rows[n_sequences:] if (r[motif] != GAP).all()]
    if not complete:
        raise RuntimeError("no sampled member has every motif column: raise the sample count")
    wt_row, members = complete[0], rows[:n_sequences]
    alphabet = np.array([*AMINO_ACIDS, "-"])
    aligned = ["".join(alphabet[r]) for r in members]
    sequences = [a.replace("-", "") for a in aligned]
    wt_columns = np.flatnonzero(wt_row != GAP)
    wt = "".join(alphabet[wt_row[wt_columns]])
    where = {int(c): i for i, c in enumerate(wt_columns)}
    spans = [(where[a], where[b - 1] + 1) for a, b in motifs]
    return PottsFamily(
        sequences,
        aligned,
        wt,
        spans,
        motifs,
        fields=fields,
        contacts=contacts,
        couplings=couplings,
        wt_columns=wt_columns,
    )
