"""The Python API of the PGLLM pipeline on a dataset: :func:`classify` (recognition) and
:func:`detect_ood` (ID classes vs the rest), the functions behind ``pointcloud-pgllm classify``
and ``ood``.

The evaluated set is either a dataset (``data``: a ModelNet-style OFF tree, a PointNet HDF5
folder or one ``.h5`` file; its clouds are encoded and captioned here) or PointLLM's outputs
(``captions``: its captions JSON, with ``features``: the same clouds' features, a ``.npy`` file
or an array ``[N, D]``). Both functions return a :class:`~pointcloud_pgllm.results.PGLLMResult`
(scores ``[N, C]`` per ablation, metrics, captions, features); writing files is separate
(:func:`~pointcloud_pgllm.results.write_results`). Bad input raises
:class:`~pointcloud_pgllm.errors.PGLLMInputError` with one line; options that do not fit raise
its subclass :class:`~pointcloud_pgllm.errors.PGLLMUsageError`, whose messages name an option
by its command-line spelling (field ``graph_k`` is ``--graph-k``). Both functions need at least
2 classes (the tfidf scorer's classifier and the softmax of MSP need them).

Example::

    from pointcloud_pgllm.api import PipelineOptions, classify

    result = classify("data/modelnet40", options=PipelineOptions(n_points=256, graph_k=4))
    result.metrics["both"]["accuracy"], result.predicted()[:3]
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pointcloud_pgllm.constants import (
    DEFAULT_N_POINTS,
    GUIDANCE_NEIGHBOURS,
    OOD_PROPAGATION_K,
    OOD_SPLITS,
    PROPAGATION_ALPHA,
    PROPAGATION_K,
    PROPAGATION_STEPS,
)
from pointcloud_pgllm.errors import PGLLMInputError, PGLLMUsageError, PGLLMWarning
from pointcloud_pgllm.graph import GRAPH_VARIANTS
from pointcloud_pgllm.pipeline import IDProbabilityScorer, PGLLMConfig, evaluate, pgllm_scores
from pointcloud_pgllm.results import PGLLMResult
from pointcloud_pgllm.scorers import SCORERS, Scorer

__all__ = [
    "OOD_SCORES",
    "PipelineOptions",
    "classify",
    "detect_ood",
    "encode_clouds",
    "make_scorer",
]

OOD_SCORES = ("msp", "single-probability")

PathLike = str | Path


@dataclass(frozen=True)
class PipelineOptions:
    """Settings of a classify / ood run (each field is the CLI option of the same name, with
    dashes: ``graph_k`` is ``--graph-k``)."""

    split: str = "test"  # split of ``data`` to evaluate (the support set)
    n_points: int = DEFAULT_N_POINTS  # points sampled per cloud
    seed: int = 0  # seed of the point sampling and of the captioner
    encoder: str = "pointnn"  # 'pointnn', a fit .ckpt or a TorchScript file
    scorer: str = "tfidf"  # one of scorers.SCORERS: tfidf, smollm2, http
    train_data: PathLike | None = None  # tfidf: labelled training data (default: data's train)
    base_url: str | None = None  # http scorer: e.g. http://localhost:8000/v1
    model: str | None = None  # http scorer: model name
    graph: str = "official"  # graph variant (graph.GRAPH_VARIANTS)
    graph_k: int | None = None  # neighbours per node; None: 10 for classify, 3 for ood
    guidance_k: int = GUIDANCE_NEIGHBOURS  # neighbours whose captions guide the scorer
    alpha: float = PROPAGATION_ALPHA  # propagation a
    steps: int = PROPAGATION_STEPS  # propagation T
    normalize: bool | None = None  # L2-normalise features; None: on, off for given features

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise PGLLMUsageError(f"--scorer: {self.scorer!r} is not one of {', '.join(SCORERS)}")
        if self.graph not in GRAPH_VARIANTS:
            raise PGLLMUsageError(
                f"--graph: {self.graph!r} is not one of {', '.join(GRAPH_VARIANTS)}"
            )
        if self.scorer == "http" and (not self.base_url or not self.model):
            raise PGLLMUsageError("--scorer http needs --base-url and --model")
        if self.n_points < 1:
            raise PGLLMUsageError(f"--n-points must be >= 1, got {self.n_points}")
        if not 0.0 <= self.alpha <= 1.0:  # graph.propagate's wording (the CLI's line before api.py)
            raise PGLLMInputError(f"alpha must be in [0, 1], got {self.alpha}")
        if self.steps < 0:
            raise PGLLMUsageError(f"--steps must be >= 0, got {self.steps}")


def encode_clouds(
    points: np.ndarray, encoder: str, batch_size: int = 16, quiet: bool = True
) -> np.ndarray:
    """Features ``[N, D]`` of clouds ``points`` ``[N, P, 3]`` by the encoder ``encoder``
    (:func:`~pointcloud_pgllm.model.load_encoder`'s spec), on one torch thread;
    ``quiet=False`` shows progress on stderr."""
    from iclr26_common.threads import torch_threads
    from pointcloud_pgllm.model import encode, load_encoder

    with torch_threads(1):  # the encoders' many small kernels run faster on one thread
        return encode(load_encoder(encoder), points, batch_size, quiet=quiet).numpy()


def make_scorer(
    options: PipelineOptions,
    class_names: list[str],
    eval_sources: list[str],
    data: PathLike | None = None,
    captions: PathLike | None = None,
    quiet: bool = True,
) -> Scorer:
    """The scorer ``options.scorer`` names. The tfidf scorer is fitted on labelled training data
    that never holds the evaluated items: ``options.train_data``, else the 'train' split of
    ``data`` (a folder; one file holds one split); with ``captions``, a labelled PointLLM
    captions JSON (``options.train_data``)."""
    from pointcloud_pgllm.scorers import HTTPChatScorer, LikelihoodScorer, TfidfScorer

    if options.scorer == "http":
        return HTTPChatScorer(options.base_url, options.model)
    if options.scorer == "smollm2":
        return LikelihoodScorer()
    from pointcloud_pgllm.captions import GeometricCaptioner
    from pointcloud_pgllm.io import load_dataset, shared_source_files

    if captions is not None:
        from pointcloud_pgllm.pointllm_io import captions_tfidf_scorer

        return captions_tfidf_scorer(captions, options.train_data, class_names)
    data_path = Path(data)  # type: ignore[arg-type]  # data is given when captions is not
    train_path = Path(options.train_data) if options.train_data is not None else data_path
    if options.train_data is None and data_path.is_file():
        raise PGLLMInputError(
            f"{data_path}: one file holds one split; the tfidf scorer would be fitted on the "
            "evaluation labels: give its training data with --train-data (or use another scorer)"
        )
    same = train_path.exists() and data_path.exists() and train_path.samefile(data_path)
    if same and (data_path.is_file() or options.split == "train"):
        raise PGLLMInputError(
            f"{train_path}: --train-data is the evaluated data (--data, --split {options.split}); "
            "the tfidf scorer must never see the evaluation labels"
        )
    train = load_dataset(
        train_path,
        "train",
        n_points=options.n_points,
        seed=options.seed,
        classes=class_names,
        quiet=quiet,
    )
    shared = shared_source_files(train.sources, eval_sources)
    if shared:  # e.g. a file given as --data and its folder as --train-data (or the reverse)
        raise PGLLMInputError(
            f"{shared[0]}: is read both as --train-data ({train_path}) and as the evaluated data "
            f"({data_path}); the tfidf scorer must never see the evaluation labels"
        )
    return TfidfScorer().fit(
        GeometricCaptioner(options.seed)(train.points, quiet=quiet),
        train.labels,
        train.class_names,
    )


def _read_features(features: PathLike | np.ndarray, n_rows: int) -> np.ndarray:
    """PointLLM's features ``[n_rows, D]`` float32 from a ``.npy`` path or an array."""
    from pointcloud_pgllm.pointllm_io import read_features

    if not isinstance(features, np.ndarray):
        return read_features(features, n_rows)
    if features.ndim != 2 or features.shape[0] != n_rows or features.dtype.kind not in "fiu":
        raise PGLLMInputError(
            f"features: need a numeric array [{n_rows}, D] (one row per caption), got "
            f"{features.dtype} {features.shape}"
        )
    if not np.isfinite(features).all():
        raise PGLLMInputError("features: the array has non-finite values")
    return features.astype(np.float32, copy=False)


def _check_two_classes(classes: list[str], option: str) -> None:
    """One-line :class:`PGLLMUsageError` unless ``classes`` names at least 2 distinct classes
    (the tfidf scorer's classifier cannot be fitted on one, and MSP of one class is always 1)."""
    if len(set(classes)) < 2:
        raise PGLLMUsageError(
            f"{option}: give at least 2 distinct classes, got {len(classes)} "
            f"({', '.join(classes) or 'none'})"
        )


def _load_inputs(
    data: PathLike | None,
    captions: PathLike | None,
    features: PathLike | np.ndarray | None,
    options: PipelineOptions,
    classes: list[str] | None,
    quiet: bool = True,
) -> tuple[Any, np.ndarray | None]:
    """The evaluated set: clouds of ``data`` (a PointCloudSet, features ``None``), or PointLLM's
    captions (a CaptionSet) with their features ``[N, D]``; ``classes`` keeps the items of those
    classes only (unlabelled captions: all items, scored against ``classes``)."""
    from pointcloud_pgllm.io import load_dataset

    if captions is None and features is None:
        if data is None:
            raise PGLLMUsageError("give --data, or --captions with --features")
        loaded = load_dataset(
            data,
            options.split,
            n_points=options.n_points,
            seed=options.seed,
            classes=classes,
            quiet=quiet,
        )
        return loaded, None
    if data is not None:
        raise PGLLMUsageError("--data and --captions/--features exclude each other")
    if captions is None or features is None:
        raise PGLLMUsageError("--captions and --features go together")
    from pointcloud_pgllm.pointllm_io import keep_classes, read_pointllm_captions

    items = read_pointllm_captions(captions, classes)
    feats = _read_features(features, len(items))
    if classes is not None:
        items, feats = keep_classes(items, feats, captions)
    return items, feats


@dataclass
class _Run:
    """What one pipeline pass produced (before the result object is assembled)."""

    scores: dict[str, np.ndarray]
    metrics: dict[str, dict[str, float]]
    timings_s: dict[str, float]
    captions: list[str]
    features: np.ndarray
    scorer: Scorer
    config: PGLLMConfig


def _run_pipeline(
    items: Any,
    loaded_features: np.ndarray | None,
    labels: np.ndarray,
    class_names: list[str],
    options: PipelineOptions,
    graph_k: int,
    scorer: Scorer | None,
    data: PathLike | None,
    captions_path: PathLike | None,
    quiet: bool = True,
) -> _Run:
    from pointcloud_pgllm.captions import GeometricCaptioner

    n = len(items)
    if not 1 <= graph_k < n or not 1 <= options.guidance_k < n:
        raise PGLLMUsageError(f"--graph-k and --guidance-k must be in 1..{n - 1} for {n} clouds")
    _warn_if_graph_k_spans_classes(graph_k, labels, class_names)
    if scorer is None:
        scorer = make_scorer(options, class_names, items.sources, data, captions_path, quiet)
    if loaded_features is not None:  # PointLLM's captions and features
        captions, feats = list(items.captions), loaded_features
    else:
        captions = GeometricCaptioner(options.seed)(items.points, quiet=quiet)
        feats = encode_clouds(items.points, options.encoder, quiet=quiet)
    # the official scripts use PointLLM's raw features (ACC.py:101-104)
    normalize = options.normalize if options.normalize is not None else loaded_features is None
    config = PGLLMConfig(
        options.graph, graph_k, options.guidance_k, options.alpha, options.steps, normalize
    )
    scores = pgllm_scores(feats, captions, scorer, class_names, config, quiet=quiet)
    metrics = {a: evaluate(s, labels) for a, s in scores.items()} if (labels >= 0).any() else {}
    return _Run(scores, metrics, config.timings, captions, feats, scorer, config)


def _warn_if_graph_k_spans_classes(
    graph_k: int, labels: np.ndarray, class_names: list[str]
) -> None:
    """A :class:`PGLLMWarning` when ``graph_k`` is not below the number of clouds of the
    smallest labelled class: then every cloud of that class has neighbours of other classes in
    the graph, and propagation mixes their scores (issue 39: on 2 clouds per class the default
    K = 10 took classify from 0.76 without refinement to 0.35 with it). The labels only decide
    whether to warn; k is used as given (capping it by the labels would let them into the
    predictions)."""
    labels = np.asarray(labels)
    known = labels[labels >= 0]
    if known.size == 0:
        return
    counts = np.bincount(known, minlength=len(class_names))
    present = np.flatnonzero(counts)
    smallest = int(present[np.argmin(counts[present])])
    if graph_k >= counts[smallest]:
        warnings.warn(
            PGLLMWarning(
                f"--graph-k {graph_k} is not below the {counts[smallest]} clouds of the "
                f"smallest class ({class_names[smallest]}): every cloud of it has neighbours "
                "of other classes, so propagation mixes classes and may lower accuracy "
                f"(give --graph-k {max(1, int(counts[smallest]) - 1)} or less)"
            ),
            stacklevel=3,
        )


def _settings(
    mode: str,
    class_names: list[str],
    n_items: int,
    data: PathLike | None,
    captions: PathLike | None,
    features: PathLike | np.ndarray | None,
    options: PipelineOptions,
    scorer: Scorer | None,
    run: _Run,
    ood_score: str | None,
) -> dict[str, Any]:
    """What ``metrics.json`` records about the run, in its key order."""
    if isinstance(features, np.ndarray):
        features_text: str | None = f"<array {features.shape[0]}x{features.shape[1]}>"
    else:
        features_text = None if features is None else str(features)
    return {
        "mode": mode,
        "data": None if data is None else str(data),
        "split": options.split,
        "captions": None if captions is None else str(captions),
        "features": features_text,
        "train_data": None if options.train_data is None else str(options.train_data),
        "classes": class_names,
        "n_clouds": n_items,
        "scorer": options.scorer if scorer is None else type(scorer).__name__,
        "encoder": options.encoder,
        "graph": options.graph,
        "graph_k": run.config.graph_k,
        "guidance_k": options.guidance_k,
        "alpha": options.alpha,
        "steps": options.steps,
        "normalize": run.config.normalize,
        "ood_score": ood_score,
    }


def _result(
    mode: str,
    items: Any,
    labels: np.ndarray,
    class_names: list[str],
    run: _Run,
    settings: dict[str, Any],
    **extra: Any,
) -> PGLLMResult:
    """The :class:`PGLLMResult` of a finished ``run`` over ``items`` (its sources); ``extra``:
    the mode's own fields (``id_scores`` of ``ood``)."""
    return PGLLMResult(
        mode=mode,
        sources=list(items.sources),
        labels=labels,
        class_names=class_names,
        scores=run.scores,
        metrics=run.metrics,
        timings_s=run.timings_s,
        captions=run.captions,
        features=run.features,
        settings=settings,
        **extra,
    )


def classify(
    data: PathLike | None = None,
    *,
    captions: PathLike | None = None,
    features: PathLike | np.ndarray | None = None,
    classes: Sequence[str] | None = None,
    options: PipelineOptions | None = None,
    scorer: Scorer | None = None,
    quiet: bool = True,
) -> PGLLMResult:
    """PGLLM recognition of every item of ``data`` (or of PointLLM's ``captions`` with their
    ``features``): the unlabelled evaluated set is the support set of the graph.

    ``classes`` fixes the class list (items of other classes are left out; unlabelled captions
    need it and keep every item). ``scorer`` (any object with ``score(queries, class_names) ->
    [N, C]``) replaces the one ``options.scorer`` names. Returns scores ``[N, C]`` of the ladder
    none / guidance / propagation / both, and metrics when labels exist. ``quiet=False`` shows
    progress of the long stages (reading, captioning, encoding, scoring) on stderr."""
    options = options or PipelineOptions()
    class_list = None if classes is None else list(classes)
    if class_list is not None:
        _check_two_classes(class_list, "--classes")
    items, feats = _load_inputs(data, captions, features, options, class_list, quiet)
    if not items.class_names:
        raise PGLLMInputError(
            f"{captions}: no item has a label_name, so the classes are unknown: name them "
            "with --classes"
        )
    names = list(items.class_names)
    if len(set(names)) < 2:
        raise PGLLMInputError(
            f"{data or captions}: holds 1 class ({names[0]}); recognition needs at least 2"
        )
    graph_k = PROPAGATION_K if options.graph_k is None else options.graph_k
    run = _run_pipeline(
        items, feats, items.labels, names, options, graph_k, scorer, data, captions, quiet
    )
    settings = _settings(
        "classify", names, len(items), data, captions, features, options, scorer, run, None
    )
    return _result("classify", items, np.asarray(items.labels), names, run, settings)


def detect_ood(
    data: PathLike | None = None,
    *,
    id_classes: Sequence[str] | None = None,
    id_split: str | None = None,
    ood_score: str = "msp",
    captions: PathLike | None = None,
    features: PathLike | np.ndarray | None = None,
    options: PipelineOptions | None = None,
    scorer: Scorer | None = None,
    quiet: bool = True,
) -> PGLLMResult:
    """PGLLM OOD detection: the ID classes (``id_classes``, or the paper's ModelNet40 split
    ``id_split`` of ``constants.OOD_SPLITS``) are scored, every other class of the evaluated
    set is OOD (label -1). ``ood_score``: ``"msp"`` (max-softmax of the refined class scores)
    or ``"single-probability"`` (the paper's one-number prompt, refined the same way; needs the
    http scorer). Metrics: accuracy on ID, AUROC and FPR95 with ID positive, per ablation.
    ``quiet=False`` shows progress of the long stages on stderr."""
    options = options or PipelineOptions()
    if (id_classes is None) == (id_split is None):
        raise PGLLMUsageError("give one of --id-classes and --id-split")
    if id_split is not None and id_split not in OOD_SPLITS:
        raise PGLLMUsageError(f"--id-split: {id_split!r} is not one of {', '.join(OOD_SPLITS)}")
    if ood_score not in OOD_SCORES:
        raise PGLLMUsageError(f"--ood-score: {ood_score!r} is not one of {', '.join(OOD_SCORES)}")
    if ood_score == "single-probability" and scorer is None and options.scorer != "http":
        raise PGLLMUsageError("--ood-score single-probability needs --scorer http")
    if id_classes is not None:
        _check_two_classes(list(id_classes), "--id-classes")
    items, feats = _load_inputs(data, captions, features, options, None, quiet)
    if (items.labels < 0).any():
        raise PGLLMInputError(
            f"{captions}: results[{int(np.argmax(items.labels < 0))}].label_name is missing; "
            "OOD detection needs every item's class"
        )
    id_list = list(id_classes) if id_classes is not None else list(OOD_SPLITS[id_split])
    unknown = [c for c in id_list if c not in items.class_names]
    if unknown:
        option = "--id-classes" if id_classes is not None else f"--id-split {id_split}"
        raise PGLLMInputError(
            f"{option}: class {unknown[0]!r} is not in {data or captions} "
            f"(classes: {', '.join(items.class_names)})"
        )
    remap = np.array([id_list.index(c) if c in id_list else -1 for c in items.class_names])
    labels = remap[items.labels]
    if (labels < 0).sum() == 0:
        raise PGLLMInputError(
            f"{data or captions}: every class is ID; OOD detection needs clouds of other classes"
        )
    graph_k = OOD_PROPAGATION_K if options.graph_k is None else options.graph_k  # AUROC.py's K
    run = _run_pipeline(
        items, feats, labels, id_list, options, graph_k, scorer, data, captions, quiet
    )
    id_scores = None
    if ood_score == "single-probability":
        probs = pgllm_scores(
            run.features,
            run.captions,
            IDProbabilityScorer(run.scorer),
            id_list,
            replace(run.config, timings={}),  # the same settings; the timings are the first's
            quiet=quiet,
        )
        id_scores = {a: p[:, 0] for a, p in probs.items()}
        run.metrics = {a: evaluate(run.scores[a], labels, id_scores[a]) for a in run.scores}
    settings = _settings(
        "ood", id_list, len(items), data, captions, features, options, scorer, run, ood_score
    )
    return _result("ood", items, labels, id_list, run, settings, id_scores=id_scores)
