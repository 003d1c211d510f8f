"""Readers for PointLLM's outputs, the real first stage of PGLLM.

The official pipeline (handsome999KK/PGLLM, ``Pointllm/pointllm/eval/eval_modelnet_cls.py``)
writes, for the ModelNet40 test split:

- the captions JSON ``{model_name}/evaluation/ModelNet_classification_prompt0.json``::

      {"prompt": "What is this?",
       "results": [{"object_id": 0, "ground_truth": 0, "model_output": "...",
                    "label_name": "airplane"}, ...]}

  one item per cloud in dataset order (``object_id`` is the cloud's index, which the official
  ``GPT_cls_MN.py`` uses as the row of the feature matrix; ``label_name`` is the class name with
  spaces, ``"flower pot"``; ``ground_truth`` its index in ModelNet40's order);
- the features ``[N, D]`` of the same clouds (PointLLM's point encoder: class token and max-pooled
  patch tokens concatenated). The official script prints them as text (``concat_f_values_MN.txt``,
  numpy's ``str`` of each batch, which numpy shortens to ``...`` beyond 1000 values); the official
  ``GPT_cls_MN.py`` / ``GPT_OOD_MN.py`` also read a ``.npy`` array, the form read here.

Every field relied on is checked; bad input raises :class:`PGLLMInputError` naming the file and
the field (``results[3].model_output``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common.textio import read_text
from pointcloud_pgllm.constants import MODELNET40_CLASSES
from pointcloud_pgllm.errors import PGLLMInputError

__all__ = [
    "CaptionSet",
    "captions_tfidf_scorer",
    "keep_classes",
    "read_features",
    "read_pointllm_captions",
]


def _key(name: str) -> str:
    """ModelNet40 spellings compared: ``"flower pot"`` (PointLLM) == ``"flower_pot"`` (ours)."""
    return name.strip().lower().replace("_", " ")


_MODELNET40_BY_KEY = {_key(name): i for i, name in enumerate(MODELNET40_CLASSES)}


@dataclass
class CaptionSet:
    """PointLLM's captions of one split: ``captions`` [N], ``labels`` [N] int64 indices into
    ``class_names`` (-1: unlabelled, or a class outside ``class_names``), ``sources`` [N]
    (``<file>#<object_id>``). Row i is feature row i. ``labelled``: the JSON has ``label_name``
    fields (else every label is -1 and ``class_names`` is only the list to score against)."""

    captions: list[str]
    labels: np.ndarray
    class_names: list[str]
    sources: list[str]
    labelled: bool = True

    def __len__(self) -> int:
        return len(self.captions)

    def subset(self, index: np.ndarray) -> CaptionSet:
        index = np.asarray(index, dtype=np.int64)
        return CaptionSet(
            [self.captions[i] for i in index],
            self.labels[index],
            list(self.class_names),
            [self.sources[i] for i in index],
            self.labelled,
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_pointllm_captions(path: str | Path, classes: list[str] | None = None) -> CaptionSet:
    """The captions JSON of ``eval_modelnet_cls.py`` (layout in the module docstring).

    ``object_id`` must be the item's position (0, 1, ...), as the official scripts assume.
    ``label_name`` is optional but then absent from every item (labels -1). The class list is
    ``classes`` when given, else ModelNet40 (our spelling, canonical order) when every label is a
    ModelNet40 class, else the label names sorted; with ModelNet40 classes, ``ground_truth`` (if
    present) must be the label's ModelNet40 index. Labels outside ``classes`` are -1."""
    path = Path(path)
    text = read_text(path, "captions JSON", error=PGLLMInputError, gzip_suffix=False)
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PGLLMInputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise PGLLMInputError(
            f"{path}: field 'results' must be a list (PointLLM's layout: "
            '{"prompt": ..., "results": [{"object_id", "model_output", "label_name"}, ...]})'
        )
    items = payload["results"]
    if not items:
        raise PGLLMInputError(f"{path}: field 'results' is empty")
    captions: list[str] = []
    names: list[str | None] = []
    truths: list[int | None] = []
    for i, item in enumerate(items):
        where = f"{path}: results[{i}]"
        if not isinstance(item, dict):
            raise PGLLMInputError(f"{where} must be an object, got {type(item).__name__}")
        if not _is_int(item.get("object_id")) or item["object_id"] != i:
            raise PGLLMInputError(
                f"{where}.object_id must be {i} (the item's position, which is its feature row), "
                f"got {item.get('object_id')!r}"
            )
        caption = item.get("model_output")
        if not isinstance(caption, str):
            raise PGLLMInputError(f"{where}.model_output must be a string, got {caption!r}")
        name = item.get("label_name")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise PGLLMInputError(f"{where}.label_name must be a non-empty string, got {name!r}")
        truth = item.get("ground_truth")
        if truth is not None and not _is_int(truth):
            raise PGLLMInputError(f"{where}.ground_truth must be an integer, got {truth!r}")
        captions.append(caption)
        names.append(name)
        truths.append(truth)
    labelled = [n is not None for n in names]
    if any(labelled) and not all(labelled):
        first = labelled.index(not labelled[0])
        state = ("is missing", "has one") if labelled[0] else ("is present", "has none")
        raise PGLLMInputError(
            f"{path}: results[{first}].label_name {state[0]} while results[0] {state[1]} "
            "(label every item or none)"
        )
    keys = [_key(n) for n in names if n is not None]
    modelnet = bool(keys) and all(k in _MODELNET40_BY_KEY for k in keys)
    if modelnet:
        for i, (name, truth) in enumerate(zip(names, truths, strict=True)):
            expected = _MODELNET40_BY_KEY[_key(name or "")]
            if truth is not None and truth != expected:
                raise PGLLMInputError(
                    f"{path}: results[{i}].ground_truth is {truth} but label_name {name!r} is "
                    f"ModelNet40 class {expected}"
                )
    if classes is not None:
        class_names = list(classes)
    elif modelnet:
        class_names = list(MODELNET40_CLASSES)
    else:
        class_names = sorted({n.strip() for n in names if n is not None})
    index = {_key(c): j for j, c in enumerate(class_names)}
    labels = np.array(
        [index.get(_key(n), -1) if n is not None else -1 for n in names], dtype=np.int64
    )
    sources = [f"{path}#{i}" for i in range(len(items))]
    return CaptionSet(captions, labels, class_names, sources, labelled=bool(keys))


def keep_classes(
    data: CaptionSet, features: np.ndarray, path: str | Path
) -> tuple[CaptionSet, np.ndarray]:
    """The items of ``data`` (read with ``classes``) and their feature rows that belong to
    ``data.class_names``, with a notice on stderr naming how many were kept; unlabelled captions
    are kept whole (the class list then only names the classes to score against)."""
    if not data.labelled:
        return data, features
    keep = np.flatnonzero(data.labels >= 0)
    if len(keep) == 0:
        raise PGLLMInputError(f"{path}: no item's label_name is one of --classes")
    if len(keep) < len(data):  # nothing is dropped silently (issue 22 review, #11)
        print(f"{path}: kept {len(keep)} of {len(data)} items (--classes)", file=sys.stderr)
    return data.subset(keep), features[keep]


def read_features(path: str | Path, n_rows: int | None = None) -> np.ndarray:
    """Features ``[N, D]`` float32 from a ``.npy`` file (no pickles), finite, with ``n_rows``
    rows when given (one per caption, in the same order)."""
    path = Path(path)
    if path.suffix.lower() != ".npy":
        raise PGLLMInputError(
            f"{path}: features must be a .npy array [N, D] (PointLLM's concat_f_values_*.txt is "
            "numpy's printed summary, which drops values beyond 1000 per batch)"
        )
    with open(path, "rb") as handle:
        if handle.read(6) != b"\x93NUMPY":
            raise PGLLMInputError(f"{path}: not a .npy file (no NumPy header)")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise PGLLMInputError(f"{path}: not a plain .npy array ({exc})") from None
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "fiu":
        raise PGLLMInputError(f"{path}: features must be numeric, got dtype {array.dtype}")
    if array.ndim != 2 or array.shape[1] == 0:
        raise PGLLMInputError(f"{path}: features must have shape [N, D], got {array.shape}")
    if n_rows is not None and array.shape[0] != n_rows:
        raise PGLLMInputError(
            f"{path}: features have {array.shape[0]} rows but the captions have {n_rows} items "
            "(row i must be object_id i)"
        )
    bad = ~np.isfinite(array).all(axis=1)
    if bad.any():
        raise PGLLMInputError(
            f"{path}: features row {int(np.argmax(bad))} is not finite ({int(bad.sum())} rows)"
        )
    return array.astype(np.float32, copy=False)


def captions_tfidf_scorer(
    captions_path: str | Path, train_path: str | Path | None, class_names: list[str]
) -> Any:
    """The tfidf scorer fitted on a labelled PointLLM captions JSON ``train_path`` that is not
    the evaluated ``captions_path`` (the scorer never sees evaluation labels); training items of
    classes outside ``class_names`` are left out."""
    from pointcloud_pgllm.scorers import TfidfScorer

    if train_path is None:
        raise PGLLMInputError(
            f"{captions_path}: the tfidf scorer needs labelled training captions: give PointLLM's "
            "captions of the train split with --train-data (or use another scorer)"
        )
    train_path = Path(train_path)
    if train_path.suffix.lower() != ".json":
        raise PGLLMInputError(
            f"{train_path}: with --captions, --train-data must be a PointLLM captions JSON"
        )
    if train_path.exists() and train_path.samefile(captions_path):
        raise PGLLMInputError(
            f"{train_path}: --train-data is the evaluated --captions file; the tfidf scorer must "
            "never see the evaluation labels"
        )
    train = read_pointllm_captions(train_path, class_names)
    keep = np.flatnonzero(train.labels >= 0)
    if len(np.unique(train.labels[keep])) < 2:
        raise PGLLMInputError(
            f"{train_path}: field 'label_name' names fewer than 2 of the classes "
            f"({', '.join(class_names)}); the tfidf scorer needs labelled captions"
        )
    return TfidfScorer().fit(
        [train.captions[i] for i in keep], train.labels[keep], list(class_names)
    )
