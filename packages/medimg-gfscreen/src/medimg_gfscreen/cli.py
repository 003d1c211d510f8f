"""The ``medimg-gfscreen`` command: LightningCLI training subcommands plus synth, datalist,
screen, export and configs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import (
    CONFIGS_HELP,
    ArgumentParser,
    configs_command,
    dispatch,
    is_user_error,
    lightning_commands,
    resolve_config_names,
    run_with_one_line_errors,
    shipped_configs,
    top_level_parser,
)
from medimg_gfscreen import __version__
from medimg_gfscreen.cliutils import parse_shape

__all__ = ["main", "run_lightning_cli", "shipped_configs"]

PROG = "medimg-gfscreen"
TRAINER_SUBCOMMANDS = ("fit", "validate", "test", "predict")
DESCRIPTION = (
    "GF-Screen (ICLR 2026): glance-and-focus RL for pan-cancer CT screening, on MONAI + "
    "Lightning. Training subcommands are LightningCLI (`medimg-gfscreen fit --help`, "
    "`--print_config`); shipped configs can be named without a path: `medimg-gfscreen fit "
    "--config gfscreen --data.init_args.datalist DATALIST.json`. `screen` writes a lesion mask "
    "for one CT with trained weights."
)


COMMANDS = {
    "synth": "write synthetic CT volumes + labels + a Decathlon datalist",
    "datalist": "write a Decathlon datalist from an MSD / FLARE folder",
    "screen": "glance-then-focus one CT volume and write its lesion mask",
    "export": "Focus + Glance weights of a Lightning checkpoint as a .pt",
    "configs": CONFIGS_HELP,
}


def _top_level_parser() -> ArgumentParser:
    return top_level_parser(PROG, DESCRIPTION, __version__, COMMANDS, lightning=TRAINER_SUBCOMMANDS)


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """Runs LightningCLI on ``argv`` (a trainer subcommand first); returns the CLI object.

    ROI size, sub-volumes per volume and voxel spacing are linked from the data module into the
    model. The resolved config is saved only into the run's logger directory, never over an
    existing file and never into the current directory when there is no logger.
    """
    from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
    from lightning.pytorch.loggers.logger import DummyLogger

    from medimg_gfscreen.data import GFScreenDataModule
    from medimg_gfscreen.lit_module import GFScreenModule

    class RunDirSaveConfig(SaveConfigCallback):
        def setup(self, trainer, pl_module, stage) -> None:  # type: ignore[no-untyped-def]
            if self.already_saved:
                return
            logger = trainer.logger
            if logger is None or isinstance(logger, DummyLogger) or trainer.log_dir is None:
                self.already_saved = True
                return
            path = Path(trainer.log_dir) / self.config_filename
            if path.exists():
                raise FileExistsError(f"{path} exists; not overwriting it")
            super().setup(trainer, pl_module, stage)

    class GFScreenCLI(LightningCLI):
        def add_arguments_to_parser(self, parser) -> None:  # type: ignore[no-untyped-def]
            for attr in ("roi_size", "num_samples", "spacing"):
                parser.link_arguments(
                    f"data.init_args.{attr}", f"model.init_args.{attr}", apply_on="instantiate"
                )

        def instantiate_trainer(self, **kwargs: Any) -> Any:
            # check the datalist and every case before Lightning's start-up lines
            if isinstance(self.datamodule, GFScreenDataModule):
                subcommand = self.config.get("subcommand", "fit")
                self.datamodule.setup({"fit": "fit"}.get(subcommand, subcommand))
            return super().instantiate_trainer(**kwargs)

    import warnings

    # main() hands LightningCLI the resolved argv (shipped config names -> paths) on purpose
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    return GFScreenCLI(
        GFScreenModule,
        GFScreenDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        seed_everything_default=0,
        save_config_callback=RunDirSaveConfig,
        save_config_kwargs={"overwrite": False},
        args=resolve_config_names(argv, shipped_configs("medimg_gfscreen")),
    )


def synth_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} synth",
        description="Write synthetic CT (int16 HU, 1x1x3 mm, 0-3 lesions, ~30%% healthy) as "
        "imagesTr/<case>_0000.nii.gz + labelsTr/<case>.nii.gz + dataset.json + datalist.json.",
    )
    parser.add_argument("--out", type=Path, required=True, help="new (or empty) folder")
    parser.add_argument("--n", type=int, default=12, help="number of cases")
    parser.add_argument("--shape", type=parse_shape, default=(96, 96, 32), help="X,Y,Z voxels")
    parser.add_argument("--val-fraction", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(list(argv))
    if ns.n < 1:
        parser.error("--n must be >= 1")
    if not 0 <= ns.val_fraction < 1:
        parser.error("--val-fraction must be in [0, 1)")
    from medimg_gfscreen.synth import generate_dataset

    path = generate_dataset(ns.out, ns.n, ns.shape, ns.seed, ns.val_fraction)
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
    parser.add_argument("--out", type=Path, default=None, help="default ROOT/datalist.json")
    parser.add_argument("--folds", type=int, default=1, help="k-fold split (e.g. 5)")
    parser.add_argument("--fold", type=int, default=0, help="validation fold")
    parser.add_argument("--val-fraction", type=float, default=0.2, help="hold-out if --folds 1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    ns = parser.parse_args(list(argv))
    from medimg_gfscreen.io import discover_cases, write_datalist

    cases = discover_cases(ns.root)
    out = ns.out or ns.root / "datalist.json"
    path = write_datalist(cases, out, ns.folds, ns.fold, ns.val_fraction, ns.seed,
                          overwrite=ns.overwrite)  # fmt: skip
    print(f"wrote {path} ({len(cases)} cases)")
    return 0


def screen_main(argv: Sequence[str]) -> int:
    from medimg_gfscreen.constants import HU_WINDOWS

    parser = ArgumentParser(
        prog=f"{PROG} screen",
        description="Glance-then-Focus one CT (NIfTI): prints every tile's Glance score and the "
        "selection rate, writes the lesion mask (uint8) with the input's affine and header.",
    )
    parser.add_argument("image", type=Path, help="CT volume, .nii.gz / .nii, HU")
    parser.add_argument("--ckpt", type=Path, required=True, help="exported .pt or Lightning .ckpt")
    parser.add_argument("--out", type=Path, required=True, help="mask to write (.nii.gz)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--region", default="abdomen", choices=sorted(HU_WINDOWS))
    parser.add_argument("--threshold", type=float, default=None, help="gate (default: ckpt's)")
    parser.add_argument("--overlap", type=float, default=None, help="tile overlap (ckpt's)")
    parser.add_argument("--quiet", action="store_true", help="no per-tile lines, no progress")
    parser.add_argument("--overwrite", action="store_true")
    ns = parser.parse_args(list(argv))
    if ns.overlap is not None and not 0 <= ns.overlap < 1:
        parser.error("--overlap must be in [0, 1)")
    import torch

    if ns.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {ns.device}: CUDA is not available")
    from medimg_gfscreen.screen import screen_file

    info = screen_file(ns.image, ns.ckpt, ns.out, ns.device, ns.region, ns.threshold,
                       ns.overlap, progress=not ns.quiet, overwrite=ns.overwrite)  # fmt: skip
    if not ns.quiet:
        for (x, y, z), p, selected in info["tiles"]:
            print(f"tile {x:4d},{y:4d},{z:4d}  p={p:.4f}  {'focus' if selected else '-'}")
    print(
        f"selected {info['n_selected']}/{info['n_tiles']} tiles "
        f"(selection rate {100 * info['selection_rate']:.1f} %); "
        f"{info['lesion_voxels']} lesion voxels; wrote {info['out']}"
    )
    return 0


def export_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} export",
        description="Save the Focus + Glance weights and architecture of a checkpoint as a .pt "
        "that loads with torch.load(weights_only=True).",
    )
    parser.add_argument("--ckpt", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--overwrite", action="store_true")
    ns = parser.parse_args(list(argv))
    if ns.out.exists() and not ns.overwrite:
        raise FileExistsError(f"{ns.out} exists; not overwriting it (use --overwrite)")
    import torch

    from medimg_gfscreen.screen import load_screen_module

    module = load_screen_module(ns.ckpt)
    torch.save(module.export_weights(), ns.out)
    print(f"wrote {ns.out}")
    return 0


def _is_user_error(error: BaseException) -> bool:
    """Bad input (one line, exit 2) rather than a bug: ``GFScreenFormatError``, path errors, and
    ``ValueError`` raised by medimg_gfscreen's own validation."""
    from medimg_gfscreen.io import GFScreenFormatError

    return is_user_error(error, "medimg_gfscreen", (GFScreenFormatError,))


def main(args: Sequence[str] | None = None) -> int | None:
    """Entry point; ``args`` defaults to ``sys.argv[1:]``. Input errors end with one line
    ``medimg-gfscreen: error: ...`` on stderr and exit code 2 (``GFSCREEN_TRACEBACK=1`` shows
    the traceback)."""
    argv = sys.argv[1:] if args is None else args
    return run_with_one_line_errors(
        PROG, _dispatch, argv, is_user=_is_user_error, traceback_env="GFSCREEN_TRACEBACK"
    )


def _dispatch(argv: list[str]) -> int:
    handlers = {
        **lightning_commands(TRAINER_SUBCOMMANDS, run_lightning_cli),
        "synth": synth_main,
        "datalist": datalist_main,
        "screen": screen_main,
        "export": export_main,
        "configs": configs_command(PROG, "medimg_gfscreen", 16),
    }
    return dispatch(argv, _top_level_parser, handlers)


if __name__ == "__main__":
    sys.exit(main())
