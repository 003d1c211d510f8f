"""Antibody's extra passes per step vs SFT (peer: one plain SFT step on the same batch, same
model, same run): alignment steps of SFT / Vaccine / Booster / Antibody (paper and code λ_t
rules) and the finetuning step (SFT vs Antibody's weighted CE, which adds one no-grad forward of
the refusal view). Times include the optimiser step.

``OMP_NUM_THREADS=1 uv run --no-sync python packages/llm-methods/benchmarks/bench_antibody.py``
(``--hidden 128 --layers 4`` for a larger tiny model).
"""

from __future__ import annotations

import argparse
import time

import torch

from llm_methods.antibody import model as M
from llm_methods.antibody.data import synthetic_world
from llm_methods.antibody.pipeline import encode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    world = synthetic_world(0)
    tok = train_bpe(world.texts(), 640)
    model = tiny_llama(len(tok), args.layers, args.hidden, 4, max_len=96, seed=0)
    gen = torch.Generator().manual_seed(0)
    safe, _ = encode(tok, world.align).sample(gen, args.batch)
    harm, refusal = encode(tok, world.align_harmful).sample(gen, args.batch)
    ft, ft_ref = encode(tok, world.task + world.attack).sample(gen, args.batch)
    ema = M.LambdaEMA(0.99)
    recipes = {
        "sft": lambda p: M.sft_grads(model, p, safe),
        "vaccine": lambda p: M.vaccine_align_grads(model, p, safe, 5.0),
        "booster": lambda p: M.booster_align_grads(model, p, safe, harm, 5.0, 0.1),
        "antibody(paper)": lambda p: M.antibody_align_grads(
            model, p, safe, harm, refusal, M.AntibodyConfig(lambda_rule="paper")
        ),
        "antibody(code)": lambda p: M.antibody_align_grads(
            model, p, safe, harm, refusal, M.AntibodyConfig(lambda_rule="code"), ema
        ),
        "finetune sft": lambda p: M.sft_grads(model, p, ft),
        "finetune antibody": lambda p: M.weighted_finetune_grads(model, p, ft, ft_ref, 1.0),
    }
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"tiny Llama {args.layers}x{args.hidden} ({n_params / 1e3:.0f}k params), batch "
        f"{args.batch}, {args.steps} steps, 1 thread"
    )
    per_step = {}
    for name, fn in recipes.items():
        M.train(model, lambda p, _i, fn=fn: fn(p), 2)  # warm-up
        t = time.perf_counter()
        M.train(model, lambda p, _i, fn=fn: fn(p), args.steps)
        per_step[name] = (time.perf_counter() - t) / args.steps
    for name, s in per_step.items():
        peer = per_step["finetune sft" if name.startswith("finetune") else "sft"]
        print(f"{name:18s} {1000 * s:7.1f} ms/step  x{s / peer:4.2f} vs SFT")


if __name__ == "__main__":
    main()
