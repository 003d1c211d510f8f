"""The RF-MatID benchmark table: model × protocol × split, trained and tested with Lightning."""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common.cli_support import ArgumentParser, comma_list, int_list

SPLIT_NAMES = ("S1", "S2-mod1", "S2-mod2", "S2-mod3", "S3-mod1", "S3-mod2", "S3-mod3")


@dataclass
class BenchmarkRow:
    """One trained-and-tested configuration."""

    arch: str
    protocol: str
    split: str
    application_mode: str
    seed: int
    epochs: int
    n_train: int
    n_val: int
    n_test: int
    accuracy: float
    macro_f1: float
    val_accuracy: float
    train_seconds: float
    class_names: list[str] = field(default_factory=list)
    confusion: list[list[int]] = field(default_factory=list)


def train_and_test(
    data_dir: str | Path,
    arch: str,
    protocol: str = "P1",
    split: str = "S1",
    application_mode: str = "all_classes",
    epochs: int = 10,
    batch_size: int | None = None,
    seed: int = 0,
    model_kwargs: dict[str, Any] | None = None,
    cache_dir: str | Path | None = None,
    accelerator: str | None = None,
    split_seed: int = 42,
    devices: int | list[int] | None = None,
) -> BenchmarkRow:
    """Trains ``arch`` on the split's train part for ``epochs`` and evaluates the last epoch on test.

    Optimiser, schedule and batch size follow upstream's recipe for ``arch``
    (:data:`rf_matid.model.UPSTREAM_TRAINING`) unless ``batch_size`` / ``model_kwargs`` override
    them; the model of the last epoch is tested (no checkpoint selection on the test set).
    ``seed`` drives initialisation and shuffling; the split is drawn with ``split_seed`` (fixed
    at upstream's 42 by default), so every training seed sees the same split. ``accelerator``:
    ``None`` takes :func:`iclr26_common.device.lightning_accelerator`'s choice (CUDA when
    PyTorch sees it; ``ICLR26_DEVICE=cpu`` forces the CPU); one device either way. ``devices``:
    Lightning's ``devices`` (``[N]`` for ``cuda:N``; None: Lightning's default).
    """
    from iclr26_common.lightning import quiet_lightning

    with quiet_lightning():
        return _train_and_test(
            data_dir,
            arch,
            protocol,
            split,
            application_mode,
            epochs,
            batch_size,
            seed,
            model_kwargs,
            cache_dir,
            accelerator,
            split_seed,
            devices,
        )


def _train_and_test(
    data_dir: str | Path,
    arch: str,
    protocol: str,
    split: str,
    application_mode: str,
    epochs: int,
    batch_size: int | None,
    seed: int,
    model_kwargs: dict[str, Any] | None,
    cache_dir: str | Path | None,
    accelerator: str | None,
    split_seed: int,
    devices: int | list[int] | None = None,
) -> BenchmarkRow:
    from iclr26_common import seed_everything
    from iclr26_common.lightning import quiet_trainer
    from rf_matid.data import RFMatIDDataModule
    from rf_matid.lit_module import RFMatIDClassifier
    from rf_matid.model import INPUT_FORMATS, UPSTREAM_TRAINING

    recipe = {k: v for k, v in UPSTREAM_TRAINING[arch].items() if k not in ("batch_size", "epochs")}
    batch_size = batch_size or UPSTREAM_TRAINING[arch]["batch_size"]
    seed_everything(seed)
    datamodule = RFMatIDDataModule(
        str(data_dir),
        protocol=protocol,
        split=split,
        application_mode=application_mode,
        batch_size=batch_size,
        seed=seed,
        split_seed=split_seed,
        cache_dir=None if cache_dir is None else str(cache_dir),
        freq_data_type=INPUT_FORMATS[arch],
    )
    sizes = datamodule.split_sizes()
    module = RFMatIDClassifier(
        arch=arch,
        num_classes=datamodule.num_classes,
        seq_len=datamodule.seq_len,
        in_channels=datamodule.in_channels,
        class_names=datamodule.class_names,
        **(recipe | (model_kwargs or {})),
    )
    placement: dict[str, Any] = {} if accelerator is None else {"accelerator": accelerator}
    if devices is not None:
        placement["devices"] = devices
    trainer = quiet_trainer(max_epochs=epochs, deterministic="warn", **placement)
    started = time.perf_counter()
    trainer.fit(module, datamodule=datamodule)
    train_seconds = time.perf_counter() - started
    val_metrics = trainer.validate(module, datamodule=datamodule, verbose=False)[0]
    test_metrics = trainer.test(module, datamodule=datamodule, verbose=False)[0]
    return BenchmarkRow(
        arch=arch,
        protocol=protocol,
        split=split,
        application_mode=application_mode,
        seed=seed,
        epochs=epochs,
        n_train=sizes["train"],
        n_val=sizes["val"],
        n_test=sizes["test"],
        accuracy=float(test_metrics["test/acc"]),
        macro_f1=float(test_metrics["test/macro_f1"]),
        val_accuracy=float(val_metrics["val/acc"]),
        train_seconds=train_seconds,
        class_names=list(datamodule.class_names),
        confusion=module.test_confusion.tolist(),
    )


def print_row(row: BenchmarkRow) -> None:
    """One progress line per trained configuration."""
    print(
        f"{row.arch:14s} {row.protocol} {row.split:8s} seed {row.seed}: "
        f"test acc {100 * row.accuracy:5.1f}%  macro-F1 {100 * row.macro_f1:5.1f}%  "
        f"({row.n_train} train / {row.n_test} test, {row.train_seconds:.0f} s)",
        flush=True,
    )


def summarize(
    rows: Sequence[BenchmarkRow], metric: str = "accuracy"
) -> dict[tuple[str, str, str], tuple[float, float, int]]:
    """(arch, protocol, split) -> (mean, std, n seeds) of ``metric``."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for row in rows:
        groups.setdefault((row.arch, row.protocol, row.split), []).append(getattr(row, metric))
    return {
        key: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v))
        for key, v in groups.items()
    }


def markdown_table(rows: Sequence[BenchmarkRow], metric: str = "accuracy") -> str:
    """Rows: model × protocol; columns: splits; cells: mean ± std over seeds (in %)."""
    stats = summarize(rows, metric)
    splits = [s for s in SPLIT_NAMES if any(key[2] == s for key in stats)]
    pairs = list(dict.fromkeys((key[0], key[1]) for key in stats))
    header = f"| model | protocol | {' | '.join(splits)} |"
    lines = [header, "|---|---|" + "---:|" * len(splits)]
    for arch, protocol in pairs:
        cells = []
        for split in splits:
            if (arch, protocol, split) in stats:
                mean, std, n = stats[(arch, protocol, split)]
                cells.append(f"{100 * mean:.1f} ± {100 * std:.1f} (n={n})")
            else:
                cells.append("—")
        lines.append(f"| {arch} | {protocol} | {' | '.join(cells)} |")
    return "\n".join(lines)


def plot_confusion(row: BenchmarkRow, path: Path) -> Path:
    """Row-normalised confusion matrix of one test run, as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    confusion = np.asarray(row.confusion, dtype=float)
    normalised = confusion / np.maximum(confusion.sum(axis=1, keepdims=True), 1)
    size = max(4.0, 0.45 * len(row.class_names) + 2)
    fig = Figure(figsize=(size, size))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    image = ax.imshow(normalised, vmin=0, vmax=1, cmap="Blues")
    ax.set_xticks(range(len(row.class_names)), row.class_names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(row.class_names)), row.class_names, fontsize=7)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(
        f"{row.arch} {row.protocol} {row.split} (seed {row.seed}): acc {100 * row.accuracy:.1f}%"
    )
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def run_benchmark(
    data_dir: str | Path,
    archs: Sequence[str],
    protocols: Sequence[str] = ("P1",),
    splits: Sequence[str] = ("S1",),
    seeds: Sequence[int] = (0,),
    application_mode: str = "all_classes",
    epochs: int = 10,
    batch_size: int | None = None,
    model_kwargs: dict[str, dict[str, Any]] | None = None,
    on_row: Callable[[BenchmarkRow], Any] | None = None,
    workers: int = 1,
    accelerator: str | None = None,
    split_seed: int = 42,
) -> list[BenchmarkRow]:
    """Every arch × protocol × split × seed; ``model_kwargs[arch]`` goes to the LightningModule.

    ``batch_size=None`` uses upstream's batch size per model. ``workers > 1`` trains that many
    configurations at once in spawned processes, each with ``max(1, torch threads // workers)``
    torch threads (on 2 CPU cores two single-threaded trainings of the small CNN run about twice
    as fast as one two-threaded one); a script calling this must then guard its entry point with
    ``if __name__ == "__main__":``. ``accelerator=None``: :mod:`iclr26_common.device` chooses
    (and records) it in this process, and every training uses that choice. Rows come back in the product order; ``on_row`` is called as
    each finishes.
    """
    devices = None
    if accelerator is None:  # choose (and record) the device here: workers run in subprocesses
        from iclr26_common.device import lightning_accelerator, lightning_devices

        accelerator = lightning_accelerator()
        devices = lightning_devices()  # [N] for ICLR26_DEVICE=cuda:N (Lightning's 1 = cuda:0)
    tasks = [
        {
            "data_dir": data_dir,
            "arch": arch,
            "protocol": protocol,
            "split": split,
            "application_mode": application_mode,
            "epochs": epochs,
            "batch_size": batch_size,
            "seed": seed,
            "model_kwargs": (model_kwargs or {}).get(arch),
            "accelerator": accelerator,
            "split_seed": split_seed,
            "devices": devices,
        }
        for arch, protocol, split, seed in itertools.product(archs, protocols, splits, seeds)
    ]
    workers = max(1, min(int(workers), len(tasks)))
    if workers == 1:
        rows = []
        for task in tasks:
            rows.append(train_and_test(**task))
            if on_row is not None:
                on_row(rows[-1])
        return rows

    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    import torch

    from rf_matid.io import load_dataset

    load_dataset(data_dir)  # parse once here and fill the cache the workers read
    threads = max(1, torch.get_num_threads() // workers)
    results: dict[int, BenchmarkRow] = {}
    with ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads,),
    ) as pool:
        futures = {pool.submit(train_and_test, **task): i for i, task in enumerate(tasks)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            if on_row is not None:
                on_row(results[futures[future]])
    return [results[i] for i in range(len(tasks))]


def write_outputs(rows: Sequence[BenchmarkRow], out_dir: Path) -> dict[str, Path]:
    """benchmark.md (accuracy and macro-F1 tables), benchmark.json, one confusion PNG per cell."""
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = out_dir / "benchmark.md"
    markdown.write_text(
        "# RF-MatID benchmark\n\n## Test accuracy (%)\n\n"
        + markdown_table(rows, "accuracy")
        + "\n\n## Test macro-F1 (%)\n\n"
        + markdown_table(rows, "macro_f1")
        + "\n"
    )
    results = out_dir / "benchmark.json"
    results.write_text(json.dumps([asdict(row) for row in rows], indent=1))
    written = {"markdown": markdown, "json": results}
    seen = set()
    for row in rows:
        key = (row.arch, row.protocol, row.split)
        if key not in seen:
            seen.add(key)
            name = f"confusion_{row.arch}_{row.protocol}_{row.split}.png"
            written[name] = plot_confusion(row, out_dir / name)
    return written


SYNTH_MARKER = ".rf-matid-benchmark-synth.json"


def synthetic_dataset(out_dir: Path) -> Path:
    """``out_dir/data``: the miniature synthetic set, generated once and reused on reruns.

    A marker written after a complete generation records the grid; a rerun with the same grid
    reuses the data, anything else in ``out_dir/data`` (a different grid, an interrupted run,
    foreign files) is an error naming the folder, never mixed or overwritten.
    """
    from rf_matid.synth_dataset import generate_dataset

    data_dir = out_dir / "data"
    marker = data_dir / SYNTH_MARKER
    spec = {"grid": MINIATURE_GRID, "seed": 0, "write_time": False}
    if marker.is_file():
        try:
            recorded = json.loads(marker.read_text())
        except ValueError:
            recorded = None
        if recorded == spec:
            print(f"reusing the synthetic dataset in {data_dir}", flush=True)
            return data_dir
        raise FileExistsError(
            f"{data_dir} holds a synthetic dataset of another grid or version; delete it or "
            "choose another --out"
        )
    if data_dir.exists() and any(data_dir.iterdir()):
        raise FileExistsError(
            f"{data_dir} is not empty and was not completed by `rf-matid benchmark --synth` "
            "(an interrupted run or other files); delete it or choose another --out"
        )
    generate_dataset(data_dir, **MINIATURE_GRID, seed=0, write_time=False)
    marker.write_text(json.dumps(spec))
    return data_dir


def benchmark_main(argv: Sequence[str]) -> int:
    from rf_matid.model import MODELS
    from rf_matid.protocols import PROTOCOLS

    parser = ArgumentParser(
        prog="rf-matid benchmark",
        description="Train and test every model × protocol × split; write benchmark.md, "
        "benchmark.json and confusion-matrix PNGs into --out (replacing those of an earlier run).",
    )
    parser.add_argument("--data", type=Path, help="dataset root (upstream format)")
    parser.add_argument(
        "--synth",
        action="store_true",
        help="use a miniature synthetic dataset in OUT/data (generated on the first run, reused "
        "by reruns into the same --out; ignores --data)",
    )
    parser.add_argument("--out", type=Path, default=Path("rf-matid-benchmark"))
    parser.add_argument(
        "--models", type=comma_list, default="material_id,mlp", help=f"of {','.join(MODELS)}"
    )
    parser.add_argument(
        "--protocols", type=comma_list, default="P1", help=f"of {','.join(PROTOCOLS)}"
    )
    parser.add_argument(
        "--splits",
        type=comma_list,
        default="S1,S2-mod2,S3-mod1",
        help=f"of {','.join(SPLIT_NAMES)}",
    )
    parser.add_argument("--mode", default="all_classes", choices=("all_classes", "super_classes"))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument(
        "--batch-size", type=int, default=None, help="default: upstream's per model"
    )
    parser.add_argument("--seeds", type=int_list, default=[0])
    parser.add_argument(
        "--workers", type=int, default=1, help="trainings run in parallel processes"
    )
    ns = parser.parse_args(list(argv))
    archs, protocols, splits = ns.models, ns.protocols, ns.splits
    for values, known, what in (
        (archs, MODELS, "model"),
        (protocols, PROTOCOLS, "protocol"),
        (splits, SPLIT_NAMES, "split"),
    ):
        unknown = [v for v in values if v not in known]
        if unknown:
            parser.error(f"unknown {what} {unknown}; choose from {', '.join(known)}")
    if ns.epochs < 1 or ns.workers < 1:
        parser.error("--epochs and --workers must be >= 1")
    if ns.synth:
        data_dir = synthetic_dataset(ns.out)
    elif ns.data is None:
        parser.error("give --data DIR or --synth")
    else:
        data_dir = ns.data
        if not Path(data_dir).is_dir():
            raise FileNotFoundError(f"--data {data_dir} is not a directory")

    rows = run_benchmark(
        data_dir,
        archs,
        protocols,
        splits,
        ns.seeds,
        ns.mode,
        ns.epochs,
        ns.batch_size,
        on_row=print_row,
        workers=ns.workers,
    )
    written = write_outputs(rows, ns.out)
    print(markdown_table(rows))
    print(f"wrote {written['markdown']}")
    return 0


# Positions of the miniature synthetic dataset (`benchmark --synth`; the full grid of the
# `rf-matid.benchmark` experiment): every 300 mm (train and test distances for all three S2 mods),
# every angle (S3 needs 0..10), two repeated measurements per position (S1 is a random split over
# repeated measurements).
MINIATURE_GRID: dict[str, Any] = {
    "distances_mm": list(range(200, 2001, 300)),
    "angles_deg": list(range(0, 11)),
    "samples_per_position": 2,
}
