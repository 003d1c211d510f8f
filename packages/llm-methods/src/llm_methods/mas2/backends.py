"""LLM backends for the real deployment and an agent that runs the operators with prompts.

- :class:`OpenAIBackend`: any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, llama.cpp
  server, OpenAI), stdlib ``urllib`` only, with retries and exponential back-off on connection
  errors, timeouts, 429 and 5xx; a server that stays down raises one clear :class:`BackendError`.
- :class:`LocalLMBackend`: a core model spec (``smollm2``, ``zoo:NAME``, an HF folder) through
  :func:`llm_methods.lm.load_lm` and :func:`llm_methods.lm.generate`.
- :class:`LLMAgent`: the operators as prompts to a backend; programs run in the sandbox, and
  what a failed program printed never goes into a prompt (only :meth:`SandboxResult.feedback`).
- :func:`llm_generate_workflow`: the generator as an LLM writing the text DSL; the reply is parsed
  and validated (never executed), an invalid reply raises a :class:`WorkflowError` naming the node.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from llm_methods.lm.errors import LMError
from llm_methods.mas2.dsl import OPERATORS, Workflow, parse_workflow
from llm_methods.mas2.pool import Candidate
from llm_methods.mas2.sandbox import run_code, run_tests
from llm_methods.mas2.tasks import Grader, Task, _num, full_code

if TYPE_CHECKING:
    from llm_methods.lm.loading import LM

__all__ = [
    "BackendError",
    "Completion",
    "LLMAgent",
    "LocalLMBackend",
    "OpenAIBackend",
    "llm_generate_workflow",
]


class BackendError(LMError):
    """The backend failed (server down after retries, bad reply); a user-facing one-line error.

    ``unreachable``: no HTTP answer at all after the retries (connection refused, DNS, timeout):
    the run stops with this error instead of recording every step as failed.
    """

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int


class Backend(Protocol):
    def complete(
        self, prompt: str, model: str, max_tokens: int = 512, temperature: float = 0.0
    ) -> Completion: ...


class OpenAIBackend:
    """POST ``{base_url}/chat/completions``; ``base_url`` like ``http://127.0.0.1:8000/v1``."""

    RETRY_STATUS = (408, 409, 425, 429, 500, 502, 503, 504)

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if not re.match(r"^https?://", base_url):
            raise BackendError(f"base URL {base_url!r} must start with http:// or https://")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.calls = 0

    def complete(
        self, prompt: str, model: str, max_tokens: int = 512, temperature: float = 0.0
    ) -> Completion:
        body = json.dumps(
            {
                "model": model,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens,
                "temperature": temperature,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last, unreachable = "", False
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            self.calls += 1
            req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                break
            except urllib.error.HTTPError as e:
                detail = e.read()[:200].decode("utf-8", "replace")
                last, unreachable = f"HTTP {e.code} {detail}".strip(), False
                if e.code not in self.RETRY_STATUS:
                    raise BackendError(f"{self.url}: {last}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
                last, unreachable = str(getattr(e, "reason", e)), True
        else:
            raise BackendError(
                f"OpenAI-compatible server at {self.url} failed after "
                f"{self.retries + 1} attempts: {last}",
                unreachable,
            )
        return self._parse(raw)

    def _parse(self, raw: bytes) -> Completion:
        try:
            data = json.loads(raw)
            text = data["choices"][0]["message"]["content"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            raise BackendError(
                f"{self.url}: reply has no choices[0].message.content: {raw[:120]!r}"
            ) from None
        usage = data.get("usage") or {}
        p = usage.get("prompt_tokens")
        c = usage.get("completion_tokens")
        return Completion(
            str(text or ""),
            int(p) if isinstance(p, int) else 0,
            int(c) if isinstance(c, int) else max(1, len(str(text)) // 4),
        )


class LocalLMBackend:
    """A core model (default SmolLM2-135M-Instruct), greedy; ``model`` names are ignored."""

    def __init__(self, spec: str = "smollm2", device: str | None = None) -> None:
        self.spec, self.device = spec, device
        self._lm: LM | None = None

    def complete(
        self, prompt: str, model: str, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion:
        from llm_methods.lm import chat_prompt, generate, load_lm

        if self._lm is None:
            self._lm = load_lm(self.spec, self.device)
        text = chat_prompt(self._lm, prompt)
        out = generate(
            self._lm,
            [text],
            max_tokens,
            do_sample=temperature > 0,
            temperature=max(temperature, 1e-3),
            seed=0,
        )[0]
        tok = self._lm.tokenizer
        return Completion(out, len(tok(text).input_ids), len(tok(out).input_ids))


_FINAL = "End with a last line 'Answer: <number>'."
_CODE = "Return the complete Python function in one ```python code block."


class LLMAgent:
    """Runs each operator as a prompt to ``backend``; ``prices``: model -> $ per 1M tokens."""

    def __init__(
        self, backend: Backend, prices: dict[str, float], grader: Grader, max_tokens: int = 512
    ) -> None:
        self.backend, self.prices, self.grader, self.max_tokens = (
            backend,
            prices,
            grader,
            max_tokens,
        )

    def _ask(self, prompt: str, model: str) -> tuple[str, int, float]:
        c = self.backend.complete(prompt, model, self.max_tokens)
        t = c.prompt_tokens + c.completion_tokens
        return c.text, t, t * self.prices.get(model, 0.0) / 1e6

    def _extract(self, task: Task, text: str) -> str | None:
        return _num(text) if task.kind == "arith" else full_code(task, text)

    def call(
        self, op: str, task: Task, model: str, inputs: list[Candidate], rng: random.Random
    ) -> Candidate:
        src = inputs[0] if inputs else None
        code_task = task.kind == "code"
        tokens, cost, verdict = 0, 0.0, None
        try:
            if op == "ScEnsemble":  # plurality vote, no LLM call (see README Deviations)
                answers = [c.answer for c in inputs if c.answer is not None]
                best = max(answers, key=answers.count) if answers else None
                return Candidate(best, note="plurality")
            if op in ("Custom", "AnswerGenerate") or (op == "Programmer" and code_task):
                hint = (
                    _CODE
                    if code_task
                    else ("Think step by step. " + _FINAL if op == "AnswerGenerate" else _FINAL)
                )
                prompt = f"{task.question}\n\n{hint}"
                if src is not None:
                    prompt += f"\n\nA previous answer was:\n{src.answer}"
                text, tokens, cost = self._ask(prompt, model)
                answer = self._extract(task, text)
            elif op == "Programmer":
                text, tokens, cost = self._ask(
                    f"{task.question}\n\nWrite a short Python program that prints only the "
                    "answer. Reply with code only.",
                    model,
                )
                fence = re.search(r"```(?:python)?\n(.*?)```", text, re.S)
                res = run_code(
                    fence.group(1) if fence else text,
                    timeout=5.0,
                    allow_unisolated=self.grader.allow_unisolated,
                )
                self.grader.isolation.add(res.isolation)
                if res.violation:
                    return Candidate(None, tokens, cost, failed=True, note=f"sandbox {res.status}")
                answer = _num(res.stdout) if res.ok else None
            elif op == "Test":
                answer = src.answer if src else None
                if code_task and answer and task.public_test:
                    res = run_tests(
                        answer,
                        task.public_test,
                        task.entry_point,
                        allow_unisolated=self.grader.allow_unisolated,
                    )
                    self.grader.isolation.add(res.isolation)
                    if not res.ok:
                        text, tokens, cost = self._ask(
                            f"{task.question}\n\nThis attempt fails a unit test "
                            f"({res.feedback()}):\n"
                            f"{answer}\n\nFix it. {_CODE}",
                            model,
                        )
                        answer = self._extract(task, text)
            elif op == "Review":
                answer = src.answer if src else None
                text, tokens, cost = self._ask(
                    f"{task.question}\n\nProposed answer:\n{answer}\n\nIs it correct? Reply "
                    "'yes' or 'no' first.",
                    model,
                )
                verdict = "ok" if text.strip().lower().startswith("yes") else "wrong"
            elif op == "Revise":
                answer = src.answer if src else None
                if src is None or src.verdict != "ok":
                    text, tokens, cost = self._ask(
                        f"{task.question}\n\nThis answer may be wrong:\n{answer}\n\nGive a "
                        f"corrected answer. {_CODE if code_task else _FINAL}",
                        model,
                    )
                    answer = self._extract(task, text)
            else:
                raise ValueError(f"unknown operator {op!r}")
        except BackendError as e:  # a failed step: the rectifier's business
            if e.unreachable:  # the server is down: stop with one clear error
                raise
            return Candidate(None, tokens, cost, failed=True, note=str(e)[:200])
        return Candidate(answer, tokens, cost, verdict=verdict)


GENERATOR_PROMPT = """You design a multi-agent workflow for the task below. Write it in this DSL,
one statement per line: `ID = Operator(INPUT_IDS...)`, then `return ID`. Operators:
{ops}
Example:
a = AnswerGenerate()
b = Programmer()
c = AnswerGenerate()
e = ScEnsemble(a, b, c)
return e

Task:
{task}

Reply with the workflow only."""


def llm_generate_workflow(backend: Backend, model: str, task: Task) -> Workflow:
    """The generator as an LLM: its reply is parsed and validated (WorkflowError names the node)."""
    ops = "\n".join(
        f"- {name}: {doc} ({lo}-{hi} inputs)" for name, (lo, hi, doc) in OPERATORS.items()
    )
    reply = backend.complete(
        GENERATOR_PROMPT.format(ops=ops, task=task.question[:1500]), model, 256
    ).text
    return parse_workflow(reply, "llm")
