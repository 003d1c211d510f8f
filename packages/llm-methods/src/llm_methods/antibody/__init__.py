"""Antibody: defence against harmful finetuning (arXiv 2603.00498).

``data`` (BeaverTails-style jsonl reader with refusal targets, the offline synthetic instruction
set, poisoned mixtures, objective harmfulness scoring), ``model`` (``AntibodyConfig``, the
alignment stage with both λ_t rules, the weighted finetuning stage, SFT / Booster / Vaccine
baselines), ``pipeline`` (``StageSettings``; pretrain / align / finetune / evaluate a tiny Llama on
the model's device), ``lit_module`` (LightningCLI ``fit``), ``experiment`` (``measure`` the
numbers, ``report`` the result), ``cli``.

The main classes and functions are exported here and imported on first use (``import
llm_methods.antibody`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    # data
    "SafetyRecord": "llm_methods.antibody.data",
    "SyntheticWorld": "llm_methods.antibody.data",
    "is_refusal": "llm_methods.antibody.data",
    "poisoned_mixture": "llm_methods.antibody.data",
    "read_beavertails": "llm_methods.antibody.data",
    "read_refusal_pool": "llm_methods.antibody.data",
    "synthetic_world": "llm_methods.antibody.data",
    "write_jsonl": "llm_methods.antibody.data",
    # the alignment and finetuning objectives
    "AntibodyConfig": "llm_methods.antibody.model",
    "antibody_align_grads": "llm_methods.antibody.model",
    "booster_align_grads": "llm_methods.antibody.model",
    "lambda_code": "llm_methods.antibody.model",
    "lambda_paper": "llm_methods.antibody.model",
    "sft_grads": "llm_methods.antibody.model",
    "train": "llm_methods.antibody.model",
    "vaccine_align_grads": "llm_methods.antibody.model",
    "weighted_finetune_grads": "llm_methods.antibody.model",
    # the stages
    "StageSettings": "llm_methods.antibody.pipeline",
    "align": "llm_methods.antibody.pipeline",
    "evaluate": "llm_methods.antibody.pipeline",
    "finetune": "llm_methods.antibody.pipeline",
    "pretrain_base": "llm_methods.antibody.pipeline",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
