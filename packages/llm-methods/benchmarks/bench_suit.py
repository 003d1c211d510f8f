"""Edit time per request of ROME / MEMIT / AlphaEdit / SUIT, same model, same requests, same run
(the issue's peers are each other; ROME, one request at a time, is the reference), split into the
value optimisation (shared cost) and the closed-form weight update.

``uv run --no-sync python packages/llm-methods/benchmarks/bench_suit.py --model smollm2 --n 4``
(``--model tiny``: a 4-layer untrained Llama built here, seconds).
"""

from __future__ import annotations

import argparse
import time

import torch


def sync(device: torch.device) -> None:
    """Wait for queued CUDA work before reading a timer (no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    from iclr26_common.device import choose_device
    from llm_methods.corpora import chunk_ids, pydoc_topics
    from llm_methods.lm import load_lm, wrap
    from llm_methods.suit.data import read_counterfact, synth_world
    from llm_methods.suit.editors import METHODS, EditConfig, Editor, fresh_copy, value_targets
    from llm_methods.suit.experiment import FACTS, subject_basis
    from llm_methods.suit.keys import key_second_moments

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--device", default=None, help="cpu / cuda (default: CUDA when present)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.model == "tiny":
        from llm_methods.zoo.models import tiny_lm

        reqs = synth_world(8, seed=0)[: args.n]
        texts = [r.text + r.target_true for r in synth_world(24)]
        lm = tiny_lm(texts, vocab_size=400, n_layers=4, hidden=64, heads=4, seed=0)
        lm = wrap(lm.tokenizer, lm.model.to(choose_device(args.device)), lm.name)
        cfg = EditConfig(layers=(0, 1), rome_layer=1, steps=args.steps, templates=("{}",))
    else:
        reqs = read_counterfact(FACTS)[: args.n]
        lm = load_lm(args.model, args.device, "float32")
        cfg = EditConfig(steps=args.steps, templates=("{}",))
    text = "\n".join(pydoc_topics().values())
    chunks = chunk_ids(lm.tokenizer(text, add_special_tokens=False).input_ids, 64, 64, seed=0)
    layers = sorted(set(cfg.layers) | {cfg.rome_layer})
    stats = key_second_moments(lm, layers, chunks, "bench64x64")
    basis = subject_basis(lm, cfg.layers, 100, cfg.tau)
    t0 = time.perf_counter()
    value_targets(lm, cfg.layers[-1], reqs, cfg)  # returns a CPU tensor: synchronised
    value_s = (time.perf_counter() - t0) / len(reqs)
    print(f"model {lm.name}, {len(reqs)} requests, {cfg.steps} value steps")
    print(f"value optimisation alone: {value_s:.3f} s/request")
    ref = None
    for method in METHODS:
        editor = Editor(fresh_copy(lm), method, cfg, stats, basis)
        t0 = time.perf_counter()
        editor.edit(reqs)
        sync(lm.device)
        per = (time.perf_counter() - t0) / len(reqs)
        ref = ref or per
        print(f"{method:>10}: {per:.3f} s/request  ({per / ref:.2f}x ROME)")


if __name__ == "__main__":
    main()
