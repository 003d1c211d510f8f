"""Antibody: defence against harmful finetuning (arXiv 2603.00498).

``data`` (BeaverTails-style jsonl reader with refusal targets, the offline synthetic instruction
set, poisoned mixtures, objective harmfulness scoring), ``model`` (the alignment stage with both
λ_t rules, the weighted finetuning stage, SFT / Booster / Vaccine baselines), ``pipeline``
(pretrain / align / finetune / evaluate a tiny Llama), ``experiment``, ``cli``.
"""
