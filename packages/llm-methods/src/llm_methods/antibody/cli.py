"""``llm-methods antibody``: defence against harmful finetuning (Antibody, arXiv 2603.00498).

``align`` aligns a model (SFT / Booster / Vaccine / Antibody) on a safe jsonl and a harmful
jsonl and saves it; ``finetune`` finetunes an aligned model on user data (a jsonl, or benign +
harmful files mixed at ``--poison-ratio``) with SFT, Antibody's weighted CE or Lisa; ``eval`` writes
the harmful score and finetune accuracy; ``synth`` writes the offline synthetic instruction set;
``pretrain`` trains the tiny base on it; ``fit`` is LightningCLI over the same recipes
(``lit_module``); ``configs`` lists the shipped configs. Data: BeaverTails rows ``{"prompt",
"response", "is_safe", "category"?, "refusal"?, "answer"?}``, a ``.json`` list as in the official
repository or ``.jsonl``; rows without ``refusal`` take one from ``--refusals`` (one per line, as
the official ``refusal_examples.jsonl``) cycled in row order.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ABOUT = "Antibody defence against harmful finetuning (arXiv 2603.00498)"
PROG = "llm-methods antibody"
CONFIG_DIR = Path(__file__).parent / "configs"
CFG_FIELDS = ("rho", "lambda_rule", "a", "eta_lambda", "ema", "lambda2", "tau")
STAGE_FIELDS = ("steps", "batch_size", "lr", "seed")
TRAINER_SUBCOMMANDS = ("fit",)


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """LightningCLI over ``AntibodyModule`` and ``SafetyDataModule`` (``--config fit_tiny``)."""
    import lightning as L

    from llm_methods.antibody.lit_module import SafetyDataModule
    from llm_methods.cliutils import method_cli

    return method_cli("antibody", L.LightningModule, SafetyDataModule, argv)


def load_config(name_or_path: str) -> dict[str, Any]:
    """A shipped config name (``antibody``, ``antibody_paper``, ``tiny``) or a yaml path."""
    from llm_methods.cliutils import load_settings

    return load_settings("antibody", name_or_path, (*CFG_FIELDS, *STAGE_FIELDS))


def _parser() -> argparse.ArgumentParser:
    from llm_methods.cliutils import ArgumentParser

    parser = ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("fit", help="LightningCLI fit of one stage (--config fit_tiny)", add_help=False)
    al = sub.add_parser("align", help="alignment stage (sft | booster | vaccine | antibody)")
    al.add_argument("--model", required=True, help="model spec: a folder, zoo:NAME or smollm2")
    al.add_argument("--safe", type=Path, required=True, help="safe alignment jsonl (refusals)")
    al.add_argument(
        "--harmful",
        type=Path,
        default=None,
        help="harmful jsonl for the perturbation (booster / antibody)",
    )
    al.add_argument(
        "--method", default="antibody", choices=("sft", "booster", "vaccine", "antibody")
    )
    al.add_argument("--config", default="antibody", help="shipped config name or yaml path")
    ft = sub.add_parser("finetune", help="finetuning stage on (poisoned) user data")
    ft.add_argument("--model", required=True, help="aligned model folder")
    ft.add_argument("--data", type=Path, required=True, help="user jsonl (benign rows)")
    ft.add_argument("--harmful", type=Path, default=None, help="harmful jsonl to mix in")
    ft.add_argument(
        "--poison-ratio",
        type=float,
        default=None,
        help="fraction of harmful rows in the mixture, in [0, 1] (needs --harmful)",
    )
    ft.add_argument("--n", type=int, default=None, help="mixture size (default: len(--data))")
    ft.add_argument("--method", default="antibody", choices=("sft", "antibody", "lisa"))
    ft.add_argument("--guide", type=Path, default=None, help="alignment jsonl (lisa only)")
    ft.add_argument("--config", default="antibody", help="shipped config name or yaml path")
    for p in (al, ft):
        for name in (*CFG_FIELDS, *STAGE_FIELDS):
            kind = (
                str
                if name == "lambda_rule"
                else (int if name in ("steps", "batch_size", "seed") else float)
            )
            p.add_argument(
                f"--{name.replace('_', '-')}",
                dest=name,
                type=kind,
                default=None,
                help="override the config's value",
            )
        p.add_argument("--max-len", type=int, default=128, help="max tokens per row")
        p.add_argument(
            "--refusals",
            type=Path,
            default=None,
            help="refusal pool for rows without 'refusal' (one per line)",
        )
        p.add_argument("--device", default=None)
        p.add_argument("--out", type=Path, required=True, help="output folder (model + log)")
    ev = sub.add_parser("eval", help="harmful score and finetune accuracy of a model")
    ev.add_argument("--model", required=True)
    ev.add_argument("--harmful", type=Path, default=None, help="harmful prompts jsonl (HS)")
    ev.add_argument("--task", type=Path, default=None, help="task jsonl with 'answer' (FA)")
    ev.add_argument("--max-new-tokens", type=int, default=16)
    ev.add_argument("--device", default=None)
    ev.add_argument("--out", type=Path, required=True, help="output folder")
    sy = sub.add_parser("synth", help="write the offline synthetic instruction set (jsonl)")
    sy.add_argument("--out", type=Path, required=True, help="output folder")
    sy.add_argument("--seed", type=int, default=0)
    pt = sub.add_parser("pretrain", help="train the unaligned tiny base on the synthetic set")
    pt.add_argument("--out", type=Path, required=True)
    pt.add_argument("--steps", type=int, default=300)
    pt.add_argument("--seed", type=int, default=0)
    sub.add_parser("configs", help="list the shipped configs")
    return parser


def _settings(ns: argparse.Namespace) -> tuple[Any, Any]:
    from llm_methods.antibody.model import AntibodyConfig
    from llm_methods.antibody.pipeline import StageSettings

    values = load_config(ns.config)
    values.update(
        {k: getattr(ns, k) for k in (*CFG_FIELDS, *STAGE_FIELDS) if getattr(ns, k) is not None}
    )
    cfg = AntibodyConfig(**{k: values[k] for k in CFG_FIELDS if k in values}).validate()
    stage = StageSettings(**{k: values[k] for k in STAGE_FIELDS if k in values})
    if stage.steps < 1 or stage.batch_size < 1 or stage.lr <= 0:
        raise ValueError("need --steps >= 1, --batch-size >= 1 and --lr > 0")
    return cfg, stage


def _load(spec: str, device: str | None) -> Any:
    from llm_methods.cliutils import quiet_transformers
    from llm_methods.lm import load_lm

    quiet_transformers()
    lm = load_lm(spec, device, "float32")
    for p in lm.model.parameters():
        p.requires_grad_(True)
    return lm


def _save(lm: Any, model: Any, out: Path, info: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    lm.tokenizer.save_pretrained(out)
    (out / "antibody.json").write_text(json.dumps(info, indent=1))


def _pool(ns: argparse.Namespace) -> list[str] | None:
    from llm_methods.antibody.data import read_refusal_pool

    return read_refusal_pool(ns.refusals) if ns.refusals is not None else None


def _align(ns: argparse.Namespace) -> int:
    from llm_methods.antibody.data import read_beavertails
    from llm_methods.antibody.pipeline import align

    cfg, stage = _settings(ns)
    if ns.method in ("booster", "antibody") and ns.harmful is None:
        raise ValueError(
            f"--method {ns.method} needs --harmful (harmful rows for the perturbation)"
        )
    pool = _pool(ns)
    safe = read_beavertails(ns.safe, refusal_pool=pool)
    harmful = read_beavertails(ns.harmful, refusal_pool=pool) if ns.harmful is not None else []
    lm = _load(ns.model, ns.device)
    model, log = align(lm.model, lm.tokenizer, safe, harmful, ns.method, stage, cfg, ns.max_len)
    _save(
        lm,
        model,
        ns.out,
        {
            "stage": "align",
            "method": ns.method,
            "config": vars(cfg),
            "steps": stage.steps,
            "log": log.logs[-5:],
            "wall_s": log.wall_s,
        },
    )
    print(
        f"aligned ({ns.method}, {stage.steps} steps, last loss {log.logs[-1]['loss']:.4f}) -> {ns.out}"
    )
    return 0


def _finetune(ns: argparse.Namespace) -> int:
    from llm_methods.antibody.data import check_poison_ratio, poisoned_mixture, read_beavertails
    from llm_methods.antibody.pipeline import finetune

    cfg, stage = _settings(ns)
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
        lm.model, lm.tokenizer, rows, ns.method, stage, cfg.tau, ns.max_len, guide
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
            "log": log.logs[-5:],
            "wall_s": log.wall_s,
        },
    )
    print(f"finetuned ({ns.method}, {len(rows)} rows, {stage.steps} steps) -> {ns.out}")
    return 0


def _eval(ns: argparse.Namespace) -> int:
    from llm_methods.antibody.data import read_beavertails
    from llm_methods.antibody.pipeline import evaluate

    if ns.harmful is None and ns.task is None:
        raise ValueError("give --harmful and/or --task")
    harmful = read_beavertails(ns.harmful) if ns.harmful is not None else []
    task = read_beavertails(ns.task) if ns.task is not None else []
    lm = _load(ns.model, ns.device)
    result = evaluate(lm.model, lm.tokenizer, harmful, task, ns.max_new_tokens)
    ns.out.mkdir(parents=True, exist_ok=True)
    summary = {"model": ns.model, "n_harmful": len(harmful), "n_task": len(task), **result}
    (ns.out / "summary.json").write_text(json.dumps(summary, indent=1))
    parts = [f"{k.upper()} {result[k]:.2f}%" for k in ("hs", "fa") if k in result]
    print(f"{', '.join(parts)} -> {ns.out / 'summary.json'}")
    return 0


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] in TRAINER_SUBCOMMANDS:
        run_lightning_cli(list(argv))
        return 0
    ns = _parser().parse_args(list(argv))
    if ns.command == "configs":
        for path in sorted(CONFIG_DIR.glob("*.yaml")):
            print(f"{path.stem}: {path.read_text().splitlines()[0].lstrip('# ')}")
        return 0
    if ns.command == "synth":
        from llm_methods.antibody.data import synthetic_world, write_jsonl

        world = synthetic_world(ns.seed)
        for name in (
            "pretrain",
            "align",
            "align_harmful",
            "attack",
            "task",
            "eval_harmful",
            "eval_task",
        ):
            write_jsonl(getattr(world, name), ns.out / f"{name}.jsonl")
        print(f"wrote 7 splits to {ns.out}")
        return 0
    if ns.command == "pretrain":
        from llm_methods.antibody.data import synthetic_world
        from llm_methods.antibody.pipeline import pretrain_base
        from llm_methods.lm.threads import one_thread

        if ns.steps < 1:
            raise ValueError("--steps must be >= 1")
        with one_thread():
            tok, model, log = pretrain_base(synthetic_world(ns.seed), steps=ns.steps, seed=ns.seed)
        ns.out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(ns.out)
        tok.save_pretrained(ns.out)
        print(f"base pretrained ({ns.steps} steps, loss {log.logs[-1]['loss']:.3f}) -> {ns.out}")
        return 0
    return {"align": _align, "finetune": _finetune, "eval": _eval}[ns.command](ns)
