"""The result of a classify / ood run (:class:`PGLLMResult`) and its files: ``predictions.csv``
(classify) or ``ood_scores.csv`` and ``roc.png`` (ood), and ``metrics.json``
(:func:`write_results`)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pointcloud_pgllm.metrics import msp

__all__ = [
    "CSV_NAMES",
    "ROC_PLOT",
    "PGLLMResult",
    "plot_roc",
    "write_result_files",
    "write_results",
]

CSV_NAMES = {"classify": "predictions.csv", "ood": "ood_scores.csv"}
#: ood's ROC curves (ID positive), one per ablation, with their AUROC (issue 39: none before).
ROC_PLOT = "roc.png"
FINAL = "both"  # the full PGLLM (guidance + propagation): the reported prediction


@dataclass
class PGLLMResult:
    """One classify / ood run on ``N`` items and ``C`` classes.

    ``labels`` ``[N]``: indices into ``class_names`` (-1: unlabelled, or OOD for ``mode ==
    "ood"``, whose ``class_names`` are the ID classes); ``scores``: ablation (none / guidance /
    propagation / both) -> ``[N, C]``; ``id_scores``: ablation -> ``[N]`` refined ID
    probabilities of the single-probability OOD score (``None``: the max-softmax of
    ``scores``); ``metrics``: ablation -> accuracy (and auroc / fpr95 for ood), empty without
    labels; ``captions`` ``[N]`` and ``features`` ``[N, D]``: the pipeline's inputs;
    ``settings``: the inputs and options, as ``metrics.json`` records them."""

    mode: str
    sources: list[str]
    labels: np.ndarray
    class_names: list[str]
    scores: dict[str, np.ndarray]
    metrics: dict[str, dict[str, float]]
    timings_s: dict[str, float]
    captions: list[str]
    features: np.ndarray
    settings: dict[str, Any] = field(default_factory=dict)
    id_scores: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.sources)

    def predicted(self, ablation: str = FINAL) -> list[str]:
        """The predicted class name of each item ``[N]`` under ``ablation``."""
        return [self.class_names[int(i)] for i in self.scores[ablation].argmax(axis=1)]

    def id_score(self, ablation: str = FINAL) -> np.ndarray:
        """ID score ``[N]`` (higher: more in-distribution): the refined single probability when
        the run asked for it, else the max-softmax of the class scores."""
        if self.id_scores is not None:
            return self.id_scores[ablation]
        return msp(self.scores[ablation])


def _label_text(result: PGLLMResult, label: int) -> str:
    if label >= 0:
        return result.class_names[label]
    return "OOD" if result.mode == "ood" else ""


def write_results(
    result: PGLLMResult, out: str | Path, overwrite: bool = False
) -> tuple[Path, ...]:
    """Write ``out/predictions.csv`` (classify) or ``out/ood_scores.csv`` (ood),
    ``out/metrics.json`` (and ``out/roc.png``, below); returns the paths of every file written,
    in that order.

    ``out`` is checked first (:func:`iclr26_common.outputs.check_out_folder`): a folder holding
    earlier results is refused unless ``overwrite``, a file is refused; the folder is marked
    partial until both files are written. CSV: one row per item: source, label, predicted (full
    PGLLM), predicted_none (the scorer alone), for ood id_score and is_id, then
    ``score_<class>`` of the full PGLLM (6 decimals). JSON: ``result.settings``, then
    ``metrics`` and ``timings_s``. ood also writes ``out/roc.png`` (:func:`plot_roc`)."""
    from iclr26_common.outputs import check_out_folder

    with check_out_folder(out, overwrite=overwrite) as folder:
        return write_result_files(result, folder.path)


def write_result_files(result: PGLLMResult, folder: Path) -> tuple[Path, ...]:
    """:func:`write_results` into a folder already checked (the CLI checks ``--out`` before
    the work): the CSV of ``result.mode`` and ``metrics.json`` (and, for ood with labels,
    ``roc.png``), each written atomically with mode 0644; the other mode's files an earlier run
    left there are removed (``--overwrite``). Returns the paths of every file written: the CSV,
    ``metrics.json`` and, when drawn, ``roc.png``."""
    from iclr26_common.outputs import write_text

    folder = Path(folder)
    for mode, name in CSV_NAMES.items():
        if mode != result.mode:
            (folder / name).unlink(missing_ok=True)
    if result.mode != "ood":
        (folder / ROC_PLOT).unlink(missing_ok=True)
    ood = result.mode == "ood"
    final, none = result.scores[FINAL], result.scores["none"]
    id_score = result.id_score(FINAL)
    handle = io.StringIO(newline="")
    writer = csv.writer(handle, lineterminator="\r\n")
    head = ["source", "label", "predicted", "predicted_none"]
    head += ["id_score", "is_id"] if ood else []
    writer.writerow(head + [f"score_{c}" for c in result.class_names])
    for i, source in enumerate(result.sources):
        label = int(result.labels[i])
        row = [
            source,
            _label_text(result, label),
            result.class_names[int(final[i].argmax())],
            result.class_names[int(none[i].argmax())],
        ]
        row += [f"{id_score[i]:.6f}", int(label >= 0)] if ood else []
        writer.writerow(row + [f"{v:.6f}" for v in final[i]])
    payload = {**result.settings, "metrics": result.metrics, "timings_s": result.timings_s}
    csv_path = write_text(folder / CSV_NAMES[result.mode], handle.getvalue())
    json_path = write_text(folder / "metrics.json", json.dumps(payload, indent=2))
    if ood and result.metrics:
        return csv_path, json_path, plot_roc(result, folder / ROC_PLOT)
    return csv_path, json_path


def plot_roc(result: PGLLMResult, path: Path) -> Path:
    """The ROC curve (ID positive: true-positive rate of ID clouds against the false-positive
    rate of OOD ones, thresholding :meth:`PGLLMResult.id_score`) of every ablation, with its
    AUROC in the legend, as a PNG at ``path`` (object API: the pyplot backend is left alone;
    written atomically, mode 0644)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from sklearn.metrics import roc_curve

    from iclr26_common.outputs import write_bytes

    is_id = (np.asarray(result.labels) >= 0).astype(int)
    fig = Figure(figsize=(4.2, 4.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for ablation in result.scores:
        fpr, tpr, _ = roc_curve(is_id, result.id_score(ablation))
        auc = result.metrics.get(ablation, {}).get("auroc", float("nan"))
        ax.plot(fpr, tpr, lw=1.4, label=f"{ablation} (AUROC {auc:.3f})")
    ax.plot([0, 1], [0, 1], color="grey", ls=":", lw=1, label="chance")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("false-positive rate (OOD taken as ID)")
    ax.set_ylabel("true-positive rate (ID kept)")
    n_id, n_ood = int(is_id.sum()), int(len(is_id) - is_id.sum())
    ax.set_title(f"PGLLM OOD: {n_id} ID vs {n_ood} OOD clouds", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=110, format="png")
    return write_bytes(path, buffer.getvalue())
