"""LightningModule training a SCISOR denoiser with the alignment-count KL objective."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch

from bio_scisor.constants import ALPHA_POWER, BACKGROUND, T_MAX
from bio_scisor.elbo import per_sequence_loss, prior_term
from bio_scisor.insertion import insert
from bio_scisor.model import build_denoiser
from bio_scisor.windows import DEFAULT_WINDOW

__all__ = ["ScisorLitModule", "load_checkpoint"]


class ScisorLitModule(L.LightningModule):
    """SCISOR training (paper Eq. for the denoising loss; upstream ``ScisorModule``).

    Each step noises the X0 batch with the insertion process, computes the exact deletion
    posterior p by the alignment-count DP and minimises mean_b S * KL(p || q_theta) * w(t, L)
    (upstream ``val_l01``). Validation and test also log the prior term L_T as upstream's
    ``get_kl_t1`` (``*/prior_kl``, upstream ``val_l1``); it does not enter the loss.
    ``t_max``, ``alpha_power`` and the background ``pi`` are hyperparameters, so they are saved in
    the checkpoint (upstream patches them in from outside).
    """

    def __init__(
        self,
        backbone: str = "scratch",
        esm_path: str | None = None,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int = 128,
        dropout: float = 0.0,
        cond_dim: int = 64,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        t_max: float = T_MAX,
        alpha_power: float = ALPHA_POWER,
        background: list[float] | None = None,
        window_size: int | None = DEFAULT_WINDOW,
    ) -> None:
        super().__init__()
        if not 0.0 < t_max < 1.0:
            raise ValueError(f"t_max must be in (0, 1), got {t_max}")
        if background is None:
            background = BACKGROUND.tolist()
        if len(background) != 20 or min(background) <= 0:
            raise ValueError("background must be 20 positive residue frequencies")
        self.save_hyperparameters({**_init_args(locals()), "background": background})
        if window_size is not None and window_size < 1:
            raise ValueError(f"window_size must be >= 1 or None, got {window_size}")
        kwargs: dict[str, int | float | None] = {"cond_dim": cond_dim, "window_size": window_size}
        if backbone == "scratch":
            kwargs |= dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff)
            kwargs["dropout"] = dropout
        self.denoiser = build_denoiser(backbone, esm_path, **kwargs)
        self.register_buffer(
            "background", torch.tensor(background, dtype=torch.float64) / sum(background)
        )

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return self.denoiser(tokens, lengths, s)

    def _step(self, batch: tuple[torch.Tensor, torch.Tensor], stage: str) -> torch.Tensor:
        x0, x0_len = batch
        hp = self.hparams
        noised = insert(
            x0.cpu(), x0_len.cpu(), None, hp.alpha_power, hp.t_max, background=self.background.cpu()
        )
        loss, kl = per_sequence_loss(self.denoiser, x0, x0_len, noised, hp.alpha_power, hp.t_max)
        loss = loss.mean()
        bsz = x0.shape[0]
        # validation/test log epoch means: averaged over all DDP ranks, not rank 0's share
        sync = stage != "train"
        self.log(
            f"{stage}/loss", loss.float(), prog_bar=stage == "train", batch_size=bsz, sync_dist=sync
        )
        self.log(f"{stage}/kl", kl.mean().float(), batch_size=bsz, sync_dist=sync)
        if stage != "train":  # upstream logs its prior term (get_kl_t1) as val_l1
            prior = prior_term(x0, x0_len, None, hp.alpha_power, hp.t_max, self.background.cpu())
            self.log(f"{stage}/prior_kl", prior.mean().float(), batch_size=bsz, sync_dist=sync)
        return loss.float()

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        return self._step(batch, "val")

    def test_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        return self._step(batch, "test")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(
            self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )


def _init_args(values: dict) -> dict:
    return {k: v for k, v in values.items() if k not in ("self", "__class__")}


def load_checkpoint(
    path: str | Path, map_location: str = "cpu", *, option: str | None = None
) -> ScisorLitModule:
    """Rebuild a :class:`ScisorLitModule` from a Lightning checkpoint (``weights_only=True``).

    A missing file is a ``FileNotFoundError``; an unreadable one, one without
    ``state_dict``/``hyper_parameters``, or another model's checkpoint (hyperparameters this
    module does not take, weights of another shape) a :class:`~bio_scisor.io.ScisorFormatError`
    naming it; with ``option`` (the command-line option that gave ``path``, ``"--ckpt"``) every
    message starts with it (``"--ckpt PATH: ..."``), as ``--ckpt_path``'s do.
    """
    from bio_scisor.io import ScisorFormatError
    from iclr26_common.checkpoints import load_weights_only

    path = Path(path)
    ckpt = load_weights_only(
        path,
        error=ScisorFormatError,
        map_location=map_location,
        require_state_dict=True,
        package="bio_scisor",
        option=option,
    )
    named = f"{option} {path}" if option else str(path)
    if "hyper_parameters" not in ckpt:
        raise ScisorFormatError(
            f"{named}: not a bio-scisor Lightning checkpoint (no hyper_parameters)"
        )
    stored = ckpt["hyper_parameters"]
    if not isinstance(stored, dict):
        raise ScisorFormatError(
            f"{named}: not a bio-scisor Lightning checkpoint (hyper_parameters is a "
            f"{type(stored).__name__}, not a mapping)"
        )
    hparams = {k: v for k, v in stored.items() if not str(k).startswith("_")}
    try:
        module = ScisorLitModule(**hparams)
        module.load_state_dict(ckpt["state_dict"])
    except (TypeError, RuntimeError) as error:  # another model's hyperparameters or weights
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ScisorFormatError(
            f"{named}: not a bio-scisor Lightning checkpoint (another model's? {first})"
        ) from error
    return module.eval()


def fit_scisor(
    sequences: list[str],
    steps: int,
    batch_size: int = 16,
    seed: int = 0,
    **hparams: object,
) -> ScisorLitModule:
    """Train a :class:`ScisorLitModule` on ``sequences`` for ``steps`` minibatches on the device
    :func:`iclr26_common.device.lightning_accelerator` chooses (no logger, no checkpoint); used by
    the experiment, the benchmarks and the tests. The module comes back on the CPU (Lightning
    moves it there when ``fit`` ends)."""
    from torch.utils.data import DataLoader

    from bio_scisor.data import SequenceDataset, collate
    from iclr26_common import seed_everything
    from iclr26_common.lightning import quiet_trainer

    seed_everything(seed)
    module = ScisorLitModule(**hparams)  # type: ignore[arg-type]
    loader = DataLoader(
        SequenceDataset(sequences), batch_size=batch_size, shuffle=True, collate_fn=collate
    )
    trainer = quiet_trainer(max_steps=steps, max_epochs=-1, limit_val_batches=0)
    trainer.fit(module, train_dataloaders=loader)
    return module.eval()
