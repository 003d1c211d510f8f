"""Dispersion equals the official ``step3_compute_dispersion_and_plot.py`` on fixed hidden states.

Reference numbers: ``tests/data/reference/dispersion_step3.*`` (produced once by running the
official script in a scratch environment; repository, commit and command in the ``.source.json``
sidecar).

Tolerances: :data:`TOL` (relative, ``max |ours − official| / max |official|``,
iclr26_common.testing). float32 summation order is the only expected source of difference. The
mutation of the test: the mean cosine over all n² pairs, self-pairs included, instead of the
n (n − 1) distinct ones."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close
from llm_methods.dispersion import metrics
from llm_methods.dispersion.metrics import DispersionAccumulator, dispersion

REF = Path(__file__).parent / "data" / "reference"
#: Relative tolerance of the dispersions (values 0.44-1.0) and their mean, at ~10x the largest
#: difference measured on AMD EPYC (2026-12-06) over ATEN_CPU_CAPABILITY=default
#: (MKL_CBWR=COMPATIBLE; also with ONEDNN_MAX_CPU_ISA=SSE41, oneDNN's oldest kernels), avx2, avx512
#: and unset, the same in all five: the six chunks' values 1.8e-7 (also from the padded, masked
#: batch), the streaming accumulator 2.5e-7 (chunk 1), the mean 2.5e-8. Counting the self-pairs
#: moves the values by 0.33.
TOL = 2.5e-6


def _with_self_pairs(h: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The mutation: the mean cosine over all n² pairs, the n self-pairs (cos 1) included."""
    u, n = metrics._units(h, mask)
    s = u.sum(-2)
    return (s * s).sum(-1) / (n * n)


def test_dispersion_equals_official_step3() -> None:
    want = json.loads((REF / "dispersion_step3.json").read_text())
    data = np.load(REF / "dispersion_step3.npz")
    chunks = [torch.from_numpy(data[f"chunk_{i}"]) for i in range(len(want["per_chunk"]))]
    got = [float(dispersion(h)) for h in chunks]
    assert_portable_close(got, want["per_chunk"], tol=TOL, what="per chunk")
    mean = float(np.mean(got))
    assert_portable_close(mean, want["all_chunks_group_mean"], tol=TOL, what="mean")
    for i, (chunk, value) in enumerate(zip(chunks, want["per_chunk"], strict=True)):
        acc = DispersionAccumulator()
        acc.add(chunk)
        assert_portable_close(acc.value(), value, tol=TOL, what=f"accumulator, chunk {i}")
    # padded batch with a mask gives each chunk's own value
    width = max(len(h) for h in chunks)
    batch = torch.zeros(len(chunks), width, chunks[0].shape[1])
    mask = torch.zeros(len(chunks), width)
    for i, h in enumerate(chunks):
        batch[i, : len(h)], mask[i, : len(h)] = h, 1
    assert_portable_close(dispersion(batch, mask), want["per_chunk"], tol=TOL, what="masked")
    assert json.loads((REF / "dispersion_step3.source.json").read_text())["commit"]
    # self-pairs counted (a formula changed) moves the values >= 10x the tolerance
    with mock.patch.object(metrics, "mean_pairwise_cosine", _with_self_pairs):
        mutated = dispersion(batch, mask)
    assert_mutation_detected(mutated, want["per_chunk"], tol=TOL, what="self-pairs counted")
