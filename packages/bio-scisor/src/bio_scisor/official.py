"""Load the released SCISOR checkpoints (baronet2/SCISOR; Hugging Face ``SCISOR/SCISOR``, e.g.
``SCISOR_U90_S.ckpt``) into an :class:`bio_scisor.model.EsmDenoiser`.

Upstream's checkpoints are Lightning files of ``ShorteningSCUD``: ``hyper_parameters`` (plain
dicts: ``nn_params.hf_model_name``, ``nn_params.d_embedding`` = the conditioning width,
``t_max``, ``forward_kwargs.alpha_rate`` / ``window_size``) and a ``state_dict`` whose denoiser
(``FAESM_Base``) is an ESM2 with flash attention (FAESM) plus FiLM on S and a position head:

==============================================================  ==============================
upstream key (prefix ``x0_model.``)                              ours (``EsmDenoiser``)
==============================================================  ==============================
``faesm.esm.embeddings.*``, ``faesm.esm.encoder.layer.*``,        ``backbone.<same>`` (the
``faesm.esm.encoder.emb_layer_norm_after.*``,                     transformers ``EsmModel``
``faesm.esm.contact_head.*``                                      layout)
``faesm.esm.encoder.conditioning_embedder.mlp.{0,2}.*``           ``film.mlp.{0,2}.*``
``faesm.esm.encoder.film_layers.<i>.*``                           ``film.films.<i>.*``
``proj.*``                                                        ``head.*``
==============================================================  ==============================

Not used: ``faesm.lm_head.*`` (the masked-LM head; the denoiser reads hidden states), the rotary
``inv_freq`` buffers (recomputed) and ``embeddings.position_embeddings`` (ESM2 is rotary). Any
other key, or a missing one, is an error naming the checkpoint. The ESM2 sizes come from the
weights; the number of attention heads (not visible in the shapes) from the ESM2 model name,
or from ``esm_config``. The residue distribution pi is not in the checkpoint (upstream patches
it in from ``p0.pt`` before every use, e.g. ``shrink_sequences.py``: ``model.p0 =
torch.load("p0.pt")``): :func:`load_official_checkpoint` returns the forward-process settings it
found, and :func:`load_p0` reads upstream's ``p0.pt`` into our residue order. ``p0``'s values are
not shipped as a default: the upstream repository carries no licence, so the user passes the file
(``bio-scisor score --p0 p0.pt``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from bio_scisor.constants import AMINO_ACIDS, ESM2_TOKEN_IDS
from bio_scisor.io import ScisorFormatError
from bio_scisor.model import EsmDenoiser
from iclr26_common.checkpoints import load_weights_only

__all__ = [
    "ESM2_HEADS",
    "is_official_state_dict",
    "load_official_checkpoint",
    "load_p0",
    "official_keys",
]

PREFIX = "x0_model."
# attention heads of the ESM2 releases (fair-esm / transformers configs)
ESM2_HEADS = {
    "esm2_t6_8M_UR50D": 20,
    "esm2_t12_35M_UR50D": 20,
    "esm2_t30_150M_UR50D": 20,
    "esm2_t33_650M_UR50D": 20,
    "esm2_t36_3B_UR50D": 40,
    "esm2_t48_15B_UR50D": 40,
}
_IGNORED = (
    re.compile(r"faesm\.lm_head\."),
    re.compile(r".*rotary_embeddings\.inv_freq$"),
    re.compile(r"faesm\.esm\.embeddings\.position_(embeddings\.weight|ids)$"),
)


def is_official_state_dict(state: dict[str, Any]) -> bool:
    """True for upstream's layout (denoiser keys under ``x0_model.faesm.``)."""
    return any(k.startswith(PREFIX + "faesm.") for k in state)


def official_keys(key: str) -> str | None:
    """Our ``EsmDenoiser`` key for an upstream key (without ``x0_model.``); None = not used."""
    if any(p.match(key) for p in _IGNORED):
        return None
    if key.startswith("proj."):
        return "head." + key[len("proj.") :]
    m = re.match(r"faesm\.esm\.encoder\.conditioning_embedder\.mlp\.(\d+)\.(.+)$", key)
    if m:
        return f"film.mlp.{m.group(1)}.{m.group(2)}"
    m = re.match(r"faesm\.esm\.encoder\.film_layers\.(\d+)\.(.+)$", key)
    if m:
        return f"film.films.{m.group(1)}.{m.group(2)}"
    if key.startswith("faesm.esm."):
        return "backbone." + key[len("faesm.esm.") :]
    raise KeyError(key)


def _esm_config(weights: dict[str, torch.Tensor], heads: int, overrides: dict[str, Any]):
    from transformers import EsmConfig

    emb = weights["faesm.esm.embeddings.word_embeddings.weight"]
    layers = {
        int(m.group(1))
        for k in weights
        if (m := re.match(r"faesm\.esm\.encoder\.layer\.(\d+)\.", k))
    }
    inter = weights["faesm.esm.encoder.layer.0.intermediate.dense.weight"].shape[0]
    values = dict(
        vocab_size=emb.shape[0],
        hidden_size=emb.shape[1],
        num_hidden_layers=len(layers),
        num_attention_heads=heads,
        intermediate_size=inter,
        pad_token_id=1,
        mask_token_id=32,
        max_position_embeddings=1026,
        position_embedding_type="rotary",
        token_dropout=True,
        emb_layer_norm_before=False,
        layer_norm_eps=1e-5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    values.update(overrides)
    return EsmConfig(**values)


def load_official_checkpoint(
    path: str | Path,
    esm_config: str | Path | dict[str, Any] | None = None,
    map_location: str = "cpu",
) -> tuple[EsmDenoiser, dict[str, Any]]:
    """Rebuild upstream's denoiser from a released checkpoint (``torch.load(weights_only=True)``).

    ``esm_config``: a ``config.json`` path or a dict of ``EsmConfig`` fields overriding what
    the weights and the model name give (needed for ESM2 sizes outside :data:`ESM2_HEADS`).
    Returns (denoiser in eval mode, {"t_max", "alpha_power", "window_size", "hf_model_name"}).
    A missing file is a ``FileNotFoundError``, an unreadable one or one without a
    ``state_dict`` a :class:`~bio_scisor.io.ScisorFormatError`, both one line naming the file.
    """
    path = Path(path)
    ckpt = load_weights_only(
        path, error=ScisorFormatError, map_location=map_location, require_state_dict=True
    )
    state = ckpt["state_dict"]
    if not is_official_state_dict(state):
        raise ValueError(f"{path}: not an upstream SCISOR checkpoint (no x0_model.faesm.* keys)")
    hp = ckpt.get("hyper_parameters") or {}
    nn_params = hp.get("nn_params") or {}
    forward = hp.get("forward_kwargs") or {}
    overrides: dict[str, Any] = {}
    if isinstance(esm_config, str | Path):
        overrides = json.loads(Path(esm_config).read_text())
    elif esm_config is not None:
        overrides = dict(esm_config)
    name = str(nn_params.get("hf_model_name", ""))
    heads = overrides.get("num_attention_heads", ESM2_HEADS.get(name))
    if heads is None:
        raise ValueError(
            f"{path}: unknown ESM2 model {name!r}; pass esm_config with num_attention_heads"
        )
    weights = {k[len(PREFIX) :]: v for k, v in state.items() if k.startswith(PREFIX)}
    ours: dict[str, torch.Tensor] = {}
    source: dict[str, str] = {}
    for key, value in weights.items():
        try:
            target = official_keys(key)
        except KeyError:
            raise ValueError(f"{path}: unexpected key {PREFIX + key!r}") from None
        if target is not None:
            ours[target] = value
            source[target] = PREFIX + key
    cond_dim = weights["faesm.esm.encoder.film_layers.0.weight"].shape[1]
    config = _esm_config(
        weights, int(heads), {k: v for k, v in overrides.items() if k != "num_attention_heads"}
    )
    window = forward.get("window_size")
    denoiser = EsmDenoiser(
        cond_dim=int(cond_dim),
        window_size=None if window is None else int(window),
        config=config,
        conditioner="faesm",
    )
    expected = denoiser.state_dict()
    missing = sorted(k for k in expected if k not in ours and not k.endswith("inv_freq"))
    if missing:
        raise ValueError(
            f"{path}: missing weight(s) {missing[:4]}{' ...' if len(missing) > 4 else ''}"
        )
    for key, value in ours.items():
        if key not in expected:
            raise ValueError(f"{path}: unexpected key {source[key]!r}")
        if expected[key].shape != value.shape:
            raise ValueError(
                f"{path}: weight {source[key]!r} has shape {tuple(value.shape)}, expected "
                f"{tuple(expected[key].shape)} (check esm_config)"
            )
    denoiser.load_state_dict(ours, strict=False)
    settings = {
        "t_max": float(hp.get("t_max", 0.9)),
        "alpha_power": float(forward.get("alpha_rate", 1.1)),
        "window_size": denoiser.window_size,
        "hf_model_name": name,
    }
    return denoiser.eval(), settings


def load_p0(path: Path | str) -> torch.Tensor:
    """Upstream's background ``p0.pt`` (a probability vector over ESM2's 33 tokens, mass on the
    20 residues) as our π ``[20]`` (float64, order ``AMINO_ACIDS``, renormalised over the 20).
    Raises ``ValueError`` naming the file for anything else."""
    path = Path(path)
    p0 = load_weights_only(path, "p0 file", error=ScisorFormatError)
    if not isinstance(p0, torch.Tensor) or p0.ndim != 1 or len(p0) <= max(ESM2_TOKEN_IDS.values()):
        raise ValueError(f"{path}: p0 must be a 1-D tensor over the ESM2 vocabulary (33 tokens)")
    pi = torch.stack([p0[ESM2_TOKEN_IDS[a]] for a in AMINO_ACIDS]).to(torch.float64)
    if not torch.isfinite(pi).all() or (pi <= 0).any():
        raise ValueError(f"{path}: p0 must be positive on the 20 residues")
    return pi / pi.sum()
