"""``llm-methods perk``: PERK test-time LoRA memory for long contexts (and the FT-ICR baseline).

``fit`` / ``validate`` / ``test`` are LightningCLI over ``PERKModule`` / ``ICRModule`` and
``BabiLongDataModule`` (``--config tiny`` names a shipped config); ``eval`` answers a
BabiLong-format jsonl with a trained checkpoint and writes ``predictions.jsonl`` (each record
as it finishes, the folder marked partial until ``summary.json``; Ctrl-C keeps them and
``--resume`` continues) + ``summary.json``; ``synth`` writes the offline BabiLong-style
generator's jsonl; ``judge`` turns paired ``eval`` runs of PERK and FT-ICR (one pair per
context length) into the experiment's two claims (``experiment.judge``: effects with 95 %
intervals, verdicts); ``configs`` lists the shipped configs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.device import add_device_option
from iclr26_common.progress import add_quiet_option

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
    out_args(ev, "output folder", required=True, resumable=True)
    add_quiet_option(ev)
    ev.add_argument("--limit", type=int, default=None, help="first N records only")
    ev.add_argument(
        "--max-new-tokens", type=int, default=None, help="answer length (default: the checkpoint's)"
    )
    add_device_option(ev)
    ev.add_argument(
        "--seed",
        type=seed,
        default=0,
        help="seed (torch, NumPy, random) set before each record as SEED + its index; recorded "
        "in summary.json",
    )
    synth = sub.add_parser("synth", help="write generated BabiLong-style records (jsonl)")
    out_args(synth, "output .jsonl file", required=True, kind="file")
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
    judge = sub.add_parser(
        "judge",
        help="the experiment's claims from `perk eval` runs of PERK and FT-ICR",
        description="Judge the experiment's two claims (experiment.judge) from paired `perk "
        "eval` runs: one PERK and one FT-ICR run per context length, on the same data file.",
    )
    judge.add_argument("--perk", nargs="+", required=True, metavar="RUN", help="PERK eval runs")
    judge.add_argument(
        "--ficr", nargs="+", required=True, metavar="RUN", help="FT-ICR eval runs, same order"
    )
    judge.add_argument(
        "--lengths", nargs="+", type=int, default=[4, 8, 16, 32], help="the length of each pair"
    )
    judge.add_argument(
        "--trained", nargs="+", type=int, default=[4, 8], help="the lengths trained at"
    )
    out_args(judge, "claims .json file (default: print only)", kind="file")
    sub.add_parser("configs", help="list the shipped configs")
    return show_defaults(parser)


def _judge(ns: argparse.Namespace) -> int:
    """``perk judge``: the claims printed one line each (and into ``--out`` with the numbers)."""
    from iclr26_common.outputs import check_out_file, write_text
    from iclr26_common.registry import derive_verdict
    from iclr26_common.report import effect_text, verdict_text
    from llm_methods.perk.experiment import judge_predictions

    if ns.out is not None:
        check_out_file(ns.out, overwrite=ns.overwrite)
    claims, metrics = judge_predictions(ns.perk, ns.ficr, ns.lengths, ns.trained)
    dicts = [c.to_dict() for c in claims]
    verdict = derive_verdict(claims)
    for m, acc in metrics["accuracy"].items():
        print(f"{m}: " + ", ".join(f"length {L_} {a:.3f}" for L_, a in acc.items()))
    for label, claim in zip("ab", dicts, strict=True):
        print(f"({label}) {verdict_text(claim)}: {effect_text(claim)}")
    print(f"verdict: {verdict}")
    if ns.out is not None:
        data = {"verdict": verdict, "claims": dicts, "metrics": metrics}
        print(f"-> {write_text(ns.out, json.dumps(data, indent=1) + chr(10))}")
    return 0


#: ``perk eval``'s record of its settings in ``--out``: ``--resume`` continues only a run of
#: the same settings.
SETTINGS_FILE = "settings.json"


def _eval_settings(ns: argparse.Namespace) -> dict[str, Any]:
    """What the predictions of ``perk eval`` depend on (compared by ``--resume``)."""
    return {
        "model": str(Path(ns.model).resolve()),
        "data": str(Path(ns.data).resolve()),
        "limit": ns.limit,
        "max_new_tokens": ns.max_new_tokens,
        "seed": ns.seed,
    }


#: ``perk eval``'s option of each settings key that is not spelled ``--KEY``.
EVAL_OPTIONS = {"max_new_tokens": "--max-new-tokens"}


def _resumed_rows(folder: Path, settings: dict[str, Any], records: list[Any]) -> list[dict]:
    """The predictions an interrupted ``perk eval`` with the same ``settings`` left in
    ``folder`` (whole lines of the same records, in order); other settings, or rows of other
    records, are one line naming them."""
    from iclr26_common.cli_support import UsageError
    from iclr26_common.outputs import check_resume_settings

    check_resume_settings(folder / SETTINGS_FILE, settings, "perk eval", options=EVAL_OPTIONS)
    rows: list[dict] = []
    predictions = folder / "predictions.jsonl"
    try:
        text = predictions.read_text(encoding="utf-8") if predictions.is_file() else ""
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{predictions}: not readable ({error}); pass --overwrite") from None
    lines = text.splitlines()
    for line in lines[: len(records)]:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            break  # a line cut by the interruption: that record is answered again
        rec = records[len(rows)]
        if not isinstance(row, dict) or (row.get("question"), row.get("gold")) != (
            rec.question,
            rec.answer,
        ):
            raise UsageError(
                f"--resume: {predictions} line {len(rows) + 1} is not record {len(rows) + 1} of "
                f"{settings['data']}; pass --overwrite"
            )
        rows.append(row)
    return rows


def _eval(ns: argparse.Namespace) -> int:
    """``perk eval``: answer each record (seeded ``SEED + index``, so a record's answer does not
    depend on the others), rewriting ``predictions.jsonl`` after each one in a folder marked
    partial; ``summary.json`` last. Ctrl-C keeps the finished records (one line, exit 130 from
    the console script) and ``--resume`` answers only the rest: a resumed run writes what an
    uninterrupted one writes."""
    import torch

    from iclr26_common.outputs import check_output_options, record_settings, write_text
    from iclr26_common.progress import progress
    from iclr26_common.seeding import seed_everything
    from llm_methods.lm.loading import resolve_device
    from llm_methods.perk.data import extract_output, is_correct, read_babilong
    from llm_methods.perk.lit_module import load_checkpoint

    # before any record is answered
    out = check_output_options(ns)
    device = resolve_device(ns.device)
    records = read_babilong(ns.data, ns.limit)
    settings = _eval_settings(ns)
    rows = _resumed_rows(out.path, settings, records) if out.resumed else []
    module = load_checkpoint(ns.model, option="--model").to(device)
    if ns.max_new_tokens is not None:
        module.hparams.max_new_tokens = ns.max_new_tokens
    if rows:
        print(f"resuming after {len(rows)} of {len(records)} records in {out.path}")
    with out:  # marked partial until summary.json is written
        if not out.resumed:  # --overwrite: no earlier run's rows can pass for this one's
            for name in ("predictions.jsonl", "summary.json", SETTINGS_FILE):
                (out.path / name).unlink(missing_ok=True)
        todo = range(len(rows), len(records))
        for i in progress(todo, description="perk eval", quiet=ns.quiet):
            rec = records[i]
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
            # each finished record is on disk before the next starts (Ctrl-C keeps it); the
            # settings with the first one (a run that fails on its first record leaves nothing)
            if not (out.path / SETTINGS_FILE).is_file():
                record_settings(out.path / SETTINGS_FILE, settings)
            write_text(out.path / "predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        acc = sum(r["correct"] for r in rows) / len(rows)
        summary = {
            "method": module.METHOD,
            "checkpoint": str(ns.model),
            "data": str(ns.data),
            "n": len(rows),
            "accuracy": acc,
            "seed": ns.seed,
        }
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
    if ns.command == "judge":
        return _judge(ns)
    return _eval(ns)
