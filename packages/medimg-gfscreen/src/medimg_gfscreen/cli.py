"""The ``medimg-gfscreen`` command: LightningCLI training subcommands plus synth, datalist,
screen, export and configs."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from iclr26_common.cli_support import (
    CONFIGS_HELP,
    ArgumentParser,
    ConsoleScript,
    comma_list,
    finite_float,
    nonnegative_float,
    nonnegative_int,
    positive_int,
    probability,
)
from iclr26_common.device import add_device_option
from iclr26_common.outputs import (
    RESUME_HELP,
    add_output_options,
    check_output_options,
    overwrite_help,
)
from iclr26_common.progress import add_quiet_option
from medimg_gfscreen import __version__

__all__ = ["main", "run_lightning_cli"]

PROG = "medimg-gfscreen"
PREDICT_OUT = "--data.init_args.output_dir"  # predict's output folder
DESCRIPTION = (
    "GF-Screen (ICLR 2026): glance-and-focus RL for pan-cancer CT screening, on MONAI + "
    "Lightning. Training subcommands are LightningCLI (`medimg-gfscreen fit --help`, "
    "`--print_config`); shipped configs can be named without a path: `medimg-gfscreen fit "
    "--config gfscreen --data.init_args.datalist DATALIST.json`. `predict` writes one lesion mask "
    "per image of a folder (--data.init_args.predict_dir, --data.init_args.output_dir); `screen` "
    "writes the mask of one CT from exported, Lightning or official weights."
)


COMMANDS = {
    "synth": "write synthetic CT volumes + labels + a Decathlon datalist",
    "datalist": "write a Decathlon datalist from an MSD / FLARE folder",
    "screen": "glance-then-focus one CT volume and write its lesion mask",
    "export": "Focus + Glance weights of a Lightning checkpoint as a .pt",
    "configs": CONFIGS_HELP,
}


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """Runs LightningCLI on ``argv`` (a trainer subcommand first) through the workspace's
    :func:`iclr26_common.lightning.run_cli`; returns the CLI object.

    ROI size, sub-volumes per volume and voxel spacing are linked from the data module into the
    model. The datalist and every case's headers are checked before the Trainer exists, so bad
    data is one line before Lightning's start-up output. ``predict`` writes one mask per image
    (:class:`medimg_gfscreen.screen.MaskWriter`) into the data module's ``output_dir``.
    """
    from iclr26_common.lightning import CLI, run_cli
    from medimg_gfscreen.data import GFScreenDataModule
    from medimg_gfscreen.lit_module import GFScreenModule

    class GFScreenCLI(CLI):
        out: Any = None  # predict's output folder, checked once parsed

        def parse_arguments(self, parser: Any, args: Any) -> None:
            super().parse_arguments(parser, args)
            if self.config.get("subcommand") == "predict":  # before a model or data is loaded
                node = self.config["predict"]
                # the one output rule, --overwrite with --resume refused (also from a YAML)
                self.out = check_output_options(
                    SimpleNamespace(
                        **{
                            _dest(PREDICT_OUT): _predict_output_dir(node),
                            "overwrite": bool(node.get("overwrite")),
                            "resume": bool(node.get("resume")),
                        }
                    ),
                    option=PREDICT_OUT,
                )

        def instantiate_trainer(self, **kwargs: Any) -> Any:
            from medimg_gfscreen.screen import MaskWriter

            trainer = super().instantiate_trainer(**kwargs)
            if self.subcommand == "predict":
                trainer.callbacks.append(MaskWriter())
            return trainer

        def _run_subcommand(self, subcommand: str) -> None:
            if subcommand != "predict" or self.out is None:
                super()._run_subcommand(subcommand)
                return
            import signal

            handler = signal.getsignal(signal.SIGINT)
            with self.out:  # partial while the masks are written
                try:
                    super()._run_subcommand(subcommand)
                except SystemExit:
                    # Lightning turns Ctrl-C into "Detected KeyboardInterrupt ..." and exit 1:
                    # give it back as Ctrl-C (one line `PROG: interrupted`, exit 130)
                    if getattr(self.trainer, "interrupted", False):
                        raise KeyboardInterrupt from None
                    raise
                finally:
                    with contextlib.suppress(ValueError, TypeError):  # not the main thread
                        signal.signal(signal.SIGINT, handler)  # Lightning ignores SIGINT after

    def check_data(cli: Any) -> None:
        if isinstance(cli.datamodule, GFScreenDataModule):
            subcommand = cli.config.get("subcommand", "fit")
            if subcommand == "predict" and cli.out is not None:
                node = cli.config["predict"]
                cli.datamodule.existing_masks = (
                    "skip" if cli.out.resumed else "replace" if node.get("overwrite") else "refuse"
                )
            cli.datamodule.setup(subcommand)

    # linked on parse: model and data module get the same config values, so a logger's hparams
    # merge sees equal values (an instantiate link passed the data module's tuples and a
    # logged `fit` stopped with "different values" for roi_size/spacing)
    links = [
        (f"data.init_args.{attr}", f"model.init_args.{attr}", "parse")
        for attr in ("roi_size", "num_samples", "spacing")
    ]
    return run_cli(
        GFScreenModule,
        GFScreenDataModule,
        argv,
        package="medimg_gfscreen",
        prog=PROG,
        links=links,
        before_trainer=check_data,
        cli_class=GFScreenCLI,
        subcommand_flags={
            "predict": {
                "--overwrite": {"action": "store_true", "help": overwrite_help(PREDICT_OUT)},
                "--resume": {
                    "action": "store_true",
                    "help": RESUME_HELP["folder"].format(option=PREDICT_OUT),
                },
            }
        },
    )


def _dest(option: str) -> str:
    """The attribute :func:`~iclr26_common.outputs.check_output_options` reads for ``option``."""
    return option.lstrip("-").replace("-", "_")


def _predict_output_dir(node: Any) -> str:
    """``predict``'s ``data.init_args.output_dir`` (the data module's default, ``predictions``,
    when the config names none)."""
    import inspect

    from medimg_gfscreen.data import GFScreenDataModule

    data = node.get("data") or {}
    init = data.get("init_args") if hasattr(data, "get") and "init_args" in data else data
    value = init.get("output_dir") if hasattr(init, "get") else None
    if value is None:
        value = inspect.signature(GFScreenDataModule).parameters["output_dir"].default
    return str(value)


def parse_shape(text: str) -> tuple[int, int, int]:
    """``--shape``: ``'96,96,32'`` -> (96, 96, 32); three positive integers."""
    expected = f"expected three positive integers 'X,Y,Z', got {text!r}"
    try:
        values = comma_list(text, int)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(expected) from None
    if len(values) != 3 or min(values) < 1:
        raise argparse.ArgumentTypeError(expected)
    return values[0], values[1], values[2]


def synth_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} synth",
        description="Write synthetic CT (int16 HU, 1x1x3 mm, 0-3 lesions, ~30% healthy) as "
        "imagesTr/<case>_0000.nii.gz + labelsTr/<case>.nii.gz + dataset.json + datalist.json.",
    )
    add_output_options(parser)
    parser.add_argument("--n", type=int, default=12, help="number of cases")
    parser.add_argument("--shape", type=parse_shape, default=(96, 96, 32), help="X,Y,Z voxels")
    parser.add_argument("--val-fraction", type=probability, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(list(argv))
    if ns.n < 2:
        parser.error("--n must be >= 2 (a training and a validation case)")
    if not 0 < ns.val_fraction < 1:
        parser.error("--val-fraction must be in (0, 1)")
    out = check_output_options(ns)  # before any work; synth has no --resume
    from medimg_gfscreen.synth import generate_dataset

    with out:
        path = generate_dataset(
            out.path, ns.n, ns.shape, ns.seed, ns.val_fraction, overwrite=ns.overwrite
        )
    print(f"wrote {ns.n} cases and {path}")
    return 0


def datalist_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} datalist",
        description="Pair images and masks of an MSD task folder (dataset.json + imagesTr/ + "
        "labelsTr/) or a FLARE / nnU-Net folder (*_0000.nii.gz images, same-stem masks) and "
        "write a Decathlon datalist JSON (training / validation).",
    )
    parser.add_argument("root", type=Path, help="data folder")
    add_output_options(
        parser,
        kind="file",
        required=False,
        help="datalist JSON to write (default: ROOT/datalist.json)",
    )
    parser.add_argument("--folds", type=positive_int, default=1, help="k-fold split (e.g. 5)")
    parser.add_argument("--fold", type=nonnegative_int, default=0, help="validation fold")
    parser.add_argument(
        "--val-fraction", type=probability, default=0.2, help="hold-out if --folds 1"
    )
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(list(argv))
    ns.out = ns.out or ns.root / "datalist.json"
    out = check_output_options(ns, kind="file")
    from medimg_gfscreen.io import discover_cases, write_datalist

    cases = discover_cases(ns.root)
    path = write_datalist(
        cases, out, ns.folds, ns.fold, ns.val_fraction, ns.seed, overwrite=ns.overwrite
    )
    print(f"wrote {path} ({len(cases)} cases)")
    return 0


def screen_main(argv: Sequence[str]) -> int:
    from medimg_gfscreen.constants import HU_WINDOWS

    parser = ArgumentParser(
        prog=f"{PROG} screen",
        description="Glance-then-Focus one CT (NIfTI): writes the lesion mask (uint8) with the "
        "input's affine and header, and a table of its tiles (--table: case, tile, voxel and "
        "world coordinates of the centre, Glance p, selected, the mask's lesion voxels in the "
        "tile); prints a summary (tiles selected, selection rate, Glance p range, lesion "
        "voxels).",
    )
    parser.add_argument("image", type=Path, help="CT volume, .nii.gz / .nii, HU")
    parser.add_argument("--ckpt", type=Path, required=True, help="exported .pt or Lightning .ckpt")
    add_output_options(parser, kind="file", help="mask to write (.nii.gz)")
    parser.add_argument(
        "--table",
        type=Path,
        default=None,
        help="the tiles' CSV to write (default: beside --out, MASK.tiles.csv)",
    )
    parser.add_argument("--print-tiles", action="store_true", help="also print one line per tile")
    add_device_option(parser)
    parser.add_argument(
        "--region",
        default=None,
        choices=sorted(HU_WINDOWS),
        help="HU window (default: the training's, as the checkpoint records it; abdomen when it "
        "records none, e.g. official checkpoints)",
    )
    parser.add_argument(
        "--threshold", type=finite_float, default=None, help="gate (default: ckpt's)"
    )
    parser.add_argument(
        "--overlap", type=nonnegative_float, default=None, help="tile overlap (ckpt's)"
    )
    parser.add_argument(
        "--prenormalized",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the image is already scaled to [0, 1] (no HU window; by default an image that does "
        "not look like CT in Hounsfield units is refused; default: the training's)",
    )
    parser.add_argument(
        "--no-hu-check",
        dest="check_hu",
        action="store_false",
        help="accept a CT in HU without air in view (no voxel <= -200 HU); keeps the HU window",
    )
    parser.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="use --region / --prenormalized even where they differ from the training's",
    )
    add_quiet_option(parser, also="no HU window line")
    ns = parser.parse_args(list(argv))
    if ns.overlap is not None and not 0 <= ns.overlap < 1:
        parser.error("--overlap must be in [0, 1)")
    check_output_options(ns, kind="file")  # before any work
    if not ns.out.name.endswith((".nii.gz", ".nii")):
        parser.error(f"--out {ns.out}: must end with .nii.gz or .nii")
    table = ns.table if ns.table is not None else _tiles_table_path(ns.out)
    if table.resolve() == ns.out.resolve():
        parser.error(f"--table {table}: is --out")
    # the second output: the same rule, under the same --overwrite
    check_output_options(
        SimpleNamespace(table=table, overwrite=ns.overwrite), kind="file", option="--table"
    )
    from iclr26_common.device import choose_device, parse_device_option
    from iclr26_common.outputs import write_text
    from medimg_gfscreen.screen import screen_file, tiles_table

    # a bad $ICLR26_DEVICE was refused in one line before the command started (common's
    # check_device_env); choose_device's DeviceError is a user error there too
    device = str(parse_device_option(ns.device) if ns.device is not None else choose_device())
    info = screen_file(
        ns.image,
        ns.ckpt,
        ns.out,
        device,
        ns.region,
        ns.threshold,
        ns.overlap,
        progress=not ns.quiet,
        overwrite=ns.overwrite,
        prenormalized=ns.prenormalized,
        check_hu=ns.check_hu,
        allow_mismatch=ns.allow_mismatch,
        ckpt_option="--ckpt",
    )
    write_text(table, tiles_table(info))
    if not ns.quiet:
        pre = info["preprocessing"]
        source = "the checkpoint's" if "region" in info["recorded"] else "not recorded: default"
        window = "none (prenormalized)" if pre["prenormalized"] else f"{pre['region']}"
        print(f"HU window: {window} (region {source})")
    if ns.print_tiles:
        print("tile centres in the input image: voxel index (i, j, k) and world RAS (mm)")
        for tile in info["tiles"]:
            i, j, k = tile["voxel"]
            x, y, z = tile["world"]
            print(
                f"tile voxel {i:7.1f},{j:7.1f},{k:7.1f}  world {x:8.1f},{y:8.1f},{z:8.1f} mm  "
                f"p={tile['p']:.4f}  {'focus' if tile['selected'] else '-'}"
            )
    p = [tile["p"] for tile in info["tiles"]]
    with_lesion = sum(1 for tile in info["tiles"] if tile["lesion_voxels"])
    print(
        f"{info['case']}: selected {info['n_selected']}/{info['n_tiles']} tiles "
        f"(selection rate {100 * info['selection_rate']:.1f} %), Glance p "
        f"{min(p, default=float('nan')):.3f}..{max(p, default=float('nan')):.3f}; "
        f"{info['lesion_voxels']} lesion voxels ({with_lesion} tiles hold some); "
        f"wrote {info['out']} and {table} ({len(p)} tiles)"
    )
    return 0


def _tiles_table_path(mask: Path) -> Path:
    """``screen``'s default table: ``MASK.tiles.csv`` beside the mask (``.nii.gz`` dropped)."""
    stem = mask.name[: -len(".nii.gz")] if mask.name.endswith(".nii.gz") else mask.stem
    return mask.with_name(f"{stem}.tiles.csv")


def export_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} export",
        description="Save the Focus + Glance weights and architecture of a checkpoint as a .pt "
        "that loads with torch.load(weights_only=True).",
    )
    parser.add_argument("--ckpt", type=Path, required=True)
    add_output_options(parser, kind="file", help="the .pt to write")
    ns = parser.parse_args(list(argv))
    out = check_output_options(ns, kind="file")  # before any work
    import io

    import torch

    from iclr26_common.outputs import write_bytes
    from medimg_gfscreen.screen import load_screen_module, load_weights

    weights = load_weights(ns.ckpt, option="--ckpt")
    module = load_screen_module(ns.ckpt, weights=weights, option="--ckpt")
    buffer = io.BytesIO()
    torch.save(module.export_weights(weights["preprocessing"]), buffer)
    write_bytes(out, buffer.getvalue())
    print(f"wrote {ns.out}")
    return 0


SCRIPT = ConsoleScript(
    "medimg_gfscreen",
    __version__,
    DESCRIPTION,
    COMMANDS,
    handlers=lambda: {
        "synth": synth_main,
        "datalist": datalist_main,
        "screen": screen_main,
        "export": export_main,
    },
    run_lightning=run_lightning_cli,
    error_types=("medimg_gfscreen.io:GFScreenFormatError",),
    traceback_env="GFSCREEN_TRACEBACK",
)


def main(args: Sequence[str] | None = None) -> int:
    """Entry point; ``args`` defaults to ``sys.argv[1:]``. Input errors end with one line
    ``medimg-gfscreen: error: ...`` on stderr and exit code 2 (``GFSCREEN_TRACEBACK=1`` shows
    the traceback)."""
    return SCRIPT.main(args)


if __name__ == "__main__":
    sys.exit(main())
