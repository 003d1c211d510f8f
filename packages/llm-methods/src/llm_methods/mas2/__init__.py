"""MAS²: self-generative, self-configuring, self-rectifying multi-agent systems (arXiv 2509.24323).

A generator writes a workflow over AFlow-style operators in a small validated DSL (:mod:`.dsl`),
an implementer assigns a backbone model from a costed pool to each node, a rectifier rewrites the
workflow or the assignment while it runs (:mod:`.execute`); Collaborative Tree Optimization trains
the three meta-agents with value-weighted DPO (:mod:`.cto`). Generated code runs only in
:mod:`.sandbox`. Light imports only.

The main classes and functions are exported here and imported on first use
(``import llm_methods.mas2`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "OPERATORS": "llm_methods.mas2.dsl",
    "Node": "llm_methods.mas2.dsl",
    "Workflow": "llm_methods.mas2.dsl",
    "WorkflowError": "llm_methods.mas2.dsl",
    "parse_workflow": "llm_methods.mas2.dsl",
    "validate": "llm_methods.mas2.dsl",
    "Trace": "llm_methods.mas2.execute",
    "CTOConfig": "llm_methods.mas2.cto",
    "build_tree": "llm_methods.mas2.cto",
    "dpo_step": "llm_methods.mas2.cto",
    "train_cto": "llm_methods.mas2.cto",
    "Candidate": "llm_methods.mas2.pool",
    "SimPool": "llm_methods.mas2.pool",
    "load_pool": "llm_methods.mas2.pool",
    "TabularPolicy": "llm_methods.mas2.policy",
    "Team": "llm_methods.mas2.policy",
    "Task": "llm_methods.mas2.tasks",
    "generate_arith": "llm_methods.mas2.tasks",
    "generate_code": "llm_methods.mas2.tasks",
    "load_humaneval": "llm_methods.mas2.tasks",
    "read_tasks": "llm_methods.mas2.tasks",
    "write_tasks": "llm_methods.mas2.tasks",
    "SandboxUnavailable": "llm_methods.mas2.isolation",
    "SandboxError": "llm_methods.mas2.sandbox",
    "SandboxResult": "llm_methods.mas2.sandbox",
    "run_code": "llm_methods.mas2.sandbox",
    "run_tests": "llm_methods.mas2.sandbox",
    "LLMAgent": "llm_methods.mas2.backends",
    "LocalLMBackend": "llm_methods.mas2.backends",
    "OpenAIBackend": "llm_methods.mas2.backends",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
