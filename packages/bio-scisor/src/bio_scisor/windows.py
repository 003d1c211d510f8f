"""Long sequences: the denoiser sees a window of ``window_size`` residues (upstream
``predict_with_windows`` / ``get_window_indices``, window 2048 in both shipped configs).

For a row of length L > W the model scores a window X[s : s + W] and the full distribution over
positions is (upstream's mixture)

    q(i) = q_window(i - s) * W / L   for s <= i < s + W,      q(i) = 1 / L   elsewhere,

which sums to one. Rows with L <= W are scored whole (the mixture reduces to q_window). Training
and sampling draw one start per row, s = floor(u * (L - W)), u ~ U[0, 1) as upstream
(``mode="random"``). Scoring averages the mixture over evenly spaced starts
(``mode="average"``), the deterministic counterpart of upstream's random start (README,
Deviations), so a variant's score does not depend on a random draw.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from bio_scisor.constants import PAD_INDEX

__all__ = ["DEFAULT_WINDOW", "average_starts", "denoiser_log_q", "window_size_of"]

# upstream ``forward_kwargs.window_size`` (configs/uniref50.yaml and uniref90.yaml)
DEFAULT_WINDOW = 2048


def window_size_of(model: nn.Module) -> int | None:
    """The denoiser's window (attribute ``window_size``; ``None`` = never window)."""
    return getattr(model, "window_size", None)


def average_starts(length: int, window: int) -> list[int]:
    """Evenly spaced window starts 0 .. L - W, ceil(2 L / W) of them (every residue is covered)."""
    if length <= window:
        return [0]
    count = max(2, math.ceil(2 * length / window))
    return sorted({round(k * (length - window) / (count - 1)) for k in range(count)})


def _gather_windows(
    tokens: torch.Tensor, lengths: torch.Tensor, starts: torch.Tensor, window: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Window tokens (B, W') and lengths (B,) for per-row ``starts`` (W' = min(W, n))."""
    width = min(window, tokens.shape[1])
    cols = starts[:, None] + torch.arange(width, device=tokens.device)[None, :]
    inside = cols < lengths[:, None]
    rows = torch.arange(tokens.shape[0], device=tokens.device)[:, None]
    win = torch.where(inside, tokens[rows, cols.clamp_max(tokens.shape[1] - 1)], PAD_INDEX)
    return win, torch.minimum(lengths - starts, torch.full_like(lengths, width))


def _mixture(
    log_q_win: torch.Tensor,
    lengths: torch.Tensor,
    starts: torch.Tensor,
    win_len: torch.Tensor,
    n: int,
    window: int,
) -> torch.Tensor:
    """Upstream's full distribution (B, n) float64 from window log-probabilities (B, W')."""
    length = lengths.to(torch.float64)[:, None]
    long_row = (lengths > window)[:, None]
    pos = torch.arange(n, device=log_q_win.device)[None, :]
    rel = pos - starts[:, None]
    inside = (rel >= 0) & (rel < win_len[:, None])
    scale = torch.where(long_row, math.log(window) - torch.log(length), 0.0)
    values = log_q_win.to(torch.float64).gather(1, rel.clamp(0, log_q_win.shape[1] - 1)) + scale
    out = torch.where(inside, values, -torch.log(length))
    return out.masked_fill(pos >= lengths[:, None], -math.inf)


def denoiser_log_q(
    model: nn.Module,
    tokens: torch.Tensor,
    lengths: torch.Tensor,
    s: torch.Tensor,
    mode: str = "random",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """log q(i | X, S) (B, n) float64 with upstream's windowing for rows longer than the window.

    ``mode="random"``: one start per row (training, shrinking, generation; ``generator`` on the
    CPU). ``mode="average"``: the mixture averaged over :func:`average_starts` (scoring).
    """
    window = window_size_of(model)
    n = tokens.shape[1]
    if window is None or n <= window:
        return model(tokens, lengths, s).to(torch.float64)
    if mode == "random":
        u = torch.rand(tokens.shape[0], generator=generator, dtype=torch.float64)
        span = (lengths.cpu() - window).clamp_min(0).to(torch.float64)
        starts = torch.floor(u * span).long().to(tokens.device)
        win, win_len = _gather_windows(tokens, lengths, starts, window)
        log_q_win = model(win, win_len, s).to(torch.float64)
        return _mixture(log_q_win, lengths, starts, win_len, n, window)
    if mode != "average":
        raise ValueError(f"mode must be 'random' or 'average', got {mode!r}")
    rows = []
    for b in range(tokens.shape[0]):
        length = int(lengths[b])
        if length <= window:
            row = model(tokens[b : b + 1, :length], lengths[b : b + 1], s[b : b + 1])
            rows.append(nn.functional.pad(row.to(torch.float64), (0, n - length), value=-math.inf))
            continue
        starts = torch.tensor(average_starts(length, window), device=tokens.device)
        k = len(starts)
        win, win_len = _gather_windows(
            tokens[b : b + 1, :length].expand(k, -1), lengths[b : b + 1].expand(k), starts, window
        )
        log_q_win = model(win, win_len, s[b : b + 1].expand(k)).to(torch.float64)
        mix = _mixture(log_q_win, lengths[b : b + 1].expand(k), starts, win_len, length, window)
        row = torch.logsumexp(mix, dim=0, keepdim=True) - math.log(k)
        rows.append(nn.functional.pad(row, (0, n - length), value=-math.inf))
    return torch.cat(rows, dim=0)
