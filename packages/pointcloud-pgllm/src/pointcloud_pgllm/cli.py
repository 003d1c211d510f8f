"""The ``pointcloud-pgllm`` command: LightningCLI for the trainable encoder, plus synth, embed,
caption, classify and ood (the full PGLLM pipeline on a dataset folder) and configs.

``classify`` / ``ood`` only parse their options, check ``--out`` (before any work), call
:mod:`pointcloud_pgllm.api` and write its result with
:func:`pointcloud_pgllm.results.write_result_files`; bad input raised there as
``PGLLMInputError`` ends as one line (exit 2): ``pointcloud-pgllm: error: ...``, or, for an
option problem (``PGLLMUsageError``), the subcommand's usage line ``pointcloud-pgllm classify:
error: ... (see pointcloud-pgllm classify --help)``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iclr26_common.cli_support import (
    CONFIGS_HELP,
    TRAINER_SUBCOMMANDS,
    ArgumentParser,
    ConsoleScript,
    comma_list,
    finite_float,
    nonnegative_int,
    positive_int,
    probability,
)
from iclr26_common.outputs import OutputError, add_output_options, check_output_options
from iclr26_common.progress import add_quiet_option
from pointcloud_pgllm import __version__

if TYPE_CHECKING:  # the API is imported when a command runs (``--help`` stays light)
    from pointcloud_pgllm.api import PipelineOptions
    from pointcloud_pgllm.results import PGLLMResult

__all__ = ["main", "run_lightning_cli"]

PROG = "pointcloud-pgllm"
DESCRIPTION = (
    "PGLLM (ICLR 2026): point-graph in-context guidance and label-propagation refinement for 3-D "
    "recognition and OOD detection. `fit`/`validate`/`test`/`predict` are LightningCLI for the "
    "trainable encoder (`pointcloud-pgllm fit --config tiny --print_config`; `predict` writes "
    "predictions.csv with each cloud's source, label, predicted class and probabilities into "
    "the run folder); `classify` and "
    "`ood` run the whole pipeline on a dataset folder and write CSV + metrics.json."
)


COMMANDS = {
    **{name: f"LightningCLI `{name}` of the trainable encoder" for name in TRAINER_SUBCOMMANDS},
    "synth": "write a synthetic ModelNet-like OFF tree (ID + OOD classes)",
    "embed": "encoder features of a dataset split as .npy",
    "caption": "geometric captions of a dataset split as CSV",
    "classify": "PGLLM recognition on a dataset folder: CSV + metrics.json",
    "ood": "PGLLM OOD detection (ID classes vs the rest): CSV + metrics.json",
    "configs": CONFIGS_HELP,
}


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """Runs LightningCLI on ``argv`` (a trainer subcommand first) through
    :func:`iclr26_common.lightning.run_cli` and returns the CLI object; the data module's
    ``num_classes`` and ``class_names`` are linked into the model. ``predict`` writes
    ``predictions.csv`` (cloud ids, label, predicted class, probabilities) into the run folder
    (:mod:`pointcloud_pgllm.predictions`); an earlier one there is refused unless
    ``predict --overwrite``."""
    from iclr26_common.lightning import run_cli
    from pointcloud_pgllm.data import PointCloudDataModule
    from pointcloud_pgllm.lit_module import PointCloudClassifier
    from pointcloud_pgllm.predictions import PredictionsWriter

    links = [
        (f"data.init_args.{attr}", f"model.init_args.{attr}", "instantiate")
        for attr in ("num_classes", "class_names")
    ]
    return run_cli(
        PointCloudClassifier,
        PointCloudDataModule,
        argv,
        package="pointcloud_pgllm",
        prog=PROG,
        links=links,
        predict_writer=PredictionsWriter,
    )


def synth_main(argv: Sequence[str]) -> int:
    from pointcloud_pgllm.synth import SYNTH_CLASSES, SYNTH_ID_CLASSES, SYNTH_OOD_CLASSES

    parser = ArgumentParser(
        prog=f"{PROG} synth",
        description="Write <out>/<class>/{train,test}/<class>_XXXX.off (ModelNet40 layout, ~1 % "
        f"glued 'OFF<V> <F> 0' headers). ID classes (MN1 names): {', '.join(SYNTH_ID_CLASSES)}; "
        f"OOD classes: {', '.join(SYNTH_OOD_CLASSES)}.",
    )
    add_output_options(
        parser,
        help="dataset root to write: new or empty, or with --overwrite (which replaces the class "
        "folders an earlier synth wrote; a folder holding anything else is refused)",
    )
    parser.add_argument(
        "--classes", type=comma_list, default=None, help="comma-separated (default: all)"
    )
    parser.add_argument(
        "--n-train", type=nonnegative_int, default=20, help="training meshes per class"
    )
    parser.add_argument("--n-test", type=nonnegative_int, default=10, help="test meshes per class")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--glued-fraction", type=probability, default=0.01, help="share of malformed headers"
    )
    ns = parser.parse_args(list(argv))
    if ns.n_train + ns.n_test == 0:
        parser.error("--n-train and --n-test must not both be 0")
    unknown = sorted(set(ns.classes or []) - set(SYNTH_CLASSES))
    if unknown:
        parser.error(f"unknown classes {unknown}; known: {', '.join(SYNTH_CLASSES)}")
    from pointcloud_pgllm.synth import foreign_entries, generate_dataset, remove_generated

    out = check_output_options(ns)
    foreign = foreign_entries(out.path) if ns.overwrite and out.path.is_dir() else []
    if foreign:
        raise OutputError(
            f"--out {out.path}: holds {foreign[0]}, which synth did not write; --overwrite "
            "replaces only an earlier synthetic dataset: give a new folder"
        )
    with out:
        if ns.overwrite:
            remove_generated(out.path)
        root = generate_dataset(
            out.path,
            ns.classes,
            n_train=ns.n_train,
            n_test=ns.n_test,
            seed=ns.seed,
            glued_fraction=ns.glued_fraction,
        )
    print(f"wrote {root}")
    return 0


def _data_args(parser: ArgumentParser, required: bool = True) -> None:
    from pointcloud_pgllm.constants import DEFAULT_N_POINTS

    parser.add_argument(
        "--data", type=Path, required=required, help="OFF tree, PointNet HDF5 folder or .h5 file"
    )
    parser.add_argument("--split", default="test", help="split to read (default: test)")
    parser.add_argument("--n-points", type=positive_int, default=DEFAULT_N_POINTS)
    parser.add_argument("--seed", type=int, default=0)
    add_quiet_option(parser)


def embed_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} embed",
        description="Encode every cloud of a split: <out>/features.npy [N, D], labels.npy, index.csv.",
    )
    _data_args(parser)
    parser.add_argument(
        "--encoder", default="pointnn", help="'pointnn', a fit .ckpt or a TorchScript file"
    )
    add_output_options(parser)
    ns = parser.parse_args(list(argv))
    out = check_output_options(ns)
    import csv
    import io

    import numpy as np

    from iclr26_common.outputs import write_bytes, write_text
    from pointcloud_pgllm.api import encode_clouds
    from pointcloud_pgllm.io import load_dataset

    def npy(array: np.ndarray) -> bytes:
        buffer = io.BytesIO()
        np.save(buffer, array)
        return buffer.getvalue()

    with out:
        data = load_dataset(ns.data, ns.split, n_points=ns.n_points, seed=ns.seed, quiet=ns.quiet)
        feats = encode_clouds(data.points, ns.encoder, quiet=ns.quiet)
        table = io.StringIO(newline="")
        writer = csv.writer(table, lineterminator="\r\n")
        writer.writerow(["row", "source", "label", "class"])
        for i, (src, lab) in enumerate(zip(data.sources, data.labels, strict=True)):
            writer.writerow([i, src, int(lab), data.class_names[lab] if lab >= 0 else ""])
        write_bytes(out.path / "features.npy", npy(feats.astype(np.float32)))
        write_bytes(out.path / "labels.npy", npy(data.labels))
        write_text(out.path / "index.csv", table.getvalue())
    print(f"wrote {out.path / 'features.npy'} {feats.shape}")
    return 0


def caption_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} caption",
        description="Geometric (label-free) captions of a split as CSV: source, class, caption.",
    )
    _data_args(parser)
    add_output_options(parser, kind="file", help="CSV file to write")
    ns = parser.parse_args(list(argv))
    target = check_output_options(ns, kind="file")
    import csv
    import io

    from iclr26_common.outputs import write_text
    from pointcloud_pgllm.captions import GeometricCaptioner
    from pointcloud_pgllm.io import load_dataset

    data = load_dataset(ns.data, ns.split, n_points=ns.n_points, seed=ns.seed, quiet=ns.quiet)
    captions = GeometricCaptioner(ns.seed)(data.points, quiet=ns.quiet)
    table = io.StringIO(newline="")
    writer = csv.writer(table, lineterminator="\r\n")
    writer.writerow(["source", "class", "caption"])
    for src, lab, cap in zip(data.sources, data.labels, captions, strict=True):
        writer.writerow([src, data.class_names[lab] if lab >= 0 else "", cap])
    write_text(target, table.getvalue())
    print(f"wrote {ns.out} ({len(captions)} captions)")
    return 0


def _pipeline_parser(name: str, description: str) -> ArgumentParser:
    from pointcloud_pgllm.constants import (
        GUIDANCE_NEIGHBOURS,
        OOD_PROPAGATION_K,
        PROPAGATION_ALPHA,
        PROPAGATION_K,
        PROPAGATION_STEPS,
    )
    from pointcloud_pgllm.graph import GRAPH_VARIANTS
    from pointcloud_pgllm.scorers import SCORERS

    parser = ArgumentParser(prog=f"{PROG} {name}", description=description)
    _data_args(parser, required=False)
    parser.add_argument(
        "--captions",
        type=Path,
        default=None,
        help="instead of --data: PointLLM's captions JSON (eval_modelnet_cls.py's "
        "ModelNet_classification_prompt0.json), with --features",
    )
    parser.add_argument(
        "--features",
        type=Path,
        default=None,
        help="with --captions: the same clouds' PointLLM features, .npy [N, D], "
        "row i = object_id i",
    )
    add_output_options(
        parser, help="output folder (CSV + metrics.json): new or empty, or with --overwrite"
    )
    parser.add_argument(
        "--encoder", default="pointnn", help="'pointnn', a fit .ckpt or a TorchScript file"
    )
    parser.add_argument(
        "--scorer",
        choices=SCORERS,
        default="tfidf",
        help="tfidf: fitted on the labelled 'train' split's captions; smollm2: local "
        "likelihood scorer; http: OpenAI-compatible endpoint (--base-url, --model)",
    )
    parser.add_argument(
        "--train-data",
        type=Path,
        default=None,
        help="tfidf scorer: labelled training data (default: the 'train' split of "
        "--data; required when --data is one file, which holds one split, and "
        "with --captions, where it is a labelled captions JSON)",
    )
    parser.add_argument(
        "--base-url", default=None, help="http scorer: e.g. http://localhost:8000/v1"
    )
    parser.add_argument("--model", default=None, help="http scorer: model name")
    parser.add_argument(
        "--graph",
        choices=GRAPH_VARIANTS,
        default="official",
        help="official: ACC.py/AUROC.py's operator (W diagonal 2, D from knn row "
        "sums); symmetric: ours (diagonal 1, D of W); paper: cosine top-K",
    )
    parser.add_argument(
        "--graph-k",
        type=positive_int,
        default=None,
        help=f"neighbours per node (default: classify {PROPAGATION_K} as ACC.py, "
        f"ood {OOD_PROPAGATION_K} as AUROC.py)",
    )
    parser.add_argument("--guidance-k", type=int, default=GUIDANCE_NEIGHBOURS)
    parser.add_argument("--alpha", type=finite_float, default=PROPAGATION_ALPHA, help="in [0, 1]")
    parser.add_argument("--steps", type=nonnegative_int, default=PROPAGATION_STEPS)
    parser.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="L2-normalise the features before the graph and the guidance "
        "neighbours (default: on for our encoder's features; off with --features, "
        "as the official scripts use PointLLM's raw features)",
    )
    return parser


def _options(ns: argparse.Namespace) -> PipelineOptions:
    """The :class:`~pointcloud_pgllm.api.PipelineOptions` of a parsed classify / ood line."""
    from pointcloud_pgllm.api import PipelineOptions

    return PipelineOptions(
        split=ns.split,
        n_points=ns.n_points,
        seed=ns.seed,
        encoder=ns.encoder,
        scorer=ns.scorer,
        train_data=ns.train_data,
        base_url=ns.base_url,
        model=ns.model,
        graph=ns.graph,
        graph_k=ns.graph_k,
        guidance_k=ns.guidance_k,
        alpha=ns.alpha,
        steps=ns.steps,
        normalize=ns.normalize,
    )


def _usage_errors_as_parser_errors(
    parser: ArgumentParser, call: Callable[[], PGLLMResult]
) -> PGLLMResult:
    """``call()``; a ``PGLLMUsageError`` it raises (an option problem) ends as ``parser``'s
    one-line usage error (subcommand prog and ``--help`` hint, exit 2); data errors pass."""
    import warnings

    from pointcloud_pgllm.errors import PGLLMUsageError, PGLLMWarning

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PGLLMWarning)
            result = call()
    except PGLLMUsageError as error:
        parser.error(str(error))
    for item in caught:  # ours as one line each; any other warning as Python shows it
        if issubclass(item.category, PGLLMWarning):
            print(f"{PROG}: warning: {item.message}", file=sys.stderr, flush=True)
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)
    return result


def _inputs(ns: argparse.Namespace) -> dict[str, Any]:
    """The keywords classify and ood pass alike to :mod:`pointcloud_pgllm.api`: ``captions``,
    ``features``, ``options`` (:func:`_options`) and ``quiet``."""
    return dict(captions=ns.captions, features=ns.features, options=_options(ns), quiet=ns.quiet)


def _run_and_write(
    parser: ArgumentParser, ns: argparse.Namespace, call: Callable[[], PGLLMResult]
) -> None:
    """Check ``--out`` before any work, run ``call`` (its option problems are ``parser``'s
    usage errors) with ``--out`` marked partial, write the result files and print the
    metrics. A failed or interrupted run leaves no folder it created."""
    from pointcloud_pgllm.results import write_result_files

    out = check_output_options(ns)
    with out:
        result = _usage_errors_as_parser_errors(parser, call)
        written = write_result_files(result, out.path)
    for a, m in result.metrics.items():
        print(f"{a:12s} " + "  ".join(f"{k} {v:.4f}" for k, v in m.items()))
    print(f"wrote {', '.join(map(str, written[:-1]))} and {written[-1]}")  # every file


def classify_main(argv: Sequence[str]) -> int:
    parser = _pipeline_parser(
        "classify",
        "PGLLM recognition of every cloud of a split (the unlabelled support set): "
        "predictions.csv (final = guidance + propagation) and metrics.json (the none / guidance "
        "/ propagation / both ladder when labels exist).",
    )
    parser.add_argument(
        "--classes",
        type=comma_list,
        default=None,
        help="class list; items of other classes are left out (default: the dataset's). "
        "Unlabelled captions (no label_name) need it and keep every item",
    )
    ns = parser.parse_args(list(argv))
    from pointcloud_pgllm.api import classify

    _run_and_write(
        parser,
        ns,
        lambda: classify(ns.data, classes=ns.classes, **_inputs(ns)),
    )
    return 0


def ood_main(argv: Sequence[str]) -> int:
    from pointcloud_pgllm.api import OOD_SCORES
    from pointcloud_pgllm.constants import OOD_SPLITS

    parser = _pipeline_parser(
        "ood",
        "PGLLM OOD detection: the ID classes are scored, every other class of the split is OOD. "
        "Writes ood_scores.csv (id_score = max-softmax of the refined scores, or the refined "
        "single-probability answer) and metrics.json (accuracy on ID, AUROC and FPR95 with ID "
        "positive, per ablation).",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--id-classes", type=comma_list, help="comma-separated ID classes")
    group.add_argument(
        "--id-split", choices=sorted(OOD_SPLITS), help="the paper's ModelNet40 ID split"
    )
    parser.add_argument(
        "--ood-score",
        choices=OOD_SCORES,
        default="msp",
        help="msp: max-softmax of the refined class scores; single-probability: "
        "the paper's one-number prompt, refined the same way (needs --scorer http)",
    )
    ns = parser.parse_args(list(argv))
    from pointcloud_pgllm.api import detect_ood

    _run_and_write(
        parser,
        ns,
        lambda: detect_ood(
            ns.data,
            id_classes=ns.id_classes,
            id_split=ns.id_split,
            ood_score=ns.ood_score,
            **_inputs(ns),
        ),
    )
    return 0


SCRIPT = ConsoleScript(
    "pointcloud_pgllm",
    __version__,
    DESCRIPTION,
    COMMANDS,
    handlers=lambda: {
        "synth": synth_main,
        "embed": embed_main,
        "caption": caption_main,
        "classify": classify_main,
        "ood": ood_main,
    },
    run_lightning=run_lightning_cli,
    error_types=("pointcloud_pgllm.errors:PGLLMInputError", "pointcloud_pgllm.scorers:ScorerError"),
)


def main(args: Sequence[str] | None = None) -> int:
    """Entry point of ``pointcloud-pgllm``; ``args`` defaults to ``sys.argv[1:]``.

    Input errors end with one line ``pointcloud-pgllm: error: ...`` on stderr and exit code 2
    (``POINTCLOUD_PGLLM_TRACEBACK=1`` shows the traceback instead)."""
    return SCRIPT.main(args)


if __name__ == "__main__":
    sys.exit(main())
