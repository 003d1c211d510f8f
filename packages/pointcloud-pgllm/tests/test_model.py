from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pointcloud_pgllm.errors import PGLLMInputError
from pointcloud_pgllm.model import (
    PointNet2Encoder,
    PointNN,
    encode,
    farthest_point_sample,
    gather,
    knn_indices,
    load_encoder,
    trig_pos_encoding,
)


@pytest.mark.parametrize(
    ("encoder", "n_points", "dim"),
    [
        (PointNN(), 256, 72 * 16),
        (PointNN(3, 24, 8), 128, 24 * 8),
        (PointNet2Encoder(), 512, 256),
        (PointNet2Encoder((16, 32), 8, (32, 8)), 64, 32),
    ],
)
def test_encoder_shapes(encoder: torch.nn.Module, n_points: int, dim: int) -> None:
    out = encoder(torch.randn(2, n_points, 3))
    assert out.shape == (2, dim) and encoder.out_dim == dim
    assert torch.isfinite(out).all()


def test_fps_picks_the_farthest_points() -> None:
    xyz = torch.tensor([[[0.0, 0, 0], [0.1, 0, 0], [5, 0, 0], [0, 3, 0], [0.2, 0.1, 0]]])
    idx = farthest_point_sample(xyz, 3)
    assert idx.tolist() == [[0, 2, 3]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fps_numpy_loop_gives_the_torch_loops_indices(dtype: torch.dtype) -> None:
    """The CPU path runs the FPS loop in numpy: the indices of the torch loop (written out
    here), ties included (a duplicated point: the first of equal distances wins in both)."""
    g = torch.Generator().manual_seed(0)
    xyz = torch.rand(4, 64, 3, generator=g, dtype=dtype)
    xyz[:, 9] = xyz[:, 3]
    xyz[1] = torch.round(xyz[1] * 2) / 2  # a coarse grid: many equal distances

    def torch_loop(xyz: torch.Tensor, m: int) -> torch.Tensor:
        b, n, _ = xyz.shape
        pairwise = torch.cdist(xyz, xyz)
        index = torch.zeros(b, m, dtype=torch.long)
        dist = torch.full((b, n), float("inf"), dtype=xyz.dtype)
        farthest = torch.zeros(b, dtype=torch.long)
        for i in range(m):
            index[:, i] = farthest
            torch.minimum(dist, pairwise[torch.arange(b), farthest], out=dist)
            farthest = dist.argmax(-1)
        return index

    for m in (1, 32, 64):
        got = farthest_point_sample(xyz, m)
        assert got.dtype == torch.long and torch.equal(got, torch_loop(xyz, m))


def test_knn_and_gather() -> None:
    xyz = torch.arange(10, dtype=torch.float32).reshape(1, 10, 1).repeat(1, 1, 3)
    nbr = knn_indices(xyz[:, [4]], xyz, 3)
    assert sorted(nbr[0, 0].tolist()) == [3, 4, 5]
    assert gather(xyz, nbr).shape == (1, 1, 3, 3)


def test_trig_encoding_dim_and_validation() -> None:
    assert trig_pos_encoding(torch.zeros(4, 3), 12).shape == (4, 12)
    with pytest.raises(ValueError, match="divisible by 6"):
        trig_pos_encoding(torch.zeros(4, 3), 10)


def test_pointnn_is_deterministic_and_training_free() -> None:
    x = torch.randn(3, 128, 3)
    enc = PointNN(3, 24, 8)
    assert len(list(enc.parameters())) == 0
    torch.testing.assert_close(enc(x), enc(x))


def test_torchscript_encoder_round_trip(tmp_path: Path) -> None:
    enc = PointNet2Encoder((16, 32), 8, (32, 8))
    path = tmp_path / "enc.pt"
    torch.jit.save(torch.jit.trace(enc, torch.randn(1, 64, 3)), str(path))
    loaded = load_encoder(str(path))
    x = torch.randn(2, 64, 3)
    torch.testing.assert_close(encode(loaded, x), encode(enc, x))


def test_load_encoder_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_encoder(str(tmp_path / "missing.ckpt"))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a module")
    with pytest.raises(PGLLMInputError, match=r"bad\.pt"):
        load_encoder(str(bad))
    ckpt = tmp_path / "x.ckpt"
    torch.save({"weights": torch.zeros(1)}, ckpt)
    with pytest.raises(PGLLMInputError, match=r"x\.ckpt: not a Lightning checkpoint \(no 'state_d"):
        load_encoder(str(ckpt))
    torch.save({"state_dict": {}}, ckpt)
    with pytest.raises(PGLLMInputError, match="no 'hyper_parameters'"):
        load_encoder(str(ckpt))


def test_unreadable_checkpoint_is_a_one_line_input_error(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A .ckpt that torch cannot unpickle (truncated, or not a checkpoint at all) is bad input,
    not a crash: one line naming the file (it used to escape as torch's UnpicklingError)."""
    from iclr26_common.testing import assert_one_line_error
    from pointcloud_pgllm.cli import main

    ckpt = tmp_path / "broken.ckpt"
    ckpt.write_bytes(b"not a checkpoint")
    with pytest.raises(PGLLMInputError, match=r"broken\.ckpt: not a readable encoder checkpoint"):
        load_encoder(str(ckpt))
    args = [
        "embed",
        "--data",
        str(small_tree),
        "--n-points",
        "64",
        "--encoder",
        str(ckpt),
        "--quiet",
    ]
    line = assert_one_line_error(
        main, [*args, "--out", str(tmp_path / "e")], capsys, prog="pointcloud-pgllm"
    )
    assert "broken.ckpt: not a readable encoder checkpoint" in line
    assert not (tmp_path / "e").exists()


def test_another_packages_checkpoint_is_named_as_such(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 36: ``classify --encoder`` with another package's checkpoint said "encoder weights
    do not match (Error(s) in loading state_dict...)"; now one line naming both packages."""
    from iclr26_common.checkpoints import MODEL_KEY
    from iclr26_common.testing import assert_one_line_error
    from pointcloud_pgllm.cli import main

    ckpt = tmp_path / "rf.ckpt"
    foreign = {
        "state_dict": {"encoder.weight": torch.zeros(2, 3)},
        "hyper_parameters": {"width": 8},
        MODEL_KEY: "rf_matid.lit_module.RFMatIDClassifier",
    }
    torch.save(foreign, ckpt)
    expected = (
        f"{ckpt}: a checkpoint of rf-matid (rf_matid.lit_module.RFMatIDClassifier), "
        "not of pointcloud-pgllm"
    )
    with pytest.raises(PGLLMInputError) as info:
        load_encoder(str(ckpt))
    assert str(info.value) == expected
    args = ["classify", "--data", str(small_tree), "--n-points", "64", "--encoder", str(ckpt)]
    line = assert_one_line_error(
        main, [*args, "--quiet", "--out", str(tmp_path / "c")], capsys, prog="pointcloud-pgllm"
    )
    assert expected in line and "do not match" not in line
    assert not (tmp_path / "c").exists()


class _DeviceSpy(torch.nn.Module):
    """Records the device of each batch it encodes; returns CPU features ``[B, 4]``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.device] = []

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        self.seen.append(points.device)
        return torch.ones(points.shape[0], 4)


def test_encode_runs_on_the_chosen_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """``encode`` follows iclr26_common's device choice (``ICLR26_DEVICE`` here; CUDA when seen
    by default) or an explicit ``device``; the features come back on the CPU. The shape-only
    "meta" device stands in for a GPU."""
    points = torch.zeros(5, 16, 3)
    spy = _DeviceSpy()
    monkeypatch.setenv("ICLR26_DEVICE", "meta")
    feats = encode(spy, points, batch_size=2)
    assert spy.seen == [torch.device("meta")] * 3
    assert feats.shape == (5, 4) and feats.device.type == "cpu"
    monkeypatch.delenv("ICLR26_DEVICE")
    explicit = _DeviceSpy()
    encode(explicit, points, batch_size=5, device="meta")
    assert explicit.seen == [torch.device("meta")]
