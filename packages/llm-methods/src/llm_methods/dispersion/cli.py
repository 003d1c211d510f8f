"""``llm-methods dispersion``: representation dispersion (arXiv 2506.24106).

``fit`` / ``validate`` / ``test`` are LightningCLI over the push-away LightningModules and
``TextChunkDataModule`` (``--config tiny|pushaway|crossdomain`` or a YAML path); ``measure``
writes per-chunk perplexity and per-layer dispersion of any model on your text (the work is
:func:`llm_methods.dispersion.measure_cli.measure`); ``configs`` lists the shipped configs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["ABOUT", "main", "run_lightning_cli"]

ABOUT = "representation dispersion (arXiv 2506.24106)"
PROG = "llm-methods dispersion"
TRAINER_SUBCOMMANDS = ("fit", "validate", "test")


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """LightningCLI over dispersion's LightningModules and ``TextChunkDataModule``."""
    import lightning as L

    from llm_methods.dispersion.data import TextChunkDataModule
    from llm_methods.method_cli import method_cli

    return method_cli(
        "dispersion",
        L.LightningModule,
        TextChunkDataModule,
        argv,
        links=[("data.vocab_size", "model.init_args.vocab_size", "instantiate")],
    )


def measure_main(argv: Sequence[str]) -> int:
    """``dispersion measure``: parse, check sizes (exit 2 naming the flag), run, print summary."""
    from llm_methods.method_cli import (
        ArgumentParser,
        model_args,
        out_args,
        seed_args,
        show_defaults,
    )

    parser = ArgumentParser(
        prog=f"{PROG} measure",
        description="Per-chunk perplexity and per-layer dispersion of a model on your text; "
        "writes chunks.csv, layers.csv, summary.json and dispersion_vs_ppl.png into --out.",
    )
    model_args(parser)
    parser.add_argument(
        "--input",
        nargs="*",
        default=[],
        help=".txt/.jsonl files or folders (default: pydoc topics)",
    )
    out_args(parser, "output folder", required=True)
    parser.add_argument("--chunk-len", type=int, default=64, help="tokens per chunk")
    parser.add_argument("--max-chunks", type=int, default=200, help="chunks measured (a sample)")
    parser.add_argument("--bin-size", type=int, default=10, help="chunks per perplexity bin")
    parser.add_argument("--batch-size", type=int, default=8, help="chunks per forward")
    seed_args(parser)
    ns = show_defaults(parser).parse_args(list(argv))
    for flag in ("chunk_len", "max_chunks", "bin_size", "batch_size"):
        if getattr(ns, flag) < (2 if flag == "chunk_len" else 1):
            parser.error(f"--{flag.replace('_', '-')} is too small")
    from iclr26_common.outputs import check_out_folder
    from llm_methods.dispersion.measure_cli import measure

    folder = check_out_folder(ns.out, overwrite=ns.overwrite)  # before the model is loaded
    from iclr26_common.seeding import seed_everything

    seed_everything(ns.seed)
    with folder:
        summary = measure(ns)
    print(" ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, list)))
    return 0


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if argv and argv[0] in TRAINER_SUBCOMMANDS:
        run_lightning_cli(argv)
        return 0
    if argv and argv[0] == "measure":
        return measure_main(argv[1:])
    from llm_methods.method_cli import ArgumentParser, shipped_configs

    if argv and argv[0] == "configs":
        for name, path in shipped_configs("dispersion").items():
            print(f"{name:14s} {path}")
        return 0
    parser = ArgumentParser(prog=PROG, description=ABOUT)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in TRAINER_SUBCOMMANDS:
        sub.add_parser(name, help=f"LightningCLI `{name}` of push-away training", add_help=False)
    sub.add_parser("measure", help="per-chunk perplexity + dispersion of a model on text")
    sub.add_parser("configs", help="list shipped configs (tiny, pushaway, crossdomain)")
    if not argv:
        parser.print_help()
        raise SystemExit(2)
    parser.parse_args(argv)
    parser.error(f"unknown command {argv[0]!r}")
