"""The SeekBench experiment's registered design: its thresholds, fixed before any run (issue
42), and the names its report and controls use. :mod:`llm_methods.seekbench.experiment`
re-exports every name."""

from __future__ import annotations

PAPER = (
    "SeekBench: Beyond Correctness, Evaluating LLM Search Agents' Epistemic Competence "
    "(arXiv 2509.22391)"
)
CLAIM_A_MIN_TAU = 2 / 3
CLAIM_B_MIN_CE_GAP = 0.02
CLAIM_C_MIN_PREMATURE_GAP = 0.10
ACCURACY_MARGIN = 0.05
# the judge's control: Cohen's kappa of the evidence level E, judge vs the file's (gold) labels;
# 0.7 is the paper's own bar for its LLM judge against the expert labels (experts: > 0.8)
MIN_EVIDENCE_KAPPA = 0.7
PAIR = ("calibrated", "premature")
PROXY = "synthetic proxy (designed agents, rule-judge labels), not the paper's real traces"
DATA_ENV = "SEEKBENCH_DATA"
# the claims' first control: one name whatever its outcome (the outcome is in passed/measured)
DATA_CONTROL = f"{DATA_ENV} names a trace file"
NO_DATA = f"not measured: {DATA_ENV} unset"
HOW_TO_RUN = (
    f"{DATA_ENV}=path/to/seekbench_data.jsonl iclr26 reproduce llm-methods.seekbench "
    "(the official file: SHAO-Jiaqi757/SeekBench data/seekbench_data.jsonl)"
)
PIPELINE_TITLE = (
    "Pipeline checks on the synthetic proxy (designed outcome; they test our judge and "
    "metrics, not the paper)"
)
CLUSTER_UNITS = "questions (the file's (dataset, question) clusters)"
# the SmolLM2 judge's sample of real result steps: fixed seed (issue 42: its kappa_E against the
# experts, beside the rule judge's)
LM_REAL_SEED = 0
