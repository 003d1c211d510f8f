"""The task-format policy: a zoo-style tiny Llama (BPE tokenizer + ``tiny_llama``) pretrained
here by supervised next-token training on generated problems (loss on the response only), so
that sampled answers are right often enough for RL to have signal. Cached like the zoo under
``cache_root() / "remix" / "<recipe>-<hash>"`` (atomic rename; a recipe change gives a new hash).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from iclr26_common.cachedir import build_once, recipe_digest

__all__ = ["TaskModelSpec", "ensure_task_model", "pretrain_task_model"]


@dataclass(frozen=True)
class TaskModelSpec:
    n_train: int = 4000
    max_value: int = 20
    vocab_size: int = 400
    n_layers: int = 2
    hidden: int = 64
    heads: int = 4
    steps: int = 400
    batch_size: int = 32
    lr: float = 3e-3
    seq_len: int = 48
    seed: int = 1234  # data seed: disjoint from the RL problem seeds used by the experiment

    def digest(self) -> str:
        return recipe_digest(self)


def pretrain_task_model(spec: TaskModelSpec):  # -> (tokenizer, model, info)
    """Train the policy from scratch on the task format; returns (tokenizer, model, info)."""
    from llm_methods.lm.threads import one_thread
    from llm_methods.lm.train import train_lm
    from llm_methods.remix.data import records_to_problems, sft_texts, synth_problems
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    problems = records_to_problems(synth_problems(spec.n_train, spec.seed, spec.max_value))
    pairs = sft_texts(problems, spec.seed)
    tok = train_bpe([p + r for p, r in pairs], spec.vocab_size)
    chunks, masks = [], []
    for prompt, response in pairs:
        p = [tok.bos_token_id, *tok(prompt, add_special_tokens=False).input_ids]
        r = [*tok(response, add_special_tokens=False).input_ids, tok.eos_token_id]
        ids = (p + r)[: spec.seq_len]
        mask = ([0] * len(p) + [1] * len(r))[: spec.seq_len]
        pad = spec.seq_len - len(ids)
        chunks.append(ids + [tok.pad_token_id] * pad)
        masks.append(mask + [0] * pad)
    model = tiny_llama(len(tok), spec.n_layers, spec.hidden, spec.heads, max_len=256, seed=0)
    with one_thread():
        log = train_lm(
            model, chunks, spec.steps, spec.batch_size, spec.lr, seed=spec.seed, loss_mask=masks
        )
    info = {
        "recipe": dataclasses.asdict(spec),
        "final_loss": sum(log.losses[-10:]) / 10,
        "wall_s": round(log.wall_s, 1),
    }
    return tok, model, info


def ensure_task_model(spec: TaskModelSpec | None = None, cache_dir: Path | None = None) -> Path:
    """The cached folder of the pretrained task model (an HF folder ``load_lm`` reads)."""
    from iclr26_common.smollm2 import cache_root

    spec = spec or TaskModelSpec()
    target = (cache_dir or cache_root()) / "remix" / f"arith-{spec.digest()}"

    def fill(staging: Path) -> str:
        tok, model, info = pretrain_task_model(spec)
        model.save_pretrained(staging)
        tok.save_pretrained(staging)
        return json.dumps(info, indent=1)

    return build_once(target, "remix.json", fill)
