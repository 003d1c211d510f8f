from __future__ import annotations

from pathlib import Path

import pytest
import torch

# The test models are tiny: intra-op threads only cost time (badly so on a loaded machine).
torch.set_num_threads(1)

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=32, cond_dim=16)


@pytest.fixture(scope="session")
def family():
    from bio_scisor.synth import make_assay, make_family

    fam = make_family(n_sequences=60, seed=3)
    make_assay(fam, n_multi=20, seed=3)
    return fam


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
    from transformers import EsmConfig, EsmModel

    config = EsmConfig(
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
    path = tmp_path_factory.mktemp("esm2_tiny")
    EsmModel(config, add_pooling_layer=False).save_pretrained(path)
    return path
