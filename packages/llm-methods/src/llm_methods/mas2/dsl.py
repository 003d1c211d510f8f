"""The workflow DSL the generator writes: a DAG over AFlow-style operators, parsed, never exec'd.

Text form (one statement per line, ``#`` comments)::

    a = AnswerGenerate()
    b = Programmer()
    c = AnswerGenerate()
    e = ScEnsemble(a, b, c)
    return e

Dict / JSON form: ``{"nodes": [{"id": "a", "op": "AnswerGenerate", "inputs": []}, ...],
"output": "e"}``. :func:`parse_workflow` accepts either and :func:`validate` names the offending
node in a :class:`WorkflowError` (unknown operator, wrong arity, forward / unknown reference,
duplicate id, unused output). Nothing in a spec is ever evaluated as Python.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OPERATORS", "Node", "Workflow", "WorkflowError", "parse_workflow", "validate"]

# operator -> (min inputs, max inputs, what it does); AFlow's operator set (Review/Revise as two)
OPERATORS: dict[str, tuple[int, int, str]] = {
    "Custom": (0, 1, "one free-form LLM call (optionally on an input's answer)"),
    "AnswerGenerate": (0, 0, "step-by-step reasoning then a final answer"),
    "Programmer": (0, 0, "write a program; run it in the sandbox; its output/code is the answer"),
    "ScEnsemble": (2, 8, "self-consistency: pick the most consistent of its inputs"),
    "Test": (1, 1, "run the input's code on the public unit tests; on failure ask for a fix"),
    "Review": (1, 1, "judge whether the input's answer is right"),
    "Revise": (1, 1, "rewrite the input's answer when its Review (or none) rejects it"),
}
GENERATORS = ("Custom", "AnswerGenerate", "Programmer")
MAX_NODES = 12
_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
_STMT = re.compile(r"^(?P<id>\w+)\s*=\s*(?P<op>\w+)\s*\((?P<args>[^()]*)\)$")
_RETURN = re.compile(r"^return\s+(?P<id>\w+)$")


class WorkflowError(ValueError):
    """An invalid workflow spec; the message names the offending node (or line)."""


@dataclass(frozen=True)
class Node:
    id: str
    op: str
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Workflow:
    nodes: tuple[Node, ...]
    output: str
    name: str = field(default="", compare=False)

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise WorkflowError(f"no node {node_id!r}")

    def to_text(self) -> str:
        lines = [f"{n.id} = {n.op}({', '.join(n.inputs)})" for n in self.nodes]
        return "\n".join([*lines, f"return {self.output}"])

    def to_dict(self) -> dict[str, Any]:
        nodes = [{"id": n.id, "op": n.op, "inputs": list(n.inputs)} for n in self.nodes]
        return {"name": self.name, "nodes": nodes, "output": self.output}

    def signature(self) -> str:
        """Canonical text (the policy's action key)."""
        return self.to_text()


def validate(wf: Workflow) -> Workflow:
    """Raise :class:`WorkflowError` naming the first bad node; return ``wf`` when valid."""
    if not wf.nodes:
        raise WorkflowError("workflow has no nodes")
    if len(wf.nodes) > MAX_NODES:
        raise WorkflowError(f"workflow has {len(wf.nodes)} nodes (max {MAX_NODES})")
    seen: set[str] = set()
    for n in wf.nodes:
        if not _ID.match(n.id):
            raise WorkflowError(f"node {n.id!r}: invalid id (letters, digits, _; <= 32 chars)")
        if n.id in seen:
            raise WorkflowError(f"node {n.id!r}: duplicate id")
        if n.op not in OPERATORS:
            raise WorkflowError(
                f"node {n.id!r}: unknown operator {n.op!r} (known: {', '.join(OPERATORS)})"
            )
        lo, hi = OPERATORS[n.op][:2]
        if not lo <= len(n.inputs) <= hi:
            want = f"{lo}" if lo == hi else f"{lo}-{hi}"
            raise WorkflowError(f"node {n.id!r}: {n.op} takes {want} input(s), got {len(n.inputs)}")
        for ref in n.inputs:
            if ref not in seen:
                where = "itself" if ref == n.id else "a later or unknown node"
                raise WorkflowError(f"node {n.id!r}: input {ref!r} is {where}")
        if len(set(n.inputs)) != len(n.inputs):
            raise WorkflowError(f"node {n.id!r}: repeated input")
        seen.add(n.id)
    if wf.output not in seen:
        raise WorkflowError(f"output {wf.output!r} is not a node")
    used = {ref for n in wf.nodes for ref in n.inputs} | {wf.output}
    dead = [n.id for n in wf.nodes if n.id not in used]
    if dead:
        raise WorkflowError(f"node {dead[0]!r}: its result is never used")
    return wf


def _from_text(text: str, name: str) -> Workflow:
    nodes, output = [], None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if output is not None:
            raise WorkflowError(f"line {lineno}: statement after 'return'")
        if m := _RETURN.match(line):
            output = m["id"]
            continue
        m = _STMT.match(line)
        if not m:
            raise WorkflowError(
                f"line {lineno}: expected 'ID = Operator(inputs...)' or "
                f"'return ID', got {line[:60]!r}"
            )
        args = tuple(a.strip() for a in m["args"].split(",") if a.strip())
        nodes.append(Node(m["id"], m["op"], args))
    if output is None:
        raise WorkflowError("workflow has no 'return ID' line")
    return Workflow(tuple(nodes), output, name)


def _from_dict(data: Any, name: str) -> Workflow:
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise WorkflowError("workflow must be a mapping with a 'nodes' list and an 'output'")
    nodes = []
    for i, raw in enumerate(data["nodes"]):
        label = raw.get("id", f"#{i}") if isinstance(raw, dict) else f"#{i}"
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            raise WorkflowError(f"node {label!r}: needs a string 'id'")
        if not isinstance(raw.get("op"), str):
            raise WorkflowError(f"node {label!r}: needs a string 'op'")
        inputs = raw.get("inputs", [])
        if not isinstance(inputs, list) or not all(isinstance(x, str) for x in inputs):
            raise WorkflowError(f"node {label!r}: 'inputs' must be a list of node ids")
        nodes.append(Node(raw["id"], raw["op"], tuple(inputs)))
    output = data.get("output")
    if not isinstance(output, str):
        raise WorkflowError("workflow needs a string 'output'")
    return Workflow(tuple(nodes), output, str(data.get("name", name)))


def parse_workflow(spec: str | dict[str, Any] | Workflow, name: str = "") -> Workflow:
    """Parse the text DSL, a JSON string or a dict, and validate. Raises :class:`WorkflowError`."""
    if isinstance(spec, Workflow):
        return validate(spec)
    if isinstance(spec, dict):
        return validate(_from_dict(spec, name))
    text = spec.strip()
    if text.startswith("{"):
        try:
            return validate(_from_dict(json.loads(text), name))
        except json.JSONDecodeError as e:
            raise WorkflowError(f"workflow JSON: {e}") from None
        except RecursionError:  # json recurses per nesting level
            raise WorkflowError("workflow JSON: nested too deeply") from None
    fence = re.search(r"```[a-zA-Z]*\n(.*?)```", text, re.S)  # an LLM may wrap it in a fence
    return validate(_from_text(fence.group(1) if fence else text, name))


def _wf(name: str, text: str) -> Workflow:
    return parse_workflow(text, name)


# the generator's (tabular) action space: hand-enumerated templates covering the operators
TEMPLATES: tuple[Workflow, ...] = (
    _wf("cot", "a = AnswerGenerate()\nreturn a"),
    _wf("custom", "a = Custom()\nreturn a"),
    _wf("program", "p = Programmer()\nreturn p"),
    _wf(
        "sc3",
        "a = AnswerGenerate()\nb = AnswerGenerate()\nc = AnswerGenerate()\n"
        "e = ScEnsemble(a, b, c)\nreturn e",
    ),
    _wf(
        "sc_mixed",
        "a = AnswerGenerate()\nb = Programmer()\nc = AnswerGenerate()\n"
        "e = ScEnsemble(a, b, c)\nreturn e",
    ),
    _wf("review_revise", "a = AnswerGenerate()\nr = Review(a)\nv = Revise(r)\nreturn v"),
    _wf("program_test", "p = Programmer()\nt = Test(p)\nreturn t"),
    _wf(
        "sc_programs_test",
        "p = Programmer()\nq = Programmer()\ns = Programmer()\n"
        "e = ScEnsemble(p, q, s)\nt = Test(e)\nreturn t",
    ),
)
