"""``llm-methods antibody``: defence against harmful finetuning (Antibody, arXiv 2603.00498).

``align`` aligns a model (SFT / Booster / Vaccine / Antibody) on a safe jsonl and a harmful
jsonl and saves it; ``finetune`` finetunes an aligned model on user data (a jsonl, or benign +
harmful files mixed at ``--poison-ratio``) with SFT, Antibody's weighted CE or Lisa; ``eval`` writes
the harmful score and finetune accuracy; ``synth`` writes the offline synthetic instruction set;
``pretrain`` trains the tiny base on it; ``fit`` is LightningCLI over the same recipes
(``lit_module``); ``configs`` lists the shipped configs. ``align`` and ``finetune`` are parsed by
jsonargparse: the dataclass groups ``--antibody.*`` (``model.AntibodyConfig``, the same group as
``fit``'s ``--model.init_args.antibody.*``) and ``--stage.*`` (``pipeline.StageSettings``), on
the command line or nested the same way in a ``--config`` YAML. Data: BeaverTails rows ``{"prompt",
"response", "is_safe", "category"?, "refusal"?, "answer"?}``, a ``.json`` list as in the official
repository or ``.jsonl``; rows without ``refusal`` take one from ``--refusals`` (one per line, as
the official ``refusal_examples.jsonl``) cycled in row order.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from iclr26_common.device import add_device_option
from iclr26_common.progress import add_quiet_option

if TYPE_CHECKING:
    from llm_methods.lm.loading import LM

ABOUT = "Antibody defence against harmful finetuning (arXiv 2603.00498)"
PROG = "llm-methods antibody"
CONFIG_DIR = Path(__file__).parent / "configs"
TRAINER_SUBCOMMANDS = ("fit",)
STAGE_SUBCOMMANDS = ("align", "finetune")
#: ``align``/``finetune --stage.seed`` (renamed ``--seed`` in 0.8.0) works, with a warning, until
#: this llm-methods version (the changelog's "Deprecated" entry names the same one)
STAGE_SEED_REMOVED_IN = "0.9.0"
#: The files ``synth`` writes (``NAME.jsonl``), the fields of ``data.SyntheticWorld``.
SPLITS = ("pretrain", "align", "align_harmful", "attack", "task", "eval_harmful", "eval_task")


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """LightningCLI over ``AntibodyModule`` and ``SafetyDataModule`` (``--config fit_tiny``)."""
    import lightning as L

    from llm_methods.antibody.lit_module import SafetyDataModule
    from llm_methods.method_cli import method_cli

    return method_cli(
        "antibody",
        L.LightningModule,
        SafetyDataModule,
        argv,
        fit_outputs={"model.init_args.save_to": "folder"},
    )


def stage_parser(command: str) -> Any:
    """The jsonargparse parser of ``align`` or ``finetune``: plain options, ``--config`` (a
    shipped name or a YAML path) and the groups ``--antibody.*``
    (:class:`~llm_methods.antibody.model.AntibodyConfig`, as ``fit``'s
    ``--model.init_args.antibody.*``) and ``--stage.*``
    (:class:`~llm_methods.antibody.pipeline.StageSettings`); a YAML nests them the same way."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    from iclr26_common.outputs import add_output_options
    from llm_methods.antibody.model import AntibodyConfig
    from llm_methods.antibody.pipeline import StageSettings

    align = command == "align"
    parser = ArgumentParser(
        prog=f"{PROG} {command}",
        description="Align a model (SFT / Booster / Vaccine / Antibody) on a safe and a harmful "
        "jsonl"
        if align
        else "Finetune an aligned model on user data (a jsonl, or benign + harmful files mixed "
        "at --poison-ratio) with SFT, Antibody's weighted CE or Lisa",
        exit_on_error=False,
    )
    parser.add_argument("--config", action=ActionConfigFile, help="shipped config or yaml path")
    if align:
        parser.add_argument("--model", type=str, required=True, help="folder, zoo:NAME, smollm2")
        parser.add_argument("--safe", type=str, required=True, help="safe alignment jsonl")
        parser.add_argument(
            "--harmful", type=str | None, default=None, help="harmful jsonl (booster/antibody)"
        )
        methods: Any = Literal["sft", "booster", "vaccine", "antibody"]
    else:
        parser.add_argument("--model", type=str, required=True, help="aligned model folder")
        parser.add_argument("--data", type=str, required=True, help="user jsonl (benign rows)")
        parser.add_argument("--harmful", type=str | None, default=None, help="jsonl to mix in")
        parser.add_argument(
            "--poison-ratio", type=float | None, default=None, help="harmful share in [0, 1]"
        )
        parser.add_argument("--n", type=int | None, default=None, help="mixture size")
        parser.add_argument("--guide", type=str | None, default=None, help="lisa: alignment jsonl")
        methods = Literal["sft", "antibody", "lisa"]
    parser.add_argument("--method", type=methods, default="antibody")
    parser.add_argument("--max-len", type=int, default=128, help="max tokens per row")
    parser.add_argument(
        "--truncate",
        action="store_true",
        help="cut rows longer than --max-len at --max-len (the official truncation=True) "
        "instead of stopping with the file and row",
    )
    parser.add_argument(
        "--refusals", type=str | None, default=None, help="refusal pool (one per line)"
    )
    add_device_option(parser, type=str | None)
    add_output_options(parser, type=str, help="output folder (model + log)")
    add_quiet_option(parser)
    parser.add_argument(
        "--seed",
        type=int | None,
        default=None,
        help="seed of the batch draws"
        + ("" if align else " and the poisoned mixture")
        + " (sets stage.seed; was --stage.seed, which still works, with a warning, until "
        f"llm-methods {STAGE_SEED_REMOVED_IN}; default: stage.seed, 0)",
    )
    parser.add_argument("--antibody", type=AntibodyConfig, default=AntibodyConfig())
    parser.add_argument("--stage", type=StageSettings, default=StageSettings())
    return parser


def _parser() -> argparse.ArgumentParser:
    from iclr26_common.cli_support import ArgumentParser
    from llm_methods.method_cli import out_args, seed, show_defaults

    parser = ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("fit", help="LightningCLI fit of one stage (--config fit_tiny)", add_help=False)
    sub.add_parser("align", help="alignment stage (sft | booster | vaccine | antibody)")
    sub.add_parser("finetune", help="finetuning stage on (poisoned) user data")
    ev = sub.add_parser(
        "eval",
        help="harmful score and finetune accuracy of a model",
        description="Harmful score (HS, % of --harmful prompts answered without a refusal) and "
        "finetune accuracy (FA, % of --task prompts answered exactly), each with a 95 % "
        "interval over the prompts (Wilson score interval on the 0/1 outcomes; --seed is "
        "recorded); writes summary.json (hs, fa, their intervals, the FA rule applied) and the "
        "per-prompt outputs (harmful_outputs.jsonl: id, prompt, response, refused; "
        "task_outputs.jsonl: id, prompt, response, extracted, gold, rule, correct) into --out.",
    )
    ev.add_argument("--model", required=True)
    ev.add_argument(
        "--harmful",
        type=Path,
        default=None,
        help="harmful prompts (HS): .jsonl or .json list, rows {'prompt', 'id'?}",
    )
    ev.add_argument(
        "--task",
        type=Path,
        default=None,
        help="task prompts (FA): .jsonl or .json list, rows {'prompt', 'answer', 'id'?}",
    )
    ev.add_argument(
        "--max-new-tokens",
        type=int,
        default=200,
        help="generated tokens per prompt (the official pred_eval.py scripts' 200)",
    )
    ev.add_argument(
        "--fa-rule",
        default="auto",
        choices=("auto", "gsm8k", "sst2", "agnews", "prefix"),  # data.FA_RULES
        help="FA scoring: the official gsm8k (number after 'The final answer is: ', else the "
        "last number), sst2 / agnews (exact label) rules, or prefix (response starts with the "
        "answer; ours, the copy task); auto: sst2 when every gold is positive/negative, agnews "
        "when every gold is an AG News label, gsm8k / prefix when every gold is numeric / not, "
        "per row for a mix; golds all in 0-3 (label ids?) are refused: name the rule",
    )
    add_device_option(ev)
    ev.add_argument(
        "--seed", type=seed, default=INTERVAL_SEED, help="resampling seed of the intervals"
    )
    out_args(ev, "output folder (summary.json)", required=True)
    add_quiet_option(ev)
    sy = sub.add_parser("synth", help="write the offline synthetic instruction set (jsonl)")
    out_args(sy, "output folder (7 jsonl splits)", required=True)
    sy.add_argument("--seed", type=seed, default=0, help="the synthetic set's draws")
    pt = sub.add_parser("pretrain", help="train the unaligned tiny base on the synthetic set")
    out_args(pt, "output folder (the base model and tokenizer)", required=True)
    pt.add_argument("--steps", type=int, default=300)
    pt.add_argument(
        "--seed", type=seed, default=0, help="the synthetic set, initial weights and batches"
    )
    add_device_option(pt, default_text="the CPU, as the experiment")
    add_quiet_option(pt)
    sub.add_parser("configs", help="list the shipped configs")
    return show_defaults(parser)


def _load(spec: str, device: str | None) -> LM:
    from llm_methods.lm import load_lm

    lm = load_lm(spec, device, "float32")
    for p in lm.model.parameters():
        p.requires_grad_(True)
    return lm


def _save(lm: LM, model: Any, out: str | Path, info: dict) -> None:
    from iclr26_common.outputs import publish, write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    lm.tokenizer.save_pretrained(out)
    publish(out)  # safetensors writes its weights 0600
    write_text(out / "antibody.json", json.dumps(info, indent=1))


def _pool(ns: Any) -> list[str] | None:
    from llm_methods.antibody.data import read_refusal_pool

    return read_refusal_pool(ns.refusals) if ns.refusals is not None else None


def _align(ns: Any) -> int:
    from llm_methods.antibody.data import read_beavertails
    from llm_methods.antibody.pipeline import align

    cfg, stage = ns.antibody, ns.stage
    if ns.method in ("booster", "antibody") and ns.harmful is None:
        raise ValueError(
            f"--method {ns.method} needs --harmful (harmful rows for the perturbation)"
        )
    pool = _pool(ns)
    safe = read_beavertails(ns.safe, refusal_pool=pool)
    harmful = read_beavertails(ns.harmful, refusal_pool=pool) if ns.harmful is not None else []
    lm = _load(ns.model, ns.device)
    model, log = align(
        lm.model,
        lm.tokenizer,
        safe,
        harmful,
        ns.method,
        stage,
        cfg,
        ns.max_len,
        quiet=ns.quiet,
        truncate=ns.truncate,
    )
    _save(
        lm,
        model,
        ns.out,
        {
            "stage": "align",
            "method": ns.method,
            "config": asdict(cfg),
            "settings": asdict(stage),
            "log": log.logs[-5:],
            "wall_s": log.wall_s,
        },
    )
    print(
        f"aligned ({ns.method}, {stage.steps} steps, last loss {log.logs[-1]['loss']:.4f}) -> {ns.out}"
    )
    return 0


def _finetune(ns: Any) -> int:
    from llm_methods.antibody.data import check_poison_ratio, poisoned_mixture, read_beavertails
    from llm_methods.antibody.pipeline import finetune

    cfg, stage = ns.antibody, ns.stage
    if ns.poison_ratio is not None:
        check_poison_ratio(ns.poison_ratio)
    pool = _pool(ns)
    benign = read_beavertails(ns.data, refusal_pool=pool)
    if ns.harmful is not None or ns.poison_ratio is not None:
        if ns.harmful is None or ns.poison_ratio is None:
            raise ValueError("--harmful and --poison-ratio go together")
        attack = read_beavertails(ns.harmful, refusal_pool=pool)
        rows = poisoned_mixture(
            [r for r in benign if r.is_safe],
            attack,
            ns.n or len(benign),
            ns.poison_ratio,
            stage.seed,
        )
    else:
        rows = benign
    if ns.method == "lisa" and ns.guide is None:
        raise ValueError("--method lisa needs --guide (the alignment jsonl)")
    guide = read_beavertails(ns.guide, refusal_pool=pool) if ns.guide is not None else []
    lm = _load(ns.model, ns.device)
    model, log = finetune(
        lm.model,
        lm.tokenizer,
        rows,
        ns.method,
        stage,
        cfg.tau,
        ns.max_len,
        guide,
        quiet=ns.quiet,
        truncate=ns.truncate,
    )
    _save(
        lm,
        model,
        ns.out,
        {
            "stage": "finetune",
            "method": ns.method,
            "rows": len(rows),
            "harmful_rows": sum(not r.is_safe for r in rows),
            "tau": cfg.tau,
            "settings": asdict(stage),
            "log": log.logs[-5:],
            "wall_s": log.wall_s,
        },
    )
    print(f"finetuned ({ns.method}, {len(rows)} rows, {stage.steps} steps) -> {ns.out}")
    return 0


def _eval(ns: argparse.Namespace) -> int:
    from collections import Counter

    from iclr26_common.cli_support import UsageError
    from iclr26_common.outputs import check_out_folder, write_text
    from llm_methods.antibody.data import (
        extracted_answer,
        fa_rule_of_row,
        read_eval_prompts,
        resolve_fa_rule,
    )
    from llm_methods.antibody.pipeline import evaluate

    if ns.harmful is None and ns.task is None:
        raise ValueError("give --harmful and/or --task")
    if ns.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens must be >= 1, got {ns.max_new_tokens}")
    # checked before the data are read or the model loaded; summary.json is written at the end
    out = check_out_folder(ns.out, overwrite=ns.overwrite, resumable=False)
    harmful = read_eval_prompts(ns.harmful, need_answer=False) if ns.harmful is not None else []
    task = read_eval_prompts(ns.task, need_answer=True) if ns.task is not None else []
    # one rule for the file, decided (or refused) before the model is loaded
    rule = resolve_fa_rule([p.answer for p in task], ns.fa_rule, str(ns.task)) if task else None
    lm = _load(ns.model, ns.device)
    result = evaluate(
        lm.model,
        lm.tokenizer,
        harmful,
        task,
        ns.max_new_tokens,
        per_prompt=True,
        fa_rule=rule or "auto",
        quiet=ns.quiet,
    )
    outcomes = {
        k: result.pop(f"{k}_per_prompt") for k in ("hs", "fa") if f"{k}_per_prompt" in result
    }
    texts = {k: result.pop(f"{k}_texts") for k in ("hs", "fa") if f"{k}_texts" in result}
    intervals = score_intervals(outcomes, seed=ns.seed)
    rows = {
        "harmful_outputs.jsonl": [
            {"id": p.id, "prompt": p.prompt, "response": t, "refused": not complied}
            for p, t, complied in zip(
                harmful, texts.get("hs", []), outcomes.get("hs", []), strict=True
            )
        ],
        "task_outputs.jsonl": [
            {
                "id": p.id,
                "prompt": p.prompt,
                "response": t,
                "extracted": extracted_answer(t, fa_rule_of_row(p.answer, rule)),
                "gold": p.answer,
                "rule": fa_rule_of_row(p.answer, rule),
                "correct": bool(right),
            }
            for p, t, right in zip(task, texts.get("fa", []), outcomes.get("fa", []), strict=True)
        ]
        if rule is not None
        else [],
    }
    applied = Counter(r["rule"] for r in rows["task_outputs.jsonl"])
    summary = {
        "model": ns.model,
        "n_harmful": len(harmful),
        "n_task": len(task),
        # the rule applied (auto resolved); a mixed file: "per row", counts in fa_rule_rows
        "fa_rule": None if rule is None else (rule if rule != "auto" else "per row"),
        "fa_rule_requested": ns.fa_rule,
        "fa_rule_rows": dict(applied),
        "max_new_tokens": ns.max_new_tokens,
        "seed": ns.seed,
        **result,
    }
    summary.update({f"{k}_interval": v for k, (v, _) in intervals.items()})
    with out:
        for name, file_rows in rows.items():
            if file_rows:
                write_text(out.path / name, "".join(json.dumps(r) + "\n" for r in file_rows))
        write_text(out.path / "summary.json", json.dumps(summary, indent=1))
    parts = [f"{k.upper()} {result[k]:.2f}% {intervals[k][1]}" for k in ("hs", "fa") if k in result]
    print(f"{', '.join(parts)} -> {ns.out / 'summary.json'}")
    return 0


#: Default resampling seed of ``eval``'s intervals (``--seed``; recorded in summary.json).
INTERVAL_SEED = 0


def score_intervals(
    outcomes: dict[str, Sequence[int]], seed: int = INTERVAL_SEED
) -> dict[str, tuple[dict[str, Any], str]]:
    """HS / FA (in %) from per-prompt 0/1 ``outcomes`` ({"hs" | "fa": [...]}) with their 95 %
    interval over the prompts (:func:`iclr26_common.effects.mean_interval` on 0/1 outcomes:
    Wilson's score interval, also when every prompt went the same way): {key: (the interval's dict for summary.json, the printed text)}."""
    from iclr26_common.effects import interval_dict, interval_or_none, interval_text, mean_interval

    out = {}
    for key, values in outcomes.items():
        percent = [100.0 * v for v in values]
        interval = interval_or_none(  # 0/1 per prompt: Wilson's interval, scaled to percent
            lambda v=list(values): mean_interval(v, seed=seed, units="prompts", scale=100.0)
        )
        estimate = sum(percent) / len(percent) if percent else None
        out[key] = (
            interval_dict(interval, len(percent), "prompts", estimate),
            interval_text(interval, len(percent), "prompts", ".2f"),
        )
    return out


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] in TRAINER_SUBCOMMANDS:
        run_lightning_cli(list(argv))
        return 0
    if argv and argv[0] in STAGE_SUBCOMMANDS:
        from dataclasses import replace

        from iclr26_common.cli_support import UsageError
        from iclr26_common.outputs import check_out_folder
        from llm_methods.method_cli import parse_settings, renamed_flags, seed

        rest = renamed_flags(
            argv[1:],
            {"--stage.seed": "--seed"},
            f"{PROG} {argv[0]}",
            removed_in=STAGE_SEED_REMOVED_IN,
        )
        ns = parse_settings(stage_parser(argv[0]), rest, "llm_methods.antibody")
        if ns.seed is not None:  # checked as every command's --seed (method_cli.seed)
            try:
                seed(str(ns.seed))
            except argparse.ArgumentTypeError as error:
                raise UsageError(f"argument --seed: {error}") from None
            ns.stage = replace(ns.stage, seed=ns.seed)
        # checked before the data are read, the model loaded or trained
        with check_out_folder(ns.out, overwrite=ns.overwrite):
            return (_align if argv[0] == "align" else _finetune)(ns)
    ns = _parser().parse_args(list(argv))
    if ns.command == "configs":
        for path in sorted(CONFIG_DIR.glob("*.yaml")):
            print(f"{path.stem}: {path.read_text().splitlines()[0].lstrip('# ')}")
        return 0
    if ns.command == "synth":
        from iclr26_common.outputs import check_out_folder
        from llm_methods.antibody.data import synthetic_world, write_jsonl

        out = check_out_folder(ns.out, overwrite=ns.overwrite, resumable=False)
        world = synthetic_world(ns.seed)
        with out:
            for name in SPLITS:
                write_jsonl(getattr(world, name), out.path / f"{name}.jsonl")
        print(f"wrote {len(SPLITS)} splits to {ns.out}")
        return 0
    if ns.command == "pretrain":
        from iclr26_common.outputs import check_out_folder, publish
        from llm_methods.antibody.data import synthetic_world
        from llm_methods.antibody.pipeline import pretrain_base
        from llm_methods.lm.loading import resolve_device
        from llm_methods.lm.threads import one_thread

        if ns.steps < 1:
            raise ValueError("--steps must be >= 1")
        out = check_out_folder(ns.out, overwrite=ns.overwrite, resumable=False)  # before training
        with one_thread():
            device = None if ns.device is None else resolve_device(ns.device)
            tok, model, log = pretrain_base(
                synthetic_world(ns.seed),
                steps=ns.steps,
                seed=ns.seed,
                device=device,
                quiet=ns.quiet,
            )
        with out:
            model.save_pretrained(out.path)
            tok.save_pretrained(out.path)
            publish(out.path)
        print(f"base pretrained ({ns.steps} steps, loss {log.logs[-1]['loss']:.3f}) -> {ns.out}")
        return 0
    return _eval(ns)
