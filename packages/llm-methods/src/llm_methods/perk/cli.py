"""``llm-methods perk``: PERK test-time LoRA memory for long contexts (and the FT-ICR baseline).

``fit`` / ``validate`` / ``test`` are LightningCLI over ``PERKModule`` / ``ICRModule`` and
``BabiLongDataModule`` (``--config tiny`` names a shipped config); ``eval`` answers a
BabiLong-format jsonl with a trained checkpoint and writes ``predictions.jsonl`` +
``summary.json``; ``synth`` writes the offline BabiLong-style generator's jsonl; ``configs``
lists the shipped configs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ABOUT = "PERK test-time LoRA memory for long contexts (arXiv 2507.06415)"
PROG = "llm-methods perk"
TRAINER_SUBCOMMANDS = ("fit", "validate", "test")


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """LightningCLI over the PERK / FT-ICR modules and ``BabiLongDataModule``."""
    import lightning as L

    from llm_methods.method_cli import method_cli
    from llm_methods.perk.data import BabiLongDataModule

    return method_cli("perk", L.LightningModule, BabiLongDataModule, argv)


def _parser() -> argparse.ArgumentParser:
    from iclr26_common.cli_support import finite_float
    from llm_methods.method_cli import ArgumentParser, out_args, seed, show_defaults

    parser = ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in TRAINER_SUBCOMMANDS:
        sub.add_parser(
            name, help=f"LightningCLI `{name}` (PERK or FT-ICR; --config tiny)", add_help=False
        )
    ev = sub.add_parser("eval", help="answer a BabiLong jsonl with a trained checkpoint")
    ev.add_argument(
        "--model",
        type=Path,
        required=True,
        help="checkpoint from `perk fit` (--ckpt before 0.8.0)",
    )
    ev.add_argument("--data", type=Path, required=True, help="BabiLong-format jsonl")
    out_args(ev, "output folder", required=True)
    ev.add_argument("--quiet", action="store_true", help="no progress line")
    ev.add_argument("--limit", type=int, default=None, help="first N records only")
    ev.add_argument(
        "--max-new-tokens", type=int, default=None, help="answer length (default: the checkpoint's)"
    )
    ev.add_argument("--device", default=None, help="cpu / cuda (default: cuda if present)")
    ev.add_argument(
        "--seed",
        type=seed,
        default=0,
        help="seed (torch, NumPy, random) set before each record as SEED + its index; recorded "
        "in summary.json",
    )
    synth = sub.add_parser("synth", help="write generated BabiLong-style records (jsonl)")
    out_args(synth, "output .jsonl file", required=True, overwrite="replace an existing --out")
    synth.add_argument("--n", type=int, default=100, help="records")
    synth.add_argument("--n-segments", type=int, default=8, help="filler segments per context")
    synth.add_argument(
        "--position",
        type=finite_float,
        default=None,
        help="relative position of the facts in [0, 1] (default: random)",
    )
    synth.add_argument("--tasks", nargs="+", default=["qa1", "qa2", "qa3"], help="BabiLong tasks")
    synth.add_argument("--seed", type=seed, default=0, help="the generator's draws")
    sub.add_parser("configs", help="list the shipped configs")
    return show_defaults(parser)


def _eval(ns: argparse.Namespace) -> int:
    import torch

    from iclr26_common.outputs import check_out_folder, write_text
    from iclr26_common.progress import progress
    from iclr26_common.seeding import seed_everything
    from llm_methods.lm.loading import resolve_device
    from llm_methods.method_cli import quiet_transformers
    from llm_methods.perk.data import extract_output, is_correct, read_babilong
    from llm_methods.perk.lit_module import load_checkpoint

    out = check_out_folder(ns.out, overwrite=ns.overwrite)  # before any record is answered
    device = resolve_device(ns.device)
    records = read_babilong(ns.data, ns.limit)
    quiet_transformers()
    module = load_checkpoint(ns.model).to(device)
    if ns.max_new_tokens is not None:
        module.hparams.max_new_tokens = ns.max_new_tokens
    rows = []
    for i, rec in enumerate(progress(records, description="perk eval", quiet=ns.quiet)):
        # a record's answer does not depend on the records answered before it
        seed_everything((ns.seed + i) % 2**32)
        with torch.enable_grad():
            text = module.predict_record(rec)
        rows.append(
            {
                "question": rec.question,
                "gold": rec.answer,
                "task": rec.task,
                "n_segments": len(rec.context),
                "prediction": extract_output(text),
                "correct": is_correct(text, rec.answer),
                "output": text,
            }
        )
    acc = sum(r["correct"] for r in rows) / len(rows)
    summary = {
        "method": module.METHOD,
        "checkpoint": str(ns.model),
        "data": str(ns.data),
        "n": len(rows),
        "accuracy": acc,
        "seed": ns.seed,
    }
    with out:
        write_text(out.path / "predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        write_text(out.path / "summary.json", json.dumps(summary, indent=1))
    print(f"{module.METHOD}: accuracy {acc:.3f} on {len(rows)} records -> {ns.out}")
    return 0


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if argv and argv[0] in TRAINER_SUBCOMMANDS:
        run_lightning_cli(argv)
        return 0
    ns = _parser().parse_args(argv)
    if ns.command == "configs":
        from llm_methods.method_cli import shipped_configs

        for name, path in shipped_configs("perk").items():
            print(f"{name:16s} {path.read_text().splitlines()[0].lstrip('# ')}")
        return 0
    if ns.command == "synth":
        from iclr26_common.outputs import check_out_file
        from llm_methods.perk.data import synth_babilong, write_babilong

        check_out_file(ns.out, overwrite=ns.overwrite)  # a folder, or a file without --overwrite
        recs = synth_babilong(ns.n, ns.n_segments, ns.position, tuple(ns.tasks), ns.seed)
        print(f"wrote {ns.n} records to {write_babilong(recs, ns.out)}")
        return 0
    return _eval(ns)
