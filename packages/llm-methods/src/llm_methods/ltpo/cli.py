"""``llm-methods ltpo``: test-time latent thought optimisation on your math problems.

``solve`` runs LTPO (or a baseline) on a GSM8K / MATH-500 / AIME / ASDiv file and writes
``predictions.jsonl`` + ``summary.json``; ``synth`` writes offline graded word problems in GSM8K
jsonl; ``configs`` lists the shipped LTPO configs. No training, so no LightningCLI here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ABOUT = "LTPO test-time latent thought optimisation (arXiv 2510.04182)"
CONFIG_DIR = Path(__file__).parent / "configs"
METHOD_CHOICES = ("ltpo", "cot", "cot_unk", "latentseek")
FIELDS = ("n_thoughts", "sigma", "sigma_decay", "lr", "steps", "top_k", "optimizer")


def load_config(name_or_path: str) -> dict[str, Any]:
    """A shipped config name (``run_ltpo``, ``argparse_defaults``, ``adam``) or a yaml path."""
    from llm_methods.cliutils import load_settings

    return load_settings("ltpo", name_or_path, (*FIELDS, "best_post_update", "embedding_units"))


def _parser() -> argparse.ArgumentParser:
    from llm_methods.cliutils import ArgumentParser

    parser = ArgumentParser(prog="llm-methods ltpo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    solve = sub.add_parser("solve", help="solve problems from a jsonl file")
    solve.add_argument("--model", default="smollm2", help="model spec (default: smollm2)")
    solve.add_argument("--device", default=None)
    solve.add_argument("--data", type=Path, required=True, help="jsonl (or ASDiv .xml) file")
    solve.add_argument("--format", default="gsm8k", help="gsm8k | math500 | aime | asdiv")
    solve.add_argument("--config", default="run_ltpo", help="shipped config name or yaml path")
    solve.add_argument("--method", default="ltpo", choices=METHOD_CHOICES)
    for name in FIELDS:
        kind = (
            str
            if name == "optimizer"
            else (int if name in ("n_thoughts", "steps", "top_k") else float)
        )
        solve.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=kind,
            default=None,
            help="override the config's value",
        )
    solve.add_argument(
        "--keep-candidate",
        action="store_true",
        help="keep the evaluated H+eps of the best step instead of upstream's post-update H",
    )
    solve.add_argument(
        "--embedding-units",
        action="store_true",
        help="read sigma and lr in units of the model's embedding scale",
    )
    solve.add_argument("--limit", type=int, default=None, help="first N problems only")
    solve.add_argument("--max-new-tokens", type=int, default=256)
    solve.add_argument("--batch-size", type=int, default=16)
    solve.add_argument("--out", type=Path, required=True, help="output folder")
    synth = sub.add_parser("synth", help="write offline graded word problems (GSM8K jsonl)")
    synth.add_argument("--out", type=Path, required=True, help="output .jsonl file")
    synth.add_argument("--n", type=int, default=200)
    synth.add_argument("--seed", type=int, default=0)
    sub.add_parser("configs", help="list the shipped LTPO configs")
    return parser


def _solve(ns: argparse.Namespace) -> int:
    from llm_methods.cliutils import quiet_transformers
    from llm_methods.lm import load_lm
    from llm_methods.ltpo.data import is_correct, read_problems
    from llm_methods.ltpo.latentseek import latentseek
    from llm_methods.ltpo.model import (
        LTPOConfig,
        decode_with_thoughts,
        initial_thoughts,
        ltpo_optimize_batch,
        prompt_ids,
        thought_prompt,
    )

    values = load_config(ns.config)
    values.update({k: getattr(ns, k) for k in FIELDS if getattr(ns, k) is not None})
    if ns.keep_candidate:
        values["best_post_update"] = False
    if ns.embedding_units:
        values["embedding_units"] = True
    cfg = LTPOConfig(**values)
    cfg.validate()
    problems = read_problems(ns.data, ns.format, ns.limit)
    quiet_transformers()
    lm = load_lm(ns.model, ns.device)
    dec = {"max_new_tokens": ns.max_new_tokens, "batch_size": ns.batch_size}
    if ns.method == "cot":
        prefixes = [prompt_ids(lm, p.question, reserve=ns.max_new_tokens) for p in problems]
        texts = decode_with_thoughts(lm, prefixes, [None] * len(prefixes), **dec)
    else:
        prompts = [
            thought_prompt(lm, p.question, cfg.n_thoughts, reserve=ns.max_new_tokens)
            for p in problems
        ]
        prefixes, suffix = [t.prefix for t in prompts], prompts[0].suffix
        if ns.method == "latentseek":
            texts, _ = latentseek(
                lm, [p.question for p in problems], prefixes, cfg.n_thoughts, suffix=suffix, **dec
            )
        else:
            if ns.method == "cot_unk":
                thoughts = list(initial_thoughts(lm, len(prefixes), cfg.n_thoughts))
            else:
                thoughts = []
                for b in range(0, len(prefixes), ns.batch_size):
                    chunk = prefixes[b : b + ns.batch_size]
                    hs, _ = ltpo_optimize_batch(
                        lm, chunk, cfg, list(range(b, b + len(chunk))), suffix=suffix
                    )
                    thoughts += hs
            texts = decode_with_thoughts(lm, prefixes, thoughts, suffix=suffix, **dec)
    from llm_methods.ltpo.data import extract_answer

    ns.out.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "question": p.question,
            "gold": p.answer,
            "prediction": extract_answer(t),
            "correct": is_correct(t, p.answer),
            "output": t,
        }
        for p, t in zip(problems, texts, strict=True)
    ]
    (ns.out / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    acc = sum(r["correct"] for r in rows) / len(rows)
    summary = {
        "method": ns.method,
        "model": lm.name,
        "n": len(rows),
        "accuracy": acc,
        "config": values,
    }
    (ns.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"{ns.method}: accuracy {acc:.3f} on {len(rows)} problems -> {ns.out}")
    return 0


def main(argv: Sequence[str]) -> int:
    ns = _parser().parse_args(list(argv))
    if ns.command == "configs":
        for path in sorted(CONFIG_DIR.glob("*.yaml")):
            print(f"{path.stem}: {path.read_text().splitlines()[0].lstrip('# ')}")
        return 0
    if ns.command == "synth":
        from llm_methods.ltpo.data import synth_problems, write_gsm8k

        path = write_gsm8k(synth_problems(ns.n, ns.seed), ns.out)
        print(f"wrote {ns.n} problems to {path}")
        return 0
    return _solve(ns)
