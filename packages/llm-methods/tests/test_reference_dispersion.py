"""Dispersion equals the official ``step3_compute_dispersion_and_plot.py`` on fixed hidden states.

Reference numbers: ``tests/data/reference/dispersion_step3.*`` (produced once by running the
official script in a scratch environment; repository, commit and command in the ``.source.json``
sidecar).

Tolerances (measured 2026-12-04, torch 2.13.0+cpu, float32 hidden states, 1 and 4 threads
alike): max |ours − official| over the six chunks' dispersions (values 0.44-1.0) 1.8e-7, and
the same for the padded, masked batch; the streaming accumulator, on every chunk, 1.2e-7; the
mean over chunks 1.5e-8. Bounds at ~10×: 2e-6 for every per-chunk value, 2e-7 for the mean.
float32 summation order is the only expected source of difference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from llm_methods.dispersion.metrics import DispersionAccumulator, dispersion

REF = Path(__file__).parent / "data" / "reference"


def test_dispersion_equals_official_step3() -> None:
    want = json.loads((REF / "dispersion_step3.json").read_text())
    data = np.load(REF / "dispersion_step3.npz")
    chunks = [torch.from_numpy(data[f"chunk_{i}"]) for i in range(len(want["per_chunk"]))]
    got = [float(dispersion(h)) for h in chunks]
    assert got == pytest.approx(want["per_chunk"], abs=2e-6)
    assert float(np.mean(got)) == pytest.approx(want["all_chunks_group_mean"], abs=2e-7)
    for chunk, value in zip(chunks, want["per_chunk"], strict=True):
        acc = DispersionAccumulator()
        acc.add(chunk)
        assert acc.value() == pytest.approx(value, abs=2e-6)
    # padded batch with a mask gives each chunk's own value
    width = max(len(h) for h in chunks)
    batch = torch.zeros(len(chunks), width, chunks[0].shape[1])
    mask = torch.zeros(len(chunks), width)
    for i, h in enumerate(chunks):
        batch[i, : len(h)], mask[i, : len(h)] = h, 1
    assert dispersion(batch, mask).tolist() == pytest.approx(want["per_chunk"], abs=2e-6)
    assert json.loads((REF / "dispersion_step3.source.json").read_text())["commit"]
