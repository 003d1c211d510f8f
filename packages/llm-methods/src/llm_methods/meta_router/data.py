"""Router data: RouteLLM response files (the real format), MT-Bench judge scores, query
features, and the simulator of gold + biased preference labels.

RouteLLM (lm-sys/RouteLLM, Apache-2.0) releases ``gsm8k/gsm8k_responses.csv`` and
``mmlu/responses/mmlu_<domain>.csv``: a ``prompt`` column and one correctness column (True /
False) per model, named by the model (e.g. ``gpt-4-1106-preview``,
``mistralai/Mixtral-8x7B-Instruct-v0.1``); and MT-Bench ``judgements.jsonl``
(``question_id``, ``model``, ``score`` 1-10 from GPT-4) with ``question.jsonl`` (``question_id``, ``turns``). A labelled
frame here has columns ``prompt`` (or feature columns ``x0..``), ``y`` = quality(strong) −
quality(weak) and ``T`` (1 = gold-standard label, 0 = preference / LLM-judge label).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from iclr26_common.textio import input_file
from llm_methods.jsonl import read_text

__all__ = [
    "RouterDataError",
    "features",
    "read_mtbench",
    "read_responses_csv",
    "simulate",
    "true_bias",
    "true_gain",
]

TRUE_VALUES = {"true": 1.0, "false": 0.0, "1": 1.0, "0": 0.0, "1.0": 1.0, "0.0": 0.0}
N_FEATURES = 5
NOISE = 0.5
SVD_DIM = 16


class RouterDataError(ValueError):
    """Bad router input; names the file, the row and the column."""


def _numeric(frame: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    values = []
    for row, cell in enumerate(frame[column].tolist(), start=2):  # header is line 1
        if isinstance(cell, (bool, np.bool_)):
            values.append(float(cell))
            continue
        text = str(cell).strip().lower()
        try:
            value = TRUE_VALUES[text] if text in TRUE_VALUES else float(text)
        except ValueError:
            raise RouterDataError(
                f"{path}:{row}: column '{column}' is not numeric or True/False: {cell!r}"
            ) from None
        if not np.isfinite(value):
            raise RouterDataError(f"{path}:{row}: column '{column}' is {cell!r}")
        values.append(value)
    return np.asarray(values)


def read_csv_frame(path: Path) -> pd.DataFrame:
    """``path`` read with pandas; a missing file or an unreadable CSV is one error naming it."""
    input_file(path)
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise RouterDataError(f"{path}: not a readable CSV ({error})") from None


def read_responses_csv(path: str | Path, strong: str, weak: str, treatment: int) -> pd.DataFrame:
    """A RouteLLM response CSV (or any CSV with ``prompt`` or ``x0..`` features and one score
    column per model) as a labelled frame: ``y = strong − weak``, ``T = treatment``."""
    path = Path(path)
    frame = read_csv_frame(path)
    xs = sorted(
        (c for c in frame.columns if c.startswith("x") and c[1:].isdigit()),
        key=lambda c: int(c[1:]),
    )
    missing = [c for c in (strong, weak) if c not in frame.columns]
    if "prompt" not in frame.columns and not xs:
        missing.insert(0, "prompt")
    if missing:
        raise RouterDataError(
            f"{path}: missing column(s) {', '.join(missing)} (columns: "
            f"{', '.join(map(str, frame.columns))})"
        )
    if frame.empty:
        raise RouterDataError(f"{path}: no rows")
    out = pd.DataFrame({"y": _numeric(frame, strong, path) - _numeric(frame, weak, path)})
    if "prompt" in frame.columns:
        if frame["prompt"].isna().any():
            row = int(np.flatnonzero(frame["prompt"].isna())[0]) + 2
            raise RouterDataError(f"{path}:{row}: column 'prompt' is empty")
        out.insert(0, "prompt", frame["prompt"].astype(str).to_numpy())
    else:
        for c in xs:
            out[c] = _numeric(frame, c, path)
    out["T"] = int(treatment)
    return out


def read_mtbench(
    judgements: str | Path, questions: str | Path, strong: str, weak: str
) -> pd.DataFrame:
    """MT-Bench GPT-4 judge scores as preference labels (T = 0): per question, mean score of
    ``strong`` minus that of ``weak``, scaled by 1/9 (scores are 1-10); ``prompt`` = turn 1."""
    paths = Path(judgements), Path(questions)
    for p in paths:
        input_file(p)
    rows = []
    for number, line in enumerate(read_text(paths[0], RouterDataError).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            rows.append(
                {
                    "question_id": rec["question_id"],
                    "model": str(rec["model"]),
                    "score": float(rec["score"]),
                }
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise RouterDataError(
                f"{paths[0]}:{number}: needs question_id, model and a numeric "
                f"score ({type(error).__name__}: {error})"
            ) from None
    prompts = {}
    for number, line in enumerate(read_text(paths[1], RouterDataError).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            prompts[rec["question_id"]] = str(rec["turns"][0])
        except (json.JSONDecodeError, KeyError, TypeError, IndexError) as error:
            raise RouterDataError(
                f"{paths[1]}:{number}: needs question_id and turns ({type(error).__name__})"
            ) from None
    scores = pd.DataFrame(rows).groupby(["question_id", "model"])["score"].mean().unstack()
    for model in (strong, weak):
        if model not in scores.columns:
            names = sorted(map(str, scores.columns))
            shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            raise RouterDataError(
                f"{paths[0]}: no judgements for model {model!r} (its models: {shown})"
            )
    scores = scores.dropna(subset=[strong, weak])
    missing = [q for q in scores.index if q not in prompts]
    if missing:
        raise RouterDataError(f"{paths[1]}: no question {missing[0]!r}")
    return pd.DataFrame(
        {
            "prompt": [prompts[q] for q in scores.index],
            "y": ((scores[strong] - scores[weak]) / 9.0).to_numpy(),
            "T": 0,
        }
    )


def features(
    frame: pd.DataFrame, fitted: dict | None = None, path: str | Path | None = None
) -> tuple[np.ndarray, dict]:
    """Query features: the ``x0..`` columns, or for prompts a hashed bag of words reduced by
    TruncatedSVD plus log length and digit share. Returns (X, the state to reuse at routing).
    ``path``: the CSV ``frame`` was read from, as is (row i is line i + 2): its ``x`` cells are
    checked (a non-numeric, empty or non-finite cell is one error naming the file, row and
    column) and its errors name it."""
    where = f"{path}: " if path is not None else ""
    xs = sorted(
        (c for c in frame.columns if c.startswith("x") and c[1:].isdigit()),
        key=lambda c: int(c[1:]),
    )
    kind = "text" if "prompt" in frame.columns else "columns"
    if fitted is not None and fitted.get("kind") != kind:
        what = {"text": "a 'prompt' column", "columns": "x0.. feature columns"}
        raise RouterDataError(
            f"{where}the queries have {what[kind]} but the router was fitted on "
            f"{what.get(str(fitted.get('kind')), repr(fitted.get('kind')))}"
        )
    if kind == "columns":
        if not xs:
            raise RouterDataError(
                f"{where}no 'prompt' or 'x0..' feature columns (columns: "
                f"{', '.join(map(str, frame.columns)) or 'none'})"
            )
        expected = fitted.get("columns") if fitted is not None else None
        if expected is not None and xs != list(expected):
            raise RouterDataError(
                f"{where}the queries' feature columns {xs} differ from the router's "
                f"{list(expected)}"
            )
        if path is None:
            return frame[xs].to_numpy(float), {"kind": "columns", "columns": xs}
        x = np.column_stack([_numeric(frame, c, Path(path)) for c in xs])
        return x, {"kind": "columns", "columns": xs}
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import HashingVectorizer

    texts = frame["prompt"].astype(str).tolist()
    hashed = HashingVectorizer(n_features=2**14, alternate_sign=False, norm="l2").transform(texts)
    if fitted is None:
        dim = max(1, min(SVD_DIM, hashed.shape[0] - 1, hashed.shape[1] - 1))
        fitted = {"kind": "text", "svd": TruncatedSVD(dim, random_state=0).fit(hashed)}
    dense = fitted["svd"].transform(hashed)
    length = np.log1p([len(t.split()) for t in texts])
    digits = [sum(ch.isdigit() for ch in t) / max(len(t), 1) for t in texts]
    return np.column_stack([dense, length, digits]), fitted


def true_gain(x: np.ndarray) -> np.ndarray:
    """m(x) = quality(strong) − quality(weak) of the simulator."""
    return 0.2 + 0.5 * x[:, 1] - 0.3 * x[:, 2] ** 2 + 0.2 * x[:, 3]


def true_bias(x: np.ndarray, bias: float) -> np.ndarray:
    """δ(x) = m − η: the judge under-rates the strong model when answers are long (x0)."""
    return bias * (0.2 + 0.6 * x[:, 0])


def simulate(
    n: int, gold_frac: float, bias: float, seed: int = 0, n_test: int = 2000
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test). Train: ``x0..x4``, ``y``, ``T`` with gold selected with probability
    ∝ (1 + 0.5·x1) (mean ``gold_frac``); gold y = m(x) + ε, preference y = m(x) − δ(x) + ε,
    ε ~ N(0, 0.5²). Test: features, ``m`` (true gain), ``q_weak``."""
    if not 0.0 < gold_frac < 1.0:
        raise ValueError("gold_frac must be in (0, 1)")
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, (n + n_test, N_FEATURES))
    m = true_gain(x)
    cols = {f"x{j}": x[:n, j] for j in range(N_FEATURES)}
    propensity = np.clip(gold_frac * (1.0 + 0.5 * x[:n, 1]), 0.001, 0.999)
    treated = (rng.random(n) < propensity).astype(int)
    eta = m[:n] - true_bias(x[:n], bias)
    y = np.where(treated == 1, m[:n], eta) + rng.normal(0.0, NOISE, n)
    train = pd.DataFrame({**cols, "y": y, "T": treated})
    test = pd.DataFrame({f"x{j}": x[n:, j] for j in range(N_FEATURES)})
    test["m"] = m[n:]
    test["q_weak"] = 0.5 + 0.2 * x[n:, 4]
    return train, test
