"""The RF-MatID benchmark table: model × protocol × split, trained and tested with Lightning.

``rf-matid benchmark`` (:func:`benchmark_main`) checks ``--out`` before any work
(:func:`iclr26_common.outputs.check_out_folder`), writes each finished cell (one arch ×
protocol × split × seed) as ``cells/<arch>_<protocol>_<split>_seed<k>.json`` the moment it
finishes, and, rerun with ``--resume`` after an interruption (Ctrl-C, a crash), skips the cells
already there; the tables and plots are written at the end.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import (
    ArgumentParser,
    comma_list,
    int_list,
    positive_int,
)
from iclr26_common.outputs import (
    add_output_options,
    check_output_options,
    record_settings,
)
from iclr26_common.progress import add_quiet_option, progress
from rf_matid.benchmark_report import (
    SPLIT_NAMES,
    markdown_table,
    plot_confusion,
    print_row,
    summarize,
    write_outputs,
)
from rf_matid.benchmark_store import (
    CELLS_DIR,
    SETTINGS_FILE,
    BenchmarkRow,
    check_resume_settings,
    check_synthetic_dataset,
    load_cells,
    remove_earlier_outputs,
    save_cell,
    synthetic_dataset,
)

__all__ = [
    "CELL_PROGRESS_EVERY_S",
    "SPLIT_NAMES",
    "BenchmarkRow",
    "benchmark_main",
    "epoch_lines_callback",
    "last_validation_callback",
    "markdown_table",
    "plot_confusion",
    "print_row",
    "run_benchmark",
    "summarize",
    "train_and_test",
    "validation_accuracy",
    "write_outputs",
]

#: Seconds between two progress lines inside one benchmark cell (its training epochs).
CELL_PROGRESS_EVERY_S = 10.0


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
    progress_every_s: float | None = None,
) -> BenchmarkRow:
    """Trains ``arch`` on the split's train part for ``epochs`` and evaluates the last epoch on test.

    ``progress_every_s``: print a line ``ARCH PROTOCOL SPLIT seed S epochs: E/N, T elapsed, ...``
    on stderr at the end of an epoch, at most once every that many seconds (``None``: none), so
    a long cell is not silent (``rf-matid benchmark`` without ``--quiet``;
    :func:`epoch_lines_callback`).

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
            progress_every_s,
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
    progress_every_s: float | None = None,
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
    last = last_validation_callback()
    callbacks = [last]
    if progress_every_s is not None:
        label = f"{arch} {protocol} {split} seed {seed}"
        callbacks.append(epoch_lines_callback(label, epochs, progress_every_s))
    trainer = quiet_trainer(
        max_epochs=epochs, deterministic="warn", callbacks=callbacks, **placement
    )
    started = time.perf_counter()
    trainer.fit(module, datamodule=datamodule)
    train_seconds = time.perf_counter() - started
    val_accuracy = validation_accuracy(trainer, module, datamodule, last)
    test_metrics = trainer.test(module, datamodule=datamodule, verbose=False)[0]
    # the test run's own predictions (in test order): no second pass over the test split
    records = datamodule.sample_records("test")
    names = list(datamodule.class_names)
    labels_predicted = [names[int(k)] for k in module.test_predictions]
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
        val_accuracy=val_accuracy,
        train_seconds=train_seconds,
        class_names=list(datamodule.class_names),
        confusion=module.test_confusion.tolist(),
        test_files=[file for file, _ in records],
        test_correct=[
            int(label == guess) for (_, label), guess in zip(records, labels_predicted, strict=True)
        ],
    )


def last_validation_callback() -> Any:
    """A callback recording ``val/acc`` and ``trainer.global_step`` at the end of each
    validation run (``.accuracy``, ``.step``; ``None`` before the first)."""
    from lightning.pytorch.callbacks import Callback

    class _LastValidation(Callback):
        accuracy: float | None = None
        step: int | None = None

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            if not trainer.sanity_checking and "val/acc" in trainer.callback_metrics:
                self.accuracy = float(trainer.callback_metrics["val/acc"])
                self.step = int(trainer.global_step)

    return _LastValidation()


def epoch_lines_callback(label: str, epochs: int, every_s: float) -> Any:
    """A callback showing a cell's training epochs with the workspace's progress lines
    (:func:`iclr26_common.progress.progress`, plain lines): ``LABEL epochs: E/N, T elapsed, about
    R left`` at the end of an epoch at most once every ``every_s`` seconds, and ``LABEL epochs:
    N/N, T elapsed (done)`` at the end; nothing until ``every_s`` seconds have passed since the
    training started (a short cell stays silent; the benchmark's own progress shows it started).
    """
    from lightning.pytorch.callbacks import Callback

    class _EpochLines(Callback):
        lines: Any = None

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            # plain lines (a cell's bar would fight the benchmark's), none before every_s
            self.lines = progress(
                range(epochs), description=f"{label} epochs", every_s=every_s, after_s=every_s
            )
            next(self.lines, None)  # starts the clock; no start line (the benchmark's shows it)

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            if self.lines is not None:
                next(self.lines, None)  # one epoch done; the last one prints "(done)"

    return _EpochLines()


def validation_accuracy(trainer: Any, module: Any, datamodule: Any, last: Any) -> float:
    """Validation accuracy of the fitted model: the one the fit logged when it validated after
    its last optimizer step (the same model and data a separate ``trainer.validate`` scores),
    else a ``trainer.validate`` pass. ``last``: :func:`last_validation_callback`'s callback."""
    if last.accuracy is not None and last.step == trainer.global_step:
        return float(last.accuracy)
    return float(trainer.validate(module, datamodule=datamodule, verbose=False)[0]["val/acc"])


def _init_worker(threads: int) -> None:
    import signal

    import torch

    # Ctrl-C reaches the whole process group: the parent stops the workers (one line, exit 130)
    # and a worker's own KeyboardInterrupt would print a traceback of its queue wait.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)


def _stop_workers(pool: Any) -> None:
    """Terminate a ProcessPoolExecutor's workers at once (on Ctrl-C): ``shutdown(wait=False)``
    alone would leave a running training to finish before the interpreter exits."""
    pool.shutdown(wait=False, cancel_futures=True)
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


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
    done: Mapping[tuple[str, str, str, int], BenchmarkRow] | None = None,
    quiet: bool = True,
) -> list[BenchmarkRow]:
    """Every arch × protocol × split × seed; ``model_kwargs[arch]`` goes to the LightningModule.

    ``batch_size=None`` uses upstream's batch size per model. ``workers > 1`` trains that many
    configurations at once in spawned processes, each with ``max(1, torch threads // workers)``
    torch threads (on 2 CPU cores two single-threaded trainings of the small CNN run about twice
    as fast as one two-threaded one); a script calling this must then guard its entry point with
    ``if __name__ == "__main__":``. ``accelerator=None``: :mod:`iclr26_common.device` chooses
    (and records) it in this process, and every training uses that choice. Rows come back in
    the product order; ``on_row`` is called as each finishes (``rf-matid benchmark`` saves the
    cell there). ``done``: rows already finished, by :func:`cell_key` (a resumed run's cells):
    they are not trained again and come back as given. ``quiet=False`` shows progress over the
    cells on stderr (:func:`iclr26_common.progress.progress`), with a start line ``benchmark
    cells: 0/N, ...`` before the first cell when stderr is not a terminal. Ctrl-C stops the
    worker processes too.
    """
    devices = None
    if accelerator is None:  # choose (and record) the device here: workers run in subprocesses
        from iclr26_common.device import lightning_accelerator, lightning_devices

        accelerator = lightning_accelerator()
        devices = lightning_devices()  # [N] for ICLR26_DEVICE=cuda:N (Lightning's 1 = cuda:0)
    keys = list(itertools.product(archs, protocols, splits, (int(s) for s in seeds)))
    done = dict(done or {})
    results: dict[int, BenchmarkRow] = {i: done[key] for i, key in enumerate(keys) if key in done}
    tasks = {
        i: {
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
            "progress_every_s": None if quiet else CELL_PROGRESS_EVERY_S,
        }
        for i, (arch, protocol, split, seed) in enumerate(keys)
        if i not in results
    }
    workers = max(1, min(int(workers), len(tasks)))
    # progress prints "DESCRIPTION: 0/N" at once: the description says how many train at a time
    done_before = f", {len(results)} done before" if results else ""
    description = f"benchmark cells ({workers} at a time{done_before})"
    if workers == 1:
        for i, task in progress(list(tasks.items()), description=description, quiet=quiet):
            results[i] = train_and_test(**task)
            if on_row is not None:
                on_row(results[i])
        return [results[i] for i in range(len(keys))]

    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    import torch

    from rf_matid.io import load_dataset

    load_dataset(data_dir)  # parse once here and fill the cache the workers read
    threads = max(1, torch.get_num_threads() // workers)
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads,),
    )
    try:
        futures = {pool.submit(train_and_test, **task): i for i, task in tasks.items()}
        finished = as_completed(futures)
        for future in progress(finished, description=description, total=len(futures), quiet=quiet):
            results[futures[future]] = future.result()
            if on_row is not None:
                on_row(results[futures[future]])
    except BaseException:
        _stop_workers(pool)
        raise
    pool.shutdown()
    return [results[i] for i in range(len(keys))]


def benchmark_main(argv: Sequence[str]) -> int:
    from rf_matid.model import MODELS
    from rf_matid.protocols import PROTOCOLS

    parser = ArgumentParser(
        prog="rf-matid benchmark",
        description="Train and test every model × protocol × split × seed; write benchmark.md, "
        "benchmark.json and confusion-matrix PNGs into --out, and each finished cell into "
        "OUT/cells/ as it finishes (an interrupted run continues with --resume).",
    )
    parser.add_argument("--data", type=Path, help="dataset root (upstream format)")
    parser.add_argument(
        "--synth",
        action="store_true",
        help="use a miniature synthetic dataset in OUT/data (generated on the first run, reused "
        "by reruns into the same --out; ignores --data)",
    )
    add_output_options(
        parser,
        required=False,
        resumable=True,
        default=Path("rf-matid-benchmark"),
        help="output folder: new or empty, or with --overwrite / --resume (--overwrite reuses "
        "a --synth dataset of the same grid)",
    )
    add_quiet_option(parser)
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
    parser.add_argument("--epochs", type=positive_int, default=10)
    parser.add_argument(
        "--batch-size", type=positive_int, default=None, help="default: upstream's per model"
    )
    parser.add_argument("--seeds", type=int_list, default=[0])
    parser.add_argument(
        "--workers", type=positive_int, default=1, help="trainings run in parallel processes"
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
    if not ns.synth:
        if ns.data is None:
            parser.error("give --data DIR or --synth")
        if not Path(ns.data).is_dir():
            raise FileNotFoundError(f"--data {ns.data} is not a directory")
    out = check_output_options(ns)
    settings = {
        "data": "synthetic" if ns.synth else str(Path(ns.data).resolve()),
        "models": archs,
        "protocols": protocols,
        "splits": splits,
        "seeds": ns.seeds,
        "mode": ns.mode,
        "epochs": ns.epochs,
        "batch_size": ns.batch_size,
    }
    done: dict[tuple[str, str, str, int], BenchmarkRow] = {}
    if out.resumed:
        check_resume_settings(out.path, settings)
        done = load_cells(out.path)
    if ns.synth:
        check_synthetic_dataset(out.path, replace=ns.overwrite, unfinished_ok=out.resumed)
    with out:
        if ns.overwrite:
            remove_earlier_outputs(out.path)
        if not out.resumed:
            record_settings(out.path / SETTINGS_FILE, settings)
        if ns.synth:
            data_dir = synthetic_dataset(out.path, replace=ns.overwrite, unfinished_ok=out.resumed)
        else:
            data_dir = Path(ns.data)
        if done:
            print(f"resuming: {len(done)} finished cell(s) in {out.path / CELLS_DIR}", flush=True)

        def finished(row: BenchmarkRow) -> None:
            save_cell(out.path, row)
            print_row(row)

        rows = run_benchmark(
            data_dir,
            archs,
            protocols,
            splits,
            ns.seeds,
            ns.mode,
            ns.epochs,
            ns.batch_size,
            on_row=finished,
            workers=ns.workers,
            done=done,
            quiet=ns.quiet,
        )
        written = write_outputs(rows, out.path)
    print(markdown_table(rows))
    print(f"wrote {written['markdown']}")
    return 0
