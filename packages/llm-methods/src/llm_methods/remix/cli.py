"""``llm-methods remix``: GRPO / ReMix reinforcement finetuning with a verifiable reward.

``fit`` (LightningCLI: ``--config tiny|remix|grpo`` or a yaml path, any ``--model.init_args.*``
(the pretrained model as ``--model.init_args.model``, the RL settings as
``--model.init_args.rl.*``, e.g. ``rl.p_off``) / ``--data.init_args.*`` / ``--trainer.*``
override) trains a policy; ``eval`` scores a model's
greedy answers on a GSM8K jsonl file by exact match and writes them to the ``--out`` folder
(required: ``predictions.jsonl`` and ``summary.json``, the accuracy printed); ``synth`` writes
generated problems in that format; ``configs`` lists the shipped configs.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Sequence
from pathlib import Path

from iclr26_common.device import add_device_option

ABOUT = "ReMix off-policy reinforcement finetuning vs GRPO (arXiv 2507.06892)"
PROG = "llm-methods remix"


def _parser() -> argparse.ArgumentParser:
    from llm_methods.method_cli import ArgumentParser, out_args, seed, seed_args, show_defaults

    parser = ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("fit", help="LightningCLI fit (see `fit --help`)", add_help=False)
    ev = sub.add_parser("eval", help="greedy exact-match accuracy of a model on a jsonl file")
    ev.add_argument("--model", default="task", help="'task' (pretrained here) or a model spec")
    ev.add_argument("--data", type=Path, default=None, help="GSM8K jsonl (default: generated)")
    ev.add_argument("--limit", type=int, default=None, help="first N problems only")
    ev.add_argument("--n", type=int, default=64, help="generated problems when no --data")
    ev.add_argument("--max-new-tokens", type=int, default=16, help="answer length at most")
    ev.add_argument("--batch-size", type=int, default=16, help="problems generated at once")
    out_args(
        ev,
        "output folder: predictions.jsonl (one row per problem) and summary.json (the accuracy "
        "printed)",
        required=True,
    )
    add_device_option(ev)
    seed_args(ev)
    synth = sub.add_parser("synth", help="write generated problems (GSM8K jsonl)")
    out_args(synth, "output .jsonl file", required=True, kind="file")
    synth.add_argument("--n", type=int, default=200, help="problems")
    synth.add_argument("--seed", type=seed, default=0, help="random seed")
    synth.add_argument("--max-value", type=int, default=20, help="largest operand")
    sub.add_parser("configs", help="list the shipped configs")
    return show_defaults(parser)


def _fit(argv: Sequence[str]) -> int:
    from llm_methods.method_cli import method_cli
    from llm_methods.remix.lit_module import ProblemDataModule, ReMixModule

    # the trained policy's folder is checked before the policy is loaded or trained, whether
    # it is given on the command line or in a --config YAML
    with warnings.catch_warnings():
        # Lightning's note that `logger: true` falls back to its CSV logger without
        # tensorboard(X): the shipped configs mean that logger (their comments say so)
        warnings.filterwarnings("ignore", message=r".*`tensorboardX` has been removed")
        method_cli(
            "remix",
            ReMixModule,
            ProblemDataModule,
            argv,
            subcommand="fit",
            fit_outputs={"model.init_args.save_dir": "folder"},
        )
    return 0


def _eval(ns: argparse.Namespace) -> int:
    from iclr26_common.outputs import check_out_folder, write_text
    from iclr26_common.progress import progress
    from iclr26_common.seeding import seed_everything
    from llm_methods.lm.loading import resolve_device
    from llm_methods.lm.threads import one_thread
    from llm_methods.remix.data import (
        exact_match_reward,
        extract_answer,
        make_reward_fn,
        read_problems,
        records_to_problems,
        synth_problems,
    )
    from llm_methods.remix.lit_module import load_policy
    from llm_methods.remix.model import RLConfig
    from llm_methods.remix.runner import RLRunner

    if ns.max_new_tokens < 1:
        raise ValueError("--max-new-tokens must be >= 1")
    if ns.batch_size < 1:
        raise ValueError("--batch-size must be >= 1")
    # before the problems are read; no --resume: the files are written at the end
    folder = check_out_folder(ns.out, overwrite=ns.overwrite, resumable=False)
    problems = (
        read_problems(ns.data, ns.limit)
        if ns.data
        else records_to_problems(synth_problems(ns.n, 99))
    )
    if not problems:
        raise ValueError("no problems to evaluate (--n or --limit is 0)")
    device = resolve_device(ns.device)
    seed_everything(ns.seed)
    with one_thread():
        lm = load_policy(ns.model, device)
        runner = RLRunner(
            lm.model,
            lm.tokenizer,
            RLConfig(algo="grpo", max_new_tokens=ns.max_new_tokens),
            make_reward_fn(["exact_match"]),
            ns.seed,
        )
        prompts = [p.prompt for p in problems]
        batches = [prompts[i : i + ns.batch_size] for i in range(0, len(prompts), ns.batch_size)]
        out = []
        for batch in progress(batches, description="remix eval batches", quiet=ns.quiet):
            out += runner.sample(batch, 1, greedy=True)
    rows = [
        {
            "question": p.question,
            "gold": p.answer,
            "prediction": extract_answer(text),
            "correct": bool(exact_match_reward(text, p.answer)),
            "response": text,
            "length": len(comp),
        }
        for p, (_, comp, text) in zip(problems, out, strict=True)
    ]
    acc = sum(r["correct"] for r in rows) / len(rows)
    length = sum(r["length"] for r in rows) / len(rows)
    summary = {
        "model": ns.model,
        "n": len(rows),
        "accuracy": acc,
        "mean_length": length,
        "device": str(device),
        "seed": ns.seed,
    }
    with folder:
        predictions = "".join(json.dumps(r) + "\n" for r in rows)
        write_text(folder.path / "predictions.jsonl", predictions)
        write_text(folder.path / "summary.json", json.dumps(summary, indent=1))
    print(
        f"accuracy {acc:.3f} on {len(rows)} problems, mean response length {length:.2f} tokens "
        f"-> {ns.out}"
    )
    return 0


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if argv and argv[0] == "fit":
        return _fit(argv[1:])
    ns = _parser().parse_args(argv)
    if ns.command == "configs":
        from llm_methods.method_cli import shipped_configs

        for name, path in shipped_configs("remix").items():
            print(f"{name:8s} {path.read_text().splitlines()[0].lstrip('# ')}")
        return 0
    if ns.command == "synth":
        from iclr26_common.outputs import check_out_file
        from llm_methods.remix.data import synth_problems, write_gsm8k

        check_out_file(ns.out, overwrite=ns.overwrite)
        path = write_gsm8k(synth_problems(ns.n, ns.seed, ns.max_value), ns.out)
        print(f"wrote {ns.n} problems to {path}")
        return 0
    return _eval(ns)
