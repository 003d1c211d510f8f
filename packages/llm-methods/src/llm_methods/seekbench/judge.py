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
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_methods.lm.scoring import option_logprobs  # the core's; re-exported here
from llm_methods.seekbench.counts import evidence_level
from llm_methods.seekbench.data import (
    ATTRIBUTE_VALUES,
    QUERY_TYPES,
    REASONING_TYPES,
    RESULT_TYPES,
    TOOL_TYPES,
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
    "evidence_agreement",
    "judged_steps",
    "option_logprobs",
    "step_fields",
]

# the judge's three kinds of step: every tool call is judged as a query, every tool result as a
# search result (the official ontology gives them the same labels)
KINDS: dict[str, str] = {
    "reasoning": "reasoning",
    **dict.fromkeys(TOOL_TYPES, "search"),
    **dict.fromkeys(RESULT_TYPES, "search_result"),
}
# the official judge's options (annotation/ontology.json); "Unspecified" is what the official
# annotator writes when its call fails, not a label a judge may choose
_RESULT_FIELDS = {
    "information_quality": ("Sufficient", "Insufficient"),
    "information_clarity": ("Clear", "Unclear"),
}
# per step type: JSON key -> allowed values (``type`` is the annotation type)
FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "reasoning": {"type": REASONING_TYPES, "groundness": ATTRIBUTE_VALUES["groundness"]},
    **{t: {"type": QUERY_TYPES} for t in TOOL_TYPES},
    **dict.fromkeys(RESULT_TYPES, _RESULT_FIELDS),
}
# agreement fields: name -> (judge kind, key)
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
    "information_quality: Sufficient if they state the fact the question asks for, Insufficient "
    "if it is missing (a document that names the question's entity but not the asked fact is "
    "Insufficient). information_clarity: Clear (the asked fact is stated unambiguously) or "
    "Unclear (conflicting, ambiguous or vague).",
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
# irregular verb forms -> one stem, so "Who wrote X?" meets "X was written by Y"
IRREGULAR = {
    "wrote": "write",
    "written": "write",
    "bore": "born",
    "borne": "born",
    "won": "win",
    "made": "make",
    "led": "lead",
    "took": "take",
    "taken": "take",
    "became": "become",
    "began": "begin",
    "begun": "begin",
    "built": "build",
    "held": "hold",
    "sang": "sing",
    "sung": "sing",
    "gave": "give",
    "given": "give",
    "knew": "know",
    "known": "know",
    "founded": "found",
}


def step_fields(step: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    return FIELDS.get(step["type"], {})


def _strs(value: Any) -> str:
    return " ".join(str(v) for v in value) if isinstance(value, list) else str(value or "")


def _call_text(step: dict[str, Any]) -> str:
    """A tool call's input as text (query, url and goal, files or code)."""
    parts = [_strs(step.get(k)) for k in ("query", "url", "goal", "files", "code") if k in step]
    return " ".join(p for p in parts if p)


def _result_docs(step: dict[str, Any]) -> list[tuple[str, str]]:
    """A tool result as (title, text) passages: its documents, else its text split into
    sentences (a visited page, a file, python output)."""
    docs = step.get("documents") or step.get("docs")
    if isinstance(docs, list):
        return [(str(d.get("title", "")), str(d.get("content", ""))) for d in docs]
    text = _strs(step.get("content"))
    return [("", s) for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _context(trace: dict[str, Any], i: int, last: int = 3) -> str:
    lines = []
    for step in trace["trace"][max(0, i - last) : i + 1]:
        kind = KINDS.get(step["type"])
        if kind == "search":
            body = f"query: {_call_text(step)}"
        elif kind == "search_result":
            body = " | ".join(
                f"{title}: {text[:DOC_CHARS]}" if title else text[:DOC_CHARS]
                for title, text in _result_docs(step)
            )
        else:
            body = step.get("content", "")
        tag = "CURRENT " if step is trace["trace"][i] else ""
        lines.append(f"[{tag}{step['step_index']} {step['type']}] {body}")
    return "\n".join(lines)


def build_prompt(trace: dict[str, Any], i: int) -> str:
    """The judge prompt for step ``i`` (its kind's instructions, the question, recent steps and
    the JSON keys with their allowed values)."""
    step = trace["trace"][i]
    fields = step_fields(step)
    keys = ", ".join(f'"{k}": one of {list(v)}' for k, v in fields.items())
    return (
        f"{INSTRUCTIONS[KINDS[step['type']]]}\nQuestion: {trace['question']}\nTrace:\n"
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


def _stem(word: str) -> str:
    """A crude inflection stripper: irregular forms, then -ing / -ed / -es / -s / -d."""
    if word in IRREGULAR:
        return IRREGULAR[word]
    for suffix in ("ing", "ed", "es", "s", "d"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _stems(text: str) -> set[str]:
    return {_stem(w) for w in _words(text)}


def _capitals(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Z][a-z]+\b", text))


def _sufficient_passages(question: str, docs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The passages that state what ``question`` asks: they name every entity of the question
    (its capitalised words after the first) **and** mention the asked relation (a content word
    of the question outside the entity, up to inflection). The ontology's own example of
    Insufficient is a result that names the entity but not the asked fact ("Chris Martin is
    the lead singer of Coldplay" for his birth date): naming the entity is not enough."""
    entities = set(re.findall(r"\b[A-Z][a-z]+\b", question)[1:])
    relation = _stems(question) - {_stem(e.lower()) for e in entities}
    out = []
    for title, text in docs:
        body = f"{title} {text}"
        names = entities <= _capitals(body) if entities else False
        if not relation:
            asked = names
        elif entities:
            asked = names and bool(relation & _stems(body))
        else:  # no entity to anchor on: most of the question's content words
            asked = len(relation & _stems(body)) * 2 >= len(relation)
        if asked:
            out.append((title, text))
    return out


class RuleJudge(Judge):
    """Lexical rules: query overlap with earlier queries; a result is Sufficient when a passage
    names the question's entity and the asked relation, Unclear when that passage hedges (or
    none does); cue words and document-token overlap in reasoning."""

    name = "rule"

    def label(self, trace: dict[str, Any], i: int) -> dict[str, str | None]:
        self.calls += 1
        steps, step = trace["trace"], trace["trace"][i]
        kind = KINDS.get(step["type"])
        if kind == "search":
            earlier = [_call_text(s) for s in steps[:i] if KINDS.get(s["type"]) == "search"]
            text = _call_text(step)
            mine = _words(text)
            if not earlier:
                label = "InitialQuery"
            elif any(
                " ".join(q.lower().split()) == " ".join(text.lower().split()) for q in earlier
            ):
                label = "RepeatQuery"
            elif len(mine & _words(earlier[-1])) / max(len(mine | _words(earlier[-1])), 1) >= 0.5:
                label = "RefinedQuery"
            else:
                label = "FollowUpQuery"
            return {"type": label}
        if kind == "search_result":
            relevant = _sufficient_passages(trace["question"], _result_docs(step))
            hedged = any(h in text.lower() for _, text in relevant for h in HEDGES)
            return {
                "information_quality": "Sufficient" if relevant else "Insufficient",
                "information_clarity": "Unclear" if hedged or not relevant else "Clear",
            }
        if kind == "reasoning":
            text = step["content"].lower()
            if re.search(r"\b(therefore|thus|in summary|combining|so the answer)\b", text):
                label = "InformationSynthesis"
            elif re.search(r"\b(i need|i will|next|first|let me|let's|plan)\b", text):
                label = "PlanFormation"
            else:
                label = "StateAssessment"
            docs = " ".join(
                f"{title} {body}"
                for s in steps[:i]
                if KINDS.get(s["type"]) == "search_result"
                for title, body in _result_docs(s)
            )
            support = (_words(step["content"]) & _words(docs)) - _words(trace["question"])
            return {"type": label, "groundness": "Grounded" if support else "Not Grounded"}
        return {}


def judged_steps(
    traces: Sequence[dict[str, Any]], max_steps: int | None = None
) -> set[tuple[int, int]]:
    """The (trace, step) positions :func:`annotate` judges with ``max_steps``: the judgeable
    steps in file order, the first ``max_steps`` of them."""
    out: set[tuple[int, int]] = set()
    for t, trace in enumerate(traces):
        for i, step in enumerate(trace["trace"]):
            if step_fields(step) and (max_steps is None or len(out) < max_steps):
                out.add((t, i))
    return out


def annotate(
    traces: Sequence[dict[str, Any]],
    judge: Judge,
    max_steps: int | None = None,
    quiet: bool = True,
    steps: Collection[tuple[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """Copies of ``traces`` with every judgeable step's ``annotation`` replaced by the judge's
    labels (unparsable values left out); ``max_steps`` caps the steps judged in all (the first
    ones, :func:`judged_steps`); ``steps``: judge only these (trace, step) positions. A step
    not judged keeps the input's annotation. ``quiet=False``: progress over the steps judged on
    stderr."""
    from iclr26_common.progress import progress

    todo = judged_steps(traces, max_steps)
    if steps is not None:
        todo &= set(steps)
    out = [copy.deepcopy(trace) for trace in traces]
    for t, i in progress(sorted(todo), description="seekbench judge steps", quiet=quiet):
        step = out[t]["trace"][i]
        labels = judge.label(out[t], i)
        result = KINDS[step["type"]] == "search_result"
        kind = "search_result" if result else labels.pop("type", None)
        step["annotation"] = {"type": kind, "attributes": {}}
        step["annotation"]["attributes"] = {k: v for k, v in labels.items() if v is not None}
        if kind is None:
            step["annotation"].pop("type")
    return out


def _kappa(a: list[Any], b: list[Any]) -> float:
    from sklearn.metrics import cohen_kappa_score

    return float(cohen_kappa_score(a, b)) if len(set(a) | set(b)) > 1 else 1.0


def _pairs(
    gold: Sequence[dict[str, Any]],
    judged: Sequence[dict[str, Any]],
    steps: Collection[tuple[int, int]] | None,
):  # type: ignore[no-untyped-def]
    """(gold step, judged step) of every step both sides annotated (``steps``: only these
    positions, e.g. the ones a judge labelled)."""
    for t, (g_trace, j_trace) in enumerate(zip(gold, judged, strict=True)):
        for i, (g, j) in enumerate(zip(g_trace["trace"], j_trace["trace"], strict=True)):
            if steps is not None and (t, i) not in steps:
                continue
            g_ann, j_ann = g.get("annotation"), j.get("annotation")
            if g_ann is None or j_ann is None or j_ann is g_ann:
                continue
            yield g, j


def agreement(
    gold: Sequence[dict[str, Any]],
    judged: Sequence[dict[str, Any]],
    steps: Collection[tuple[int, int]] | None = None,
) -> dict[str, dict[str, float]]:
    """Cohen's κ (and raw agreement, n) per field over the steps both sides labelled (``steps``:
    only these (trace, step) positions: the judged ones, where the others keep the input's
    labels); a judged step with no value for a field counts as a disagreement."""
    pairs: dict[str, tuple[list[str], list[str]]] = {f: ([], []) for f in KAPPA_FIELDS}
    for g, j in _pairs(gold, judged, steps):
        g_ann, j_ann = g["annotation"], j["annotation"]
        for name, (kind, key) in KAPPA_FIELDS.items():
            if KINDS.get(g["type"]) != kind:
                continue
            g_val = g_ann.get("type") if key == "type" else (g_ann.get("attributes") or {}).get(key)
            if g_val is None:
                continue
            j_val = j_ann.get("type") if key == "type" else (j_ann.get("attributes") or {}).get(key)
            pairs[name][0].append(g_val)
            pairs[name][1].append(j_val or "<none>")
    out = {}
    for name, (a, b) in pairs.items():
        if not a:
            continue
        out[name] = {
            "kappa": _kappa(a, b),
            "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(a),
            "n": len(a),
        }
    return out


def evidence_agreement(
    gold: Sequence[dict[str, Any]],
    judged: Sequence[dict[str, Any]],
    steps: Collection[tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """Agreement on the evidence level E (0/1/2, :func:`~llm_methods.seekbench.counts.
    evidence_level`) of the result steps both sides annotated: Cohen's κ, raw agreement, n, and
    each side's share of E = 2 (Sufficient & Clear). Every calibration metric is a function of E
    alone, so this is the agreement that decides whether a judge can carry them. ``{"n": 0}``
    when no result step is shared."""
    g_levels, j_levels = [], []
    for g, j in _pairs(gold, judged, steps):
        g_e, j_e = evidence_level(g), evidence_level(j)
        if KINDS.get(g["type"]) == "search_result" and g_e is not None:
            g_levels.append(g_e)
            j_levels.append(-1 if j_e is None else j_e)
    n = len(g_levels)
    if not n:
        return {"n": 0}
    return {
        "kappa": _kappa(g_levels, j_levels),
        "agreement": sum(x == y for x, y in zip(g_levels, j_levels, strict=True)) / n,
        "n": n,
        "share_e2_gold": g_levels.count(2) / n,
        "share_e2_judge": j_levels.count(2) / n,
    }
