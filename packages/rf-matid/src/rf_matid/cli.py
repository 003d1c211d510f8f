"""The ``rf-matid`` command: LightningCLI training subcommands plus predict-files, synth,
benchmark and configs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import (
    CONFIGS_HELP,
    ArgumentParser,
    ConsoleScript,
    comma_list,
    int_list,
    positive_int,
)
from iclr26_common.outputs import add_output_options, check_output_options
from iclr26_common.progress import add_quiet_option
from rf_matid import __version__

__all__ = ["main", "run_lightning_cli"]

PROG = "rf-matid"
DESCRIPTION = (
    "RF-MatID (ICLR 2026): wide-band RF material identification. Training subcommands are "
    "LightningCLI (see `rf-matid fit --help`, `rf-matid fit --print_config`); shipped configs can be "
    "named without a path: `rf-matid fit --config transformer1d --data.data_dir DIR`. "
    "`predict` writes the test split's class probabilities to predictions.csv in the run's log "
    "folder (an earlier one only with --overwrite); `predict-files` writes those of new spectra "
    "from a checkpoint as a CSV."
)


COMMANDS = {
    "predict-files": "class probabilities of .csv/.s1p files or folders from a checkpoint, as a CSV",
    "synth": "write a synthetic dataset in the upstream folder/CSV format",
    "benchmark": "train/test the model × protocol × split table",
    "configs": CONFIGS_HELP,
}


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """Runs LightningCLI on ``argv`` (a trainer subcommand first) through the workspace's
    :func:`iclr26_common.lightning.run_cli` and returns the CLI object.

    The resolved config is saved into the run's log folder (the logger's version folder, or
    ``default_root_dir`` without a logger), never over an existing file. The split is built
    before the Trainer exists: a split the data cannot form is one input-error line. ``predict``
    writes ``predictions.csv`` there (:mod:`rf_matid.predict_writer`); an earlier one is refused
    unless ``predict --overwrite``.
    """
    from iclr26_common.lightning import CLI, run_cli
    from rf_matid.data import RFMatIDDataModule
    from rf_matid.lit_module import RFMatIDClassifier

    class RFMatIDCLI(CLI):
        def before_instantiate_classes(self) -> None:
            super().before_instantiate_classes()
            _check_data_dir(self.config)

    def build_split(cli: Any) -> None:
        if isinstance(cli.datamodule, RFMatIDDataModule):
            cli.datamodule.setup()

    links = [
        (f"data.init_args.{attr}", f"model.init_args.{attr}", "instantiate")
        for attr in ("num_classes", "seq_len", "in_channels", "class_names")
    ]

    def predictions_writer() -> Any:  # imported for ``predict`` only
        from rf_matid.predict_writer import PredictionCSVWriter

        return PredictionCSVWriter()

    return run_cli(
        RFMatIDClassifier,
        RFMatIDDataModule,
        argv,
        package="rf_matid",
        prog=PROG,
        links=links,
        seed=42,
        before_trainer=build_split,
        predict_writer=predictions_writer,
        cli_class=RFMatIDCLI,
    )


#: The option a LightningCLI user gives the dataset root with.
DATA_DIR_OPTION = "--data.init_args.data_dir"


def _check_data_dir(config: Any) -> None:
    """The dataset root of a parsed LightningCLI ``config``, checked before any class is built:
    a missing folder (the ``tiny`` config's default ``rf-matid-data`` unless ``synth`` wrote
    it) or a file is one line naming the option, not the reader's ``dataset root is not a
    directory``. Other data modules (a user's ``class_path``) are left to themselves."""
    from iclr26_common.cli_support import UsageError

    subcommand = config.get("subcommand") if config is not None else None
    node = config.get(subcommand) if subcommand else None
    data = node.get("data") if node is not None else None
    if data is None or not hasattr(data, "get"):
        return
    class_path = str(data.get("class_path") or "rf_matid.data.RFMatIDDataModule")
    if not class_path.endswith("RFMatIDDataModule"):
        return
    init = data.get("init_args") if "init_args" in data else data
    value = init.get("data_dir") if init is not None and hasattr(init, "get") else None
    if value is None:
        return
    path = Path(str(value))
    if not path.exists():
        raise UsageError(f"{DATA_DIR_OPTION} {value}: no such folder")
    if not path.is_dir():
        raise UsageError(f"{DATA_DIR_OPTION} {value}: is a file; give the dataset folder")


def synth_main(argv: Sequence[str]) -> int:
    from rf_matid.classes import SYNTHETIC_CLASSES

    parser = ArgumentParser(
        prog="rf-matid synth",
        description="Write a physics-based synthetic RF-MatID dataset in the upstream format.",
    )
    add_output_options(
        parser,
        help="dataset root to write: new or empty, or with --overwrite (which replaces the "
        "frequency_domain/ and time_domain/ trees an earlier synth wrote; other files stay)",
    )
    parser.add_argument(
        "--n", type=positive_int, default=1, help="samples per (class, distance, angle)"
    )
    parser.add_argument(
        "--classes", type=comma_list, default=None, help="comma-separated class names"
    )
    parser.add_argument("--distances", type=int_list, default=None, help="mm, e.g. 200:2000:50")
    parser.add_argument("--angles", type=int_list, default=None, help="deg, e.g. 0:10:1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-time", action="store_true", help="skip the time-domain CSVs")
    parser.add_argument(
        "--upstream-header",
        action="store_true",
        help="write the released files' frequency header 'freq.GHZ,real,imag' (over Hz values, "
        "as the real data) instead of 'freq_hz,real,imag'",
    )
    ns = parser.parse_args(list(argv))
    unknown = sorted(set(ns.classes or []) - set(SYNTHETIC_CLASSES))
    if unknown:
        parser.error(f"unknown classes {unknown}; known: {', '.join(SYNTHETIC_CLASSES)}")

    from rf_matid.io import FREQ_HEADER, UPSTREAM_FREQ_HEADER
    from rf_matid.synth_dataset import generate_dataset, remove_generated

    out = check_output_options(ns)
    with out:
        if ns.overwrite:
            remove_generated(out.path)
        root = generate_dataset(
            out.path,
            classes=ns.classes,
            distances_mm=ns.distances,
            angles_deg=ns.angles,
            samples_per_position=ns.n,
            seed=ns.seed,
            write_time=not ns.no_time,
            freq_header=UPSTREAM_FREQ_HEADER if ns.upstream_header else FREQ_HEADER,
        )
    print(f"wrote {root}")
    return 0


def predict_files_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="rf-matid predict-files",
        description="Predict the material of each input spectrum with a trained checkpoint and "
        "write a CSV: file, predicted class, [label,] one probability column per class. Inputs: "
        "upstream frequency CSVs, Touchstone .s1p files, or folders of them (searched "
        "recursively; a file in an upstream position folder is labelled with its class). The "
        "spectra get the training preprocessing: the checkpoint's protocol crop, then complex "
        "whitening.",
    )
    parser.add_argument("inputs", nargs="+", type=Path, help=".csv / .s1p files or folders")
    parser.add_argument("--ckpt", type=Path, required=True, help="Lightning checkpoint (.ckpt)")
    add_output_options(parser, kind="file", help="CSV file to write")
    parser.add_argument(
        "--protocol", default=None, help="P1..P5 (default: the one recorded in the checkpoint)"
    )
    parser.add_argument("--batch-size", type=positive_int, default=256)
    add_quiet_option(parser)
    ns = parser.parse_args(list(argv))
    check_output_options(ns, kind="file")

    from rf_matid.predict import collect_inputs, load_predictor, predict_files

    inputs = collect_inputs(ns.inputs)
    predictor = load_predictor(ns.ckpt, protocol=ns.protocol, option="--ckpt")
    out = predict_files(
        predictor, inputs, ns.out, ns.batch_size, overwrite=ns.overwrite, quiet=ns.quiet
    )
    print(f"wrote {out} ({len(inputs)} spectra, {len(predictor.class_names)} classes)")
    return 0


def _benchmark_main(argv: Sequence[str]) -> int:
    from rf_matid.benchmark import benchmark_main  # imports the models: only when asked for

    return benchmark_main(argv)


SCRIPT = ConsoleScript(
    "rf_matid",
    __version__,
    DESCRIPTION,
    COMMANDS,
    handlers=lambda: {
        "synth": synth_main,
        "predict-files": predict_files_main,
        "benchmark": _benchmark_main,
    },
    run_lightning=run_lightning_cli,
    error_types=("rf_matid.io:RFMatIDFormatError", "rf_matid.predict:CheckpointError"),
    configs_width=24,
)


def main(args: Sequence[str] | None = None) -> int:
    """Entry point of ``rf-matid``; ``args`` defaults to ``sys.argv[1:]``.

    Input errors (a missing data folder, a malformed file, a split the data cannot build, an
    existing output) end with one line ``rf-matid: error: ...`` on stderr and exit code 2; set
    ``RF_MATID_TRACEBACK=1`` to get the traceback instead. Other exceptions propagate.
    """
    return SCRIPT.main(args)


if __name__ == "__main__":
    sys.exit(main())
