"""The ``predict`` writer every package's LightningCLI ``predict`` uses, and the workspace rule
for the files it writes (issue 36): :class:`BatchPredictionWriter` collects every batch's
predictions and writes them once, on rank 0 under DDP; :func:`check_prediction_file` refuses a
file an earlier predict wrote unless ``predict --overwrite``. :func:`iclr26_common.lightning.
run_cli` wires them (``run_cli(predict_writer=...)``); :mod:`iclr26_common.lightning` re-exports
both names.

Importing this module imports Lightning: import it inside the command that needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import BasePredictionWriter

from iclr26_common.outputs import check_out_file, write_bytes

__all__ = ["BatchPredictionWriter", "check_free", "check_prediction_file"]


def check_free(path: Path) -> Path:
    """``path`` if no file is there; else the one-line ``FileExistsError`` naming it."""
    if path.exists():
        raise FileExistsError(f"{path}: exists; predict never overwrites a file")
    return path


def check_prediction_file(path: str | Path, *, overwrite: bool = False) -> Path:
    """The workspace rule for a file ``predict`` writes into its run folder (issue 36): ``path``
    when nothing is there or ``overwrite`` (``predict --overwrite``) is given; else one line
    (:class:`~iclr26_common.outputs.OutputError`, exit 2) naming the file and ``--overwrite``:
    ``predict: DIR/predictions.csv: exists; pass --overwrite to replace it``. A folder of that
    name, or a run folder that cannot be written, is refused either way."""
    return check_out_file(path, option="predict:", overwrite=overwrite)


class BatchPredictionWriter(BasePredictionWriter):
    """The packages' ``predict`` writers: collects every batch's ``predict_step`` output with
    :meth:`collect` (``write_interval="batch"``) and writes at the end of the predict epoch
    (:meth:`on_predict_epoch_end`: a subclass implements :meth:`write_rows`).
    ``filename`` is the file written into the run folder (:meth:`target`), ``also`` any further
    files written beside it (all of them: ``filenames``); ``path`` holds the file written.
    Without sampler indices the loader is sequential: a batch's positions follow the
    :meth:`collected` ones, :meth:`batch_size` of them.

    Under DDP (issue 39) :meth:`on_predict_epoch_end` writes the files once: each rank predicts
    its share, rank 0 gets every rank's rows (:meth:`gathered`) and writes them in the split's
    order, each position once; no rank writes a file of its own.

    The files follow the workspace rule (:func:`check_prediction_file`): :meth:`setup` refuses,
    on every rank and before the first batch, a file an earlier predict wrote unless
    ``overwrite`` (set from ``predict --overwrite`` by :func:`run_cli`'s ``predict_writer``);
    write them with :meth:`write_output` (checked again, atomic, mode 0644)."""

    def __init__(self, filename: str, *also: str, overwrite: bool = False) -> None:
        super().__init__(write_interval="batch")
        self.filename = filename
        self.filenames: tuple[str, ...] = (filename, *also)
        self.overwrite = overwrite
        self.path: Path | None = None
        self.rows: dict[int, Any] = {}
        self.folder: Path | None = None  # the run folder, read by setup on every rank

    def target(self, trainer: Any) -> Path:
        """``filename`` in the run folder, ``trainer.log_dir``. Reading ``log_dir`` is a
        broadcast from rank 0 that every rank must join (one rank alone waits for ever):
        :meth:`setup` reads it on every rank and keeps it (``folder``) for the predict run, so
        rank 0 alone may call this while writing."""
        folder = self.folder or Path(trainer.log_dir or trainer.default_root_dir)
        return folder / self.filename

    def targets(self, trainer: Any) -> list[Path]:
        """Every file of ``filenames`` in the run folder (:meth:`target`'s)."""
        folder = self.target(trainer).parent
        return [folder / name for name in self.filenames]

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "predict":  # every rank sees the same files: all stop, none waits
            self.folder = None  # a folder kept from an earlier predict is not this run's
            self.folder = self.target(trainer).parent
            for path in self.targets(trainer):
                check_prediction_file(path, overwrite=self.overwrite)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "predict":
            self.folder = None

    def write_output(self, path: Path, data: bytes | str) -> Path:
        """Write one output file: checked again (:func:`check_prediction_file`), then
        atomically with mode 0644 (:func:`iclr26_common.outputs.write_bytes`)."""
        check_prediction_file(path, overwrite=self.overwrite)
        return write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data)

    def on_predict_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.rows = {}

    def collected(self) -> int:
        """How many predictions were collected so far in this epoch."""
        return len(self.rows)

    def batch_size(self, prediction: Any, batch: Any) -> int:
        """How many predictions one batch holds: by default ``len(prediction["probs"])``."""
        return len(prediction["probs"])

    def rows_of(self, prediction: Any, batch: Any) -> Sequence[Any]:
        """One row per item of a batch: by default ``prediction["probs"]`` as float32 NumPy
        rows."""
        return prediction["probs"].detach().float().cpu().numpy()

    def collect(self, prediction: Any, batch: Any, batch_indices: Sequence[int]) -> None:
        """Keep one batch's rows (:meth:`rows_of`) in ``rows``, by their positions
        ``batch_indices`` in the split."""
        for index, row in zip(batch_indices, self.rows_of(prediction, batch), strict=True):
            self.rows[int(index)] = row

    def gathered(self, trainer: Any) -> dict[int, Any]:
        """Every rank's ``rows`` by position in the split, in the split's order (a position
        predicted twice, as DistributedSampler pads the last batch, is kept once): under DDP
        each rank predicts its share and every rank gets them all (a collective: call it on
        every rank; rank 0 writes)."""
        rows = self.rows
        if trainer.world_size > 1:
            import torch.distributed as dist

            parts: list[Any] = [None] * trainer.world_size
            dist.all_gather_object(parts, rows)
            rows = {index: row for part in parts for index, row in part.items()}
        return dict(sorted(rows.items()))

    def on_predict_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Every rank's rows (:meth:`gathered`), written by rank 0 alone (:meth:`write_rows`);
        then every rank waits for rank 0 (``strategy.barrier``), so ``predict`` returns on no
        rank before the files are there. Every rank makes the same two collective calls, in
        the same order; a rank that fails closes its connections, and the others' gather or
        barrier then fails instead of waiting (gloo: "Connection closed by peer")."""
        rows = self.gathered(trainer)
        if trainer.is_global_zero:
            self.write_rows(trainer, pl_module, rows)
        trainer.strategy.barrier()

    def write_rows(self, trainer: Any, pl_module: Any, rows: dict[int, Any]) -> None:
        """Write the files from ``rows`` (every rank's, by position in the split, in its order):
        called on rank 0 only, so without collectives (:meth:`target` is safe here,
        ``trainer.log_dir`` is not). A subclass that keeps :meth:`on_predict_epoch_end`
        implements it."""
        raise NotImplementedError(f"{type(self).__name__} must implement write_rows")

    def write_on_batch_end(
        self,
        trainer: Any,
        pl_module: Any,
        prediction: Any,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        if not batch_indices:  # None or [] (Lightning could not tell): sequential, shuffle off
            start = self.collected()
            batch_indices = range(start, start + self.batch_size(prediction, batch))
        self.collect(prediction, batch, batch_indices)
