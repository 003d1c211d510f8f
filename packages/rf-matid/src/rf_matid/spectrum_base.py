"""The shared base of the RF-MatID networks: the channels-first input check.

Kept apart from :mod:`rf_matid.model` so that :mod:`rf_matid.rfmatid_net` and the baselines
share it without an import cycle.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SpectrumClassifier"]


class SpectrumClassifier(nn.Module):
    """Shared input check: ``x`` must be real ``[B, in_channels, L]`` (channels-first)."""

    in_channels: int

    def _check_input(self, x: torch.Tensor) -> None:
        if x.ndim != 3 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"{type(self).__name__} expects input [B, {self.in_channels}, L] (channels-first); "
                f"got shape {tuple(x.shape)}"
            )
        if x.is_complex():
            raise ValueError(
                f"{type(self).__name__} expects real input; apply complex_whiten to complex spectra"
            )
