"""Dispersion equals the official ``step3_compute_dispersion_and_plot.py`` on fixed hidden states.

Reference numbers: ``tests/data/reference/dispersion_step3.*`` (produced once by running the
official script in a scratch environment; repository, commit and command in the ``.source.json``
sidecar)."""

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
    assert float(np.mean(got)) == pytest.approx(want["all_chunks_group_mean"], abs=2e-6)
    acc = DispersionAccumulator()
    acc.add(chunks[3])
    assert acc.value() == pytest.approx(want["per_chunk"][3], abs=2e-6)
    # padded batch with a mask gives each chunk's own value
    width = max(len(h) for h in chunks)
    batch = torch.zeros(len(chunks), width, chunks[0].shape[1])
    mask = torch.zeros(len(chunks), width)
    for i, h in enumerate(chunks):
        batch[i, : len(h)], mask[i, : len(h)] = h, 1
    assert dispersion(batch, mask).tolist() == pytest.approx(want["per_chunk"], abs=2e-6)
    assert json.loads((REF / "dispersion_step3.source.json").read_text())["commit"]
