"""``llm-methods ltpo``: test-time latent thought optimisation on your math problems.

``solve`` runs LTPO (or a baseline) on a GSM8K / MATH-500 / AIME / ASDiv file and writes
``predictions.jsonl`` + ``summary.json``; its settings are two dataclass groups parsed by
jsonargparse, ``--ltpo.*`` (``optimize.LTPOConfig``) and ``--decode.*`` (:class:`DecodeSettings`),
given on the command line or nested the same way in a ``--config`` YAML (a shipped name or a
path); ``synth`` writes offline graded word problems in GSM8K jsonl; ``judge`` turns the four
methods' ``solve`` outputs on one problem set into the experiment's two claims (effects with 95 %
intervals and verdicts, ``experiment.judge``); ``configs`` lists the shipped LTPO configs. No
training, so no LightningCLI here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from iclr26_common.device import add_device_option
from iclr26_common.progress import add_quiet_option

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

    from iclr26_common.outputs import add_output_options
    from llm_methods.ltpo.optimize import LTPOConfig

    parser = ArgumentParser(
        prog=f"{PROG} solve",
        description="Solve the problems of a jsonl file with LTPO (or a baseline); writes "
        "predictions.jsonl and summary.json into --out.",
        exit_on_error=False,
    )
    parser.add_argument("--config", action=ActionConfigFile, help="shipped config or yaml path")
    parser.add_argument("--model", type=str, default="smollm2", help="model spec")
    add_device_option(parser, type=str | None)
    parser.add_argument("--data", type=str, required=True, help="jsonl (or ASDiv .xml) file")
    parser.add_argument("--format", type=str, default="gsm8k", help="gsm8k|math500|aime|asdiv")
    parser.add_argument("--method", type=Literal[METHOD_CHOICES], default="ltpo")  # type: ignore[valid-type]
    parser.add_argument("--limit", type=int | None, default=None, help="first N problems only")
    add_output_options(
        parser, resumable=True, type=str, help="output folder (predictions.jsonl, summary.json)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of LTPO's thought noise (problem i draws from seed * 1000003 + i)",
    )
    add_quiet_option(parser)
    parser.add_argument("--ltpo", type=LTPOConfig, default=LTPOConfig())
    parser.add_argument("--decode", type=DecodeSettings, default=DecodeSettings())
    return parser


def _parser() -> argparse.ArgumentParser:
    from iclr26_common.cli_support import ArgumentParser
    from llm_methods.method_cli import out_args, seed, show_defaults

    parser = ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("solve", help="solve problems from a jsonl file (--help: its options)")
    synth = sub.add_parser("synth", help="write offline graded word problems (GSM8K jsonl)")
    out_args(synth, "output .jsonl file", required=True, kind="file")
    synth.add_argument("--n", type=int, default=200, help="problems")
    synth.add_argument("--seed", type=seed, default=0, help="seed of the generator")
    judge = sub.add_parser(
        "judge",
        help="the claims from the four methods' solve outputs on one problem set",
        description="Judge the experiment's two claims (experiment.judge) from the four "
        "methods' `ltpo solve` outputs on the same problems (each row's id and difficulty, "
        "1-4 steps, as `ltpo synth` writes them): effects with 95 % intervals, verdicts.",
    )
    for method in METHOD_CHOICES:
        judge.add_argument(
            f"--{method.replace('_', '-')}",
            dest=method,
            required=True,
            metavar="RUN",
            help=f"the `ltpo solve --method {method}` --out folder (or its predictions.jsonl)",
        )
    out_args(judge, "claims .json file (default: print only)", kind="file")
    sub.add_parser("configs", help="list the shipped LTPO configs")
    return show_defaults(parser)


def judge_runs(ns: argparse.Namespace) -> int:
    """``llm-methods ltpo judge``: the claims of the four runs, printed one line each (and with
    the numbers behind them into ``--out``)."""
    from iclr26_common.outputs import check_out_file, write_text
    from iclr26_common.registry import derive_verdict
    from iclr26_common.report import effect_text, verdict_text
    from llm_methods.ltpo.experiment import judge_predictions

    if ns.out is not None:
        check_out_file(ns.out, overwrite=ns.overwrite)
    claims, metrics = judge_predictions({m: getattr(ns, m) for m in METHOD_CHOICES})
    dicts = [c.to_dict() for c in claims]
    verdict = derive_verdict(claims)
    acc = ", ".join(f"{m} {a['all']:.3f}" for m, a in metrics["accuracy"].items())
    print(f"{metrics['n_problems']} problems, {metrics['model']}: accuracy {acc}")
    for label, claim in zip("ab", dicts, strict=True):
        print(f"({label}) {verdict_text(claim)}: {effect_text(claim)}")
    print(f"verdict: {verdict}")
    if ns.out is not None:
        data = {"verdict": verdict, "claims": dicts, "metrics": metrics}
        path = write_text(ns.out, json.dumps(data, indent=1) + "\n")
        print(f"-> {path}")
    return 0


#: ``ltpo solve``'s record of its settings in ``--out``: ``--resume`` continues only a run of
#: the same settings.
SETTINGS_FILE = "settings.json"


def _solve_settings(ns: Any) -> dict[str, Any]:
    """What the predictions of ``ltpo solve`` depend on (compared by ``--resume``)."""
    return {
        "method": ns.method,
        "model": ns.model,
        "data": str(Path(ns.data).resolve()),
        "format": ns.format,
        "limit": ns.limit,
        "seed": ns.seed,
        # one key per option, spelled as typed (``--ltpo.steps``): a refused --resume names it
        **{f"ltpo.{k}": v for k, v in asdict(ns.ltpo).items()},
        **{f"decode.{k}": v for k, v in asdict(ns.decode).items()},
    }


def _resumed_rows(out: Any, settings: dict[str, Any], n_problems: int, batch: int) -> list[dict]:
    """The predictions an interrupted run with the same ``settings`` left in ``out`` (whole
    batches only); a different setting is one line naming it
    (:func:`iclr26_common.outputs.check_resume_settings`)."""
    from iclr26_common.outputs import check_resume_settings

    check_resume_settings(out.path / SETTINGS_FILE, settings, "ltpo solve")
    rows = []
    predictions = out.path / "predictions.jsonl"
    if predictions.is_file():
        for line in predictions.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    done = min(len(rows), n_problems)
    return rows[: done - done % batch if done < n_problems else done]


def solve(argv: Sequence[str]) -> int:
    """``llm-methods ltpo solve ARGS``: parse, run the method batch by batch (each finished
    batch's predictions written into ``--out``, marked partial until ``summary.json``; ``--resume``
    continues an interrupted run of the same settings), print."""
    from iclr26_common.cli_support import UsageError
    from iclr26_common.outputs import check_output_options, record_settings, write_text
    from iclr26_common.progress import progress
    from iclr26_common.seeding import seed_everything
    from llm_methods.lm import load_lm
    from llm_methods.ltpo.data import answer_with_source, grade, read_problems
    from llm_methods.ltpo.latentseek import latentseek
    from llm_methods.ltpo.optimize import (
        decode_with_thoughts,
        initial_thoughts,
        ltpo_optimize_batch,
        prompt_ids,
        thought_prompt,
    )
    from llm_methods.method_cli import parse_settings

    ns = parse_settings(solve_parser(), argv, "llm_methods.ltpo")
    if not 0 <= ns.seed < 2**32:
        raise UsageError(f"--seed must be in [0, 2**32), got {ns.seed}")
    if ns.limit is not None and ns.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {ns.limit}")
    # before any problem is solved
    out = check_output_options(ns)
    cfg, dec = ns.ltpo, ns.decode
    new, batch = dec.max_new_tokens, dec.batch_size
    problems = read_problems(ns.data, ns.format, ns.limit)
    settings = _solve_settings(ns)
    rows = _resumed_rows(out, settings, len(problems), batch) if out.resumed else []
    seed_everything(ns.seed)
    lm = load_lm(ns.model, ns.device)

    def answers(first: int, chunk: list[Any]) -> list[str]:
        """The method's outputs for the problems ``chunk`` (numbered from ``first``)."""
        if ns.method == "cot":
            prefixes = [prompt_ids(lm, p.question, reserve=new) for p in chunk]
            return decode_with_thoughts(
                lm, prefixes, [None] * len(prefixes), max_new_tokens=new, batch_size=batch
            )
        prompts = [thought_prompt(lm, p.question, cfg.n_thoughts, reserve=new) for p in chunk]
        prefixes, suffix = [t.prefix for t in prompts], prompts[0].suffix
        if ns.method == "latentseek":
            texts, _ = latentseek(
                lm,
                [p.question for p in chunk],
                prefixes,
                cfg.n_thoughts,
                suffix=suffix,
                max_new_tokens=new,
                batch_size=batch,
            )
            return texts
        if ns.method == "cot_unk":
            thoughts = list(initial_thoughts(lm, len(prefixes), cfg.n_thoughts))
        else:  # problem i's noise: seeded i (upstream's), shifted by --seed
            seeds = [ns.seed * 1_000_003 + i for i in range(first, first + len(chunk))]
            thoughts, _ = ltpo_optimize_batch(lm, prefixes, cfg, seeds, suffix=suffix)
        return decode_with_thoughts(
            lm, prefixes, thoughts, max_new_tokens=new, batch_size=batch, suffix=suffix
        )

    with out:  # marked partial until summary.json is written
        record_settings(out.path / SETTINGS_FILE, settings)
        starts = range(len(rows), len(problems), batch)
        for b in progress(starts, description="ltpo batches", quiet=ns.quiet):
            chunk = problems[b : b + batch]
            for p, t in zip(chunk, answers(b, chunk), strict=True):
                prediction, source = answer_with_source(t, ns.format)
                verdict = grade(t, p.answer, ns.format)
                rows.append(
                    {
                        "id": p.id,  # the input's id, else "line N" (ltpo judge pairs by it)
                        "difficulty": p.difficulty,  # the input's, 0 when it has none
                        "question": p.question,
                        "gold": p.answer,
                        "prediction": prediction,
                        "answer_source": source,  # "boxed" (asked for) or a fallback
                        "correct": verdict == "correct",  # a solve: the boxed answer only
                        "fallback_match": verdict == "fallback",  # not a solve
                        "output": t,
                    }
                )
            write_text(out.path / "predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        acc = sum(r["correct"] for r in rows) / len(rows)
        fallback = sum(bool(r.get("fallback_match")) for r in rows)
        summary = {
            "method": ns.method,
            "model": lm.name,
            "n": len(rows),
            "accuracy": acc,  # solves: the \boxed{} answer the prompt asks for
            "fallback_matches": fallback,  # no boxed answer, a fallback equal to the gold
            # lenient: + our fallbacks (#### N, answer phrase, last number), not upstream's cascade
            "accuracy_with_fallbacks": acc + fallback / len(rows),
            "seed": ns.seed,
            "config": asdict(cfg),
            "decode": asdict(dec),
        }
        write_text(out.path / "summary.json", json.dumps(summary, indent=1))
    print(
        f"{ns.method}: accuracy {acc:.3f} on {len(rows)} problems (\\boxed answers; "
        f"{fallback} more match only by a fallback, not counted) -> {out.path}"
    )
    return 0


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] == "solve":
        return solve(argv[1:])
    ns = _parser().parse_args(list(argv))
    if ns.command == "judge":
        return judge_runs(ns)
    if ns.command == "configs":
        for path in sorted(CONFIG_DIR.glob("*.yaml")):
            print(f"{path.stem}: {path.read_text().splitlines()[0].lstrip('# ')}")
        return 0
    from iclr26_common.outputs import check_out_file
    from llm_methods.ltpo.data import synth_problems, write_gsm8k

    check_out_file(ns.out, overwrite=ns.overwrite)
    path = write_gsm8k(synth_problems(ns.n, ns.seed), ns.out)
    print(f"wrote {ns.n} problems to {path}")
    return 0
