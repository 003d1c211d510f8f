"""LLM-as-judge annotation of unlabelled SeekBench traces (paper §3.2, upstream ``annotation/``).

Step-type-specific prompts ask for JSON labels (upstream: gpt-4.1-mini, T = 0). Judges are
pluggable (:class:`Judge`): :class:`HTTPJudge` (any OpenAI-compatible ``/chat/completions``
endpoint, disk cache keyed by the prompt hash, retry with exponential backoff),
:class:`LMJudge` (a local causal LM through the core, e.g. SmolLM2; it scores each allowed label
as the JSON value's continuation and takes the argmax, so its output is always valid JSON) and
:class:`RuleJudge` (lexical rules, no model). :func:`agreement` reports Cohen's κ per field.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_methods.lm.scoring import option_logprobs  # the core's; re-exported here
from llm_methods.seekbench.data import (
    ATTRIBUTE_VALUES,
    QUERY_TYPES,
    REASONING_TYPES,
)

if TYPE_CHECKING:
    from llm_methods.lm.loading import LM

__all__ = [
    "FIELDS",
    "HTTPJudge",
    "Judge",
    "LMJudge",
    "RuleJudge",
    "agreement",
    "annotate",
    "build_prompt",
    "option_logprobs",
    "step_fields",
]

# per step type: JSON key -> allowed values (``type`` is the annotation type)
FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "reasoning": {"type": REASONING_TYPES, "groundness": ATTRIBUTE_VALUES["groundness"]},
    "search": {"type": QUERY_TYPES},
    "search_result": {
        "information_quality": ATTRIBUTE_VALUES["information_quality"],
        "information_clarity": ATTRIBUTE_VALUES["information_clarity"],
    },
}
# agreement fields: name -> (step type, key)
KAPPA_FIELDS = {
    "reasoning_type": ("reasoning", "type"),
    "groundness": ("reasoning", "groundness"),
    "query_type": ("search", "type"),
    "information_quality": ("search_result", "information_quality"),
    "information_clarity": ("search_result", "information_clarity"),
}
INSTRUCTIONS = {
    "reasoning": "Classify the agent's reasoning step. type: StateAssessment (judges the "
    "current evidence), PlanFormation (plans the next action) or InformationSynthesis "
    "(combines evidence into a conclusion). groundness: Grounded if its claims are supported "
    "by the retrieved documents, else Not Grounded.",
    "search": "Classify the search query. InitialQuery (first query), RefinedQuery (rewrites "
    "an earlier query after poor results), FollowUpQuery (seeks new information), RepeatQuery "
    "(repeats an earlier query).",
    "search_result": "Judge the retrieved documents for answering the question. "
    "information_quality: Sufficient or Insufficient. information_clarity: Clear (one "
    "consistent answer) or Unclear (conflicting or vague).",
}
DOC_CHARS = 160
STOPWORDS = {
    "what",
    "which",
    "where",
    "when",
    "who",
    "whom",
    "does",
    "did",
    "the",
    "was",
    "were",
    "is",
    "are",
    "for",
    "and",
    "with",
    "from",
    "that",
    "this",
    "about",
    "into",
    "of",
}
HEDGES = ("some sources", "however", "disputed", "conflicting", "unclear", "uncertain")


def step_fields(step: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    return FIELDS.get(step["type"], {})


def _context(trace: dict[str, Any], i: int, last: int = 3) -> str:
    lines = []
    for step in trace["trace"][max(0, i - last) : i + 1]:
        if step["type"] == "search":
            body = f"query: {step['query']}"
        elif step["type"] == "search_result":
            body = " | ".join(
                f"{d['title']}: {d['content'][:DOC_CHARS]}" for d in step["documents"]
            )
        else:
            body = step.get("content", "")
        tag = "CURRENT " if step is trace["trace"][i] else ""
        lines.append(f"[{tag}{step['step_index']} {step['type']}] {body}")
    return "\n".join(lines)


def build_prompt(trace: dict[str, Any], i: int) -> str:
    """The judge prompt for step ``i`` (its type's instructions, the question, recent steps and
    the JSON keys with their allowed values)."""
    step = trace["trace"][i]
    fields = step_fields(step)
    keys = ", ".join(f'"{k}": one of {list(v)}' for k, v in fields.items())
    return (
        f"{INSTRUCTIONS[step['type']]}\nQuestion: {trace['question']}\nTrace:\n"
        f"{_context(trace, i)}\nAnswer with JSON only: {{{keys}}}"
    )


def _parse(text: str, fields: dict[str, tuple[str, ...]]) -> dict[str, str | None]:
    """Labels from a judge's JSON reply; a missing or invalid value becomes None."""
    match = re.search(r"\{.*\}", text, re.S)
    try:
        data = json.loads(match.group(0)) if match else {}
    except json.JSONDecodeError:
        data = {}
    data = data if isinstance(data, dict) else {}
    return {k: (data.get(k) if data.get(k) in values else None) for k, values in fields.items()}


class Judge:
    """Labels one step of a trace: ``label(trace, i) -> {key: value | None}``; ``calls`` counts
    model calls (cache hits excluded)."""

    name = "judge"

    def __init__(self) -> None:
        self.calls = 0

    def label(self, trace: dict[str, Any], i: int) -> dict[str, str | None]:
        raise NotImplementedError


class _Cache:
    def __init__(self, folder: str | Path | None) -> None:
        self.folder = None if folder is None else Path(folder)

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any:
        if self.folder is None or not self._path(key).is_file():
            return None
        return json.loads(self._path(key).read_text())

    def put(self, key: str, value: Any) -> None:
        if self.folder is not None:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))


def _key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


class HTTPJudge(Judge):
    """An OpenAI-compatible chat endpoint (``base_url`` + ``/chat/completions``), temperature 0.

    Replies are cached under ``cache_dir`` keyed by sha256(model, prompt); failures (connection
    errors, HTTP 429 / 5xx) are retried ``retries`` times with backoff ``backoff * 2**attempt``.
    """

    name = "http"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        cache_dir: str | Path | None = None,
        retries: int = 4,
        backoff: float = 1.0,
        timeout: float = 60.0,
    ) -> None:
        super().__init__()
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key, self.retries = model, api_key, retries
        self.backoff, self.timeout = backoff, timeout
        self.cache = _Cache(cache_dir)

    def _post(self, prompt: str) -> str:
        body = json.dumps(
            {
                "model": self.model,
                "temperature": 0,
                "messages": [{"role": "user", "content": prompt}],
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        error: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url, body, headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    reply = json.loads(response.read())
                self.calls += 1
                return str(reply["choices"][0]["message"]["content"])
            except urllib.error.HTTPError as exc:
                error = exc
                if exc.code != 429 and exc.code < 500:
                    break
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                error = exc
            except (KeyError, IndexError, TypeError, json.JSONDecodeError) as exc:
                raise ValueError(f"{self.url}: reply is not a chat completion ({exc})") from None
        raise ValueError(f"{self.url}: judge request failed after retries ({error})")

    def label(self, trace: dict[str, Any], i: int) -> dict[str, str | None]:
        fields = step_fields(trace["trace"][i])
        prompt = build_prompt(trace, i)
        key = _key(self.model, prompt)
        text = self.cache.get(key)
        if text is None:
            text = self._post(prompt)
            self.cache.put(key, text)
        return _parse(text, fields)


class LMJudge(Judge):
    """A local causal LM (``llm_methods.lm`` handle): for each key, the allowed value with the
    highest mean token log-prob as the JSON value's continuation (one batched scoring call)."""

    name = "lm"

    def __init__(self, lm: LM, cache_dir: str | Path | None = None) -> None:
        super().__init__()
        self.lm, self.cache = lm, _Cache(cache_dir)

    def label(self, trace: dict[str, Any], i: int) -> dict[str, str | None]:
        from llm_methods.lm import chat_prompt

        fields = step_fields(trace["trace"][i])
        prompt = build_prompt(trace, i)
        key = _key(self.lm.name, prompt)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        pairs = [(f'{{"{k}": "', f'{v}"') for k, values in fields.items() for v in values]
        scores = iter(option_logprobs(self.lm, chat_prompt(self.lm, prompt), pairs))
        out = {}
        for k, values in fields.items():
            mine = [next(scores) for _ in values]
            out[k] = values[max(range(len(values)), key=mine.__getitem__)]
        self.calls += 1
        self.cache.put(key, out)
        return out


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2} - STOPWORDS


class RuleJudge(Judge):
    """Lexical rules: query overlap with earlier queries; question entities and hedges in the
    documents; cue words and document-token overlap in reasoning."""

    name = "rule"

    def label(self, trace: dict[str, Any], i: int) -> dict[str, str | None]:
        self.calls += 1
        steps, step = trace["trace"], trace["trace"][i]
        if step["type"] == "search":
            earlier = [s["query"] for s in steps[:i] if s["type"] == "search"]
            mine = _words(step["query"])
            if not earlier:
                kind = "InitialQuery"
            elif any(
                " ".join(q.lower().split()) == " ".join(step["query"].lower().split())
                for q in earlier
            ):
                kind = "RepeatQuery"
            elif len(mine & _words(earlier[-1])) / max(len(mine | _words(earlier[-1])), 1) >= 0.5:
                kind = "RefinedQuery"
            else:
                kind = "FollowUpQuery"
            return {"type": kind}
        if step["type"] == "search_result":
            entities = set(re.findall(r"\b[A-Z][a-z]+\b", trace["question"])[1:])
            relevant = [
                d
                for d in step["documents"]
                if entities
                and entities <= set(re.findall(r"\b[A-Z][a-z]+\b", d["title"] + " " + d["content"]))
            ]
            hedged = any(h in d["content"].lower() for d in relevant for h in HEDGES)
            return {
                "information_quality": "Sufficient" if relevant else "Insufficient",
                "information_clarity": "Unclear" if hedged or not relevant else "Clear",
            }
        if step["type"] == "reasoning":
            text = step["content"].lower()
            if re.search(r"\b(therefore|thus|in summary|combining|so the answer)\b", text):
                kind = "InformationSynthesis"
            elif re.search(r"\b(i need|i will|next|first|let me|let's|plan)\b", text):
                kind = "PlanFormation"
            else:
                kind = "StateAssessment"
            docs = " ".join(
                d["title"] + " " + d["content"]
                for s in steps[:i]
                if s["type"] == "search_result"
                for d in s["documents"]
            )
            support = (_words(step["content"]) & _words(docs)) - _words(trace["question"])
            return {"type": kind, "groundness": "Grounded" if support else "Not Grounded"}
        return {}


def annotate(
    traces: Sequence[dict[str, Any]],
    judge: Judge,
    max_steps: int | None = None,
    quiet: bool = True,
) -> list[dict[str, Any]]:
    """Copies of ``traces`` with every judgeable step's ``annotation`` replaced by the judge's
    labels (unparsable values left out); ``max_steps`` caps the steps judged in all.
    ``quiet=False``: progress over the traces on stderr."""
    from iclr26_common.progress import progress

    out, done = [], 0
    for trace in progress(traces, description="seekbench judge traces", quiet=quiet):
        new = copy.deepcopy(trace)
        for i, step in enumerate(new["trace"]):
            if not step_fields(step) or (max_steps is not None and done >= max_steps):
                continue
            labels = judge.label(new, i)
            done += 1
            kind = labels.pop("type", None) if step["type"] != "search_result" else "search_result"
            attributes = {k: v for k, v in labels.items() if v is not None}
            step["annotation"] = {"type": kind, "attributes": attributes}
            if kind is None:
                step["annotation"].pop("type")
        out.append(new)
    return out


def agreement(
    gold: Sequence[dict[str, Any]], judged: Sequence[dict[str, Any]]
) -> dict[str, dict[str, float]]:
    """Cohen's κ (and raw agreement, n) per field over the steps both sides labelled; a judged
    step with no value for a field counts as a disagreement."""
    from sklearn.metrics import cohen_kappa_score

    pairs: dict[str, tuple[list[str], list[str]]] = {f: ([], []) for f in KAPPA_FIELDS}
    for g_trace, j_trace in zip(gold, judged, strict=True):
        for g, j in zip(g_trace["trace"], j_trace["trace"], strict=True):
            g_ann, j_ann = g.get("annotation"), j.get("annotation")
            if g_ann is None or j_ann is None or j_ann is g_ann:
                continue
            for name, (kind, key) in KAPPA_FIELDS.items():
                if g["type"] != kind:
                    continue
                g_val = (
                    g_ann.get("type") if key == "type" else (g_ann.get("attributes") or {}).get(key)
                )
                if g_val is None:
                    continue
                j_val = (
                    j_ann.get("type") if key == "type" else (j_ann.get("attributes") or {}).get(key)
                )
                pairs[name][0].append(g_val)
                pairs[name][1].append(j_val or "<none>")
    out = {}
    for name, (a, b) in pairs.items():
        if not a:
            continue
        kappa = float(cohen_kappa_score(a, b)) if len(set(a) | set(b)) > 1 else 1.0
        out[name] = {
            "kappa": kappa,
            "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(a),
            "n": len(a),
        }
    return out
