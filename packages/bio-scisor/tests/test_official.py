"""Loading released SCISOR checkpoints (upstream's layout) into our EsmDenoiser."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bio_scisor.io import ScisorFormatError
from bio_scisor.official import is_official_state_dict, load_official_checkpoint, official_keys

from .conftest import cli_args

DATA = Path(__file__).parent / "data" / "reference"
WT = "MKTAYIAKQRQ"  # the wild type of the CLI tests


def official_checkpoint(folder: Path, drop: str | None = None, extra: str | None = None) -> Path:
    """Write the committed random upstream model as a Lightning checkpoint in upstream's layout
    (``state_dict`` with ``x0_model.*`` keys, plain ``hyper_parameters``)."""
    arrays = np.load(DATA / "scisor_official_tiny_checkpoint.npz")
    state = {k: torch.from_numpy(arrays[k]) for k in arrays.files if k != drop}
    if extra:
        state[extra] = torch.zeros(3)
    hparams = json.loads((DATA / "scisor_official_tiny_hparams.json").read_text())
    path = folder / "SCISOR_tiny.ckpt"
    torch.save({"state_dict": state, "hyper_parameters": hparams, "epoch": 0}, path)
    return path


def upstream_p0(folder: Path) -> Path:
    """Upstream's ``p0.pt`` (its values are stored in the reference fixture) written as a file."""
    p0 = json.loads((DATA / "scisor_reference.json").read_text())["get_kl_t1"]["p0"]
    path = folder / "p0.pt"
    torch.save(torch.tensor(p0, dtype=torch.float32), path)
    return path


def _upstream_cli_inputs(folder: Path) -> tuple[Path, Path, Path]:
    """What ``bio-scisor score`` needs to run an upstream checkpoint in ``folder``: the
    checkpoint (:func:`official_checkpoint`), an ESM config JSON with its 4 heads, and a DMS CSV
    of two deletions of :data:`WT`."""
    config = folder / "config.json"
    config.write_text(json.dumps({"num_attention_heads": 4}))
    dms = folder / "dms.csv"
    dms.write_text(f"mutated_sequence,DMS_score\n{WT[1:]},0.1\n{WT[:4] + WT[6:]},-1.0\n")
    return official_checkpoint(folder), config, dms


def test_p0_maps_upstreams_esm_tokens_to_our_residues(tmp_path: Path) -> None:
    """ESM2 token ids by hand (L=4, A=5, ..., D=13, ..., C=23): upstream's D is token 13."""
    from bio_scisor.constants import AMINO_ACIDS
    from bio_scisor.official import load_p0

    p0 = json.loads((DATA / "scisor_reference.json").read_text())["get_kl_t1"]["p0"]
    pi = load_p0(upstream_p0(tmp_path))
    total = sum(p0[4:24])
    assert pi.shape == (20,) and abs(float(pi.sum()) - 1.0) < 1e-12
    for letter, token in (("L", 4), ("A", 5), ("D", 13), ("K", 15), ("Q", 16), ("C", 23)):
        assert float(pi[AMINO_ACIDS.index(letter)]) == pytest.approx(p0[token] / total)
    bad = tmp_path / "bad.pt"
    torch.save(torch.ones(5), bad)
    with pytest.raises(ValueError, match=r"bad\.pt: p0 must be a 1-D tensor"):
        load_p0(bad)
    (tmp_path / "text.pt").write_text("p0\n")
    with pytest.raises(ScisorFormatError, match=r"text\.pt: not a readable p0 file"):
        load_p0(tmp_path / "text.pt")
    with pytest.raises(FileNotFoundError, match=r"none\.pt: no such p0 file"):
        load_p0(tmp_path / "none.pt")


def test_upstream_checkpoint_elbo_uses_upstreams_p0(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Review of issue 25: an upstream checkpoint was scored by ELBO with our π, silently."""
    from bio_scisor.cli import _load_denoiser, main
    from bio_scisor.official import load_p0
    from iclr26_common.testing import assert_one_line_error

    ckpt, config, dms = _upstream_cli_inputs(tmp_path)
    p0 = upstream_p0(tmp_path)
    _, process = _load_denoiser(ckpt, config, p0)
    torch.testing.assert_close(process["background"], load_p0(p0))
    args = cli_args(
        "score",
        dms=dms,
        wt=WT,
        ckpt=ckpt,
        esm_config=config,
        out=tmp_path / "s.csv",
        elbo_samples=1,
    )
    line = assert_one_line_error(main, args, capsys, prog="bio-scisor")
    assert "--elbo-samples needs --p0" in line


def test_key_mapping() -> None:
    assert official_keys("proj.weight") == "head.weight"
    assert official_keys("faesm.esm.encoder.film_layers.3.bias") == "film.films.3.bias"
    assert official_keys("faesm.esm.encoder.conditioning_embedder.mlp.2.weight") == (
        "film.mlp.2.weight"
    )
    assert official_keys("faesm.esm.encoder.layer.0.attention.self.query.weight") == (
        "backbone.encoder.layer.0.attention.self.query.weight"
    )
    assert official_keys("faesm.lm_head.decoder.weight") is None
    assert (
        official_keys("faesm.esm.encoder.layer.1.attention.self.rotary_embeddings.inv_freq") is None
    )
    with pytest.raises(KeyError):
        official_keys("something.else")


def test_loads_and_scores(tmp_path: Path) -> None:
    from bio_scisor.scoring import score_path

    path = official_checkpoint(tmp_path)
    assert is_official_state_dict(torch.load(path, weights_only=True)["state_dict"])
    model, settings = load_official_checkpoint(path, esm_config={"num_attention_heads": 4})
    assert settings["t_max"] == 0.9 and settings["alpha_power"] == 1.1
    assert not model.training and model.window_size == 2048
    wt = "MKTAYIAKQRQ"
    scores = score_path(model, wt, [wt[1:], wt[:3] + wt[5:]])
    assert np.isfinite(scores).all() and (scores < 0).all()


def test_bad_checkpoints_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown ESM2 model 'tiny_esm'"):
        load_official_checkpoint(official_checkpoint(tmp_path))
    bad = official_checkpoint(tmp_path, drop="x0_model.proj.weight")
    with pytest.raises(ValueError, match=r"SCISOR_tiny\.ckpt: missing weight.*head\.weight"):
        load_official_checkpoint(bad, esm_config={"num_attention_heads": 4})
    bad = official_checkpoint(tmp_path, extra="x0_model.faesm.esm.encoder.mystery")
    with pytest.raises(
        ValueError, match=r"unexpected key 'x0_model\.faesm\.esm\.encoder\.mystery'"
    ):
        load_official_checkpoint(bad, esm_config={"num_attention_heads": 4})
    with pytest.raises(ValueError, match="has shape"):  # wrong head count -> contact head shape
        load_official_checkpoint(
            official_checkpoint(tmp_path), esm_config={"num_attention_heads": 2}
        )
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ScisorFormatError, match=r"junk\.ckpt: not a readable checkpoint"):
        load_official_checkpoint(junk)
    with pytest.raises(FileNotFoundError, match=r"none\.ckpt: no such checkpoint"):
        load_official_checkpoint(tmp_path / "none.ckpt")
    plain = tmp_path / "plain.ckpt"
    torch.save({"weights": torch.zeros(1)}, plain)
    with pytest.raises(ScisorFormatError, match=r"plain\.ckpt: not a Lightning checkpoint"):
        load_official_checkpoint(plain)
    ours = tmp_path / "ours.ckpt"
    torch.save({"state_dict": {"denoiser.head.weight": torch.zeros(1)}}, ours)
    with pytest.raises(ValueError, match="not an upstream SCISOR checkpoint"):
        load_official_checkpoint(ours)


def test_cli_scores_and_shrinks_with_an_upstream_checkpoint(tmp_path: Path, capsys) -> None:
    from bio_scisor.cli import main
    from iclr26_common.testing import assert_one_line_error

    ckpt, config, dms = _upstream_cli_inputs(tmp_path)
    out = tmp_path / "scores.csv"
    args = cli_args("score", dms=dms, wt=WT, ckpt=ckpt, out=out, elbo_samples=1, esm_config=config)
    assert main([*args, "--p0", str(upstream_p0(tmp_path))]) == 0 and out.is_file()
    fasta = tmp_path / "in.fasta"
    fasta.write_text(f">p1 desc\n{WT}\n")
    shrink = cli_args(
        "shrink", fasta=fasta, pct=20, ckpt=ckpt, esm_config=config, out=tmp_path / "o.fa"
    )
    assert main(shrink) == 0
    line = assert_one_line_error(
        main, [*args[:-2], "--overwrite"], capsys, prog="bio-scisor", drop_earlier=True
    )
    assert "unknown ESM2 model 'tiny_esm'" in line
