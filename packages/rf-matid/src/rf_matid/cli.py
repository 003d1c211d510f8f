"""The ``rf-matid`` command: LightningCLI training subcommands plus synth, benchmark and configs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

from rf_matid import __version__

TRAINER_SUBCOMMANDS = ("fit", "validate", "test", "predict")
DESCRIPTION = (
    "RF-MatID (ICLR 2026): wide-band RF material identification. Training subcommands are "
    "LightningCLI (see `rf-matid fit --help`, `rf-matid fit --print_config`); shipped configs can be "
    "named without a path: `rf-matid fit --config transformer1d --data.data_dir DIR`."
)


def shipped_config_dir() -> Path:
    return Path(str(files("rf_matid") / "configs"))


def shipped_configs() -> dict[str, Path]:
    return {path.stem: path for path in sorted(shipped_config_dir().glob("*.yaml"))}


def _resolve_config_names(argv: list[str]) -> list[str]:
    """Lets ``--config NAME`` name a shipped config when NAME is not an existing file."""
    resolved = list(argv)
    configs = shipped_configs()
    for i, arg in enumerate(resolved):
        if arg == "--config" and i + 1 < len(resolved):
            value = resolved[i + 1]
            if not Path(value).exists() and value in configs:
                resolved[i + 1] = str(configs[value])
        elif arg.startswith("--config="):
            value = arg.split("=", 1)[1]
            if not Path(value).exists() and value in configs:
                resolved[i] = f"--config={configs[value]}"
    return resolved


def _top_level_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rf-matid", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"rf-matid {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in TRAINER_SUBCOMMANDS:
        sub.add_parser(name, help=f"LightningCLI `{name}` (rf-matid {name} --help)", add_help=False)
    sub.add_parser("synth", help="write a synthetic dataset in the upstream folder/CSV format")
    sub.add_parser("benchmark", help="train/test the model × protocol × split table")
    sub.add_parser("configs", help="list the YAML configs shipped with the package")
    return parser


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """Runs LightningCLI on ``argv`` (a trainer subcommand first) and returns the CLI object."""
    from lightning.pytorch.cli import LightningCLI

    from rf_matid.data import RFMatIDDataModule
    from rf_matid.lit_module import RFMatIDClassifier

    class RFMatIDCLI(LightningCLI):
        def add_arguments_to_parser(self, parser) -> None:  # type: ignore[no-untyped-def]
            for attr in ("num_classes", "seq_len", "in_channels", "class_names"):
                parser.link_arguments(
                    f"data.init_args.{attr}", f"model.init_args.{attr}", apply_on="instantiate"
                )

    return RFMatIDCLI(
        RFMatIDClassifier,
        RFMatIDDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        seed_everything_default=42,
        save_config_kwargs={"overwrite": True},
        args=_resolve_config_names(list(argv)),
    )


def parse_int_list(text: str) -> list[int]:
    """'200:2000:50' (inclusive range) or '200,400,600' -> list of ints."""
    try:
        if ":" in text:
            start, stop, step = (int(part) for part in text.split(":"))
            return list(range(start, stop + 1, step))
        return [int(part) for part in text.split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'start:stop:step' or a comma-separated list of integers, got {text!r}"
        ) from None


def synth_main(argv: Sequence[str]) -> int:
    from rf_matid.classes import SYNTHETIC_CLASSES

    parser = argparse.ArgumentParser(
        prog="rf-matid synth",
        description="Write a physics-based synthetic RF-MatID dataset in the upstream format.",
    )
    parser.add_argument("--out", type=Path, required=True, help="dataset root to write")
    parser.add_argument("--n", type=int, default=1, help="samples per (class, distance, angle)")
    parser.add_argument(
        "--classes", type=lambda s: s.split(","), default=None, help="comma-separated class names"
    )
    parser.add_argument(
        "--distances", type=parse_int_list, default=None, help="mm, e.g. 200:2000:50"
    )
    parser.add_argument("--angles", type=parse_int_list, default=None, help="deg, e.g. 0:10:1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-time", action="store_true", help="skip the time-domain CSVs")
    ns = parser.parse_args(list(argv))
    if ns.n < 1:
        parser.error("--n must be >= 1")
    unknown = sorted(set(ns.classes or []) - set(SYNTHETIC_CLASSES))
    if unknown:
        parser.error(f"unknown classes {unknown}; known: {', '.join(SYNTHETIC_CLASSES)}")

    from rf_matid.synth import generate_dataset

    root = generate_dataset(
        ns.out,
        classes=ns.classes,
        distances_mm=ns.distances,
        angles_deg=ns.angles,
        samples_per_position=ns.n,
        seed=ns.seed,
        write_time=not ns.no_time,
    )
    print(f"wrote {root}")
    return 0


def configs_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="rf-matid configs", description="List shipped configs.")
    parser.parse_args(list(argv))
    for name, path in shipped_configs().items():
        print(f"{name:24s} {path}")
    return 0


def main(args: Sequence[str] | None = None) -> int | None:
    """Entry point of ``rf-matid``; ``args`` defaults to ``sys.argv[1:]``."""
    argv = list(sys.argv[1:] if args is None else args)
    if not argv or argv[0] in ("-h", "--help", "--version"):
        parser = _top_level_parser()
        if not argv:
            parser.print_help()
            raise SystemExit(2)
        parser.parse_args(argv)
        return 0
    command, rest = argv[0], argv[1:]
    if command in TRAINER_SUBCOMMANDS:
        run_lightning_cli(argv)
        return 0
    extra: dict[str, Callable[[Sequence[str]], int]] = {"configs": configs_main}
    if command == "synth":
        extra["synth"] = synth_main
    elif command == "benchmark":
        from rf_matid.benchmark import benchmark_main

        extra["benchmark"] = benchmark_main
    if command not in extra:
        _top_level_parser().error(f"unknown command {command!r}")
    return extra[command](rest)


if __name__ == "__main__":
    sys.exit(main())
