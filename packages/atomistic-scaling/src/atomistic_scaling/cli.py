"""The ``atomistic-scaling`` command: LightningCLI training subcommands (fit/validate/test/
predict) plus ``synth`` (EMT data as extxyz), ``sweep`` (scaling grid + fits) and ``configs``."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from atomistic_scaling import __version__
from iclr26_common.cli_support import (
    CONFIGS_HELP,
    ArgumentParser,
    ConsoleScript,
    comma_list,
    positive_int,
)
from iclr26_common.outputs import add_output_options, check_output_options
from iclr26_common.progress import add_quiet_option

__all__ = ["main", "run_lightning_cli"]

PROG = "atomistic-scaling"
DESCRIPTION = (
    "Scaling Laws and Symmetry (ICLR 2026): neural force fields of rising symmetry order, EMT "
    "data and scaling-law fits. Training subcommands are LightningCLI (`atomistic-scaling fit "
    "--help`); shipped configs can be named without a path: `atomistic-scaling fit --config tiny`. "
    "`predict` writes the test split's energies and forces to predictions.pt in the run folder, "
    "and predictions.extxyz with each structure's source file and frame, predicted and "
    "reference energy and forces."
)


COMMANDS = {
    "synth": "write EMT-labelled structures as extxyz",
    "sweep": "scaling sweep (archs x widths x D) with fits and plots",
    "configs": CONFIGS_HELP,
}


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """Runs LightningCLI on ``argv`` (a trainer subcommand first) through
    :func:`iclr26_common.lightning.run_cli` and returns the CLI object. The data module's
    ``cutoff`` is linked into the model (the classes are given directly, not by class_path). The
    data is read before the Trainer starts, so a bad file is one line. ``predict`` writes
    ``predictions.pt`` and ``predictions.extxyz`` into the run folder
    (:mod:`atomistic_scaling.predictions`); earlier ones are refused unless ``predict
    --overwrite``, before the data is read when the run folder is ``default_root_dir``."""
    from atomistic_scaling.data import AtomisticDataModule
    from atomistic_scaling.lit_module import ForceFieldModule
    from iclr26_common.lightning import run_cli

    def predictions_writer() -> Any:  # imported for ``predict`` only
        from atomistic_scaling.predictions import PredictionsWriter

        return PredictionsWriter()

    return run_cli(
        ForceFieldModule,
        AtomisticDataModule,
        argv,
        package="atomistic_scaling",
        prog=PROG,
        links=[("data.cutoff", "model.cutoff")],
        subclass_mode=False,
        # predict with test files reads only those, labels optional (data.AtomisticDataModule)
        before_trainer=lambda cli: cli.datamodule.setup(
            "predict" if cli.config.get("subcommand") == "predict" else "fit"
        ),
        predict_writer=predictions_writer,
    )


def synth_main(argv: Sequence[str]) -> int:
    from atomistic_scaling.constants import EMT_ELEMENTS
    from atomistic_scaling.synth import KINDS, write_synthetic

    parser = ArgumentParser(
        prog=f"{PROG} synth",
        description="Generate fcc metal configurations (rattled, strained, vacancies, Langevin MD "
        "snapshots at 300-1500 K) labelled with ASE's EMT, randomly oriented; write extxyz with "
        "REF_energy / REF_forces.",
    )
    add_output_options(parser, kind="file", help="extxyz file to write (new)")
    parser.add_argument("--n", type=positive_int, default=100, help="number of structures")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--elements", type=comma_list, default=list(EMT_ELEMENTS), help="comma-separated"
    )
    parser.add_argument(
        "--kinds", type=comma_list, default=list(KINDS), help=f"comma-separated of {KINDS}"
    )
    parser.add_argument(
        "--orientation",
        choices=["random", "canonical"],
        default="random",
        help="random: each structure in its own random orientation (default); canonical: "
        "ASE's fcc cell axes",
    )
    ns = parser.parse_args(list(argv))
    bad = sorted(set(ns.elements) - set(EMT_ELEMENTS))
    if bad:
        parser.error(f"unsupported elements {bad}; EMT has {', '.join(EMT_ELEMENTS)}")
    check_output_options(ns, kind="file")
    path = write_synthetic(
        ns.out,
        ns.n,
        ns.seed,
        ns.elements,
        ns.kinds,
        ns.orientation == "random",
        overwrite=ns.overwrite,
    )
    print(f"wrote {path} ({ns.n} structures)")
    return 0


#: Options of ``sweep`` that say where and how to write, not what to compute (a resumed sweep
#: may change them).
_SWEEP_RUN_OPTIONS = ("config", "out", "overwrite", "resume", "quiet", "workers")


def sweep_parser():  # type: ignore[no-untyped-def]
    """The ``sweep`` parser: every :class:`~atomistic_scaling.sweep.SweepConfig` field with the
    dataclass's own default (one source of defaults), plus data and output options."""
    import dataclasses
    import typing

    from jsonargparse import ActionConfigFile, ArgumentParser

    from atomistic_scaling.constants import (
        DEFAULT_ENERGY_KEY,
        DEFAULT_FORCES_KEY,
        DEFAULT_MIN_DISTANCE,
    )
    from atomistic_scaling.sweep import SweepConfig

    parser = ArgumentParser(
        prog=f"{PROG} sweep",
        description="Train archs x widths x seeds, one warmup-stable-decay run per D in d_values "
        "(cooldowns branched from one trunk); fit L(N, D) and the compute / train-time "
        "frontiers on seed means with CIs from a bootstrap over seeds; write records.json, "
        "fits.json, fits.md and plots into --out, and each finished (arch, width, seed) into "
        "OUT/jobs/ as it finishes (an interrupted sweep continues with --resume). Generated "
        "EMT data is randomly oriented.",
        exit_on_error=False,
    )
    parser.add_argument("--config", action=ActionConfigFile)
    add_output_options(
        parser, resumable=True, help="output folder: new or empty, or with --overwrite / --resume"
    )
    add_quiet_option(parser)
    parser.add_argument("--train_files", type=list[str] | None, default=None)
    parser.add_argument("--val_files", type=list[str] | None, default=None)
    parser.add_argument("--energy_key", type=str, default=DEFAULT_ENERGY_KEY)
    parser.add_argument("--forces_key", type=str, default=DEFAULT_FORCES_KEY)
    parser.add_argument(
        "--min_distance",
        type=float,
        default=DEFAULT_MIN_DISTANCE,
        help="refuse frames with atoms closer than this (Å; 0: off)",
    )
    parser.add_argument(
        "--random_orientation",
        type=bool,
        default=False,
        help="rotate each structure read from files by its own random rotation",
    )
    parser.add_argument("--synthetic_val", type=int, default=100, help="EMT val size w/o files")
    defaults = SweepConfig()
    hints = typing.get_type_hints(SweepConfig)
    for item in dataclasses.fields(SweepConfig):
        parser.add_argument(
            f"--{item.name}", type=hints[item.name], default=getattr(defaults, item.name)
        )
    return parser


def _parse_sweep(argv: Sequence[str]) -> Any:
    """The parsed ``sweep`` options; a parse error is one line naming the option (jsonargparse's
    multi-line usage text is left out)."""
    import math

    from iclr26_common.cli_support import (
        UsageError,
        check_config_file,
        config_values,
        refuse_non_finite,
    )

    for value in config_values(argv):  # a Latin-1 YAML: one line, not jsonargparse's traceback
        check_config_file(value)
    try:  # '--lr nan: not a finite number', as every other command says it
        refuse_non_finite(argv)
    except UsageError as error:
        raise UsageError(f"sweep: {error} (see {PROG} sweep --help)") from None
    try:
        ns = sweep_parser().parse_args(list(argv))
    except argparse.ArgumentError as error:
        # 'Parser key "lr": Expected a <class 'float'>. Got value: nan' -> '--lr: Expected ...'
        message = re.sub(r'Parser key "([\w.]+)":?', r"--\1:", " ".join(str(error).split()))
        raise UsageError(f"sweep: {message} (see {PROG} sweep --help)") from None
    if not math.isfinite(ns.min_distance) or ns.min_distance < 0:
        raise UsageError(
            f"sweep: --min_distance must be a finite number >= 0, got {ns.min_distance}"
        )
    if ns.synthetic_val < 1:
        raise UsageError(f"sweep: --synthetic_val must be >= 1, got {ns.synthetic_val}")
    return ns


def sweep_main(argv: Sequence[str]) -> int:
    import dataclasses

    from atomistic_scaling.constants import SYNTHETIC_VAL_SEED
    from atomistic_scaling.data import AtomsGraphDataset, fit_atomic_energies
    from atomistic_scaling.io import read_many
    from atomistic_scaling.sweep import (
        SweepConfig,
        fit_sweep,
        run_sweep,
        start_line,
        trivial_loss,
    )
    from atomistic_scaling.sweep_progress import SweepFolder
    from atomistic_scaling.sweep_report import plot_sweep, public_fits, summary_table
    from atomistic_scaling.symmetry import randomly_orient

    ns = _parse_sweep(argv)
    config = SweepConfig(**{f.name: ns[f.name] for f in dataclasses.fields(SweepConfig)})
    if ns.train_files and not ns.val_files:
        raise ValueError("sweep: --val_files is required with --train_files")
    out = check_output_options(ns)
    settings = {k: v for k, v in ns.as_dict().items() if k not in _SWEEP_RUN_OPTIONS}
    folder = SweepFolder(out.path, settings)
    done = folder.resume() if out.resumed else {}
    with out:
        if ns.overwrite:
            folder.remove_earlier()
        folder.start(resumed=out.resumed)
        need = config.steps_of(max(config.d_values)) * config.batch_size
        if not ns.quiet:  # before the data: generating it takes ~20 s (issue 36 review)
            first = (
                f"reading {len(ns.train_files)} training and {len(ns.val_files)} validation file(s)"
                if ns.train_files
                else f"generating {need} training and {ns.synthetic_val} validation EMT structures"
            )
            line = start_line(config, done, saved_in=folder.jobs_dir, first=first)
            print(line, file=sys.stderr, flush=True)
        if ns.train_files:
            train = read_many(ns.train_files, ns.energy_key, ns.forces_key, ns.min_distance)
            val = read_many(ns.val_files, ns.energy_key, ns.forces_key, ns.min_distance)
            if ns.random_orientation:
                train, val = randomly_orient(train, 0), randomly_orient(val, 1)
        else:
            from atomistic_scaling.synth import generate_structures

            train = generate_structures(need, seed=0)
            val = generate_structures(ns.synthetic_val, seed=SYNTHETIC_VAL_SEED)
        energies = fit_atomic_energies(train)
        train_set = AtomsGraphDataset(train, config.cutoff)
        val_set = AtomsGraphDataset(val, config.cutoff)
        trivial = trivial_loss(val_set, energies)
        records = run_sweep(  # references per seed, own data
            train_set, val_set, None, config, done=done, on_job=folder.save_job, quiet=ns.quiet
        )
        fits = fit_sweep(records, config.n_boot)
        plot_sweep(records, fits, out.path, trivial=trivial["loss"])
        folder.write_text("records.json", json.dumps(records, indent=1))
        folder.write_text(
            "fits.json",
            json.dumps({"trivial_predictor": trivial, "fits": public_fits(fits)}, indent=1),
        )
        table = summary_table(fits, trivial=trivial["loss"])
        folder.write_text("fits.md", table + "\n")
    print(table)
    print(f"wrote {out.path}")
    return 0


SCRIPT = ConsoleScript(
    "atomistic_scaling",
    __version__,
    DESCRIPTION,
    COMMANDS,
    handlers=lambda: {"synth": synth_main, "sweep": sweep_main},
    run_lightning=run_lightning_cli,
    error_types=("atomistic_scaling.io:AtomisticFormatError",),
)


def main(args: Sequence[str] | None = None) -> int:
    """Entry point; ``args`` defaults to ``sys.argv[1:]``. Input errors end with one line
    ``atomistic-scaling: error: ...`` on stderr and exit code 2 (``ATOMISTIC_SCALING_TRACEBACK=1``
    shows the traceback)."""
    return SCRIPT.main(args)


if __name__ == "__main__":
    sys.exit(main())
