"""Synthetic protein family from a profile HMM, and a ProteinGym-format deletion assay.

The generator is a plan7-like profile HMM: ``n_match`` match states with background-derived
emissions, 2-3 conserved motifs (peaked emissions, near-zero insert/delete inside) and linkers
with insert/delete probability ``linker_indel``. It samples unaligned family members (FASTA) with
their alignment (A2M: upper case = match, ``-`` = delete, lower case = insert).

The assay fitness of a deletion variant of the wild type is NOT the generating likelihood: it
scores motif integrity (a deletion inside a motif breaks it), the spacing window between
consecutive motifs (|change| <= ``SPACING_TOLERANCE`` is neutral) and deletions flanking a motif,
plus Gaussian measurement noise. So scoring by the HMM is not circular.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bio_scisor.constants import AMINO_ACIDS, BACKGROUND
from bio_scisor.io import write_dms_indels, write_fasta
from iclr26_common.outputs import write_text

__all__ = [
    "SPACING_TOLERANCE",
    "SynthFamily",
    "deletion_fitness",
    "make_assay",
    "make_family",
    "motifs_retained",
    "write_family",
]

SPACING_TOLERANCE = 1  # residues of spacing change between motifs that cost nothing
MOTIF_BREAK = 1.0  # fitness cost of a broken motif
MOTIF_PER_RESIDUE = 0.25  # extra cost per motif residue deleted
SPACING_COST = 0.6  # per residue of spacing change beyond the tolerance
FLANK = 3  # residues either side of a motif counted as its flank
FLANK_COST = 0.2  # per flanking residue deleted
NOISE_SD = 0.1  # measurement noise


@dataclass
class SynthFamily:
    """A sampled family, its wild type and the WT motif spans (start, end) in WT coordinates."""

    sequences: list[str]
    aligned: list[str]  # A2M rows of ``sequences``
    wt: str
    wt_motifs: list[tuple[int, int]]
    motif_columns: list[tuple[int, int]]  # match-state spans of the motifs
    variants: list[str] = field(default_factory=list)
    fitness: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def wt_motif_strings(self) -> list[str]:
        return [self.wt[a:b] for a, b in self.wt_motifs]

    def deletion_fitness(self, deleted: set[int] | frozenset[int]) -> float:
        """Noise-free fitness of deleting WT positions ``deleted`` (:func:`deletion_fitness`)."""
        return deletion_fitness(deleted, self.wt_motifs)


def _profile(rng: np.random.Generator, n_match: int, motifs: list[tuple[int, int]]):
    emissions = 0.5 * BACKGROUND + 0.5 * rng.dirichlet(np.full(len(AMINO_ACIDS), 0.3), n_match)
    in_motif = np.zeros(n_match, dtype=bool)
    for a, b in motifs:
        in_motif[a:b] = True
        for col in range(a, b):
            peak = np.full(len(AMINO_ACIDS), 0.1 / (len(AMINO_ACIDS) - 1))
            peak[rng.integers(len(AMINO_ACIDS))] = 0.9
            emissions[col] = peak
    return emissions, in_motif


def _sample_member(rng, emissions, in_motif, linker_indel: float):
    """One path through the profile HMM: (unaligned sequence, A2M row, per-column positions)."""
    seq, row, where = [], [], np.full(len(emissions), -1)
    for col in range(len(emissions)):
        p = 0.001 if in_motif[col] else linker_indel
        if rng.random() < p:
            row.append("-")
        else:
            where[col] = len(seq)
            aa = AMINO_ACIDS[rng.choice(len(AMINO_ACIDS), p=emissions[col])]
            seq.append(aa)
            row.append(aa)
        next_in_motif = col + 1 < len(emissions) and in_motif[col + 1]
        if col + 1 < len(emissions) and not (in_motif[col] or next_in_motif):
            while rng.random() < (linker_indel if not row[-1].islower() else 0.3):
                aa = AMINO_ACIDS[rng.choice(len(AMINO_ACIDS), p=BACKGROUND)]
                seq.append(aa)
                row.append(aa.lower())
    return "".join(seq), "".join(row), where


def make_family(
    n_sequences: int = 400,
    n_match: int = 80,
    n_motifs: int = 3,
    motif_len: int = 6,
    linker_indel: float = 0.05,
    seed: int = 0,
) -> SynthFamily:
    """Sample ``n_sequences`` members plus a wild type whose motifs are complete (no deletion)."""
    if not 2 <= n_motifs <= 3:
        raise ValueError(f"n_motifs must be 2 or 3, got {n_motifs}")
    if n_match < n_motifs * (motif_len + 2 * FLANK + 4):
        raise ValueError(f"n_match={n_match} too short for {n_motifs} motifs of {motif_len}")
    rng = np.random.default_rng(seed)
    gap = n_match // n_motifs
    starts = [i * gap + (gap - motif_len) // 2 for i in range(n_motifs)]
    motifs = [(s, s + motif_len) for s in starts]
    emissions, in_motif = _profile(rng, n_match, motifs)
    sequences, aligned = [], []
    for _ in range(n_sequences):
        seq, row, _ = _sample_member(rng, emissions, in_motif, linker_indel)
        sequences.append(seq)
        aligned.append(row)
    while True:  # wild type: a member whose motif columns are all emitted
        wt, _, where = _sample_member(rng, emissions, in_motif, linker_indel)
        spans = [(int(where[a]), int(where[b - 1]) + 1) for a, b in motifs]
        if all(
            where[a:b].min() >= 0 and e - s == b - a
            for (a, b), (s, e) in zip(motifs, spans, strict=True)
        ):
            break
    return SynthFamily(sequences, aligned, wt, spans, motifs)


def deletion_fitness(deleted: set[int] | frozenset[int], motifs: list[tuple[int, int]]) -> float:
    """Noise-free fitness of deleting WT positions ``deleted`` (0 = neutral, lower = worse)."""
    score = 0.0
    for a, b in motifs:
        inside = sum(a <= d < b for d in deleted)
        if inside:
            score -= MOTIF_BREAK + MOTIF_PER_RESIDUE * inside
        score -= FLANK_COST * sum(a - FLANK <= d < a or b <= d < b + FLANK for d in deleted)
    for (_, end), (start, _) in itertools.pairwise(motifs):
        change = sum(end <= d < start for d in deleted)
        score -= SPACING_COST * max(0, change - SPACING_TOLERANCE)
    return score


def make_assay(
    family: SynthFamily, n_multi: int = 120, seed: int = 0
) -> tuple[list[str], np.ndarray]:
    """All distinct single deletions of the WT plus ``n_multi`` 2-3-residue deletions.

    Half the multi deletions are contiguous blocks, half scattered. The fitness is the family's
    own (``family.deletion_fitness``: the motif rules here, the Potts energy in ``potts.py``).
    Variants that spell the same sequence get the mean fitness of their position sets. Sets
    ``family.variants/fitness``.
    """
    rng = np.random.default_rng(seed + 1)
    length = len(family.wt)
    sets: list[frozenset[int]] = [frozenset([i]) for i in range(length)]
    for i in range(n_multi):
        d = int(rng.integers(2, 4))
        if i % 2 == 0:
            start = int(rng.integers(0, length - d + 1))
            sets.append(frozenset(range(start, start + d)))
        else:
            sets.append(frozenset(rng.choice(length, size=d, replace=False).tolist()))
    by_seq: dict[str, list[float]] = {}
    for deleted in sets:
        seq = "".join(c for i, c in enumerate(family.wt) if i not in deleted)
        by_seq.setdefault(seq, []).append(family.deletion_fitness(deleted))
    variants = list(by_seq)
    fitness = np.array([np.mean(by_seq[v]) for v in variants])
    fitness = fitness + rng.normal(0.0, NOISE_SD, size=len(fitness))
    family.variants, family.fitness = variants, fitness
    return variants, fitness


def motifs_retained(seq: str, motif_strings: list[str]) -> float:
    """Fraction of the WT motif substrings still present (contiguous) in ``seq``."""
    return float(np.mean([m in seq for m in motif_strings]))


def write_family(family: SynthFamily, out: str | Path, assay_id: str = "SYNTH_deletions") -> Path:
    """Write family.fasta, family.a2m, wt.fasta, ``assay_id``.csv, DMS_indels.csv, motifs.json."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_fasta(out / "family.fasta", ((f"member{i}", s) for i, s in enumerate(family.sequences)))
    write_fasta(
        out / "family.a2m", ((f"member{i}", s) for i, s in enumerate(family.aligned)), width=10**6
    )
    write_fasta(out / "wt.fasta", [("wild_type", family.wt)])
    if family.variants:
        write_dms_indels(out / f"{assay_id}.csv", family.variants, family.fitness, -0.5)
        write_text(
            out / "DMS_indels.csv",
            "DMS_id,DMS_filename,UniProt_ID,target_seq,seq_len,coarse_selection_type,"
            "DMS_number_indels\n"
            f"{assay_id},{assay_id}.csv,SYNTH_PROTEIN,{family.wt},{len(family.wt)},Activity,"
            f"{len(family.variants)}\n",
        )
    write_text(
        out / "motifs.json",
        json.dumps({"wt_motifs": family.wt_motifs, "motif_strings": family.wt_motif_strings}),
    )
    return out
