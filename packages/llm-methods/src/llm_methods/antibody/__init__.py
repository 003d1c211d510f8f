"""Antibody: defence against harmful finetuning (arXiv 2603.00498).

``data`` (BeaverTails-style jsonl reader with refusal targets, the offline synthetic instruction
set, poisoned mixtures, objective harmfulness scoring), ``model`` (``AntibodyConfig``, the
alignment stage with both λ_t rules, the weighted finetuning stage, SFT / Booster / Vaccine
baselines), ``pipeline`` (``StageSettings``; pretrain / align / finetune / evaluate a tiny Llama on
the model's device), ``lit_module`` (LightningCLI ``fit``), ``experiment`` (``measure`` the
numbers, ``report`` the result), ``cli``.
"""
