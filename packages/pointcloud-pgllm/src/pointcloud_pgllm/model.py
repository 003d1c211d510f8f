"""Frozen and trainable point encoders (plain ``nn.Module``; importable without Lightning).

PGLLM needs one feature vector per cloud to build its graph. The paper uses PointLLM's Point-BERT
(feature = concat(CLS token, max-pool of patch tokens), 768-d); here the encoder is pluggable:

1. :class:`PointNN` - training-free, after Point-NN (Zhang et al., CVPR 2023): farthest point
   sampling, k-NN grouping, trigonometric positional encoding, max + mean pooling over stages.
2. :class:`PointNet2Encoder` - a small PointNet++-style set-abstraction encoder, trained with
   Lightning (``pointcloud-pgllm fit``).
3. Any local TorchScript module or one of our Lightning checkpoints (:func:`load_encoder`).

Shapes: clouds ``[B, N, 3]`` -> features ``[B, out_dim]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

__all__ = [
    "PointNN",
    "PointNet2Encoder",
    "encode",
    "farthest_point_sample",
    "gather",
    "knn_indices",
    "load_encoder",
    "trig_pos_encoding",
]


BATCHNORM_EPS = 1e-5  # torch's BatchNorm1d default, as in Point-NN's Pooling


def farthest_point_sample(xyz: torch.Tensor, m: int) -> torch.Tensor:
    """Indices ``[B, m]`` of farthest point sampling on ``xyz`` ``[B, N, 3]`` (starts at point 0,
    deterministic)."""
    b, n, _ = xyz.shape
    m = min(m, n)
    pairwise = torch.cdist(xyz, xyz)  # [B, N, N], once: the loop below only gathers rows
    numpy_ok = pairwise.device.type == "cpu" and pairwise.dtype in (torch.float32, torch.float64)
    if numpy_ok and not torch.jit.is_tracing():  # a traced graph must keep the torch ops
        # the same loop in numpy: minimum and argmax (first maximum) are exact, so the indices
        # are torch's, with less overhead per step of the m-step loop on a CPU
        return torch.from_numpy(_fps_loop(pairwise.detach().numpy(), m))
    index = torch.zeros(b, m, dtype=torch.long, device=xyz.device)
    dist = torch.full((b, n), float("inf"), device=xyz.device, dtype=xyz.dtype)
    farthest = torch.zeros(b, dtype=torch.long, device=xyz.device)
    rows = torch.arange(b, device=xyz.device)
    for i in range(m):
        index[:, i] = farthest
        torch.minimum(dist, pairwise[rows, farthest], out=dist)
        farthest = dist.argmax(-1)
    return index


def _fps_loop(pairwise: np.ndarray, m: int) -> np.ndarray:
    """:func:`farthest_point_sample`'s loop on distances ``[B, N, N]``: indices ``[B, m]``."""
    b, n, _ = pairwise.shape
    index = np.zeros((b, m), dtype=np.int64)
    dist = np.full((b, n), np.inf, dtype=pairwise.dtype)
    farthest = np.zeros(b, dtype=np.int64)
    rows = np.arange(b)
    for i in range(m):
        index[:, i] = farthest
        np.minimum(dist, pairwise[rows, farthest], out=dist)
        farthest = dist.argmax(-1)
    return index


def knn_indices(query: torch.Tensor, xyz: torch.Tensor, k: int) -> torch.Tensor:
    """Indices ``[B, M, k]`` of the k nearest points of ``xyz`` ``[B, N, 3]`` to each query."""
    return torch.cdist(query, xyz).topk(min(k, xyz.shape[1]), dim=-1, largest=False).indices


def gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x`` ``[B, N, C]`` gathered at ``index`` ``[B, ...]`` -> ``[B, ..., C]``."""
    b = x.shape[0]
    flat = index.reshape(b, -1)
    out = torch.gather(x, 1, flat.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
    return out.reshape(*index.shape, x.shape[-1])


def trig_pos_encoding(
    xyz: torch.Tensor, dim: int, alpha: float = 1000.0, beta: float = 100.0
) -> torch.Tensor:
    """Point-NN's trigonometric encoding of ``xyz`` ``[..., 3]`` into ``[..., dim]`` (``dim``
    divisible by 6): for each axis, sin / cos of ``beta * x / alpha^(j / (dim/6))``."""
    if dim % 6:
        raise ValueError(f"positional encoding dim must be divisible by 6, got {dim}")
    feat = dim // 6
    freq = alpha ** (torch.arange(feat, dtype=xyz.dtype, device=xyz.device) / feat)
    angles = beta * xyz.unsqueeze(-1) / freq  # [..., 3, feat]
    enc = torch.stack([angles.sin(), angles.cos()], dim=-1)  # [..., 3, feat, 2]
    return enc.flatten(-3)


class PointNN(nn.Module):
    """Training-free encoder after Point-NN (non-parametric; no weights).

    Stage s: FPS to half the points, k-NN grouping, neighbour features and offsets normalised by
    their std, feature expansion (concat with the centre feature: the width doubles), geometry
    extraction ``(f + PE(dxyz)) * PE(dxyz)``, max + mean pooling over the k neighbours, then
    Point-NN's ``BatchNorm1d`` + GELU (``models/point_nn.py::Pooling``; its BatchNorm is never
    trained and runs in ``eval()``, so it is ``x / sqrt(1 + eps)``). The global feature is max +
    mean over the last stage's points: ``[B, embed_dim * 2^stages]``.
    """

    def __init__(
        self,
        n_stages: int = 4,
        embed_dim: int = 72,
        k: int = 32,
        alpha: float = 1000.0,
        beta: float = 100.0,
    ) -> None:
        super().__init__()
        self.n_stages, self.embed_dim, self.k = n_stages, embed_dim, k
        self.alpha, self.beta = alpha, beta
        self.out_dim = embed_dim * 2**n_stages

    @torch.no_grad()
    def forward(self, xyz: torch.Tensor) -> torch.Tensor:
        x = trig_pos_encoding(xyz, self.embed_dim, self.alpha, self.beta)
        for _ in range(self.n_stages):
            centres = farthest_point_sample(xyz, max(1, xyz.shape[1] // 2))
            lc_xyz, lc_x = gather(xyz, centres), gather(x, centres)
            nbr = knn_indices(lc_xyz, xyz, self.k)
            knn_xyz, knn_x = gather(xyz, nbr), gather(x, nbr)  # [B, G, K, 3 / C]
            knn_x = knn_x - lc_x.unsqueeze(-2)
            knn_x = knn_x / (knn_x.std() + 1e-5)
            knn_xyz = knn_xyz - lc_xyz.unsqueeze(-2)
            knn_xyz = knn_xyz / (knn_xyz.std() + 1e-5)
            knn_x = torch.cat([knn_x, lc_x.unsqueeze(-2).expand_as(knn_x)], dim=-1)
            pe = trig_pos_encoding(knn_xyz, knn_x.shape[-1], self.alpha, self.beta)
            weighted = (knn_x + pe) * pe
            x = weighted.amax(dim=-2) + weighted.mean(dim=-2)
            x = nn.functional.gelu(x / (1.0 + BATCHNORM_EPS) ** 0.5)  # Pooling.out_transform
            xyz = lc_xyz
        return x.amax(dim=1) + x.mean(dim=1)


class PointNet2Encoder(nn.Module):
    """A small PointNet++-style encoder: per stage FPS + k-NN grouping, a shared MLP on
    ``[dxyz, f_nbr]`` and max pooling; global max pooling. ``[B, N, 3] -> [B, widths[-1]]``."""

    def __init__(
        self,
        widths: tuple[int, ...] = (64, 128, 256),
        k: int = 16,
        n_centres: tuple[int, ...] = (256, 64, 16),
    ) -> None:
        super().__init__()
        if len(widths) != len(n_centres):
            raise ValueError("widths and n_centres need one entry per stage")
        self.k, self.n_centres = k, tuple(n_centres)
        layers, c_in = [], 0
        for width in widths:
            layers.append(
                nn.Sequential(
                    nn.Linear(3 + c_in, width),
                    nn.LayerNorm(width),
                    nn.GELU(),
                    nn.Linear(width, width),
                )
            )
            c_in = width
        self.stages = nn.ModuleList(layers)
        self.out_dim = widths[-1]

    def forward(self, xyz: torch.Tensor) -> torch.Tensor:
        x: torch.Tensor | None = None
        for stage, m in zip(self.stages, self.n_centres, strict=True):
            with torch.no_grad():
                centres = farthest_point_sample(xyz, m)
                lc_xyz = gather(xyz, centres)
                nbr = knn_indices(lc_xyz, xyz, self.k)
            rel = gather(xyz, nbr) - lc_xyz.unsqueeze(-2)
            feat = rel if x is None else torch.cat([rel, gather(x, nbr)], dim=-1)
            x = stage(feat).amax(dim=-2)
            xyz = lc_xyz
        assert x is not None
        return x.amax(dim=1)


@torch.no_grad()
def encode(
    encoder: nn.Module,
    points,
    batch_size: int = 16,
    device: str | None = None,
    quiet: bool = True,
) -> torch.Tensor:
    """Features ``[N, D]`` (float32, CPU) of clouds ``points`` ``[N, P, 3]`` in batches.

    The encoder runs on ``device`` (default :func:`iclr26_common.device.choose_device`'s pick:
    CUDA when PyTorch sees it, ``ICLR26_DEVICE`` forces); it is moved there. ``quiet=False``
    shows progress over the batches on stderr."""
    from iclr26_common.device import choose_device
    from iclr26_common.progress import progress

    target = choose_device(device)
    points = torch.as_tensor(points, dtype=torch.float32)
    encoder.to(target).eval()
    starts = range(0, len(points), batch_size)
    chunks = [
        encoder(points[i : i + batch_size].to(target)).float().cpu()
        for i in progress(starts, description="encoding", quiet=quiet)
    ]
    return torch.cat(chunks) if chunks else torch.zeros(0, getattr(encoder, "out_dim", 0))


def load_encoder(spec: str) -> nn.Module:
    """An encoder from ``spec``: ``pointnn`` (training-free), a Lightning ``.ckpt`` written by
    ``pointcloud-pgllm fit`` (its encoder only), or a TorchScript file (``torch.jit.save``) of
    any module mapping ``[B, N, 3]`` to ``[B, D]``. Checkpoints are read with
    ``torch.load(weights_only=True)`` (:func:`iclr26_common.checkpoints.load_weights_only`: an
    unreadable one is a one-line ``PGLLMInputError``); nothing is downloaded."""
    from pointcloud_pgllm.errors import PGLLMInputError

    if spec == "pointnn":
        return PointNN()
    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such encoder checkpoint (or use 'pointnn')")
    if path.suffix == ".ckpt":
        from iclr26_common.checkpoints import load_weights_only

        state = load_weights_only(
            path,
            "encoder checkpoint",
            error=PGLLMInputError,
            require_state_dict=True,
            package="pointcloud_pgllm",
        )
        if "hyper_parameters" not in state:
            raise PGLLMInputError(
                f"{path}: not a Lightning checkpoint of pointcloud-pgllm fit (no "
                "'hyper_parameters')"
            )
        hp = state["hyper_parameters"]
        encoder = PointNet2Encoder(
            tuple(hp.get("widths", (64, 128, 256))),
            int(hp.get("k", 16)),
            tuple(hp.get("n_centres", (256, 64, 16))),
        )
        prefix = "encoder."
        weights = {
            k[len(prefix) :]: v for k, v in state["state_dict"].items() if k.startswith(prefix)
        }
        try:
            encoder.load_state_dict(weights)
        except RuntimeError as error:
            raise PGLLMInputError(
                f"{path}: encoder weights do not match ({str(error).splitlines()[0]})"
            ) from None
        return encoder.eval()
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except RuntimeError as error:
        raise PGLLMInputError(
            f"{path}: not a TorchScript module nor a .ckpt ({str(error).splitlines()[0]})"
        ) from None
    if not hasattr(module, "out_dim"):
        with torch.no_grad():
            module.out_dim = int(module(torch.zeros(1, 64, 3)).shape[-1])  # type: ignore[attr-defined]
    return module.eval()
