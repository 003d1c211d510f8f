"""SeekBench: process-level evaluation of LLM search agents (arXiv 2509.22391).

The main classes and functions are exported here and imported on first use
(``import llm_methods.seekbench`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "TraceError": "llm_methods.seekbench.data",
    "read_traces": "llm_methods.seekbench.data",
    "validate_trace": "llm_methods.seekbench.data",
    "write_traces": "llm_methods.seekbench.data",
    "analyze": "llm_methods.seekbench.metrics",
    "paired_difference": "llm_methods.seekbench.metrics",
    "HTTPJudge": "llm_methods.seekbench.judge",
    "LMJudge": "llm_methods.seekbench.judge",
    "RuleJudge": "llm_methods.seekbench.judge",
    "agreement": "llm_methods.seekbench.judge",
    "annotate": "llm_methods.seekbench.judge",
    "evidence_agreement": "llm_methods.seekbench.judge",
    "AgentProfile": "llm_methods.seekbench.synth",
    "synth_traces": "llm_methods.seekbench.synth",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
