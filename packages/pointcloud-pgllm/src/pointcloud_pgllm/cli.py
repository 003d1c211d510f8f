"""The ``pointcloud-pgllm`` command: LightningCLI for the trainable encoder, plus synth, embed,
caption, classify and ood (the full PGLLM pipeline on a dataset folder) and configs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import (
    CONFIGS_HELP,
    ArgumentParser,
    comma_list,
    configs_command,
    dispatch,
    is_user_error,
    lightning_commands,
    run_with_one_line_errors,
    top_level_parser,
)
from pointcloud_pgllm import __version__

__all__ = ["main", "run_lightning_cli"]

PROG = "pointcloud-pgllm"
TRAINER_SUBCOMMANDS = ("fit", "validate", "test", "predict")
DESCRIPTION = (
    "PGLLM (ICLR 2026): point-graph in-context guidance and label-propagation refinement for 3-D "
    "recognition and OOD detection. `fit`/`validate`/`test`/`predict` are LightningCLI for the "
    "trainable encoder (`pointcloud-pgllm fit --config tiny --print_config`); `classify` and "
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


def _top_level_parser() -> ArgumentParser:
    return top_level_parser(PROG, DESCRIPTION, __version__, COMMANDS, lightning=TRAINER_SUBCOMMANDS)


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """Runs LightningCLI on ``argv`` (a trainer subcommand first) through
    :func:`iclr26_common.lightning.run_cli` and returns the CLI object; the data module's
    ``num_classes`` and ``class_names`` are linked into the model."""
    from iclr26_common.lightning import run_cli
    from pointcloud_pgllm.data import PointCloudDataModule
    from pointcloud_pgllm.lit_module import PointCloudClassifier

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
    )


def synth_main(argv: Sequence[str]) -> int:
    from pointcloud_pgllm.synth import SYNTH_CLASSES, SYNTH_ID_CLASSES, SYNTH_OOD_CLASSES

    parser = ArgumentParser(
        prog=f"{PROG} synth",
        description="Write <out>/<class>/{train,test}/<class>_XXXX.off (ModelNet40 layout, ~1 %% "
        f"glued 'OFF<V> <F> 0' headers). ID classes (MN1 names): {', '.join(SYNTH_ID_CLASSES)}; "
        f"OOD classes: {', '.join(SYNTH_OOD_CLASSES)}.",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="dataset root to write (new or empty)"
    )
    parser.add_argument(
        "--classes", type=comma_list, default=None, help="comma-separated (default: all)"
    )
    parser.add_argument("--n-train", type=int, default=20, help="training meshes per class")
    parser.add_argument("--n-test", type=int, default=10, help="test meshes per class")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--glued-fraction", type=float, default=0.01, help="share of malformed headers"
    )
    ns = parser.parse_args(list(argv))
    if ns.n_train < 0 or ns.n_test < 0 or ns.n_train + ns.n_test == 0:
        parser.error("--n-train and --n-test must be >= 0 and not both 0")
    unknown = sorted(set(ns.classes or []) - set(SYNTH_CLASSES))
    if unknown:
        parser.error(f"unknown classes {unknown}; known: {', '.join(SYNTH_CLASSES)}")
    from pointcloud_pgllm.synth import generate_dataset

    root = generate_dataset(
        ns.out,
        ns.classes,
        n_train=ns.n_train,
        n_test=ns.n_test,
        seed=ns.seed,
        glued_fraction=ns.glued_fraction,
    )
    print(f"wrote {root}")
    return 0


def _data_args(parser: ArgumentParser, required: bool = True) -> None:
    parser.add_argument(
        "--data", type=Path, required=required, help="OFF tree, PointNet HDF5 folder or .h5 file"
    )
    parser.add_argument("--split", default="test", help="split to read (default: test)")
    parser.add_argument("--n-points", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)


def _new_output(path: Path, overwrite: bool) -> Path:
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite or choose a new --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _features(data: Any, encoder_spec: str, batch_size: int = 16) -> Any:
    from iclr26_common.threads import torch_threads
    from pointcloud_pgllm.model import encode, load_encoder

    with torch_threads(1):  # the encoders' many small kernels run faster on one thread
        return encode(load_encoder(encoder_spec), data.points, batch_size).numpy()


def embed_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} embed",
        description="Encode every cloud of a split: <out>/features.npy [N, D], labels.npy, index.csv.",
    )
    _data_args(parser)
    parser.add_argument(
        "--encoder", default="pointnn", help="'pointnn', a fit .ckpt or a TorchScript file"
    )
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--overwrite", action="store_true")
    ns = parser.parse_args(list(argv))
    import csv

    import numpy as np

    from pointcloud_pgllm.io import load_dataset

    data = load_dataset(ns.data, ns.split, n_points=ns.n_points, seed=ns.seed)
    feats = _features(data, ns.encoder)
    ns.out.mkdir(parents=True, exist_ok=True)
    np.save(_new_output(ns.out / "features.npy", ns.overwrite), feats.astype(np.float32))
    np.save(_new_output(ns.out / "labels.npy", ns.overwrite), data.labels)
    with open(_new_output(ns.out / "index.csv", ns.overwrite), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["row", "source", "label", "class"])
        for i, (src, lab) in enumerate(zip(data.sources, data.labels, strict=True)):
            writer.writerow([i, src, int(lab), data.class_names[lab] if lab >= 0 else ""])
    print(f"wrote {ns.out / 'features.npy'} {feats.shape}")
    return 0


def caption_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog=f"{PROG} caption",
        description="Geometric (label-free) captions of a split as CSV: source, class, caption.",
    )
    _data_args(parser)
    parser.add_argument("--out", type=Path, required=True, help="CSV file to write")
    parser.add_argument("--overwrite", action="store_true")
    ns = parser.parse_args(list(argv))
    import csv

    from pointcloud_pgllm.captions import GeometricCaptioner
    from pointcloud_pgllm.io import load_dataset

    data = load_dataset(ns.data, ns.split, n_points=ns.n_points, seed=ns.seed)
    captions = GeometricCaptioner(ns.seed)(data.points)
    with open(_new_output(ns.out, ns.overwrite), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["source", "class", "caption"])
        for src, lab, cap in zip(data.sources, data.labels, captions, strict=True):
            writer.writerow([src, data.class_names[lab] if lab >= 0 else "", cap])
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
    parser.add_argument(
        "--out", type=Path, required=True, help="output folder (CSV + metrics.json)"
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
        type=int,
        default=PROPAGATION_K,
        help=f"neighbours per node (default: classify {PROPAGATION_K} as ACC.py, "
        f"ood {OOD_PROPAGATION_K} as AUROC.py)",
    )
    parser.add_argument("--guidance-k", type=int, default=GUIDANCE_NEIGHBOURS)
    parser.add_argument("--alpha", type=float, default=PROPAGATION_ALPHA)
    parser.add_argument("--steps", type=int, default=PROPAGATION_STEPS)
    parser.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="L2-normalise the features before the graph and the guidance "
        "neighbours (default: on for our encoder's features; off with --features, "
        "as the official scripts use PointLLM's raw features)",
    )
    parser.add_argument("--overwrite", action="store_true")
    return parser


def _make_scorer(
    ns: Any,
    parser: ArgumentParser,
    data_path: Path,
    class_names: list[str],
    n_points: int,
    seed: int,
    eval_sources: list[str],
) -> Any:
    from pointcloud_pgllm.scorers import HTTPChatScorer, LikelihoodScorer, TfidfScorer

    if ns.scorer == "http":
        if not ns.base_url or not ns.model:
            parser.error("--scorer http needs --base-url and --model")
        return HTTPChatScorer(ns.base_url, ns.model)
    if ns.scorer == "smollm2":
        return LikelihoodScorer()
    from pointcloud_pgllm.captions import GeometricCaptioner
    from pointcloud_pgllm.errors import PGLLMInputError
    from pointcloud_pgllm.io import load_dataset, shared_source_files

    if ns.captions is not None:
        from pointcloud_pgllm.pointllm_io import captions_tfidf_scorer

        return captions_tfidf_scorer(ns.captions, ns.train_data, class_names)
    train_path = Path(ns.train_data) if ns.train_data is not None else Path(data_path)
    data_path = Path(data_path)
    if ns.train_data is None and data_path.is_file():
        raise PGLLMInputError(
            f"{data_path}: one file holds one split; the tfidf scorer would be fitted on the "
            "evaluation labels: give its training data with --train-data (or use another scorer)"
        )
    same = train_path.exists() and data_path.exists() and train_path.samefile(data_path)
    if same and (data_path.is_file() or ns.split == "train"):
        raise PGLLMInputError(
            f"{train_path}: --train-data is the evaluated data (--data, --split {ns.split}); the "
            "tfidf scorer must never see the evaluation labels"
        )
    train = load_dataset(train_path, "train", n_points=n_points, seed=seed, classes=class_names)
    shared = shared_source_files(train.sources, eval_sources)
    if shared:  # e.g. a file given as --data and its folder as --train-data (or the reverse)
        raise PGLLMInputError(
            f"{shared[0]}: is read both as --train-data ({train_path}) and as the evaluated data "
            f"({data_path}); the tfidf scorer must never see the evaluation labels"
        )
    return TfidfScorer().fit(
        GeometricCaptioner(seed)(train.points), train.labels, train.class_names
    )


def _load_inputs(ns: Any, parser: ArgumentParser, classes: list[str] | None) -> Any:
    """The evaluated set: clouds of ``--data`` (a PointCloudSet), or PointLLM's captions with
    their features (a CaptionSet, features in ``ns.loaded_features``); ``classes`` keeps the
    items of those classes only (unlabelled captions: all items, scored against ``classes``)."""
    from pointcloud_pgllm.io import load_dataset

    ns.loaded_features = None
    if ns.captions is None and ns.features is None:
        if ns.data is None:
            parser.error("give --data, or --captions with --features")
        return load_dataset(ns.data, ns.split, n_points=ns.n_points, seed=ns.seed, classes=classes)
    if ns.data is not None:
        parser.error("--data and --captions/--features exclude each other")
    if ns.captions is None or ns.features is None:
        parser.error("--captions and --features go together")
    from pointcloud_pgllm.pointllm_io import keep_classes, read_features, read_pointllm_captions

    data = read_pointllm_captions(ns.captions, classes)
    feats = read_features(ns.features, len(data))
    if classes is not None:
        data, feats = keep_classes(data, feats, ns.captions)
    ns.loaded_features = feats
    return data


def _run_pipeline(
    ns: Any, parser: ArgumentParser, data: Any, labels: Any, class_names: list[str]
) -> tuple[dict, dict]:
    from pointcloud_pgllm.captions import GeometricCaptioner
    from pointcloud_pgllm.pipeline import PGLLMConfig, evaluate, pgllm_scores

    if not 1 <= ns.graph_k < len(data) or not 1 <= ns.guidance_k < len(data):
        parser.error(
            f"--graph-k and --guidance-k must be in 1..{len(data) - 1} for {len(data)} clouds"
        )
    scorer = _make_scorer(ns, parser, ns.data, class_names, ns.n_points, ns.seed, data.sources)
    if ns.loaded_features is not None:  # PointLLM's captions and features (--captions)
        captions, feats = list(data.captions), ns.loaded_features
    else:
        captions = GeometricCaptioner(ns.seed)(data.points)
        feats = _features(data, ns.encoder)
    if ns.normalize is None:  # the official scripts use PointLLM's raw features (ACC.py:101-104)
        ns.normalize = ns.features is None
    config = PGLLMConfig(ns.graph, ns.graph_k, ns.guidance_k, ns.alpha, ns.steps, ns.normalize)
    scores = pgllm_scores(feats, captions, scorer, class_names, config)
    metrics = {a: evaluate(s, labels) for a, s in scores.items()} if (labels >= 0).any() else {}
    info = {
        "metrics": metrics,
        "timings_s": config.timings,
        "captions": captions,
        "features": feats,
        "scorer": scorer,
    }
    return scores, info


def _write_results(
    ns: Any, data: Any, labels: Any, class_names: list[str], scores: dict, info: dict, mode: str
) -> None:
    import csv
    import json

    from pointcloud_pgllm.metrics import msp

    ns.out.mkdir(parents=True, exist_ok=True)
    final = scores["both"]
    csv_path = _new_output(
        ns.out / ("predictions.csv" if mode == "classify" else "ood_scores.csv"), ns.overwrite
    )
    with open(csv_path, "w", newline="") as handle:
        writer = csv.writer(handle)
        head = ["source", "label", "predicted", "predicted_none"]
        head += ["id_score", "is_id"] if mode == "ood" else []
        writer.writerow(head + [f"score_{c}" for c in class_names])
        id_score = info["id_scores"]["both"] if "id_scores" in info else msp(final)
        for i, src in enumerate(data.sources):
            lab = int(labels[i])
            row = [
                src,
                class_names[lab] if lab >= 0 else ("OOD" if mode == "ood" else ""),
                class_names[int(final[i].argmax())],
                class_names[int(scores["none"][i].argmax())],
            ]
            row += [f"{id_score[i]:.6f}", int(lab >= 0)] if mode == "ood" else []
            writer.writerow(row + [f"{v:.6f}" for v in final[i]])
    payload = {
        "mode": mode,
        "data": None if ns.data is None else str(ns.data),
        "split": ns.split,
        "captions": None if ns.captions is None else str(ns.captions),
        "features": None if ns.features is None else str(ns.features),
        "train_data": None if ns.train_data is None else str(ns.train_data),
        "classes": class_names,
        "n_clouds": len(data),
        "scorer": ns.scorer,
        "encoder": ns.encoder,
        "graph": ns.graph,
        "graph_k": ns.graph_k,
        "guidance_k": ns.guidance_k,
        "alpha": ns.alpha,
        "steps": ns.steps,
        "normalize": ns.normalize,
        "ood_score": getattr(ns, "ood_score", None),
        "metrics": info["metrics"],
        "timings_s": info["timings_s"],
    }
    with open(_new_output(ns.out / "metrics.json", ns.overwrite), "w") as handle:
        json.dump(payload, handle, indent=2)
    for a, m in info["metrics"].items():
        print(f"{a:12s} " + "  ".join(f"{k} {v:.4f}" for k, v in m.items()))
    print(f"wrote {csv_path} and {ns.out / 'metrics.json'}")


def classify_main(argv: Sequence[str]) -> int:
    parser = _pipeline_parser(
        "classify",
        "PGLLM recognition of every cloud of a split (the unlabelled support set): predictions.csv (final = guidance + propagation) and metrics.json (the none / guidance / propagation / both ladder when labels exist).",
    )
    parser.add_argument(
        "--classes",
        type=comma_list,
        default=None,
        help="class list; items of other classes are left out (default: the dataset's). "
        "Unlabelled captions (no label_name) need it and keep every item",
    )
    ns = parser.parse_args(list(argv))
    data = _load_inputs(ns, parser, ns.classes)
    if not data.class_names:
        from pointcloud_pgllm.errors import PGLLMInputError

        raise PGLLMInputError(
            f"{ns.captions}: no item has a label_name, so the classes are unknown: name them "
            "with --classes"
        )
    scores, info = _run_pipeline(ns, parser, data, data.labels, list(data.class_names))
    _write_results(ns, data, data.labels, list(data.class_names), scores, info, "classify")
    return 0


def ood_main(argv: Sequence[str]) -> int:
    from pointcloud_pgllm.constants import OOD_PROPAGATION_K, OOD_SPLITS

    parser = _pipeline_parser(
        "ood",
        "PGLLM OOD detection: the ID classes are scored, every other class of the split is OOD. Writes ood_scores.csv (id_score = max-softmax of the refined scores, or the refined single-probability answer) and metrics.json (accuracy on ID, AUROC and FPR95 with ID positive, per ablation).",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--id-classes", type=comma_list, help="comma-separated ID classes")
    group.add_argument(
        "--id-split", choices=sorted(OOD_SPLITS), help="the paper's ModelNet40 ID split"
    )
    parser.add_argument(
        "--ood-score",
        choices=("msp", "single-probability"),
        default="msp",
        help="msp: max-softmax of the refined class scores; single-probability: "
        "the paper's one-number prompt, refined the same way (needs --scorer http)",
    )
    parser.set_defaults(graph_k=OOD_PROPAGATION_K)  # AUROC.py's K = 3
    ns = parser.parse_args(list(argv))
    if ns.ood_score == "single-probability" and ns.scorer != "http":
        parser.error("--ood-score single-probability needs --scorer http")
    import numpy as np

    from pointcloud_pgllm.errors import PGLLMInputError

    data = _load_inputs(ns, parser, None)
    if (data.labels < 0).any():
        raise PGLLMInputError(
            f"{ns.captions}: results[{int(np.argmax(data.labels < 0))}].label_name is missing; "
            "OOD detection needs every item's class"
        )
    id_classes = list(ns.id_classes or OOD_SPLITS[ns.id_split])
    unknown = [c for c in id_classes if c not in data.class_names]
    if unknown:
        option = "--id-classes" if ns.id_classes else f"--id-split {ns.id_split}"
        raise PGLLMInputError(
            f"{option}: class {unknown[0]!r} is not in {ns.data or ns.captions} (classes: {', '.join(data.class_names)})"
        )
    remap = np.array([id_classes.index(c) if c in id_classes else -1 for c in data.class_names])
    labels = remap[data.labels]
    if (labels < 0).sum() == 0:
        raise PGLLMInputError(
            f"{ns.data or ns.captions}: every class is ID; OOD detection needs clouds of other classes"
        )
    scores, info = _run_pipeline(ns, parser, data, labels, id_classes)
    if ns.ood_score == "single-probability":
        from pointcloud_pgllm.pipeline import (
            IDProbabilityScorer,
            PGLLMConfig,
            evaluate,
            pgllm_scores,
        )

        config = PGLLMConfig(ns.graph, ns.graph_k, ns.guidance_k, ns.alpha, ns.steps, ns.normalize)
        probs = pgllm_scores(
            info["features"],
            info["captions"],
            IDProbabilityScorer(info["scorer"]),
            id_classes,
            config,
        )
        info["id_scores"] = {a: p[:, 0] for a, p in probs.items()}
        info["metrics"] = {a: evaluate(scores[a], labels, info["id_scores"][a]) for a in scores}
    _write_results(ns, data, labels, id_classes, scores, info, "ood")
    return 0


def _is_user_error(error: BaseException) -> bool:
    """Bad input rather than a bug: our input errors, scorer errors, file-system errors about a
    path, and ``ValueError`` raised by pointcloud_pgllm's own validation."""
    from pointcloud_pgllm.errors import PGLLMInputError
    from pointcloud_pgllm.scorers import ScorerError

    return is_user_error(
        error,
        "pointcloud_pgllm",
        (
            PGLLMInputError,
            ScorerError,
        ),
    )


def main(args: Sequence[str] | None = None) -> int | None:
    """Entry point of ``pointcloud-pgllm``; ``args`` defaults to ``sys.argv[1:]``.

    Input errors end with one line ``pointcloud-pgllm: error: ...`` on stderr and exit code 2
    (``POINTCLOUD_PGLLM_TRACEBACK=1`` shows the traceback instead)."""
    argv = sys.argv[1:] if args is None else args
    return run_with_one_line_errors(
        PROG, _dispatch, argv, is_user=_is_user_error, traceback_env="POINTCLOUD_PGLLM_TRACEBACK"
    )


def _dispatch(argv: list[str]) -> int:
    handlers = {
        **lightning_commands(TRAINER_SUBCOMMANDS, run_lightning_cli),
        "synth": synth_main,
        "embed": embed_main,
        "caption": caption_main,
        "classify": classify_main,
        "ood": ood_main,
        "configs": configs_command(PROG, "pointcloud_pgllm", 16),
    }
    return dispatch(argv, _top_level_parser, handlers)


if __name__ == "__main__":
    sys.exit(main())
