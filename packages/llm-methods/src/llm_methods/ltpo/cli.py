"""``llm-methods ltpo``: test-time latent thought optimisation on your math problems.

``solve`` runs LTPO (or a baseline) on a GSM8K / MATH-500 / AIME / ASDiv file and writes
``predictions.jsonl`` + ``summary.json``; its settings are two dataclass groups parsed by
jsonargparse, ``--ltpo.*`` (``optimize.LTPOConfig``) and ``--decode.*`` (:class:`DecodeSettings`),
given on the command line or nested the same way in a ``--config`` YAML (a shipped name or a
path); ``synth`` writes offline graded word problems in GSM8K jsonl; ``configs`` lists the
shipped LTPO configs. No training, so no LightningCLI here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

ABOUT = "LTPO test-time latent thought optimisation (arXiv 2510.04182)"
PROG = "llm-methods ltpo"
CONFIG_DIR = Path(__file__).parent / "configs"
METHOD_CHOICES = ("ltpo", "cot", "cot_unk", "latentseek")


@dataclass
class DecodeSettings:
    """Greedy decoding of the answers (the ``decode:`` group of a config)."""

    max_new_tokens: int = 256  # new tokens per answer
    batch_size: int = 16  # questions per batch (one shared prefix KV cache)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"decode.max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.batch_size < 1:
            raise ValueError(f"decode.batch_size must be >= 1, got {self.batch_size}")


def solve_parser() -> Any:
    """``llm-methods ltpo solve``'s jsonargparse parser: plain options, ``--config`` (a shipped
    name or a YAML path) and the groups ``--ltpo.*`` (:class:`~llm_methods.ltpo.optimize.
    LTPOConfig`) and ``--decode.*`` (:class:`DecodeSettings`); a YAML nests them the same way."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    from llm_methods.ltpo.optimize import LTPOConfig

    parser = ArgumentParser(
        prog=f"{PROG} solve",
        description="Solve the problems of a jsonl file with LTPO (or a baseline); writes "
        "predictions.jsonl and summary.json into --out.",
        exit_on_error=False,
    )
    parser.add_argument("--config", action=ActionConfigFile, help="shipped config or yaml path")
    parser.add_argument("--model", type=str, default="smollm2", help="model spec")
    parser.add_argument("--device", type=str | None, default=None, help="cpu / cuda")
    parser.add_argument("--data", type=str, required=True, help="jsonl (or ASDiv .xml) file")
    parser.add_argument("--format", type=str, default="gsm8k", help="gsm8k|math500|aime|asdiv")
    parser.add_argument("--method", type=Literal[METHOD_CHOICES], default="ltpo")  # type: ignore[valid-type]
    parser.add_argument("--limit", type=int | None, default=None, help="first N problems only")
    parser.add_argument("--out", type=str, required=True, help="output folder")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the earlier results in --out"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument("--ltpo", type=LTPOConfig, default=LTPOConfig())
    parser.add_argument("--decode", type=DecodeSettings, default=DecodeSettings())
    return parser


def _parser() -> argparse.ArgumentParser:
    from iclr26_common.cli_support import ArgumentParser

    parser = ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("solve", help="solve problems from a jsonl file (--help: its options)")
    synth = sub.add_parser("synth", help="write offline graded word problems (GSM8K jsonl)")
    synth.add_argument("--out", type=Path, required=True, help="output .jsonl file")
    synth.add_argument("--n", type=int, default=200)
    synth.add_argument("--seed", type=int, default=0)
    sub.add_parser("configs", help="list the shipped LTPO configs")
    return parser


def solve(argv: Sequence[str]) -> int:
    """``llm-methods ltpo solve ARGS``: parse, run the method, write the two files, print."""
    from iclr26_common.outputs import check_out_folder, write_text
    from iclr26_common.progress import progress
    from llm_methods.lm import load_lm
    from llm_methods.ltpo.data import extract_answer, is_correct, read_problems
    from llm_methods.ltpo.latentseek import latentseek
    from llm_methods.ltpo.optimize import (
        decode_with_thoughts,
        initial_thoughts,
        ltpo_optimize_batch,
        prompt_ids,
        thought_prompt,
    )
    from llm_methods.method_cli import parse_settings, quiet_transformers

    ns = parse_settings(solve_parser(), argv, "llm_methods.ltpo")
    out = check_out_folder(ns.out, overwrite=ns.overwrite)  # before any problem is solved
    cfg, dec = ns.ltpo, ns.decode
    new, batch = dec.max_new_tokens, dec.batch_size
    problems = read_problems(ns.data, ns.format, ns.limit)
    quiet_transformers()
    lm = load_lm(ns.model, ns.device)
    if ns.method == "cot":
        prefixes = [prompt_ids(lm, p.question, reserve=new) for p in problems]
        texts = decode_with_thoughts(
            lm, prefixes, [None] * len(prefixes), max_new_tokens=new, batch_size=batch
        )
    else:
        prompts = [thought_prompt(lm, p.question, cfg.n_thoughts, reserve=new) for p in problems]
        prefixes, suffix = [t.prefix for t in prompts], prompts[0].suffix
        if ns.method == "latentseek":
            texts, _ = latentseek(
                lm,
                [p.question for p in problems],
                prefixes,
                cfg.n_thoughts,
                suffix=suffix,
                max_new_tokens=new,
                batch_size=batch,
            )
        else:
            if ns.method == "cot_unk":
                thoughts = list(initial_thoughts(lm, len(prefixes), cfg.n_thoughts))
            else:
                thoughts = []
                starts = range(0, len(prefixes), batch)
                for b in progress(starts, description="ltpo batches", quiet=ns.quiet):
                    chunk = prefixes[b : b + batch]
                    hs, _ = ltpo_optimize_batch(
                        lm, chunk, cfg, list(range(b, b + len(chunk))), suffix=suffix
                    )
                    thoughts += hs
            texts = decode_with_thoughts(
                lm, prefixes, thoughts, max_new_tokens=new, batch_size=batch, suffix=suffix
            )
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
    acc = sum(r["correct"] for r in rows) / len(rows)
    summary = {
        "method": ns.method,
        "model": lm.name,
        "n": len(rows),
        "accuracy": acc,
        "config": asdict(cfg),
        "decode": asdict(dec),
    }
    with out:
        write_text(out.path / "predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        write_text(out.path / "summary.json", json.dumps(summary, indent=1))
    print(f"{ns.method}: accuracy {acc:.3f} on {len(rows)} problems -> {out.path}")
    return 0


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] == "solve":
        return solve(argv[1:])
    ns = _parser().parse_args(list(argv))
    if ns.command == "configs":
        for path in sorted(CONFIG_DIR.glob("*.yaml")):
            print(f"{path.stem}: {path.read_text().splitlines()[0].lstrip('# ')}")
        return 0
    from llm_methods.ltpo.data import synth_problems, write_gsm8k

    path = write_gsm8k(synth_problems(ns.n, ns.seed), ns.out)
    print(f"wrote {ns.n} problems to {path}")
    return 0
