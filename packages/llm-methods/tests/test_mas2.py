"""MAS²: DSL validation, sandbox containment, HTTP backend vs a stub server, simulation, CTO."""

from __future__ import annotations

import http.server
import json
import random
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from llm_methods.mas2.dsl import TEMPLATES, WorkflowError, parse_workflow
from llm_methods.mas2.sandbox import SandboxError, run_code


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("a = Foo()\nreturn a", "node 'a': unknown operator 'Foo'"),
        ("a = AnswerGenerate()\nb = Review(a, a2)\nreturn b", "node 'b': Review takes 1"),
        ("a = AnswerGenerate()\ne = ScEnsemble(a, z)\nreturn e", "node 'e': input 'z'"),
        ("a = AnswerGenerate()\na = Programmer()\nreturn a", "node 'a': duplicate id"),
        ("a = AnswerGenerate()\nb = Programmer()\nreturn a", "node 'b': its result is never used"),
        ("a = AnswerGenerate()", "no 'return ID'"),
        ("import os\nreturn a", "line 1: expected"),
        ('{"nodes": [{"id": "x", "op": "Test", "inputs": []}], "output": "x"}', "node 'x': Test"),
    ],
)
def test_invalid_spec_names_node(spec: str, message: str) -> None:
    with pytest.raises(WorkflowError, match=message.replace("(", r"\(")):
        parse_workflow(spec)


def test_deeply_nested_json_is_one_clear_error() -> None:
    """A workflow JSON nested 100k deep raised a RecursionError traceback (issue 28)."""
    with pytest.raises(WorkflowError, match="nested too deeply"):
        parse_workflow('{"nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")


def test_test_operator_prompt_carries_no_program_output() -> None:
    """What a failing program printed (here: a secret) never reaches the backend's prompt."""
    from llm_methods.mas2.backends import Completion, LLMAgent
    from llm_methods.mas2.pool import Candidate
    from llm_methods.mas2.tasks import Grader, generate_code

    class Recorder:
        prompts: ClassVar[list[str]] = []

        def complete(
            self, prompt: str, model: str, max_tokens: int = 512, temperature: float = 0.0
        ) -> Completion:
            Recorder.prompts.append(prompt)
            return Completion("```python\ndef f():\n    return 1\n```", 3, 3)

    task = generate_code(1)[0]
    secret = "s3cr3t-token-8271"  # appears only in what the program prints, not in its code
    bad = f"def {task.entry_point}(*args):\n    raise ValueError({secret[::-1]!r}[::-1])\n"
    agent = LLMAgent(Recorder(), {"m": 1.0}, Grader(allow_unisolated=True))
    agent.call("Test", task, "m", [Candidate(bad)], random.Random(0))
    assert len(Recorder.prompts) == 1
    assert secret not in Recorder.prompts[0] and "(it raised ValueError)" in Recorder.prompts[0]


def test_valid_spec_roundtrip() -> None:
    for wf in TEMPLATES:
        assert parse_workflow(wf.to_text()) == wf
        assert parse_workflow(wf.to_dict()) == wf
    fenced = "Here:\n```\na = AnswerGenerate()\nreturn a\n```"
    assert parse_workflow(fenced).nodes[0].op == "AnswerGenerate"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("while True:\n    pass", "timeout"),
        ("import os\ntry:\n    os.fork()\nexcept Exception:\n    print('caught')", "forbidden"),
        ("import os\nos.execv('/bin/ls', ['ls'])", "forbidden"),
        ("import subprocess\nsubprocess.run(['ls'])", "forbidden"),
        ("import socket\nsocket.create_connection(('127.0.0.1', 80))", "forbidden"),
        ("open('/tmp/mas2_escape_test', 'w').write('x')", "forbidden"),
        ("x = bytearray(4 * 1024**3)", "memory"),
        ("raise ValueError('bug')", "error"),
        ("open('scratch', 'w').write('ok')\nprint(open('scratch').read())", "ok"),
    ],
)
def test_sandbox_contains(code: str, status: str) -> None:
    res = run_code(code, timeout=1.0, memory_mb=256)
    assert res.status == status, res
    if res.violation:
        with pytest.raises(SandboxError, match=f"sandbox {status}"):
            res.check()
    assert not Path("/tmp/mas2_escape_test").exists()


class _Stub(http.server.BaseHTTPRequestHandler):
    fail_first = 0
    seen: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.seen.append(body)
        if _Stub.fail_first > 0:
            _Stub.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        reply = {
            "choices": [{"message": {"content": "a = AnswerGenerate()\nreturn a"}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def stub_url():  # type: ignore[no-untyped-def]
    server = http.server.HTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def test_openai_backend_retries_and_generates(stub_url: str) -> None:
    from llm_methods.mas2.backends import OpenAIBackend, llm_generate_workflow
    from llm_methods.mas2.tasks import generate_arith

    _Stub.fail_first, _Stub.seen = 2, []
    backend = OpenAIBackend(stub_url, api_key="", retries=3, backoff=0.01)
    out = backend.complete("hi", "m1")
    assert (out.prompt_tokens, out.completion_tokens) == (11, 7)
    assert backend.calls == 3 and _Stub.seen[-1]["model"] == "m1"
    wf = llm_generate_workflow(backend, "m1", generate_arith(1)[0])
    assert wf.nodes[0].op == "AnswerGenerate"


def test_openai_backend_down_is_clear() -> None:
    from llm_methods.mas2.backends import BackendError, OpenAIBackend

    backend = OpenAIBackend("http://127.0.0.1:9/v1", retries=2, backoff=0.01)
    with pytest.raises(BackendError, match="failed after 3 attempts") as info:
        backend.complete("hi", "m")
    assert info.value.unreachable and backend.calls == 3


def test_pool_reader_errors(tmp_path: Path) -> None:
    from llm_methods.mas2.pool import PoolError, load_pool

    bad = tmp_path / "p.yaml"
    bad.write_text("models:\n  a: {price: 1, skill: {reason: 1.5, code: 0.1}}\n")
    with pytest.raises(PoolError, match=r"p.yaml: models.a.skill.reason: must be a probability"):
        load_pool(bad)
    assert set(load_pool().names) == {"tiny", "mathy", "coder", "large"}


def test_task_files_roundtrip_and_errors(tmp_path: Path) -> None:
    from llm_methods.mas2.tasks import (
        TaskFormatError,
        generate_arith,
        generate_code,
        read_tasks,
        write_tasks,
    )

    tasks = generate_arith(3) + generate_code(3)
    assert read_tasks(write_tasks(tasks, tmp_path / "t.jsonl")) == tasks
    bad = tmp_path / "b.jsonl"
    bad.write_text(
        '{"task_id": "1", "question": "q", "answer": "2"}\n{"task_id": "2", "prompt": "p"}\n'
    )
    with pytest.raises(TaskFormatError, match=r"b.jsonl:2: missing field 'canonical_solution'"):
        read_tasks(bad)


def test_simulated_world_and_rectifier() -> None:
    """Reference code passes, mutants fail; a flaky model fails without a rectifier, and a
    rectifier that switches to a reliable model recovers."""
    from llm_methods.mas2.execute import execute
    from llm_methods.mas2.pool import SimAgent, SimModel, SimPool
    from llm_methods.mas2.tasks import Grader, generate_code

    grader = Grader()
    task = generate_code(1)[0]
    assert grader.passes(task, task.question + task.canonical)
    assert not any(grader.passes(task, task.question + m) for m in task.mutants)
    pool = SimPool(
        {
            "flaky": SimModel("flaky", 1.0, {"reason": 1.0, "code": 1.0}, fail=1.0),
            "solid": SimModel("solid", 2.0, {"reason": 1.0, "code": 1.0}),
        }
    )
    agent = SimAgent(pool, grader)
    wf = parse_workflow("p = Programmer()\nreturn p")
    once = execute(wf, {"p": "flaky"}, task, agent, grader, random.Random(0), pool.names)
    assert not once.success and once.answer is None
    fixed = execute(
        wf,
        {"p": "flaky"},
        task,
        agent,
        grader,
        random.Random(0),
        pool.names,
        lambda *a: "switch:solid",
    )
    assert fixed.success and fixed.events[0]["action"] == "switch:solid"
    assert fixed.assignment == {"p": "solid"} and fixed.cost > once.cost


def test_cto_prefers_better_workflow() -> None:
    """With one accurate cheap model, CTO's DPO raises the generator's probability of the
    workflow whose leaves score higher (Programmer beats Custom on code)."""
    from llm_methods.mas2.cto import CTOConfig, train_cto
    from llm_methods.mas2.dsl import TEMPLATES
    from llm_methods.mas2.policy import Team
    from llm_methods.mas2.pool import SimAgent, SimModel, SimPool
    from llm_methods.mas2.tasks import Grader, generate_code

    pool = SimPool({"m": SimModel("m", 0.1, {"reason": 0.9, "code": 0.95})}, cost_weight=0.0)
    grader = Grader()
    agent = SimAgent(pool, grader)
    tasks = generate_code(5)
    grader.prefetch([j for t in tasks for j in agent.programs(t)])
    templates = tuple(t for t in TEMPLATES if t.name in ("custom", "program"))
    team = Team.uniform(pool.names, templates)
    hist = train_cto(team, tasks, agent, grader, pool, CTOConfig(rounds=2, steps=40), seed=0)
    probs = dict(zip(team.names, team.gen.probs("code", team.names), strict=True))
    assert probs["program"] > 0.6, probs
    assert hist[0]["pairs"] > 0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("k", 0, "CTO k must be >= 1, got 0"),
        ("steps", 0, "CTO steps must be >= 1, got 0"),
        ("beta", 0.0, "CTO beta must be > 0, got 0.0"),
    ],
)
def test_cto_config_is_checked_on_construction(field: str, value: float, message: str) -> None:
    """Checked where it is built (was a validate() call each user had to remember), one message
    per field."""
    from llm_methods.mas2.cto import CTOConfig

    with pytest.raises(ValueError, match=f"^{message}$"):
        CTOConfig(**{field: value})
