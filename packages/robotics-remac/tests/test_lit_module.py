from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import lightning as L
import pytest
import torch

from robotics_remac.checkpoint import load_policy, save_policy
from robotics_remac.data import ChunkDataset, DemoDataModule, collect_demonstrations
from robotics_remac.lit_module import FlowPolicyModule, RemacModule, charbonnier, curriculum_low
from robotics_remac.model import FlowPolicy, LoRALinear, lora_parameters
from robotics_remac.settings import CurriculumSettings, PolicySizes, TrainingTimeRTCSettings
from robotics_remac.training import ABLATIONS, fit_finetune, remac_from_policy

SIZES = PolicySizes(channels=16, hidden=32, token_hidden=8, depth=1)
TINY = asdict(SIZES)  # FlowPolicy's keyword arguments


def _batch(n: int = 16) -> dict[str, torch.Tensor]:
    ds = ChunkDataset(collect_demonstrations(2, seed=0), 8)
    return ds[list(range(n))]


def test_chunks_follow_the_episode() -> None:
    eps = collect_demonstrations(2, seed=0)
    ds = ChunkDataset(eps, 8)
    assert len(ds) == 2 * (120 - 7)
    torch.testing.assert_close(ds[5]["actions"], torch.from_numpy(eps[0].actions[5:13]))


@pytest.mark.parametrize("ttrtc", [False, True])
def test_base_loss_decreases(ttrtc: bool) -> None:
    torch.manual_seed(0)
    module = FlowPolicyModule(sizes=SIZES, training_time_rtc=TrainingTimeRTCSettings(ttrtc))
    batch = _batch(128)
    opt = torch.optim.Adam(module.parameters(), 3e-3)
    first = module.flow_loss(batch).item()
    for _ in range(60):
        loss = module.flow_loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert module.flow_loss(batch).item() < 0.7 * first


@pytest.mark.parametrize("name", list(ABLATIONS))
def test_remac_loss_parts_and_gradients(name: str) -> None:
    module = remac_from_policy(FlowPolicy(**TINY), **ABLATIONS[name])
    parts = module.remac_loss(_batch(), train=False)
    assert torch.isfinite(parts["loss"])
    assert ("l_delta" in parts) == module.loss.use_delta
    assert ("l_keep" in parts) == module.loss.use_keep
    parts["loss"].backward()
    base_grads = [p.grad for n, p in module.policy.named_parameters() if ".base." in n]
    assert all(g is None for g in base_grads)
    assert any(
        p.grad is not None and p.grad.abs().sum() > 0
        for n, p in module.policy.named_parameters()
        if "lora_" in n
    )


def test_charbonnier() -> None:
    assert charbonnier(torch.tensor([0.0])).item() == pytest.approx(1e-3)
    assert charbonnier(torch.tensor([3.0])).item() == pytest.approx(3.0, abs=1e-6)


def test_p_schedule_and_delay_curriculum() -> None:
    module = RemacModule(
        sizes=SIZES, curriculum=CurriculumSettings(epochs=4, p_start=1.0, p_end=0.2)
    )
    assert module.p_gt() == 1.0  # no trainer yet
    assert module._delay_low() == 4


def test_curriculum_low_replays_upstreams_32_epoch_schedule() -> None:
    """Upstream ``minval = int(4 * (1 - epoch / 32))``, worked out by hand per epoch: 4 at epoch
    0, 3 at 1-8, 2 at 9-16, 1 at 17-24, 0 at 25-31."""
    by_hand = [4] + [3] * 8 + [2] * 8 + [1] * 8 + [0] * 7
    assert [curriculum_low((e + 0.5) / 32, 4) for e in range(32)] == by_hand
    assert curriculum_low(0.0, 4) == 4 and curriculum_low(1.0, 4) == 0


def test_a_three_epoch_finetune_trains_delay_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """The experiment's 3-epoch finetune must reach d = 0 at the end, as upstream's 32 epochs do
    (a per-epoch schedule stretched over 3 epochs stops at ⌊4·(1 - 2/3)⌋ = 1)."""
    seen: list[int] = []
    original = RemacModule._delay_low

    def record(self: RemacModule) -> int:
        seen.append(original(self))
        return seen[-1]

    monkeypatch.setattr(RemacModule, "_delay_low", record)
    dm = DemoDataModule(n_episodes=4, batch_size=64, val_fraction=0.25)
    fit_finetune(FlowPolicy(**TINY), dm, 3, **ABLATIONS["remac"])
    assert seen[0] == 4 and seen[-1] == 0
    assert seen == sorted(seen, reverse=True)


def test_ema_uses_upstreams_decay() -> None:
    """One EMA step moves the average 1 - 0.999 of the way to the weights (upstream EMA_DECAY)."""
    module = RemacModule(sizes=SIZES)
    params = lora_parameters(module.policy)
    module.on_train_batch_end(None, None, 0)  # first call snapshots the weights
    with torch.no_grad():
        for p in params:
            p.add_(1.0)
    before = [e.clone() for e in module._ema]
    module.on_train_batch_end(None, None, 1)
    for e, b in zip(module._ema, before, strict=True):
        torch.testing.assert_close(e - b, torch.full_like(e, 0.001))


def test_fit_checkpoint_and_weights_only_reload(tmp_path: Path) -> None:
    dm = DemoDataModule(n_episodes=4, batch_size=64, val_fraction=0.25)

    def fit_and_save(module: L.LightningModule, name: str) -> Path:
        trainer = L.Trainer(
            max_epochs=1,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=tmp_path,
        )
        trainer.fit(module, dm)
        trainer.save_checkpoint(tmp_path / name)
        return tmp_path / name

    base_ckpt = fit_and_save(FlowPolicyModule(sizes=SIZES), "base.ckpt")
    loaded = load_policy(base_ckpt)
    assert loaded.kind == "base"
    remac = RemacModule(base_ckpt=str(base_ckpt))
    assert remac.hparams["sizes"]["channels"] == 16
    remac_ckpt = fit_and_save(remac, "remac.ckpt")
    blob = torch.load(remac_ckpt, weights_only=True)
    assert "hyper_parameters" in blob
    again = load_policy(remac_ckpt)
    assert again.kind == "remac"
    assert any(isinstance(m, LoRALinear) for m in again.policy.modules())
    obs, x, t = torch.randn(2, 8), torch.randn(2, 8, 2), torch.rand(2)
    torch.testing.assert_close(again.policy(obs, x, t), remac.policy.eval()(obs, x, t))
    plain = save_policy(tmp_path / "p.pt", again.policy, "remac")
    torch.testing.assert_close(load_policy(plain).policy(obs, x, t), again.policy(obs, x, t))


def test_bad_checkpoints(tmp_path: Path) -> None:
    from robotics_remac.dataset_format import RemacFormatError

    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(RemacFormatError, match=r"bad\.ckpt"):
        load_policy(bad)
    torch.save({"x": 1}, bad)
    with pytest.raises(RemacFormatError, match="neither"):
        load_policy(bad)


def test_training_losses_run_on_the_batchs_device() -> None:
    """Every tensor a loss creates (flow times, delay masks, the curriculum's self-sampled prefix)
    follows the batch: on the shape-only "meta" device a stray CPU tensor raises, as it would
    on a GPU."""
    meta = torch.device("meta")
    batch = {
        "obs": torch.zeros(4, 8, device=meta),
        "actions": torch.zeros(4, 8, 2, device=meta),
        "prev_obs": torch.zeros(4, 8, 8, device=meta),
        "frame": torch.zeros(4, dtype=torch.long, device=meta),
    }
    base = FlowPolicyModule(sizes=SIZES, training_time_rtc=TrainingTimeRTCSettings(True)).to(meta)
    assert base.flow_loss(batch).device == meta
    remac = RemacModule(sizes=SIZES, curriculum=CurriculumSettings(enabled=True)).to(meta)
    assert remac.remac_loss(batch, train=True)["loss"].device == meta
