"""PERK vs FT-ICR at equal context: time and peak memory of one query and of one training step.

Per context length (filler segments of generated BabiLong qa1, facts included):

* query: PERK's test-time adaptation (4 first-order inner steps, gradient accumulation 4) +
  greedy answer with no context, vs FT-ICR's greedy answer with the whole context in the prompt;
* inner step: one PERK inner step (forward + backward over the segment batch) vs one FT-ICR
  fine-tuning step (forward + backward over the full prompt) — the unit the paper's memory
  comparison scales with;
* meta step: PERK's outer-loop step (2 first-order + 2 second-order inner steps + outer
  backward) vs the FT-ICR training step.

Peak memory: CUDA allocator peak on GPU, live tensor bytes (``perk.memory.PeakMemory``) on CPU.
Same model and records in the same run.

``uv run --no-sync python packages/llm-methods/benchmarks/bench_perk.py [--model smollm2]``
"""

from __future__ import annotations

import argparse
import copy

import torch

from iclr26_common.device import choose_device
from llm_methods.perk.data import synth_babilong
from llm_methods.perk.icr import ICR
from llm_methods.perk.memory import peak_bytes, timed
from llm_methods.perk.model import PERK, format_segments


def _model(spec: str):  # type: ignore[no-untyped-def]
    if spec == "tiny":
        from llm_methods.zoo.models import tiny_lm

        texts = [
            " ".join(r.context) + f" {r.question} {r.answer}"
            for r in synth_babilong(40, n_segments=6, seed=1)
        ]
        lm = tiny_lm(texts, vocab_size=400, n_layers=2, hidden=64, heads=4, max_len=8192)
        return lm.tokenizer, lm.model.to(choose_device())
    from llm_methods.lm import load_lm

    lm = load_lm(spec)
    return lm.tokenizer, lm.model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="tiny", help="tiny (2x64 Llama) or a model spec")
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--r", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tok, base = _model(args.model)
    device = next(base.parameters()).device
    perk = PERK(copy.deepcopy(base), tok, r=args.r, alpha=16, lslr_init=1e-2).to(device)
    icr = ICR(copy.deepcopy(base), tok, r=args.r, alpha=16)
    print(f"model {args.model}, rsLoRA r={args.r}, device {device}, torch threads 1")
    print(
        "| filler | ICR tokens | what | PERK s | FT-ICR s | PERK/ICR time | PERK MiB | "
        "FT-ICR MiB | PERK/ICR memory |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for length in args.lengths:
        rec = synth_babilong(1, length, 0.5, ("qa1",), seed=length)[0]
        rows = _closures(perk, icr, rec)
        n_tokens = len(tok(icr_prompt(rec), add_special_tokens=False).input_ids)
        for what, f_perk, f_icr in rows:
            f_perk(), f_icr()  # warm-up
            t_p = min(timed(f_perk, device)[1] for _ in range(args.repeats))
            t_i = min(timed(f_icr, device)[1] for _ in range(args.repeats))
            m_p, m_i = peak_bytes(f_perk, device)[1], peak_bytes(f_icr, device)[1]
            print(
                f"| {length} | {n_tokens} | {what} | {t_p:.3f} | {t_i:.3f} | {t_p / t_i:.2f} | "
                f"{m_p / 2**20:.1f} | {m_i / 2**20:.1f} | {m_p / max(m_i, 1):.2f} |"
            )
        perk.zero_grad(set_to_none=True)
        icr.zero_grad(set_to_none=True)


def _closures(perk: PERK, icr: ICR, rec) -> list:  # type: ignore[no-untyped-def]
    """(what, PERK call, FT-ICR call) for one record."""
    n, tok = len(rec.context), perk.tokenizer
    ids, mask = perk.encode(format_segments(rec.context, tok.eos_token or ""))
    params = {k: p.detach().clone().requires_grad_(True) for k, p in perk.lora_init().items()}

    def perk_query():  # type: ignore[no-untyped-def]
        return perk.answer(perk.adapt(rec.context, train=False), n, rec.question, 24)

    def perk_inner():  # type: ignore[no-untyped-def]
        return perk._accumulated_grads(params, ids, mask)

    def perk_meta():  # type: ignore[no-untyped-def]
        fast = perk.adapt(rec.context, train=True)
        perk.outer_loss(fast, n, rec.question, rec.answer, rec.support).backward()

    def icr_query():  # type: ignore[no-untyped-def]
        return icr.answer(rec.context, rec.question, 24)

    def icr_step():  # type: ignore[no-untyped-def]
        icr.loss(rec.context, rec.question, rec.answer, rec.support).backward()

    return [
        ("query (adapt + answer vs answer)", perk_query, icr_query),
        ("inner step vs FT-ICR step (fwd + bwd)", perk_inner, icr_step),
        ("meta-train step vs FT-ICR step", perk_meta, icr_step),
    ]


def icr_prompt(rec) -> str:  # type: ignore[no-untyped-def]
    from llm_methods.perk.icr import format_icr

    return format_icr(rec.context, rec.question)


if __name__ == "__main__":
    main()
