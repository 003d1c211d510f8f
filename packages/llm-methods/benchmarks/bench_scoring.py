"""Batched, padded continuation scoring (``continuation_logprobs``) vs one text at a time, same
model, same texts, same run. Peer: a plain per-text HF forward + log-softmax gather (what a user
would write without the core). Also checks the scores agree.

``OMP_NUM_THREADS=1 uv run python packages/llm-methods/benchmarks/bench_scoring.py --model smollm2``
"""

from __future__ import annotations

import argparse
import time

import torch

from llm_methods.corpora import pydoc_topics
from llm_methods.lm import continuation_logprobs, encode_texts, load_lm


def per_text(lm, prompts: list[str], conts: list[str]) -> torch.Tensor:  # type: ignore[no-untyped-def]
    out = []
    with torch.no_grad():
        for prompt, cont in zip(prompts, conts, strict=True):
            head = encode_texts(lm, [prompt])[0]
            tail = lm.tokenizer(cont, add_special_tokens=False).input_ids
            ids = torch.tensor([head + tail], device=lm.device)
            logp = torch.log_softmax(lm.model(input_ids=ids).logits[0, :-1].float(), -1)
            lp = logp.gather(-1, ids[0, 1:, None]).squeeze(-1)
            out.append(lp[len(head) - 1 :].sum().cpu())
    return torch.stack(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default=None, help="cpu / cuda (default: CUDA when present)")
    args = parser.parse_args()
    lm = load_lm(args.model, args.device, "float32")  # both scorers return CPU tensors: synced
    text = " ".join(pydoc_topics().values())
    words = text.split()
    prompts, conts = [], []
    for i in range(args.n):  # prompts of 8..39 words, continuations of 4..11 words
        start = 997 * i
        prompts.append(" ".join(words[start : start + 8 + i % 32]))
        conts.append(" " + " ".join(words[start + 40 : start + 44 + i % 8]))
    print(
        f"{lm.name}, torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"{args.n} prompt/continuation pairs\n"
    )
    start = time.perf_counter()
    ref = per_text(lm, prompts, conts)
    t_ref = time.perf_counter() - start
    start = time.perf_counter()
    got = continuation_logprobs(lm, prompts, conts, batch_size=args.batch_size)
    t_got = time.perf_counter() - start
    print("| scorer | s | × per-text | max abs diff (nats) |")
    print("|---|---:|---:|---:|")
    print(f"| per-text HF forward (peer) | {t_ref:.2f} | 1.00 | — |")
    print(
        f"| continuation_logprobs, batch {args.batch_size} | {t_got:.2f} | "
        f"{t_ref / t_got:.2f} | {float((got - ref).abs().max()):.1e} |"
    )


if __name__ == "__main__":
    main()
