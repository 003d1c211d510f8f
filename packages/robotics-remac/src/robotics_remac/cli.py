"""The ``robotics-remac`` command: LightningCLI training subcommands plus collect, eval, configs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import (
    CONFIGS_HELP,
    ArgumentParser,
    ConsoleScript,
    comma_list,
    nonnegative_int,
    positive_float,
    positive_int,
)
from iclr26_common.outputs import OutputFolder, add_output_options, check_output_options
from iclr26_common.progress import add_quiet_option
from robotics_remac import __version__

__all__ = ["main", "parse_delays", "run_lightning_cli"]

PROG = "robotics-remac"
DESCRIPTION = (
    "REMAC (ICLR 2026): masked action chunking for asynchronous robot inference. Training "
    "subcommands are LightningCLI (`robotics-remac fit --config base`, then `robotics-remac fit "
    "--config remac --model.init_args.base_ckpt BASE.ckpt`); shipped configs can be named without "
    "a path. `collect` writes expert demonstrations in the LeRobot v2.1 layout; `eval` runs "
    "policies asynchronously under inference delays and writes a CSV and a plot."
)


def parse_delays(text: str) -> list[int]:
    """'0-4' (inclusive) or '0,2,4' -> a non-empty list of non-negative ints."""
    if "-" in text:
        try:
            lo, hi = (int(p) for p in text.split("-"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected 'A-B' or 'A,B,...', got {text!r}") from None
        values = list(range(lo, hi + 1))
    else:
        values = comma_list(text, int)
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative delays, got {text!r}")
    return values


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """LightningCLI over the base/REMAC modules (picked by ``class_path``) and the demonstration
    data module, through :func:`iclr26_common.lightning.run_cli`. The data is read before the
    Trainer starts, so a bad dataset is one line. ``--ckpt_path`` (on the command line or in a
    config file) is checked once parsed, before Lightning unpickles it; ``predict`` writes
    ``predictions.pt`` into ``--trainer.default_root_dir`` (:mod:`robotics_remac.writer`): each
    chunk with its episode_index and frame_index, and the ``--split`` sampled (val, train or
    all)."""
    import lightning as L

    from iclr26_common.cli_support import UsageError
    from iclr26_common.lightning import CLI, check_prediction_file, run_cli
    from robotics_remac.checkpoint import flat_0_3_message
    from robotics_remac.data import PREDICT_SPLITS, DemoDataModule
    from robotics_remac.writer import PredictionsWriter, predictions_path

    predict_flags = {
        "--split": {
            "choices": list(PREDICT_SPLITS),
            "default": "val",
            "help": "the episodes to sample a chunk per observation of: the held-out ones "
            "(val, default), the training ones (train) or every one (all); written to "
            "predictions.pt with each chunk's episode_index and frame_index",
        },
    }

    class RemacCLI(CLI):
        def parse_arguments(self, parser: Any, args: Any) -> None:
            super().parse_arguments(parser, args)
            if self.config.get("subcommand") == "predict":
                # remac's run folder is default_root_dir with a logger too: its file is known
                # now, before a model or the data is loaded (the rule of every predict)
                node = self.config["predict"]
                root = (node.get("trainer") or {}).get("default_root_dir") or os.getcwd()
                check_prediction_file(predictions_path(root), overwrite=bool(node.get("overwrite")))

        def _parse_ckpt_path(self) -> None:
            # common's check first (a missing, foreign or unnamed checkpoint, named by option);
            # what it refuses as naming no model may be a 0.3.x checkpoint: say so instead
            try:
                super()._parse_ckpt_path()
            except UsageError:
                path = self._ckpt_path()
                message = flat_0_3_message(path) if path else None
                if message is not None:
                    raise UsageError(f"--ckpt_path {message}") from None
                raise

        def instantiate_trainer(self, **kwargs: Any) -> Any:
            trainer = super().instantiate_trainer(**kwargs)
            if self.subcommand == "predict":
                self.datamodule.predict_split = self.config["predict"].get("split") or "val"
            return trainer

    return run_cli(
        L.LightningModule,
        DemoDataModule,
        argv,
        package="robotics_remac",
        prog=PROG,
        links=[
            ("data.init_args.horizon", "model.init_args.horizon", "instantiate"),
            ("data.obs_dim", "model.init_args.obs_dim", "instantiate"),
            ("data.action_dim", "model.init_args.action_dim", "instantiate"),
        ],
        before_trainer=lambda cli: cli.datamodule.setup("fit"),
        cli_class=RemacCLI,
        subcommand_flags={"predict": predict_flags},
        predict_writer=PredictionsWriter,
    )


def collect_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} collect",
        description="Roll out the PD expert and write the demonstrations as a LeRobot dataset "
        "(v2.1 layout, or v3.0 with --codebase-version v3.0).",
    )
    add_output_options(
        parser,
        help="dataset folder: new or empty, or with --overwrite (which replaces the data/ and "
        "meta/ an earlier run wrote)",
    )
    parser.add_argument("--episodes", type=positive_int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--codebase-version", choices=["v2.1", "v3.0"], default="v2.1", help="LeRobot layout"
    )
    ns = parser.parse_args(list(argv))
    out = check_output_options(ns)  # before any work
    from robotics_remac.data import collect_demonstrations
    from robotics_remac.dataset_writer import write_lerobot_dataset

    episodes = collect_demonstrations(ns.episodes, ns.seed)
    with out:
        root = write_lerobot_dataset(
            out.path, episodes, version=ns.codebase_version, overwrite=ns.overwrite
        )
    print(f"wrote {root} ({ns.episodes} episodes)")
    return 0


def eval_main(argv: Sequence[str]) -> int:
    from robotics_remac.rollout import METHODS

    parser = ArgumentParser(
        prog=f"{PROG} eval",
        description="Run policies asynchronously on the chase task under inference delays; write "
        "results.csv (success, 95 % Wilson CI, prefix deviation from the expert, boundary jerk; "
        "success_low/_high/_ci_method/_n/_resample_seed: the 95 % bootstrap interval over the "
        "episodes, resampling seed --seed; with several methods, success_diff and its paired "
        "interval against the first --method on the same episodes) and success_vs_delay.png "
        "into --out. Methods: " + ", ".join(METHODS) + ".",
    )
    parser.add_argument("--policy", type=Path, required=True, help="base policy checkpoint")
    parser.add_argument("--remac", type=Path, help="REMAC finetune checkpoint")
    parser.add_argument("--lora-only", type=Path, help="LoRA-only finetune checkpoint")
    parser.add_argument("--ttrtc", type=Path, help="training-time RTC checkpoint")
    parser.add_argument(
        "--method", type=comma_list, default=["naive", "remac"], help="comma-separated methods"
    )
    parser.add_argument("--delays", type=parse_delays, default=[0, 1, 2, 3, 4], help="e.g. 0-4")
    parser.add_argument(
        "--exec-horizon", type=positive_int, default=None, help="e (default max(1, d))"
    )
    parser.add_argument(
        "--assumed-delay",
        type=nonnegative_int,
        default=None,
        help="delay the policy is told (misestimation)",
    )
    parser.add_argument(
        "--measured-delay",
        type=nonnegative_int,
        default=None,
        metavar="CAP",
        help="measure each chunk's latency online and run with d = min(CAP, ceil(latency / "
        "control period)) instead of --delays (the policy is told the delay of the largest of the "
        "last 16 latencies); results.csv then has delay 'measured' and no plot is drawn",
    )
    parser.add_argument(
        "--control-period",
        type=positive_float,
        default=None,
        help="seconds per control step (default: the task's dt, 0.05); used with --measured-delay",
    )
    parser.add_argument("--episodes", type=positive_int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    add_output_options(
        parser,
        resumable=True,
        help="output folder: new or empty, or with --overwrite / --resume (finished cells are "
        "kept in cells.jsonl)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="evaluate offline on your own LeRobot episodes instead of the chase task: the mean "
        "L2 error of the executed actions chunk[d:d+e] to the episode's, the committed prefix "
        "being the episode's own actions, per method and delay, 95 %% interval over episodes; "
        "writes offline_results.csv",
    )
    add_quiet_option(parser)
    ns = parser.parse_args(list(argv))
    methods = ns.method
    if ns.measured_delay is not None and ns.assumed_delay is not None:
        parser.error("--assumed-delay cannot be combined with --measured-delay (it is measured)")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown --method {unknown}; known: {', '.join(METHODS)}")
    if ns.data is not None:  # one error per thing given: name only what the user gave
        learned_async = [
            m for m in METHODS if METHODS[m].execution == "async" and METHODS[m].policy
        ]
        refused = [m for m in methods if m not in learned_async]
        if refused:
            parser.error(
                f"--data cannot evaluate --method {','.join(refused)}: offline evaluation "
                "takes learned methods executed asynchronously only ("
                + ", ".join(learned_async)
                + ")"
            )
        if ns.measured_delay is not None:
            parser.error("--data cannot be combined with --measured-delay (it needs a simulator)")
        if ns.resume:
            parser.error("--data cannot be combined with --resume (rerun with --overwrite)")
    out = check_output_options(ns)  # before any work
    if ns.data is not None:
        from robotics_remac.offline_eval import run_offline

        return run_offline(ns, methods, out)
    return _run_eval(ns, methods, out)


def _task_policy(path: Path | str, policy: Any) -> Any:
    """``policy`` if its sizes are the chase task's (8-wide states, 2-wide actions); ``path``
    names it in the error (``--policy PATH``)."""
    from robotics_remac.env import ACTION_DIM, OBS_DIM

    for key, need in (("obs_dim", OBS_DIM), ("action_dim", ACTION_DIM)):
        if policy.config[key] != need:
            raise ValueError(
                f"{path}: policy {key} {policy.config[key]}, the chase task needs {need} "
                "(trained on another dataset?)"
            )
    return policy


#: The finished cells of an ``eval`` run, one JSON record a line (rewritten atomically after each
#: cell): what ``--resume`` reads back.
CELLS_FILE = "cells.jsonl"


def _cell_key(settings: dict[str, Any], method: str, d: Any, e: int, d_hat: Any) -> str:
    """What makes a finished cell reusable by ``--resume``: the cell and every setting that
    changes its episodes (checkpoints, episodes, seed, delays)."""
    cell = {"method": method, "delay": d, "exec_horizon": e, "assumed_delay": d_hat}
    return json.dumps({**settings, **cell}, sort_keys=True)


def _finished_cells(out: OutputFolder) -> dict[str, dict[str, Any]]:
    """``{key: record}`` of the cells an interrupted run finished (empty unless resumed)."""
    path = out.path / CELLS_FILE
    if not out.resumed or not path.is_file():
        return {}
    done = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            done[record["key"]] = record
        except (ValueError, KeyError, TypeError):
            continue  # not a record this version wrote: that cell runs again
    return done


def load_policies(
    ns: argparse.Namespace, methods: list[str], check: Any
) -> tuple[dict[str, Path | None], dict[str, Any]]:
    """The checkpoint paths of ``eval``'s flags and the policies ``methods`` need (each passed
    through ``check(path, policy)``); only the planner: ``--policy`` (it gives the chunk length)."""
    from robotics_remac.checkpoint import load_policy
    from robotics_remac.rollout import METHODS

    paths = {
        "base": ns.policy,
        "remac": ns.remac,
        "lora_only": ns.lora_only,
        "training_time_rtc": ns.ttrtc,
    }
    flags = {
        "base": "--policy",
        "remac": "--remac",
        "lora_only": "--lora-only",
        "training_time_rtc": "--ttrtc",
    }
    policies: dict[str, Any] = {}
    for method in methods:
        key = METHODS[method].policy
        if not key:  # the planner needs no checkpoint
            continue
        if paths[key] is None:
            raise ValueError(f"method {method!r} needs {flags[key]} CHECKPOINT")
        if key not in policies:
            loaded = load_policy(paths[key], option=flags[key])
            policies[key] = check(f"{flags[key]} {paths[key]}", loaded.policy)
    if not policies:
        loaded = load_policy(ns.policy, option="--policy")
        policies["base"] = check(f"--policy {ns.policy}", loaded.policy)
    return paths, policies


def _delay_cells(
    ns: argparse.Namespace, methods: list[str], horizon: int
) -> list[tuple[str, Any, int, Any]]:
    """``(method, d, e, d_hat)`` for every ``--delays`` d and method: the execution horizon
    ``e`` (``--exec-horizon``, else the default for d) and the delay the controller assumes
    ``d_hat`` (``--assumed-delay``, else d), each checked against the chunk length ``horizon``
    (one-line ``ValueError`` naming the option)."""
    from robotics_remac.rollout import check_delay, default_exec_horizon

    cells: list[tuple[str, Any, int, Any]] = []
    for d in ns.delays:
        e = default_exec_horizon(d) if ns.exec_horizon is None else ns.exec_horizon
        check_delay(d, e, horizon)
        d_hat = d if ns.assumed_delay is None else ns.assumed_delay
        if not 0 <= d_hat < horizon:
            raise ValueError(f"--assumed-delay {d_hat} must satisfy 0 <= d < H={horizon}")
        cells += [(m, d, e, d_hat) for m in methods]
    return cells


def _run_eval(ns: argparse.Namespace, methods: list[str], out: OutputFolder) -> int:
    import numpy as np

    from iclr26_common.outputs import FILE_MODE, write_text
    from iclr26_common.progress import progress
    from robotics_remac.env import DT
    from robotics_remac.experiment import plot_curves
    from robotics_remac.latency import MeasuredDelay
    from robotics_remac.rollout import METHODS, check_delay, default_exec_horizon, make_chunker
    from robotics_remac.rollout import rollout as run_rollout

    # Policies load and roll out on the CPU: the chase task steps in numpy after every action,
    # so a GPU would only add a transfer per step for these small mixers.
    paths, policies = load_policies(ns, methods, _task_policy)
    horizon = policies["base" if "base" in policies else next(iter(policies))].horizon
    period = DT if ns.control_period is None else ns.control_period
    if ns.measured_delay is not None:
        cap = ns.measured_delay
        e = default_exec_horizon(cap) if ns.exec_horizon is None else ns.exec_horizon
        check_delay(cap, e, horizon)
        cells = [(m, "measured", e, "measured") for m in methods]
    else:
        cells = _delay_cells(ns, methods, horizon)
    settings = {
        "checkpoints": {k: str(Path(v).resolve()) for k, v in paths.items() if v is not None},
        "episodes": ns.episodes,
        "seed": ns.seed,
        "measured_delay": ns.measured_delay,
        "control_period": period if ns.measured_delay is not None else None,
    }
    done = _finished_cells(out)
    records: list[dict[str, Any]] = []
    with out:
        for method, d, e, d_hat in progress(cells, description="eval cells", quiet=ns.quiet):
            key = _cell_key(settings, method, d, e, d_hat)
            record = done.get(key)
            if record is None:
                spec = METHODS[method]
                online = d == "measured"
                stats = run_rollout(
                    make_chunker(spec.sampler, policies.get(spec.policy)),
                    ns.episodes,
                    MeasuredDelay(period, ns.measured_delay) if online else d,
                    horizon,
                    e,
                    spec.execution,
                    assumed_delay=None if online else d_hat,
                    seed=ns.seed,
                )
                row = {
                    "method": method,
                    "delay": d,
                    "assumed_delay": d_hat,
                    "exec_horizon": e,
                    **stats.row(),
                    **stats.extra,
                }
                record = {"key": key, "row": row, "success": stats.success.tolist()}
            records.append(record)
            lines = "".join(json.dumps(r) + "\n" for r in records)
            write_text(out.path / CELLS_FILE, lines)  # the finished cells survive an interrupt
        rows = [dict(r["row"]) for r in records]
        successes = [np.asarray(r["success"]) for r in records]
        texts = _add_intervals(rows, successes, methods, ns.seed)
        write_text(out.path / "results.csv", _csv_text(rows))
        if ns.assumed_delay is not None:
            for row in rows:  # plot the curve even under a misestimated delay
                row["assumed_delay"] = row["delay"]
        if ns.measured_delay is None:
            os.chmod(plot_curves(rows, out.path / "success_vs_delay.png"), FILE_MODE)
    for row, text in zip(rows, texts, strict=True):
        print(
            f"{row['method']:12s} d={row['delay']} success {row['success']:.3f}, 95 % {text}"
            + (f" mean d {row['mean_delay']:.2f}" if "mean_delay" in row else "")
        )
    plot = "" if ns.measured_delay is not None else f" and {out.path / 'success_vs_delay.png'}"
    print(f"wrote {out.path / 'results.csv'}{plot}")
    return 0


def _csv_text(rows: list[dict[str, Any]]) -> str:
    """``rows`` as CSV text (header from the first row), ``\\n`` line ends."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _add_intervals(
    rows: list[dict[str, Any]], successes: list[Any], methods: list[str], seed: int
) -> list[str]:
    """Adds each cell's success interval over its episodes and, with several methods, its paired
    difference to the first method's cell at the same delay (the same episodes) to ``rows``
    (after the existing columns); returns the printed interval text of each row."""
    from iclr26_common.effects import interval_text
    from robotics_remac.intervals import UNITS, difference_columns, success_columns

    baseline = methods[0] if len(methods) > 1 else None
    reference = {}
    for row, success in zip(rows, successes, strict=True):
        if row["method"] == baseline:
            reference.setdefault((row["delay"], row["assumed_delay"]), success)
    texts = []
    for row, success in zip(rows, successes, strict=True):
        columns, interval = success_columns(success, seed)
        row.update(columns)
        text = interval_text(interval, len(success), UNITS)
        if baseline is not None:
            base = reference.get((row["delay"], row["assumed_delay"]))
            own = row["method"] == baseline
            diff_columns, diff = difference_columns(
                None if own else success, None if own else base, baseline, seed
            )
            row.update(diff_columns)
            if not own and base is not None:
                text += f"; vs {baseline} {row['success_diff']:+.3f} " + interval_text(
                    diff, len(success), UNITS
                )
        texts.append(text)
    return texts


COMMANDS = {
    "collect": "write expert demonstrations (LeRobot v2.1 layout)",
    "eval": "success vs inference delay per method (CSV + plot)",
    "configs": CONFIGS_HELP,
}


SCRIPT = ConsoleScript(
    "robotics_remac",
    __version__,
    DESCRIPTION,
    COMMANDS,
    handlers=lambda: {"collect": collect_main, "eval": eval_main},
    run_lightning=run_lightning_cli,
    error_types=("robotics_remac.dataset_format:RemacFormatError",),
)


def main(args: Sequence[str] | None = None) -> int:
    """Entry point; input errors end with one ``robotics-remac: error: ...`` line and exit 2
    (``ROBOTICS_REMAC_TRACEBACK=1`` shows the traceback)."""
    return SCRIPT.main(args)


if __name__ == "__main__":
    sys.exit(main())
