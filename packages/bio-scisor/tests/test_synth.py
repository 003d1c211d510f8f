from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bio_scisor.io import read_dms_indels, read_reference, read_sequences
from bio_scisor.synth import deletion_fitness, make_family, motifs_retained


def test_family_shape_and_wild_type_motifs(family, check_family_layout) -> None:  # type: ignore[no-untyped-def]
    check_family_layout(family, 60, 80, inserts=True)  # 80 match columns
    # conserved motif columns: members carry the WT motif far more often than chance
    kept = np.mean([motifs_retained(s, family.wt_motif_strings) for s in family.sequences])
    assert kept > 0.2


def test_fitness_rules(family) -> None:
    (a0, b0), (a1, _), _ = family.wt_motifs
    linker = (b0 + a1) // 2
    assert deletion_fitness({a0 + 2}, family.wt_motifs) < -1.0  # a broken motif
    assert deletion_fitness({linker}, family.wt_motifs) == 0.0  # within the spacing window
    assert deletion_fitness({linker, linker + 1, linker + 2}, family.wt_motifs) < 0  # too close
    assert deletion_fitness({a0 - 1}, family.wt_motifs) < 0  # flank


def test_assay_variants_are_unique_deletions(family) -> None:
    assert len(set(family.variants)) == len(family.variants)
    assert len(family.fitness) == len(family.variants)
    assert {len(family.wt) - len(v) for v in family.variants} == {1, 2, 3}


def test_written_files_read_back(synth_dir: Path, family) -> None:
    assert len(read_sequences(synth_dir / "family.fasta")) == 60
    assert [s for _, s in read_sequences(synth_dir / "family.a2m")] == family.sequences
    (ref,) = read_reference(synth_dir / "DMS_indels.csv")
    assay = read_dms_indels(synth_dir / ref["DMS_filename"], ref["target_seq"])
    assert assay.mutants == family.variants
    np.testing.assert_allclose(assay.scores, family.fitness, atol=1e-6)
    assert json.loads((synth_dir / "motifs.json").read_text())["motif_strings"] == (
        family.wt_motif_strings
    )


def test_seeded() -> None:
    assert make_family(10, seed=5).wt == make_family(10, seed=5).wt
