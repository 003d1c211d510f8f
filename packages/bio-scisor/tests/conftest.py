from __future__ import annotations

from pathlib import Path

import pytest
import torch

# The test models are tiny: intra-op threads only cost time (badly so on a loaded machine).
torch.set_num_threads(1)

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=32, cond_dim=16)


def tiny_esm_config(**overrides: object):  # type: ignore[no-untyped-def]
    """The tests' randomly initialisable two-layer ESM2 ``EsmConfig`` (ESM2's vocabulary and
    rotary positions at hidden size 16), with ``overrides`` (e.g. the dropouts set to 0)."""
    from transformers import EsmConfig

    settings: dict[str, object] = dict(
        vocab_size=33,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        pad_token_id=1,
        mask_token_id=32,
        max_position_embeddings=1026,
        position_embedding_type="rotary",
        token_dropout=True,
    )
    return EsmConfig(**{**settings, **overrides})


def cli_args(command: str, **options: object) -> list[str]:
    """``bio-scisor`` argv: ``command`` then ``--option value`` per keyword in order (``_`` in a
    name becomes ``-``; ``True`` gives the bare flag), e.g.
    ``cli_args("score", dms=path, wt="MKT")`` -> ``["score", "--dms", str(path), "--wt", "MKT"]``."""
    args = [command]
    for name, value in options.items():
        args.append("--" + name.replace("_", "-"))
        if value is not True:
            args.append(str(value))
    return args


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    """The seeded tiny :class:`ScisorDenoiser` (``TINY``), eval mode, its zero-initialised FiLM
    weights redrawn (std 0.3) so that S matters, as after training; one per test module (a
    module's own ``model`` fixture, as test_windows.py's, replaces it)."""
    from bio_scisor.model import ScisorDenoiser

    torch.manual_seed(0)
    m = ScisorDenoiser(**TINY).eval()
    for film in m.film.films:  # make S matter, as after training
        torch.nn.init.normal_(film.weight, std=0.3)
    return m


@pytest.fixture(scope="session")
def family():
    from bio_scisor.synth import make_assay, make_family

    fam = make_family(n_sequences=60, seed=3)
    make_assay(fam, n_multi=20, seed=3)
    return fam


@pytest.fixture(scope="session")
def check_family_layout():  # type: ignore[no-untyped-def]
    """``check_family_layout(fam, n_sequences, n_columns, inserts=...)``: what both synthetic
    families (the profile-HMM ``make_family`` and the Potts ``make_potts_family``) promise:
    ``n_sequences`` members whose aligned rows read back to their sequences over ``n_columns``
    match columns (``inserts``: lower-case insert states outside them, as the HMM's A2M rows;
    else every row is exactly the ``n_columns`` columns), and a wild type carrying its three
    6-residue motifs."""
    from bio_scisor.synth import motifs_retained

    def check(fam, n_sequences: int, n_columns: int, *, inserts: bool) -> None:  # type: ignore[no-untyped-def]
        assert len(fam.sequences) == len(fam.aligned) == n_sequences
        for seq, row in zip(fam.sequences, fam.aligned, strict=True):
            if inserts:
                assert row.replace("-", "").upper() == seq
                assert sum(c.isupper() or c == "-" for c in row) == n_columns
            else:
                assert len(row) == n_columns and row.replace("-", "") == seq
        assert [b - a for a, b in fam.wt_motifs] == [6, 6, 6]
        assert motifs_retained(fam.wt, fam.wt_motif_strings) == 1.0

    return check


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory: pytest.TempPathFactory, family) -> Path:
    from bio_scisor.synth import write_family

    return write_family(family, tmp_path_factory.mktemp("synth"))


@pytest.fixture(scope="session")
def tiny_module(family):
    from bio_scisor.lit_module import fit_scisor

    return fit_scisor(family.sequences, steps=3, batch_size=4, seed=0, t_max=0.3, **TINY)


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory, tiny_module) -> Path:
    path = tmp_path_factory.mktemp("ckpt") / "tiny.ckpt"
    torch.save(
        {"hyper_parameters": dict(tiny_module.hparams), "state_dict": tiny_module.state_dict()},
        path,
    )
    return path


@pytest.fixture(scope="session")
def tiny_esm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised two-layer ESM2 saved as a local ``EsmModel`` folder: what the
    esm2_t12_35M config's ``model.esm_path`` points at (the real weights are never
    downloaded), at a test size."""
    from transformers import EsmModel

    path = tmp_path_factory.mktemp("esm2_tiny")
    EsmModel(tiny_esm_config(), add_pooling_layer=False).save_pretrained(path)
    return path
