"""LightningModules: the flow-matching base policy (optionally training-time RTC) and the REMAC
LoRA finetune (with the switches of the paper's ablation ladder).

Batches are ``{"obs": [B, O], "actions": [B, H, A], "prev_obs": [B, H, O], "frame": [B]}``
(:class:`robotics_remac.data.DemoDataModule`; ``O``, ``A`` linked from the dataset's
``meta/info.json``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import lightning as L
import torch

from robotics_remac.model import FlowPolicy, add_lora, delay_mask, lora_disabled, lora_parameters
from robotics_remac.sampling import euler_sample, prefix_preserved_sample
from robotics_remac.settings import (
    CurriculumSettings,
    EMASettings,
    LoRASettings,
    LossSettings,
    OptimSettings,
    PolicySizes,
    TrainingTimeRTCSettings,
    as_group,
    plain_hparams,
)

__all__ = [
    "FlowPolicyModule",
    "RemacModule",
    "async_loss",
    "charbonnier",
    "curriculum_low",
    "sample_exec_horizons",
    "self_sampled_chunk",
    "stale_prefix",
]

# Defaults of the modules' setting groups (frozen dataclasses, so one shared instance is safe).
DEFAULT_SIZES = PolicySizes()
BASE_OPTIM = OptimSettings()  # base policy: 100 warm-up steps
REMAC_OPTIM = OptimSettings(warmup_steps=50)  # REMAC finetune: 50 warm-up steps
NO_TRAINING_TIME_RTC = TrainingTimeRTCSettings()
DEFAULT_LORA = LoRASettings()
DEFAULT_CURRICULUM = CurriculumSettings()
DEFAULT_LOSS = LossSettings()
DEFAULT_EMA = EMASettings()


def charbonnier(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """Elementwise Charbonnier penalty ``sqrt(x² + ε²)``."""
    return torch.sqrt(x * x + eps * eps)


def async_loss(
    policy: torch.nn.Module,
    obs: torch.Tensor,
    actions: torch.Tensor,
    prefix: torch.Tensor,
    delays: torch.Tensor,
    noise: torch.Tensor,
    t: torch.Tensor,
    p_gt: float,
    loss: LossSettings,
    use_mask: bool = True,
) -> dict[str, torch.Tensor]:
    """REMAC's training loss, upstream ``LoRAFlowPolicy.async_loss`` (``model_async_lora.py``,
    commit 7184ad3) for given draws.

    ``actions`` ``A`` and the self-sampled prefix ``prefix`` ``Ã`` are ``[B, H, A]``; ``delays``
    ``[B]`` give the mask ``m = 1[τ >= d]`` (1 = generated); ``noise`` ``ε`` ``[B, H, A]`` and the
    flow time ``t`` ``[B]``. As upstream: the GT/self-sampled mix ``Â = γA + (1 - γ)Ã`` with
    ``γ = 1[t < p_gt]`` (upstream draws ``γ`` as ``bernoulli(time_rng, p)`` from the same key as
    ``t = uniform(time_rng)``, which is exactly this event); the network input interpolates the
    mix over the whole chunk, ``x_t = (1 - t)ε + tÂ``, the target is ``u = A - ε``; per sample
    ``b`` (``n_b = max(1, Σ_τ m)``, generated tokens):
    ``L_m = mean_b Σ_{τ,a} charb(û - u)·m / n_b``, ``L_Δ = mean_b Σ ‖m(u - ũ) - m(û - ũ)‖² / n_b``
    (``ũ``: the backbone, LoRA off, no gradient), ``L_keep = mean((û - ũ)²(1 - m))`` over every
    element; ``loss = w·L_m + w·L_Δ + w·L_keep`` (``w`` = upstream's ``gamma_flow`` =
    ``gamma_keep``; terms off by ``loss.use_delta`` / ``use_keep``). Returns the terms and
    ``loss``.
    """
    m3 = delay_mask(delays.cpu(), actions.shape[1]).to(actions)[..., None]
    gamma = (t < p_gt).to(actions)[:, None, None]
    a_hat = gamma * actions + (1 - gamma) * prefix
    tt = t[:, None, None]
    x = (1 - tt) * noise + tt * a_hat
    u = actions - noise
    u_hat = policy(obs, x, t, m3[..., 0] if use_mask else None)
    with torch.no_grad(), lora_disabled(policy):
        u_base = policy(obs, x, t)
    n_b = m3.sum(dim=(1, 2)).clamp_min(1.0)
    l_m = ((charbonnier(u_hat - u, loss.charbonnier_eps) * m3).sum(dim=(1, 2)) / n_b).mean()
    parts = {"l_m": l_m}
    total = loss.weight * l_m
    if loss.use_delta:
        l_d = (((m3 * (u - u_base) - m3 * (u_hat - u_base)) ** 2).sum(dim=(1, 2)) / n_b).mean()
        parts["l_delta"] = l_d
        total = total + loss.weight * l_d
    if loss.use_keep:
        l_k = (((u_hat - u_base) * (1 - m3)) ** 2).mean()
        parts["l_keep"] = l_k
        total = total + loss.weight * l_k
    parts["loss"] = total
    return parts


def _warmup_adamw(params: Iterable[torch.nn.Parameter], optim: OptimSettings) -> Any:
    opt = torch.optim.AdamW(params, lr=optim.lr, weight_decay=optim.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: min(1.0, (step + 1) / max(1, optim.warmup_steps))
    )
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def _sample_delays(b: int, low: int, high: int) -> torch.Tensor:
    return torch.randint(low, high + 1, (b,))


def curriculum_low(progress: float, max_delay: int, epochs: int = 32) -> int:
    """Lowest delay of the curriculum at training ``progress`` in [0, 1]: upstream
    ``train_flow_lora.py``'s ``int(max_delay·(1 - epoch/epochs))`` at the virtual epoch
    ``⌊progress·epochs⌋`` (clamped to ``epochs - 1``), so with upstream's 32 epochs the lowest
    delay is 4 for 1/32 of training, 3, 2 and 1 for 8/32 each and 0 for the last 7/32."""
    epoch = min(epochs - 1, math.floor(max(0.0, progress) * epochs))
    return max(0, min(max_delay, int(max_delay * (1 - epoch / epochs))))


def sample_exec_horizons(delays: torch.Tensor, horizon: int) -> torch.Tensor:
    """Per sample ``e ~ U{max(1, d) .. H - d}`` (upstream ``train_flow_lora.py``: ``es``)."""
    low = delays.clamp_min(1)
    span = (horizon - delays - low + 1).clamp_min(1)
    return low + (torch.rand(delays.shape) * span).long().clamp_max(span - 1)


def _stale_observation(
    batch: dict[str, torch.Tensor], exec_horizons: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The observation the asynchronous loop sampled the stale chunk from, ``obs_{t-k}`` with
    ``k = min(e, frame)`` (``[B, obs]``), ``k`` (``[B]``) and the chunk length ``H``."""
    if "prev_obs" not in batch or "frame" not in batch:
        raise KeyError(
            "REMAC batches need 'prev_obs' and 'frame' (robotics_remac.data.ChunkDataset)"
        )
    obs_hist, frame = batch["prev_obs"], batch["frame"]
    b, h = obs_hist.shape[:2]
    k = torch.minimum(exec_horizons.to(frame.device), frame).clamp(0, h - 1)
    rows = torch.arange(b, device=obs_hist.device)
    return obs_hist[rows, k], k, h


def _shift_left(chunk: torch.Tensor, k: torch.Tensor, h: int) -> torch.Tensor:
    """``chunk`` ``[B, H, A]`` shifted left by ``k`` ``[B]`` steps, zero-padded at the end."""
    pos = torch.arange(h, device=chunk.device)[None, :] + k[:, None]
    shifted = chunk.gather(1, pos.clamp_max(h - 1)[..., None].expand(-1, -1, chunk.shape[-1]))
    return shifted * (pos < h)[..., None].to(chunk.dtype)


def stale_prefix(
    policy: torch.nn.Module,
    batch: dict[str, torch.Tensor],
    exec_horizons: torch.Tensor,
    sample_steps: int,
) -> torch.Tensor:
    """What the asynchronous loop commits at frame ``t``: the chunk sampled from ``obs_{t-e}``
    (``e`` steps earlier; ``obs_0`` when ``t < e``) shifted left by ``k = min(e, t)`` and
    zero-padded, ``Ã[:, j] = sample(obs_{t-k})[:, j + k]``. Upstream computes this look-back
    (``idx_prevs = t - e``) but never uses it. ``policy`` is called as-is (the caller disables
    LoRA). Returns ``[B, H, A]``.
    """
    obs_prev, k, h = _stale_observation(batch, exec_horizons)
    return _shift_left(euler_sample(policy, obs_prev, sample_steps), k, h)


def self_sampled_chunk(
    policy: torch.nn.Module,
    batch: dict[str, torch.Tensor],
    delays: torch.Tensor,
    exec_horizons: torch.Tensor,
    sample_steps: int,
) -> torch.Tensor:
    """The self-sampled chunk ``Ã`` of :func:`async_loss`: on the committed prefix (``τ < d``)
    the stale chunk of :func:`stale_prefix` (what the asynchronous loop commits), on the
    generated tokens (``τ >= d``) the base policy's own sample from the current observation
    ``obs_t``, as upstream's ``action_without_lora(obs)``. Upstream mixes ``Ã`` into the network
    input over the whole chunk; the stale chunk alone there (shifted, zero-padded at the end)
    made the curriculum finetunes collapse at d >= 2 (README, issue-38 full run). One batched
    sample of ``2B`` observations; ``policy`` is called as-is (the caller disables LoRA).
    Returns ``[B, H, A]``."""
    obs_prev, k, h = _stale_observation(batch, exec_horizons)
    both = euler_sample(policy, torch.cat([obs_prev, batch["obs"]]), sample_steps)
    stale, fresh = both[: len(k)], both[len(k) :]
    shifted = _shift_left(stale, k, h)
    generated = delay_mask(delays.cpu(), h).to(stale)[..., None]
    return generated * fresh + (1 - generated) * shifted


class FlowPolicyModule(L.LightningModule):
    """Base policy: conditional flow matching, ``x_t = (1-t)·ε + t·A``, ``u = A - ε``, MSE.

    With ``training_time_rtc.enabled`` (arXiv 2512.05964) a delay ``d ~ U{0..max_delay}`` per
    sample puts the first ``d`` actions in clean (flow time 1 per token) and the loss covers the
    rest only. ``test`` logs the flow loss and the MSE of 5-step sampled chunks to the
    demonstrations. Settings: :mod:`robotics_remac.settings` (``sizes``, ``optim``,
    ``training_time_rtc``).
    """

    def __init__(
        self,
        horizon: int = 8,
        obs_dim: int = 8,
        action_dim: int = 2,
        sizes: PolicySizes = DEFAULT_SIZES,
        optim: OptimSettings = BASE_OPTIM,
        training_time_rtc: TrainingTimeRTCSettings = NO_TRAINING_TIME_RTC,
        sample_steps: int = 5,
    ) -> None:
        """``horizon``, ``obs_dim``, ``action_dim``: the data's chunk shape (linked from the data
        module by the CLI); ``sample_steps``: Euler steps of ``test``/``predict`` sampling."""
        super().__init__()
        sizes = as_group(PolicySizes, sizes, "sizes")  # a checkpoint stores plain dicts
        optim = as_group(OptimSettings, optim, "optim")
        training_time_rtc = as_group(
            TrainingTimeRTCSettings, training_time_rtc, "training_time_rtc"
        )
        self.sizes, self.optim, self.training_time_rtc = sizes, optim, training_time_rtc
        self.sample_steps = sample_steps
        self.save_hyperparameters()  # under LightningCLI: the parsed config (+ _class_path)
        self.save_hyperparameters(plain_hparams(self.hparams))
        if training_time_rtc.enabled and not 0 <= training_time_rtc.max_delay < horizon:
            raise ValueError(
                f"training_time_rtc.max_delay must be in [0, horizon={horizon}), "
                f"got {training_time_rtc.max_delay}"
            )
        self.policy = FlowPolicy(obs_dim, action_dim, horizon, **asdict(sizes))

    def flow_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        obs, a = batch["obs"], batch["actions"]
        b, h, _ = a.shape
        noise = torch.randn_like(a)
        t = torch.rand(b, device=a.device)
        if not self.training_time_rtc.enabled:
            x = (1 - t)[:, None, None] * noise + t[:, None, None] * a
            return ((self.policy(obs, x, t) - (a - noise)) ** 2).mean()
        m = delay_mask(_sample_delays(b, 0, self.training_time_rtc.max_delay), h).to(a.device)
        tt = m * t[:, None] + (1 - m)
        x = (1 - tt)[..., None] * noise + tt[..., None] * a
        err = ((self.policy(obs, x, tt) - (a - noise)) ** 2).mean(-1)
        return (err * m).sum() / m.sum().clamp_min(1)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.flow_loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["obs"]))
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self.log("val/loss", self.flow_loss(batch), batch_size=len(batch["obs"]), sync_dist=True)

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        n = len(batch["obs"])
        self.log("test/loss", self.flow_loss(batch), batch_size=n, sync_dist=True)
        sampled = euler_sample(self.policy, batch["obs"], self.sample_steps)
        mse = ((sampled - batch["actions"]) ** 2).mean()
        self.log("test/action_mse", mse, batch_size=n, sync_dist=True)

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        """A sampled chunk ``[B, H, A]`` per observation (``sample_steps`` Euler steps)."""
        return euler_sample(self.policy, batch["obs"], self.sample_steps)

    def configure_optimizers(self) -> Any:
        return _warmup_adamw(self.policy.parameters(), self.optim)


class RemacModule(L.LightningModule):
    """REMAC finetune (paper Sec. 3.2, upstream ``train_remac``): masked LoRA on a frozen base.

    Per sample a delay ``d`` (uniform on ``{0..max_delay}``, or with the curriculum enabled
    uniform on ``{low..max_delay}``, ``low`` = :func:`curriculum_low` of the training progress:
    upstream's ``int(4·(1 - epoch/num_epochs))`` over its 32 epochs, replayed over the fraction of
    steps done, so d = 0 is trained in the last 7/32 of the steps) gives the mask
    ``m = 1[τ >= d]``. The loss is :func:`async_loss` (upstream's) with the mix
    ``Â = γA + (1-γ)Ã`` where ``Ã`` is the base policy's own 5-step sample (LoRA off, no gradient,
    :func:`self_sampled_chunk`): on the prefix tokens from the *stale* observation ``obs_{t-e}``,
    ``e ~ U{max(1,d)..H-d}``, shifted by ``e`` (:func:`stale_prefix`: what the asynchronous loop
    commits), on the generated tokens from ``obs_t`` (as upstream's),
    and ``γ = 1[t < p]``, ``p`` annealed linearly from ``p_start`` to ``p_end``
    (self-conditioning; with the curriculum disabled ``γ = 1``). Loss (``w = loss.weight``):
    ``w·L_m`` (masked Charbonnier of ``û - u``) ``+ w·L_Δ`` (``‖m(u - ũ) - m(û - ũ)‖²``, ``ũ`` =
    backbone with LoRA off) ``+ w·L_keep`` (``‖(û - ũ)(1 - m)‖²``). ``lora.use_mask=False`` with
    ``curriculum.max_delay=0`` and the extra terms off is the LoRA-only ablation. An EMA of the
    LoRA weights (decay 0.999, upstream ``EMA_DECAY``) replaces them at the end of fit.

    Args:
        base_ckpt: checkpoint of the base policy (Lightning ``.ckpt`` of :class:`FlowPolicyModule`
            or a policy file); ``None`` starts from a randomly initialised base (tests only).
        horizon, obs_dim, action_dim: the data's chunk shape (linked from the data module by the
            CLI; must equal the base checkpoint's).
        sizes: mixer widths of a random base (ignored with ``base_ckpt``: its widths are used and
            recorded as the ``sizes`` hyperparameter, so a checkpoint describes its policy).
        lora, curriculum, loss, optim, ema: the groups of :mod:`robotics_remac.settings`.
        sample_steps: Euler steps of the self-sampled prefix and of ``predict``.
    """

    def __init__(
        self,
        base_ckpt: str | None = None,
        horizon: int = 8,
        obs_dim: int = 8,
        action_dim: int = 2,
        sizes: PolicySizes = DEFAULT_SIZES,
        lora: LoRASettings = DEFAULT_LORA,
        curriculum: CurriculumSettings = DEFAULT_CURRICULUM,
        loss: LossSettings = DEFAULT_LOSS,
        optim: OptimSettings = REMAC_OPTIM,
        ema: EMASettings = DEFAULT_EMA,
        sample_steps: int = 5,
    ) -> None:
        super().__init__()
        sizes = as_group(PolicySizes, sizes, "sizes")  # a checkpoint stores plain dicts
        lora = as_group(LoRASettings, lora, "lora")
        curriculum = as_group(CurriculumSettings, curriculum, "curriculum")
        loss = as_group(LossSettings, loss, "loss")
        optim = as_group(OptimSettings, optim, "optim")
        ema = as_group(EMASettings, ema, "ema")
        self.lora, self.curriculum, self.loss = lora, curriculum, loss
        self.optim, self.ema = optim, ema
        self.horizon, self.sample_steps = horizon, sample_steps
        self.save_hyperparameters()  # under LightningCLI: the parsed config (+ _class_path)
        self.save_hyperparameters(plain_hparams(self.hparams))
        if not 0 <= curriculum.max_delay < horizon:
            raise ValueError(
                f"curriculum.max_delay must be in [0, horizon={horizon}), got {curriculum.max_delay}"
            )
        if base_ckpt is not None:
            from robotics_remac.checkpoint import load_policy

            policy = load_policy(base_ckpt).policy.train()
            for key, value in (
                ("horizon", horizon),
                ("obs_dim", obs_dim),
                ("action_dim", action_dim),
            ):
                if policy.config[key] != value:
                    raise ValueError(
                        f"{base_ckpt}: base {key} {policy.config[key]} != data {key} {value}"
                    )
        else:
            policy = FlowPolicy(obs_dim, action_dim, horizon, **asdict(sizes))
        # the policy's actual widths (a base checkpoint's, not ``sizes``): what a reload builds
        self.hparams["sizes"] = {k: policy.config[k] for k in PolicySizes.__dataclass_fields__}
        self.policy = add_lora(policy, lora.rank, lora.alpha, lora.dropout, lora.use_mask)
        self._ema: list[torch.Tensor] | None = None

    # -- schedules -------------------------------------------------------------------------
    def _progress(self) -> float:
        total = self.trainer.estimated_stepping_batches if self._trainer is not None else 0
        if not total or not math.isfinite(total):
            return 0.0
        return min(1.0, self.global_step / total)

    def _delay_low(self) -> int:
        c = self.curriculum
        if not c.enabled:
            return 0
        return curriculum_low(self._progress(), c.max_delay, c.epochs)

    def p_gt(self) -> float:
        """Probability of the ground-truth prefix (γ = 1), annealed over training."""
        c = self.curriculum
        return c.p_start + (c.p_end - c.p_start) * self._progress()

    # -- loss ------------------------------------------------------------------------------
    def remac_loss(self, batch: dict[str, torch.Tensor], train: bool) -> dict[str, torch.Tensor]:
        """:func:`async_loss` on a batch: delays from the curriculum, the self-sampled chunk
        (:func:`self_sampled_chunk`: stale on the prefix, fresh on the generated tokens; LoRA
        off) when the curriculum is on (else ``Ã = A``)."""
        c = self.curriculum
        obs, a = batch["obs"], batch["actions"]
        b = len(a)
        delays = _sample_delays(b, self._delay_low() if train else 0, c.max_delay)
        if c.enabled:
            es = sample_exec_horizons(delays, self.horizon)
            with torch.no_grad(), lora_disabled(self.policy):
                a_tilde = self_sampled_chunk(self.policy, batch, delays, es, self.sample_steps)
        else:
            a_tilde = a
        p = self.p_gt() if (train and c.enabled) else 1.0
        noise, t = torch.randn_like(a), torch.rand(b, device=a.device)
        return async_loss(
            self.policy, obs, a, a_tilde, delays, noise, t, p, self.loss, self.lora.use_mask
        )

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        parts = self.remac_loss(batch, train=True)
        n = len(batch["obs"])
        for k, v in parts.items():
            self.log(f"train/{k}", v, prog_bar=k == "loss", batch_size=n)
        return parts["loss"]

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss = self.remac_loss(batch, train=False)["loss"]
        self.log("val/loss", loss, batch_size=len(batch["obs"]), sync_dist=True)

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss = self.remac_loss(batch, train=False)["loss"]
        self.log("test/loss", loss, batch_size=len(batch["obs"]), sync_dist=True)

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        """A chunk ``[B, H, A]`` per observation, sampled with no committed prefix (d = 0)."""
        obs = batch["obs"]
        prefix = torch.zeros(len(obs), self.horizon, self.policy.action_dim)
        return prefix_preserved_sample(
            self.policy, obs, prefix.to(obs), 0, self.sample_steps, "zeros"
        )

    # -- optimisation + EMA ----------------------------------------------------------------
    def configure_optimizers(self) -> Any:
        return _warmup_adamw(lora_parameters(self.policy), self.optim)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        params = lora_parameters(self.policy)
        with torch.no_grad():
            if self._ema is None:
                self._ema = [p.detach().clone() for p in params]
                return
            for e, p in zip(self._ema, params, strict=True):
                e.lerp_(p.detach(), 1 - self.ema.decay)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Checkpoints hold the EMA of the LoRA weights (what evaluation uses)."""
        if self._ema is None:
            return
        names = [n for n, _ in self.named_parameters() if "lora_" in n or "mask_proj" in n]
        for name, e in zip(names, self._ema, strict=True):
            checkpoint["state_dict"][name] = e.detach().clone()

    def on_train_end(self) -> None:
        if self._ema is None:
            return
        with torch.no_grad():
            for e, p in zip(self._ema, lora_parameters(self.policy), strict=True):
                p.copy_(e)
