"""``llm-methods mbok``: MBOK multi-kernel Boolean compression of a causal LM's linears.

- ``compress``: replace the chosen linear layers of a model spec by MBOK (K Boolean kernels,
  SVID init), OneBit (K = 1) or RTN (``--bits``) layers and save them to one safetensors file;
  prints the real stored bytes and bits per weight (scales counted).
- ``finetune``: LightningCLI ``fit`` of the distillation (KL + 10·MSE from the FP teacher;
  Boolean optimiser on every kernel, AdamW on the scales), e.g. ``--config mbok_k2``; settings as
  ``--model.init_args.*`` / ``--data.init_args.*`` (the pretrained model:
  ``--model.init_args.model``), like the other LightningCLI commands.
- ``eval``: perplexity of a model spec, optionally with a compressed file installed, on a
  ``.txt`` / ``.jsonl`` file (``--text-file``; default: held-out pydoc topics); the result is
  printed and written to ``--out`` (one JSON file, required: no result only on stdout).
- ``configs``: the shipped finetune configs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.device import add_device_option

ABOUT = "MBOK multi-kernel Boolean weights: compress, finetune, eval (arXiv 2505.22811)"
PROG = "llm-methods mbok"


def _parser() -> argparse.ArgumentParser:
    from llm_methods.method_cli import ArgumentParser, out_args, seed_args, show_defaults

    parser = ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    comp = sub.add_parser("compress", help="compress linear layers, save safetensors")
    comp.add_argument("--model", default="smollm2", help="model spec")
    comp.add_argument(
        "--method", default="mbok", choices=("mbok", "onebit", "rtn"), help="compression"
    )
    comp.add_argument("--k", type=int, default=2, help="Boolean kernels for mbok (>= 1)")
    comp.add_argument("--bits", type=int, default=2, help="bits for rtn (1..8)")
    comp.add_argument(
        "--layers",
        nargs="+",
        default=["all"],
        help="in-block linear names (q_proj, mlp.down_proj, ...) or 'all'",
    )
    comp.add_argument("--blocks", default="all", help="decoder blocks: 'all', '3', '20-29', '0,5'")
    out_args(
        comp,
        "output file (.safetensors; one file)",
        required=True,
        kind="file",
    )
    add_device_option(comp)
    seed_args(comp)  # --seed and --quiet (no progress lines over the layers)
    # no abbreviations: ``--text`` (removed in 0.8.0) is refused, not read as ``--text-file``
    ev = sub.add_parser("eval", help="perplexity on a text file", allow_abbrev=False)
    ev.add_argument("--model", default="smollm2", help="model spec")
    ev.add_argument("--compressed", type=Path, default=None, help="a `compress`/`finetune` file")
    ev.add_argument(
        "--text-file",
        type=Path,
        default=None,
        help=".txt or .jsonl (field 'text') to score (--text before 0.8.0); default: held-out "
        "pydoc topics",
    )
    ev.add_argument("--seq-len", type=int, default=128, help="tokens per chunk")
    ev.add_argument("--max-chunks", type=int, default=32, help="chunks scored at most")
    ev.add_argument("--batch-size", type=int, default=4, help="chunks per forward pass")
    out_args(
        ev,
        "output .json file (one file): the perplexity printed, with the model, compressed "
        "layers, text, chunks, device and seed",
        required=True,
        kind="file",
    )
    add_device_option(ev)
    seed_args(ev)
    for command in (comp, ev):  # not the top level: its description keeps its layout
        show_defaults(command)
    sub.add_parser(
        "finetune", help="LightningCLI fit of the distillation (--config NAME|FILE)", add_help=False
    )
    sub.add_parser("configs", help="list the shipped finetune configs")
    return parser


def _start(ns: argparse.Namespace) -> Any:
    """The checked ``--device`` (one line naming it when bad) after seeding ``--seed``."""
    from iclr26_common.seeding import seed_everything
    from llm_methods.lm.loading import resolve_device

    device = resolve_device(ns.device)
    seed_everything(ns.seed)
    return device


def _compress(ns: argparse.Namespace) -> int:
    from iclr26_common.outputs import check_out_file
    from llm_methods.lm import load_lm
    from llm_methods.lm.errors import LMError
    from llm_methods.mbok import distill

    if ns.method == "mbok" and ns.k < 1:
        raise LMError(f"--k: number of Boolean kernels K must be >= 1, got {ns.k}")
    if ns.method == "rtn" and not 1 <= ns.bits <= 8:
        raise LMError(f"--bits must be in 1..8, got {ns.bits}")
    if ns.out.suffix != ".safetensors":
        raise LMError(f"--out {ns.out}: expected a .safetensors file name")
    check_out_file(ns.out, overwrite=ns.overwrite)  # before the model is loaded and compressed
    device = _start(ns)
    lm = load_lm(ns.model, device, dtype="float32")
    names = distill.select_linears(lm.model, ns.layers, ns.blocks)
    layers = distill.compress_model(
        lm.model,
        names,
        ns.method,
        k=ns.k,
        bits=ns.bits,
        progress_as=None if ns.quiet else f"mbok compress ({ns.method}) layers",
    )
    meta = {
        "model": ns.model,
        "method": ns.method,
        "k": ns.k,
        "bits": ns.bits,
        "layers": ns.layers,
        "blocks": ns.blocks,
    }
    size = distill.save_compressed(layers, ns.out, meta)
    s = distill.stored_summary(distill.deployable(layers))
    fp32 = int(s["weights"]) * 4
    print(
        f"{ns.method}: {len(names)} layers, {int(s['weights'])} weights; stored {int(s['bytes'])} B "
        f"({s['bits_per_weight']:.3f} bits/weight, {s['bytes'] / fp32:.4f}x fp32); "
        f"file {size} B -> {ns.out}"
    )
    return 0


def _eval(ns: argparse.Namespace) -> int:
    from iclr26_common.outputs import check_out_file, write_text
    from iclr26_common.progress import progress
    from llm_methods.lm import load_lm
    from llm_methods.lm.errors import LMError
    from llm_methods.mbok import data, distill

    if ns.seq_len < 2 or ns.max_chunks < 1 or ns.batch_size < 1:
        raise LMError("--seq-len must be >= 2, --max-chunks and --batch-size >= 1")
    check_out_file(ns.out, overwrite=ns.overwrite)  # before the text is read and the model loaded
    if ns.compressed is not None:  # missing, or a folder: one line before the model is loaded
        from iclr26_common.textio import input_file

        input_file(ns.compressed, "compressed-model file", error=LMError)
    texts = data.read_texts(ns.text_file) if ns.text_file else data.pydoc_split()[1]
    device = _start(ns)
    lm = load_lm(ns.model, device, dtype="float32")
    detail, layers_info = "", None
    if ns.compressed is not None:
        layers, meta = distill.load_compressed(lm.model, ns.compressed)
        s = distill.stored_summary(layers)
        layers_info = {
            "file": str(ns.compressed),
            "layers": len(layers),
            "method": meta.get("method", "?"),
            "bits_per_weight": float(s["bits_per_weight"]),
        }
        detail = f", {len(layers)} {layers_info['method']} layers at {s['bits_per_weight']:.3f} bits/weight"
    source = str(ns.text_file) if ns.text_file else "pydoc held-out topics"
    chunks = data.token_chunks(lm.tokenizer, texts, ns.seq_len, ns.max_chunks, None, source)
    batches = data.batches_of(chunks, ns.batch_size, lm.device)
    ppl = distill.perplexity_of(
        lm.model, progress(batches, description="mbok eval batches", quiet=ns.quiet)
    )
    result = {
        "model": ns.model,
        "compressed": layers_info,
        "text": source,
        "chunks": len(chunks),
        "seq_len": ns.seq_len,
        "perplexity": ppl,
        "device": str(lm.device),
        "seed": ns.seed,
    }
    write_text(ns.out, json.dumps(result, indent=1) + "\n")
    print(
        f"perplexity {ppl:.3f} on {len(chunks)}x{ns.seq_len} tokens of {source}{detail} -> {ns.out}"
    )
    return 0


def _finetune(argv: list[str]) -> int:
    from llm_methods.mbok.lit_module import BooleanDistillModule, BooleanTextDataModule
    from llm_methods.method_cli import method_cli

    # the compressed layers' file is checked before the model is loaded or trained, whether it is
    # given on the command line or in a --config YAML
    method_cli(
        "mbok",
        BooleanDistillModule,
        BooleanTextDataModule,
        argv,
        subcommand="fit",
        links=[("model.init_args.model", "data.init_args.model", "parse")],
        fit_outputs={"model.init_args.save_to": "file"},
    )
    return 0


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if argv and argv[0] == "finetune":
        return _finetune(argv[1:])
    ns = _parser().parse_args(argv)
    if ns.command == "configs":
        from llm_methods.method_cli import shipped_configs

        for name, path in shipped_configs("mbok").items():
            print(f"{name:12s} {path.read_text().splitlines()[0].lstrip('# ')}")
        return 0
    if ns.command == "compress":
        return _compress(ns)
    return _eval(ns)
