"""REMAC trains on the prefix the asynchronous loop really commits: a chunk sampled ``e`` steps
earlier from an older observation (issue 25, "the model never sees a stale prefix"); the
generated tokens of the self-sampled chunk come from the current observation, as upstream's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import robotics_remac.lit_module as lit
from robotics_remac.data import ChunkDataset
from robotics_remac.dataset_format import Episode
from robotics_remac.lit_module import (
    RemacModule,
    sample_exec_horizons,
    self_sampled_chunk,
    stale_prefix,
)
from robotics_remac.settings import CurriculumSettings, PolicySizes

TINY = PolicySizes(channels=16, hidden=32, token_hidden=8, depth=1)
H = 8


def _ramp_episode(n: int = 40) -> Episode:
    """Every state feature equals the frame index, so an observation names its frame."""
    t = np.arange(n, dtype=np.float32)
    return Episode(np.repeat(t[:, None], 8, 1), np.stack([t, -t], 1))


def _spy(calls: list[torch.Tensor]):
    """Stands in for the sampler: chunk[b, j] = 100·frame(obs_b) + j (both action dims)."""

    def sample(policy, obs, steps, gen=None):  # type: ignore[no-untyped-def]
        calls.append(obs[:, 0].clone())
        j = torch.arange(H, dtype=obs.dtype)
        return (100 * obs[:, :1] + j[None, :])[..., None].expand(-1, -1, 2).clone()

    return sample


def test_dataset_carries_the_observation_history() -> None:
    ds = ChunkDataset([_ramp_episode(20)], H)
    item = ds[[5]]
    assert item["frame"].tolist() == [5]
    # prev_obs[k] = obs_{max(0, 5 - k)}: frames 5, 4, 3, 2, 1, 0, 0, 0
    assert item["prev_obs"][0, :, 0].tolist() == [5, 4, 3, 2, 1, 0, 0, 0]


def test_exec_horizons_follow_upstream_range() -> None:
    torch.manual_seed(0)
    d = torch.tensor([0, 1, 2, 3, 4] * 400)
    e = sample_exec_horizons(d, H)
    for dd in range(5):
        got = set(e[d == dd].tolist())
        assert got == set(range(max(1, dd), H - dd + 1)), (dd, got)


def test_stale_prefix_is_the_earlier_chunk_shifted(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[torch.Tensor] = []
    monkeypatch.setattr(lit, "euler_sample", _spy(calls))
    ds = ChunkDataset([_ramp_episode(40)], H)
    batch = ds[[10, 1]]
    out = stale_prefix(None, batch, torch.tensor([3, 3]), 5)  # type: ignore[arg-type]
    # frame 10, e = 3: chunk from obs_7 shifted by 3 -> 703..707 then zeros
    assert out[0, :, 0].tolist() == [703, 704, 705, 706, 707, 0, 0, 0]
    # frame 1 < e: the only earlier chunk is obs_0's, shifted by 1 -> 1..7 then one zero
    assert out[1, :, 1].tolist() == [1, 2, 3, 4, 5, 6, 7, 0]
    assert calls[0].tolist() == [7, 0]


def test_remac_loss_samples_the_prefix_from_an_earlier_observation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failed before the fix: the self-sampled prefix came from the current observation."""
    calls: list[torch.Tensor] = []
    monkeypatch.setattr(lit, "euler_sample", _spy(calls))
    torch.manual_seed(0)
    ds = ChunkDataset([_ramp_episode(40)], H)
    frames = list(range(H, 30))
    batch = ds[frames]
    module = RemacModule(
        sizes=TINY,
        horizon=H,
        curriculum=CurriculumSettings(enabled=True, max_delay=4, p_start=0.0, p_end=0.0),
    )
    module.remac_loss(batch, train=True)
    assert len(calls) == 1  # one batched sample: the stale observations, then the current ones
    stale, current = calls[0][: len(frames)], calls[0][len(frames) :]
    lag = torch.tensor(frames, dtype=torch.float32) - stale
    # epoch 0 of the curriculum draws d = max_delay = 4, which forces e = 4 (4 <= e <= 8 - 4)
    assert lag.tolist() == [4.0] * len(frames)
    assert current.tolist() == [float(f) for f in frames]


def test_self_sampled_chunk_is_stale_on_the_prefix_and_fresh_on_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On 43a8cc5 the whole self-sampled chunk was the stale one (shifted, zero-padded at the
    end), which upstream's loss mixes into every token: the curriculum finetunes collapsed at
    d >= 2 in the issue-38 full run. Now the generated tokens carry the base's sample from the
    current observation (upstream's ``action_without_lora(obs)``), the prefix the stale one."""
    calls: list[torch.Tensor] = []
    monkeypatch.setattr(lit, "euler_sample", _spy(calls))
    ds = ChunkDataset([_ramp_episode(40)], H)
    batch = ds[[10, 20]]
    out = self_sampled_chunk(None, batch, torch.tensor([2, 0]), torch.tensor([3, 5]), 5)  # type: ignore[arg-type]
    # frame 10, d = 2, e = 3: prefix from obs_7 shifted by 3 (703, 704), then obs_10's chunk
    assert out[0, :, 0].tolist() == [703, 704, 1002, 1003, 1004, 1005, 1006, 1007]
    # d = 0: no prefix, every token is the current observation's chunk
    assert out[1, :, 1].tolist() == [2000 + j for j in range(H)]
    assert calls[0].tolist() == [7, 15, 10, 20]
