"""``llm-methods dispersion measure``: per-chunk PPL + per-layer D of any model on user text."""

from __future__ import annotations

import csv
import json
from argparse import Namespace
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["measure"]


def measure(ns: Namespace) -> dict[str, Any]:
    from llm_methods.corpora import chunk_ids
    from llm_methods.dispersion.data import builtin_documents, read_documents
    from llm_methods.dispersion.experiment import _plot_correlation
    from llm_methods.dispersion.measure import binned, binned_correlation, chunk_statistics
    from llm_methods.lm import load_lm

    docs = read_documents(ns.input) if ns.input else builtin_documents("pydoc")
    lm = load_lm(ns.model, ns.device, ns.dtype)
    chunks, origin = [], []
    for doc in docs:
        ids = lm.tokenizer(doc.text, add_special_tokens=False).input_ids
        for chunk in chunk_ids(ids, ns.chunk_len):
            chunks.append(chunk)
            origin.append(doc.source)
    if not chunks:
        raise ValueError(f"no document has {ns.chunk_len} tokens (--chunk-len)")
    pick = sorted(np.random.default_rng(ns.seed).permutation(len(chunks))[: ns.max_chunks])
    chunks, origin = [chunks[i] for i in pick], [origin[i] for i in pick]
    stats = chunk_statistics(lm, chunks, batch_size=ns.batch_size, quiet=getattr(ns, "quiet", True))
    out: Path = ns.out
    out.mkdir(parents=True, exist_ok=True)
    last = stats.dispersion.shape[1] - 1
    with open(out / "chunks.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["chunk", "source", "ppl", "dispersion_last"])
        for i, (src, p, d) in enumerate(
            zip(origin, stats.ppl, stats.dispersion[:, last], strict=True)
        ):
            writer.writerow([i, src, f"{p:.6g}", f"{d:.6g}"])
    with open(out / "layers.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["hidden_state_index", "mean_dispersion"])
        for i, d in enumerate(stats.dispersion.mean(0)):
            writer.writerow([i, f"{d:.6g}"])
    summary: dict[str, Any] = {
        "model": lm.name,
        "chunks": len(chunks),
        "mean_ppl": float(stats.ppl.mean()),
        "mean_dispersion_last": float(stats.dispersion[:, last].mean()),
    }
    if len(chunks) // ns.bin_size >= 3:
        r = binned_correlation(stats.ppl, stats.dispersion[:, last], ns.bin_size)
        x, y = binned(stats.ppl, stats.dispersion[:, last], ns.bin_size)
        summary.update(pearson_r=r, bins=len(x))
        _plot_correlation(out / "dispersion_vs_ppl.png", {lm.name: (x, y, r)})
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary
